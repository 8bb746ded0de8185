"""Watermarks adapted to many data owners, for WaterDrum (section 5.2 and App. E.7, Table 4).

WaterDrum's metric needs a watermark that every data owner applies to their own data under
their own key and verifies from text alone. Waterfall (Lau et al., 2024) is built for that;
WaterDrum's Table 4 adapts three watermarks made for a single model owner -- KGW
(Kirchenbauer et al., 2023), SynthID-Text (Dathathri et al., 2024) and EXP-edit (Kuditipudi
et al., 2024) -- by giving each owner their own key and applying them with the same
operator as Waterfall's. Two registries say how:

* :data:`OWNER_ADAPTERS`, by scheme name (the first word of a ``--watermark`` spec): the
  owner's key text under that scheme, and the per-text value WaterDrum averages (Waterfall's
  q-score; each other scheme's own detector statistic, unchanged, as its authors' detector
  reports it). ``evalrun watermark-data`` and the ``waterdrum`` pack's grader accept any
  scheme registered here; a third-party package adds one through the
  ``evalrun.owner_watermarks`` entry-point group.
* :data:`WATERMARK_METHODS`: the rows of Table 4 (a spec, a title naming the paper, and the
  paper's figures), which ``evalrun unlearning compare`` runs.

Owner keys: each owner's id (:func:`evalrun.unlearning.keys.owner_waterfall_id`: the owner
index, or derived from the secret) is the key. KGW and EXP-edit take it as their key text
(evalrun hashes any key text to a 64-bit word); SynthID needs one integer key per tournament
layer, so the layer keys are derived from the id (:func:`synthid_layer_keys`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Sequence

from evalrun._util.errors import SpecError
from evalrun._util.registry import Registry
from evalrun.unlearning.keys import owner_waterfall_id
from evalrun.watermark import Detection, WatermarkScheme, parse_watermark

#: SynthID's tournament depth when the spec does not give one (transformers' example
#: configuration uses 30 keys)
SYNTHID_DEPTH = 30


@dataclass(frozen=True)
class OwnerAdapter:
    """How one watermark scheme serves many data owners."""

    #: ``(scheme, owner index, secret or None) -> key text`` for generation and verification
    key: Callable[[WatermarkScheme, int, "str | None"], str]
    #: the per-text value WaterDrum averages, from the scheme's detection
    value: Callable[[Detection], float]
    #: what the value is, for reasons and reports
    value_name: str


@dataclass(frozen=True)
class PaperRow:
    """A row of WaterDrum's Table 4 (arXiv data, Llama-3.1-8B; Gemma-7B for SynthID)."""

    d1: float
    d2: float
    seconds: float
    gpu: bool


@dataclass(frozen=True)
class WatermarkMethod:
    """A row of Table 4: the scheme (spec) owners watermark with, and the paper's figures."""

    name: str
    title: str
    spec: str
    paper: PaperRow | None = None


OWNER_ADAPTERS: Registry[OwnerAdapter] = Registry("owner-keyed watermark", "evalrun.owner_watermarks",
                                                  option="owner_watermark")
WATERMARK_METHODS: Registry[WatermarkMethod] = Registry("WaterDrum watermark method",
                                                        "evalrun.waterdrum_watermarks", option="--watermarks")


def owner_id_key(scheme: WatermarkScheme, owner: int, secret: str | None) -> str:
    """The owner's id as the key text (Waterfall's convention, kept for KGW and EXP-edit)."""
    return str(owner_waterfall_id(owner, secret))


def synthid_layer_keys(owner_id: int, depth: int, table_size: int) -> list[int]:
    """``depth`` int64 tournament keys derived from an owner id: the first 8 bytes (signed,
    big-endian) of ``sha256("synthid-owner\\0<id>\\0<i>")`` for i = 0, 1, ..., skipping any that
    would repeat a layer (equal modulo a power-of-two ``table_size``, as SynthID checks)."""
    keys: list[int] = []
    layers: set[int] = set()
    i = 0
    while len(keys) < depth:
        digest = hashlib.sha256(f"synthid-owner\0{owner_id}\0{i}".encode()).digest()
        k = int.from_bytes(digest[:8], "big", signed=True)
        layer = k % table_size if table_size & (table_size - 1) == 0 else k
        if layer not in layers:
            keys.append(k)
            layers.add(layer)
        i += 1
    return keys


