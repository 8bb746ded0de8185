"""Watermarked generation through the native logits processors, then detection."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from evalrun._util.errors import EvalrunError
from evalrun.watermark.registry import parse_watermark

VOCAB = 1000
KEY = "test-key"


class ToyModel:
    """Random logits that depend on the previous token and the step (seeded)."""

    def __init__(self, seed: int = 0, scale: float = 1.0) -> None:
        g = torch.Generator().manual_seed(seed)
        self.table = torch.randn(VOCAB, VOCAB, generator=g, dtype=torch.float64) * scale
        self.seed = seed

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed * 7919 + input_ids.shape[1])
        noise = torch.randn(input_ids.shape[0], VOCAB, generator=g, dtype=torch.float64)
        return (self.table[input_ids[:, -1]] + noise).to(torch.float32)


def generate(model: ToyModel, processor, batch: int, length: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, 6), generator=g)
    for _ in range(length):
        scores = model.logits(ids)
        if processor is not None:
            scores = processor(ids, scores)
        nxt = torch.multinomial(torch.softmax(scores.double(), dim=-1), 1, generator=g)
        ids = torch.cat([ids, nxt], dim=1)
    return ids[:, 6:]


def test_toy_model_has_enough_entropy() -> None:
    model = ToyModel()
    ids = torch.randint(0, VOCAB, (8, 3), generator=torch.Generator().manual_seed(0))
    p = torch.softmax(model.logits(ids).double(), -1)
    entropy = -(p * p.log()).sum(-1)
    assert float(entropy.min()) >= 3.0


SPECS = [
    "kgw:gamma=0.25,delta=2",
    "kgw:gamma=0.5,delta=2,randomness=minhash,context=3,skip=0.1",
    "exp:context=1",
    "exp:randomness=minhash,context=2,skip=0.05",
    "binary:context=1",
    "its:context=2,permutations=2000",
    "kgw:randomness=fixed,key_len=32,permutations=1000",
    "exp:randomness=fixed,key_len=32,permutations=1000",
    "binary:randomness=fixed,key_len=16,permutations=1000",
    "its:randomness=fixed,key_len=32,permutations=1000",
    "its:randomness=fixed,key_len=16,score=edit,psi=0.5,permutations=1000",
]


@pytest.mark.parametrize("spec", SPECS)
def test_watermarked_text_is_detected(spec: str) -> None:
    scheme = parse_watermark(spec)
    model = ToyModel(seed=1)
    length = 100 if "edit" in spec else 150
    proc = scheme.logits_processor(KEY, VOCAB, temperature=1.0, seed=3)
    marked = generate(model, proc, batch=2, length=length, seed=11)
    for row in marked.tolist():
        det = scheme.detect(row, KEY, VOCAB)
        assert det.p_value < 1e-3, (spec, det)
        assert det.num_tokens_scored > 0
    # the same text under another key, and unwatermarked text, look null (seeded, so the
    # 1e-3 bound is not flaky; calibration itself is tested in test_native_nulls.py)
    plain = generate(model, None, batch=1, length=length, seed=12)[0].tolist()
    assert scheme.detect(plain, KEY, VOCAB).p_value > 1e-3
    assert scheme.detect(marked[0].tolist(), "other-key", VOCAB).p_value > 1e-3


def test_green_list_fields_and_temperature() -> None:
    scheme = parse_watermark("kgw:gamma=0.25,delta=4")
    model = ToyModel(seed=2)
    proc = scheme.logits_processor(KEY, VOCAB, temperature=0.7, seed=0)
    row = generate(model, proc, batch=1, length=120, seed=5)[0].tolist()
    det = scheme.detect(row, KEY, VOCAB)
    assert scheme.green_list
    assert det.num_green_tokens is not None and det.num_green_tokens > 0.5 * det.num_tokens_scored
    assert det.z_score > 8
    assert det.as_json()["num_green_tokens"] == det.num_green_tokens


def test_processor_batched_shapes_and_one_hot() -> None:
    for spec in ("exp", "its", "binary", "its:randomness=fixed,key_len=8"):
        scheme = parse_watermark(spec)
        proc = scheme.logits_processor(KEY, VOCAB, temperature=1.0, seed=0)
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, VOCAB, (3, 4), generator=g)
        scores = torch.randn(3, VOCAB + 24, generator=g)  # model vocabularies may be padded
        out = proc(ids, scores)
        assert out.shape == scores.shape and out.dtype == scores.dtype
        finite = torch.isfinite(out)
        assert finite.sum(dim=1).tolist() == [1, 1, 1]
        assert int(finite.nonzero()[:, 1].max()) < VOCAB


def test_fixed_offsets_make_generations_diverse() -> None:
    scheme = parse_watermark("exp:randomness=fixed,key_len=64")
    model = ToyModel(seed=4)
    a = generate(model, scheme.logits_processor(KEY, VOCAB, temperature=1.0, seed=1), 1, 30, 0)
    b = generate(model, scheme.logits_processor(KEY, VOCAB, temperature=1.0, seed=2), 1, 30, 0)
    c = generate(model, scheme.logits_processor(KEY, VOCAB, temperature=1.0, seed=1), 1, 30, 0)
    assert not torch.equal(a, b)
    assert torch.equal(a, c)


def test_repeats_ignore_scores_each_pair_once() -> None:
    tokens = [5, 9] * 30
    ignore = parse_watermark("exp:context=1").detect(tokens, KEY, VOCAB)
    count = parse_watermark("exp:context=1,repeats=count").detect(tokens, KEY, VOCAB)
    assert ignore.num_tokens_scored == 2
    assert count.num_tokens_scored == 59


def test_empty_and_invalid_tokens() -> None:
    for spec in ("kgw", "exp", "its:permutations=10", "exp:randomness=fixed,key_len=4"):
        scheme = parse_watermark(spec)
        det = scheme.detect([], KEY, VOCAB)
        assert det.p_value == 1.0 and det.num_tokens_scored == 0
        with pytest.raises(EvalrunError, match="outside the vocabulary"):
            scheme.detect([1, VOCAB], KEY, VOCAB)


def test_detection_is_deterministic_and_key_free() -> None:
    scheme = parse_watermark("its:randomness=fixed,key_len=16,permutations=50")
    tokens = np.random.default_rng(0).integers(0, VOCAB, 60).tolist()
    assert scheme.detect(tokens, KEY, VOCAB) == scheme.detect(tokens, KEY, VOCAB)
    assert KEY not in repr(scheme.logits_processor(KEY, VOCAB, temperature=1, seed=0))
    assert KEY not in str(scheme.spec)
