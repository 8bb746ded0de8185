"""Watermarks adapted to many owners (WaterDrum Table 4): owner keys per scheme, the same
watermarking operator (``watermark-data`` on the embedded model) for every registered method,
and the ``waterdrum`` pack's grader verifying each through ``owner_watermark``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalrun._util.errors import SpecError
from evalrun.model.providers import parse_model
from evalrun.pack.grade import GradeContext
from evalrun.pack.loading import load_pack
from evalrun.unlearning.data import load_owners, shipped_owners_path, watermark_data
from evalrun.unlearning.demo import write_pack
from evalrun.unlearning.grading import VERIFIED, grade_verification, verifier_spec
from evalrun.unlearning.owner_watermarks import (
    OWNER_ADAPTERS,
    TABLE4,
    WATERMARK_METHODS,
    methods,
    owner_watermark,
    synthid_layer_keys,
)
from evalrun.watermark.schemes.synthid import parse_keys

pytest.importorskip("torch")
pytest.importorskip("transformers")

V = 8192  # the embedded model's vocabulary


def test_table4_methods_are_registered_in_the_papers_order() -> None:
    assert [m.name for m in methods()][:4] == list(TABLE4)
    for m in methods():
        assert owner_watermark(m.spec).scheme.spec.name in OWNER_ADAPTERS
        assert m.paper is not None and "et al." in m.title
    assert WATERMARK_METHODS.get("kgw").paper.d2 == pytest.approx(0.996)


def test_a_scheme_without_an_owner_adapter_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(SpecError, match=r"unigram is not adapted to many owners; known: exp, kgw, synthid, waterfall"):
        owner_watermark("unigram:gamma=0.5")
    with pytest.raises(SpecError, match="unknown WaterDrum watermark method 'bogus'"):
        methods(["bogus"])


def test_synthid_layer_keys_are_distinct_layers_derived_from_the_owner_id() -> None:
    keys = synthid_layer_keys(3, 30, 2**16)
    assert len(keys) == 30 and len({k % 2**16 for k in keys}) == 30
    assert keys == synthid_layer_keys(3, 30, 2**16) and keys != synthid_layer_keys(4, 30, 2**16)
    marked = owner_watermark("synthid:depth=30")
    assert parse_keys(marked.key(3, None), depth=30, table_size=2**16) == tuple(keys)
    assert marked.key(3, "s3cret") != marked.key(3, None)
    assert owner_watermark("kgw:delta=2").key(3, None) == "3"  # the owner's id is the key


@pytest.fixture(scope="module")
def marked_lines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Four passages of owners 0 and 1 watermarked by each Table 4 method with the same
    operator (continue mode on the embedded model, 40 tokens)."""
    import torch

    torch.set_num_threads(1)  # as the commands do: a second thread is slower on a shared 2-core machine
    root = tmp_path_factory.mktemp("t4")
    records = [r for r in load_owners(shipped_owners_path()) if r["owner"] in (0, 1)]
    records = records[:2] + records[24:26]
    return {m.name: watermark_data(records, model=parse_model("embedded"), watermark=m.spec,
                                   out=root / f"{m.name}.jsonl", mode="continue", max_tokens=40, seed=0)
            for m in methods()}


@pytest.mark.parametrize("name", TABLE4)
def test_each_method_marks_the_owners_data_with_the_owners_key(
        marked_lines: dict[str, list[dict[str, Any]]], name: str) -> None:
    lines = marked_lines[name]
    marked = owner_watermark(WATERMARK_METHODS.get(name).spec)
    assert all(line["watermark"] == marked.scheme.spec.canonical() for line in lines)
    own, other = [], []
    for line in lines:
        ids = line["completion_token_ids"]
        value, det = marked.verify(ids, line["owner"], None, V)
        assert value == pytest.approx(line["verification_score"])
        own.append(value)
        other.append(marked.verify(ids, 1 - line["owner"], None, V)[0])
    # each owner's key is found in its own data, more than another owner's key
    assert sum(own) > sum(other)
    assert sum(line["p_value"] <= 0.05 for line in lines) >= 3


@pytest.mark.parametrize("name", TABLE4)
def test_the_pack_grader_verifies_the_method_named_in_pack_toml(
        marked_lines: dict[str, list[dict[str, Any]]], name: str, tmp_path: Path) -> None:
    spec = WATERMARK_METHODS.get(name).spec
    pack = write_pack(tmp_path / "pack", [{"id": "a", "owner": 0, "set": "forget", "prompt": "p q"}],
                      owner_watermark=spec)
    settings = load_pack(pack).meta
    assert verifier_spec(settings) == spec
    line = marked_lines[name][0]
    ctx = GradeContext(token_ids=tuple(line["completion_token_ids"]), key=None,
                       extra={"vocab_size": V}, settings=settings)
    g = grade_verification({"id": "a", "owner": line["owner"], "set": "forget", "prompt": "p"}, "x", ctx)
    assert g.metadata["verification_score"] == pytest.approx(line["verification_score"])
    assert g.metadata["owner_watermark"] == owner_watermark(spec).scheme.spec.name
    assert (g.label == VERIFIED) == (line["p_value"] <= 0.05)
    json.dumps(g.metadata)


def test_the_shipped_pack_still_verifies_waterfall_from_k_p_and_n_gram() -> None:
    from evalrun.pack.loading import shipped_packs_dir

    settings = load_pack(shipped_packs_dir() / "waterdrum").meta
    assert verifier_spec(settings) == "waterfall:k_p=1,n_gram=2"
