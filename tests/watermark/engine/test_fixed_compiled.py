"""Fixed-key detection (align and edit scores) through the compiled kernel against the numpy
reference path (the kernel monkeypatched away, as on an install without a C compiler): the
same p-values, scores, offsets, green counts and z-scores, bit for bit, for every scheme
that uses these scores, on seeded texts and at the edges."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

from evalrun._util.errors import SpecError
from evalrun.kernels import offset_scores as osk
from evalrun.watermark.registry import SCHEMES, parse_watermark

needs_compiled = pytest.mark.skipif(not osk.compiled_available(),
                                    reason="the compiled kernel was not built with this install")
pytestmark = pytest.mark.numeric

KEY = "fixed-compiled-key"

#: every scheme that scores with align or edit (randomness=fixed), each score, skip and psi
SPECS = [
    "kgw:randomness=fixed,key_len=16,permutations=30",
    "kgw:randomness=fixed,key_len=5,gamma=0.5,skip=0.3,permutations=20",
    "kgw:randomness=fixed,key_len=7,score=edit,permutations=10",
    "exp:randomness=fixed,key_len=16,permutations=30",
    "exp:randomness=fixed,key_len=6,skip=0.25,permutations=20",
    "exp:randomness=fixed,key_len=9,score=edit,psi=0.0,permutations=10",
    "its:randomness=fixed,key_len=16,permutations=30",
    "its:randomness=fixed,key_len=13,score=edit,permutations=10",
    "its:randomness=fixed,key_len=4,score=edit,psi=1.5,skip=0.5,permutations=8",
    "binary:randomness=fixed,key_len=8,permutations=10",
    "binary:randomness=fixed,key_len=6,score=edit,permutations=5",
]

TEXTS = {
    "n=1": lambda rng, v: rng.integers(0, v, 1),
    "n<key_len": lambda rng, v: rng.integers(0, v, 3),
    "n>key_len": lambda rng, v: rng.integers(0, v, 37),
    "repeats": lambda rng, v: np.array([1 % v] * 12 + [0, v - 1, 0] * 4),
}


def reference_analyse(monkeypatch: pytest.MonkeyPatch, scheme: Any, tokens: Any,
                      vocab: int) -> dict[str, Any]:
    with monkeypatch.context() as m:
        m.setattr(osk, "_compiled", None)
        assert not osk.compiled_available()
        return scheme.analyse(tokens, KEY, vocab)


def assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for name in want:
        a, b = got[name], want[name]
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape, name
            if b.dtype.kind == "f":
                assert np.array_equal(a.view(np.int64), b.view(np.int64)), name
            else:
                assert np.array_equal(a, b), name
        else:
            assert type(a) is type(b) and a == b, name


def test_every_fixed_key_scheme_is_covered() -> None:
    """The registered schemes that take randomness=fixed (and so score with align or edit)
    are the ones in SPECS, and each hands the kernel its statistic: a new one needs a line
    in SPECS, or detection of it would silently stay on the slow path."""
    covered = {spec.split(":")[0] for spec in SPECS}
    fixed = set()
    for name in SCHEMES.names():
        try:
            scheme = parse_watermark(f"{name}:randomness=fixed,key_len=4")
        except SpecError:
            continue  # no fixed randomness
        fixed.add(name)
        assert scheme.sampler.compiled_offset_stat(1000) is not None, name
    assert fixed == covered


@needs_compiled
@pytest.mark.parametrize("text", list(TEXTS))
@pytest.mark.parametrize("vocab", [2, 1000, 32_000])
@pytest.mark.parametrize("spec", SPECS)
def test_compiled_detection_equals_reference(monkeypatch: pytest.MonkeyPatch, spec: str,
                                             vocab: int, text: str) -> None:
    scheme = parse_watermark(spec)
    rng = np.random.default_rng(zlib.crc32(f"{spec} {vocab} {text}".encode()))
    tokens = TEXTS[text](rng, vocab).astype(np.int64)
    calls = []
    real = osk.offset_scores

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(osk, "offset_scores", spy)
        got = scheme.analyse(tokens, KEY, vocab)
    assert calls, "the compiled path was not taken"
    assert_same(got, reference_analyse(monkeypatch, scheme, tokens, vocab))


@needs_compiled
@pytest.mark.parametrize("spec", [
    "kgw:randomness=fixed,key_len=256",
    "exp:randomness=fixed,key_len=256",
    "its:randomness=fixed,key_len=64,score=edit,permutations=50",
])
def test_benchmark_specs_on_a_watermarked_length_text(monkeypatch: pytest.MonkeyPatch,
                                                      spec: str) -> None:
    """The benchmark's specs (all 200 null keys, L = 256) on one text of 120 tokens, through
    the public detect and prefix p-values."""
    scheme = parse_watermark(spec)
    tokens = np.random.default_rng(7).integers(0, 32_000, 120)
    got = scheme.detect(tokens, KEY, 32_000)
    got_p = scheme.prefix_p_values(tokens, KEY, 32_000)
    with monkeypatch.context() as m:
        m.setattr(osk, "_compiled", None)
        want = scheme.detect(tokens, KEY, 32_000)
        want_p = scheme.prefix_p_values(tokens, KEY, 32_000)
    assert got == want
    assert np.array_equal(got_p.view(np.int64), want_p.view(np.int64))


@needs_compiled
def test_detect_many_and_empty_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    scheme = parse_watermark("exp:randomness=fixed,key_len=8,permutations=20")
    texts = [np.zeros(0, dtype=np.int64), np.array([5]), np.arange(30) % 7]
    got = scheme.detect_many(texts, KEY, 50)
    with monkeypatch.context() as m:
        m.setattr(osk, "_compiled", None)
        want = scheme.detect_many(texts, KEY, 50)
    assert got == want
    assert got[0].p_value == 1.0 and got[0].num_tokens_scored == 0


def test_torch_backend_keeps_its_own_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled kernel serves the numpy backend only; torch builds M itself (on CPU here)
    and gets the same bits."""
    torch = pytest.importorskip("torch")
    scheme = parse_watermark("its:randomness=fixed,key_len=9,score=edit,permutations=10")
    tokens = np.random.default_rng(2).integers(0, 700, 25)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the torch backend took the compiled path")

    with monkeypatch.context() as m:
        m.setattr(osk, "offset_scores", refuse)
        on_torch = scheme.analyse(torch.as_tensor(tokens), KEY, 700, backend="torch")
    assert_same(on_torch, scheme.analyse(tokens, KEY, 700))


def test_without_the_kernel_detection_takes_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """An install without a C compiler: the same detection, by numpy."""
    scheme = parse_watermark("kgw:randomness=fixed,key_len=16,permutations=30")
    tokens = np.random.default_rng(4).integers(0, 1000, 48)
    monkeypatch.setattr(osk, "_compiled", None)
    with pytest.raises(RuntimeError, match="not built"):
        osk.offset_scores(osk.kgw(0.25), "align", np.zeros((1, 16), dtype=np.uint64),
                          np.ones((1, 16), dtype=bool), tokens, 1000, 0.25)
    det = scheme.detect(tokens, KEY, 1000)
    assert det.num_tokens_scored == 48 and 0 < det.p_value <= 1
