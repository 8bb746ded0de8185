"""The vLLM watermark adapter's bookkeeping, against pure-python stand-ins for vLLM's batch
updates (runs without vllm); the real engine is exercised when vllm is importable."""

from __future__ import annotations

import enum
import importlib.util
import types
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from evalrun.plugins.providers.vllm_watermark import (
    EXTRA_ARGS_KEY,
    EvalrunWatermarkLogitsProcessor,
    vllm_temperature,
    watermark_extra_args,
)
from evalrun.watermark import parse_watermark

pytestmark = pytest.mark.numeric  # the schemes' processors on float32 logits

V = 64
KGW = "kgw:delta=2,gamma=0.25"


class Direction(enum.Enum):  # stands in for vllm's MoveDirectionality
    UNIDIRECTIONAL = 1
    SWAP = 2


@dataclass
class Update:  # stands in for vllm's BatchUpdate
    batch_size: int
    removed: list = field(default_factory=list)
    added: list = field(default_factory=list)
    moved: list = field(default_factory=list)


@dataclass
class Params:  # the SamplingParams fields the adapter reads
    temperature: float = 1.0
    extra_args: dict | None = None
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logit_bias: Any = None


def marked(spec: str = KGW, key: str = "k", temperature: float = 1.0, seed: int = 1) -> Params:
    return Params(temperature=vllm_temperature(temperature),
                  extra_args=watermark_extra_args(spec, key, temperature, seed))


def adapter() -> EvalrunWatermarkLogitsProcessor:
    config = types.SimpleNamespace(model_config=types.SimpleNamespace(get_vocab_size=lambda: V))
    return EvalrunWatermarkLogitsProcessor(config, torch.device("cpu"), False)


def reference(spec: str, prompt: list[int], output: list[int], logits: torch.Tensor,
              key: str = "k", temperature: float = 1.0, seed: int = 1) -> torch.Tensor:
    proc = parse_watermark(spec).logits_processor(key, V, temperature=temperature, seed=seed)
    return proc(torch.tensor([prompt + output]), logits[None].clone())[0]


def test_temperature_and_extra_args():
    assert vllm_temperature(0) == 0.0 and vllm_temperature(0.7) == 1.0
    args = watermark_extra_args(KGW, "secret", 0.7, 5)[EXTRA_ARGS_KEY]
    assert args == {"spec": KGW, "key": "secret", "temperature": 0.7, "seed": 5}
    with pytest.raises(ValueError, match="no watermark key"):
        watermark_extra_args(KGW, "", 1.0, 1)


def test_validate_params_refuses_what_would_change_the_math():
    EvalrunWatermarkLogitsProcessor.validate_params(Params())  # unmarked: nothing to check
    EvalrunWatermarkLogitsProcessor.validate_params(marked())
    EvalrunWatermarkLogitsProcessor.validate_params(marked(temperature=0.0))
    bad_temp = marked(temperature=0.7)
    bad_temp.temperature = 0.7  # vLLM would divide the processor's scores again
    with pytest.raises(ValueError, match="temperature=1.0"):
        EvalrunWatermarkLogitsProcessor.validate_params(bad_temp)
    greedy = marked(temperature=0.0)
    greedy.temperature = 1.0
    with pytest.raises(ValueError, match="temperature=0.0"):
        EvalrunWatermarkLogitsProcessor.validate_params(greedy)
    top_p = marked()
    top_p.top_p = 0.9
    with pytest.raises(ValueError, match="top_p"):
        EvalrunWatermarkLogitsProcessor.validate_params(top_p)
    with pytest.raises(ValueError, match="--watermark"):
        EvalrunWatermarkLogitsProcessor.validate_params(marked(spec="nosuchscheme"))
    no_key = marked()
    del no_key.extra_args[EXTRA_ARGS_KEY]["key"]
    with pytest.raises(ValueError, match="'key'"):
        EvalrunWatermarkLogitsProcessor.validate_params(no_key)


def test_argmax_is_not_invariant():
    assert adapter().is_argmax_invariant() is False