def synthid_key(scheme: WatermarkScheme, owner: int, secret: str | None) -> str:
    """SynthID's ``--key`` text for an owner: :func:`synthid_layer_keys` of the owner's id."""
    depth = getattr(scheme, "depth", None) or SYNTHID_DEPTH
    table = int(getattr(scheme, "sampling_table_size", 2**16))
    return ",".join(map(str, synthid_layer_keys(owner_waterfall_id(owner, secret), depth, table)))


def _score(det: Detection) -> float:
    return float(det.score)


def _z(det: Detection) -> float:
    return float(det.z_score) if det.z_score is not None else 0.0


OWNER_ADAPTERS.register("waterfall", OwnerAdapter(owner_id_key, _score, "q-score"))
OWNER_ADAPTERS.register("kgw", OwnerAdapter(owner_id_key, _z, "z-score"))
OWNER_ADAPTERS.register("synthid", OwnerAdapter(synthid_key, _score, "mean g-value"))
OWNER_ADAPTERS.register("exp", OwnerAdapter(owner_id_key, _score, "alignment score"))

#: the demo's and comparison's Waterfall spec
WATERFALL = "waterfall:kappa=2"
WATERMARK_METHODS.register("waterfall", WatermarkMethod(
    "waterfall", "Waterfall (Lau et al., 2024)", WATERFALL, PaperRow(0.965, 0.963, 0.015, False)))
# Kirchenbauer et al.'s defaults, as WaterDrum App. D uses them (gamma 0.5, delta 2)
WATERMARK_METHODS.register("kgw", WatermarkMethod(
    "kgw", "adapted KGW (Kirchenbauer et al., 2023)", "kgw:gamma=0.5,delta=2",
    PaperRow(0.871, 0.996, 0.336, True)))
WATERMARK_METHODS.register("synthid", WatermarkMethod(
    "synthid", "adapted SynthID-Text (Dathathri et al., 2024)", f"synthid:depth={SYNTHID_DEPTH}",
    PaperRow(0.549, -16.951, 0.386, True)))
# EXP-edit: exponential sampling from a fixed key sequence of 256, Levenshtein-aligned score
WATERMARK_METHODS.register("exp_edit", WatermarkMethod(
    "exp_edit", "adapted EXP-edit (Kuditipudi et al., 2024)", "exp:randomness=fixed,key_len=256,score=edit",
    PaperRow(0.789, -17.079, 165.5, False)))


@dataclass(frozen=True)
class OwnerWatermark:
    """A parsed scheme with its owner adapter: what generation and verification use."""

    scheme: WatermarkScheme
    adapter: OwnerAdapter

    def key(self, owner: int, secret: str | None) -> str:
        return self.adapter.key(self.scheme, owner, secret)

    def verify(self, token_ids: Sequence[int], owner: int, secret: str | None,
               vocab_size: int) -> tuple[float, Detection]:
        """The owner's value on ``token_ids`` (the query excluded) and the detection behind it."""
        det = self.scheme.detect(token_ids, self.key(owner, secret), vocab_size)
        return self.adapter.value(det), det


def owner_watermark(spec: str, what: str = "--watermark") -> OwnerWatermark:
    """The scheme of ``spec`` with its registered owner adapter; an error naming ``what`` and
    the registered schemes when the scheme has none."""
    scheme = parse_watermark(spec)
    if scheme is None:
        raise SpecError(f"{what} {spec}: owner data needs a watermark; known: {', '.join(OWNER_ADAPTERS.names())}")
    if scheme.spec.name not in OWNER_ADAPTERS:
        raise SpecError(f"{what} {spec}: {scheme.spec.name} is not adapted to many owners; "
                        f"known: {', '.join(OWNER_ADAPTERS.names())}")
    return OwnerWatermark(scheme, OWNER_ADAPTERS.get(scheme.spec.name))


def owner_value(spec: str) -> str:
    """What WaterDrum averages per text under ``spec`` (for reports)."""
    return owner_watermark(spec).adapter.value_name


#: Table 4's rows in the paper's order; methods registered by plugins follow, by name
TABLE4 = ("waterfall", "kgw", "synthid", "exp_edit")


def methods(names: Sequence[str] | None = None) -> list[WatermarkMethod]:
    """The registered methods named (by default Table 4's, then any others)."""
    if names is None:
        names = [*TABLE4, *(n for n in WATERMARK_METHODS.names() if n not in TABLE4)]
    return [WATERMARK_METHODS.get(n) for n in names]


def needs_model(method: WatermarkMethod) -> bool:
    """Whether verifying reads a model's logits (a GPU in practice for large models)."""
    return owner_watermark(method.spec).scheme.needs_model
