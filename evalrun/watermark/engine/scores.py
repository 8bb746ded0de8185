"""Score functions (MarkMyWords section VII-E, Fig. 10 S1-S3) and their spec keys.

* ``score=sum`` (S1): sum of per-token statistics over scored positions; for text-dependent
  randomness (window, minhash). ``repeats=ignore`` (default) scores a repeated
  (context seed, token) pair once, ``repeats=count`` every time.
* ``score=align`` (S2): best sum over the cyclic offsets of a fixed key sequence.
* ``score=edit`` (S3): best Levenshtein-style alignment with gap cost ``psi`` (default 0.5).

align and edit need ``randomness=fixed``; sum needs window or minhash (with a fixed key the
offset of a generation is unknown, so an aligned sum cannot be formed). Scores that have no
exact null use a permutation test with ``permutations=N`` random keys (default 200, p-value
resolution ``1/(N+1)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalrun._util.errors import SpecError
from evalrun._util.specs import Spec, spec_float, spec_int
from evalrun.kernels.align import align_prefix, edit_prefix
from evalrun.kernels.backend import Ops
from evalrun.watermark.engine.randomness import Randomness

SCORES = ("sum", "align", "edit")
REPEATS = ("ignore", "count")
DEFAULT_PSI = 0.5
DEFAULT_PERMUTATIONS = 200
KEYS = frozenset({"score", "psi", "permutations", "repeats"})


@dataclass(frozen=True)
class Scoring:
    kind: str
    psi: float = DEFAULT_PSI
    permutations: int = 0  # 0: exact null
    repeats: str = "ignore"

    @property
    def count_repeats(self) -> bool:
        return self.repeats == "count"

    def params(self) -> dict[str, str]:
        out = {"score": self.kind}
        if self.kind == "edit":
            out["psi"] = repr(self.psi)
        if self.kind == "sum":
            out["repeats"] = self.repeats
        if self.permutations:
            out["permutations"] = str(self.permutations)
        return out


def parse_scoring(spec: Spec, what: str, randomness: Randomness, exact_sum_null: bool) -> Scoring:
    """Read the score keys; ``exact_sum_null`` says whether the sampler's sum score has an
    exact null (otherwise it is tested by permutation)."""
    default = "align" if randomness.fixed else "sum"
    kind = spec.params.get("score", default).strip().lower()
    if kind not in SCORES:
        raise SpecError(f"{what} {spec}: score={kind!r} must be one of {', '.join(SCORES)}")
    if kind in ("align", "edit") and not randomness.fixed:
        raise SpecError(f"{what} {spec}: score={kind} searches offsets of a fixed key sequence; "
                        "it needs randomness=fixed (use score=sum with window/minhash)")
    if kind == "sum" and randomness.fixed:
        raise SpecError(f"{what} {spec}: score=sum needs randomness=window|minhash; with "
                        "randomness=fixed the generation offset is unknown (use score=align|edit)")
    if "psi" in spec.params and kind != "edit":
        raise SpecError(f"{what} {spec}: key 'psi' applies to score=edit only")
    if "repeats" in spec.params and kind != "sum":
        raise SpecError(f"{what} {spec}: key 'repeats' applies to score=sum only")
    psi = spec_float(spec, "psi", DEFAULT_PSI, what=what, lo=0.0, hi=100.0)
    repeats = spec.params.get("repeats", "ignore").strip().lower()
    if repeats not in REPEATS:
        raise SpecError(f"{what} {spec}: repeats={repeats!r} must be ignore or count")
    permutation = kind != "sum" or not exact_sum_null
    if "permutations" in spec.params and not permutation:
        raise SpecError(f"{what} {spec}: key 'permutations' applies only to scores tested by "
                        "permutation (align, edit, or its); this one has an exact null")
    perms = spec_int(spec, "permutations", DEFAULT_PERMUTATIONS, what=what, lo=1,
                     hi=1_000_000) if permutation else 0
    return Scoring(kind, psi=psi, permutations=perms, repeats=repeats)


def offset_scores(ops: Ops, scoring: Scoring, m: Any) -> tuple[Any, Any]:
    """align or edit score of every prefix (and the best offset) from ``M[..., n, L]``."""
    if scoring.kind == "align":
        return align_prefix(ops, m)
    return edit_prefix(ops, m, scoring.psi)