def test_rows_follow_added_removed_and_moved_requests():
    a = adapter()
    a.update_state(None)  # no change: nothing happens
    out0: list[int] = []
    out2: list[int] = []
    p0, p2 = marked(seed=1), marked(spec="exp", seed=2)
    a.update_state(Update(3, added=[(0, p0, [1, 2, 3], out0), (1, Params(), [4], []),
                                    (2, p2, [5, 6], out2)]))
    assert sorted(a.rows) == [0, 2]
    assert "key" not in p0.extra_args[EXTRA_ARGS_KEY]  # the key is gone once the processor exists
    # output lists are live references: appending in place shows up in the context
    out0.append(9)
    assert a.rows[0].context() == [1, 2, 3, 9]
    # a swap exchanges rows; a one-way move replaces the target and empties the source
    a.update_state(Update(3, moved=[(0, 2, Direction.SWAP)]))
    assert a.rows[2].context() == [1, 2, 3, 9] and a.rows[0].context() == [5, 6]
    a.update_state(Update(3, moved=[(2, 1, Direction.UNIDIRECTIONAL)]))
    assert sorted(a.rows) == [0, 1] and a.rows[1].context() == [1, 2, 3, 9]
    # removed first, then added (an unmarked request reusing an index clears it), then moved
    a.update_state(Update(2, removed=[1], added=[(0, Params(), [7], [])]))
    assert a.rows == {}


def test_readded_request_keeps_its_processor():
    a = adapter()
    p, out = marked(), [4]
    a.update_state(Update(1, added=[(0, p, [1, 2], out)]))
    first = a.rows[0].processor
    a.update_state(Update(0, removed=[0]))
    a.update_state(Update(1, added=[(0, p, [1, 2], out)]))  # e.g. resumed after preemption
    assert a.rows[0].processor is first


def test_apply_matches_the_processor_on_prompt_plus_output():
    a = adapter()
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, V, generator=gen)
    out0, out2 = [10, 11], [12]
    a.update_state(Update(3, added=[(0, marked(temperature=0.7, seed=3), [1, 2, 3], out0),
                                    (1, Params(), [4], []),
                                    (2, marked(spec="exp", seed=4), [5, 6], out2)]))
    want0 = reference(KGW, [1, 2, 3], out0, logits[0], temperature=0.7, seed=3)
    want2 = reference("exp", [5, 6], out2, logits[2], seed=4)
    got = a.apply(logits.clone())
    assert torch.allclose(got[0], want0)
    assert torch.equal(got[1], logits[1])  # unmarked rows untouched
    assert torch.isfinite(got[2]).sum() == 1 and got[2].argmax() == want2.argmax()
    # empty batch: logits pass through
    b = adapter()
    assert b.apply(logits) is logits


@pytest.mark.parametrize("spec", ["dipmark", "unbiased", "pf", "sweet", "ewd", "exp_gumbel", "morphmark"])
def test_markllm_schemes_through_the_adapter_match_their_processors(spec: str):
    """MarkLLM's schemes take the vLLM path unchanged: over several steps, each row's logits
    are what the scheme's own processor gives on prompt + output so far."""
    a = adapter()
    gen = torch.Generator().manual_seed(1)
    prompt, output = [3, 9, 27, 17, 51, 2, 8], [5, 40]
    a.update_state(Update(2, added=[(0, marked(spec=spec, temperature=0.8, seed=2), prompt, output),
                                    (1, Params(), [4], [])]))
    proc = parse_watermark(spec).logits_processor("k", V, temperature=0.8, seed=2)
    for step in range(3):
        logits = torch.randn(2, V, generator=gen) * 3
        want = proc(torch.tensor([prompt + output]), logits[:1].clone())[0]
        got = a.apply(logits.clone())
        assert torch.allclose(got[0], want, equal_nan=True), (spec, step)
        assert torch.equal(got[1], logits[1])
        output.append(int(torch.nan_to_num(want, neginf=-1e30).argmax()))  # vLLM grows the list in place


def test_prompt_embeddings_are_refused():
    with pytest.raises(ValueError, match="prompt's token ids"):
        adapter().update_state(Update(1, added=[(0, marked(), None, [])]))


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vllm is not installed")
def test_adapter_is_a_vllm_logits_processor():
    from evalrun._util.errors import EvalrunError
    from evalrun.plugins.providers.vllm import _import_vllm

    try:  # a vllm that is installed but does not import: evalrun's line, not a traceback
        _import_vllm("vllm")
    except EvalrunError as exc:
        pytest.fail(str(exc), pytrace=False)
    from vllm.v1.sample.logits_processor import LogitsProcessor

    assert issubclass(EvalrunWatermarkLogitsProcessor, LogitsProcessor)
