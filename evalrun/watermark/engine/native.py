"""The native watermark engine: randomness source x sampling algorithm x score (MarkMyWords VII).

A :class:`Sampler` (one per scheme module: kgw, exp, binary, its) supplies per-token
statistics and the token choice at generation; :class:`NativeScheme` combines it with a
:class:`~evalrun.watermark.randomness.Randomness` and a
:class:`~evalrun.watermark.scores.Scoring` into a :class:`WatermarkScheme`.

Kernels run on numpy or torch (see :mod:`evalrun.kernels.backend`); ``detect`` and
``prefix_p_values`` accept ``backend=`` to override the automatic choice.
"""

from __future__ import annotations

from evalrun._util.hashing import stable_int
from evalrun._util.specs import Spec, check_keys
from evalrun.watermark.base import WatermarkScheme
from evalrun.watermark.engine import randomness as rnd
from evalrun.watermark.engine import scores as sc
from evalrun.watermark.engine.detection import NativeDetection
from evalrun.watermark.engine.processing import WatermarkProcessor
from evalrun.watermark.engine.sampler import Sampler


def build_native(spec: Spec, sampler: Sampler, what: str = "--watermark") -> "NativeScheme":
    """Validate ``spec`` for ``sampler`` and build the scheme with its canonical spec."""
    check_keys(spec, rnd.KEYS | sc.KEYS | sampler.keys, what=what)
    randomness = rnd.parse_randomness(spec, what)
    scoring = sc.parse_scoring(spec, what, randomness, sampler.exact_null is not None)
    params = {**randomness.params(), **scoring.params(), **sampler.params()}
    canonical = Spec(name=spec.name, params=params)
    return NativeScheme(canonical, sampler, randomness, scoring)


class NativeScheme(NativeDetection, WatermarkScheme):  # type: ignore[misc]  # *_many take a keyword backend, not **kwargs
    """One native scheme; holds no key."""

    def __init__(self, spec: Spec, sampler: Sampler, randomness: rnd.Randomness,
                 scoring: sc.Scoring) -> None:
        self.spec = spec
        self.sampler = sampler
        self.randomness = randomness
        self.scoring = scoring
        self.green_list = sampler.green_list
        self.null_seed = stable_int("evalrun-permutation-null", spec.canonical())

    def __repr__(self) -> str:
        return f"NativeScheme({self.spec})"

    @property
    def shared_context(self) -> int | None:
        """Window and min-hash seeds read the previous ``context`` tokens and nothing else;
        fixed randomness uses ``seed`` and the step count (its key offset): not shared."""
        return None if self.randomness.fixed else self.randomness.context

    # ---- generation ------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float, seed: int,
                         backend: str | None = None) -> "WatermarkProcessor":
        return WatermarkProcessor(self, rnd.derive_key(key), vocab_size, temperature, seed,
                                  backend)
