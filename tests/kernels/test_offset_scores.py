"""The compiled align/edit kernel (kernels/offset_scores.c) against the numpy reference path,
bit for bit: every build of its loops this CPU runs, every statistic (kgw, exp, its, binary),
both scores, and the shapes at the edges (one token, fewer or more tokens than key positions,
repeated tokens, vocabulary 2, skipped key positions, psi 0)."""

from __future__ import annotations

import shutil
import sysconfig
import zlib

import numpy as np
import pytest

from evalrun.kernels import offset_scores as osk
from evalrun.kernels import seed_words as kr
from evalrun.kernels.backend import NUMPY
from evalrun.watermark.engine import scores as sc
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes.kgw import DistributionShift

needs_compiled = pytest.mark.skipif(not osk.compiled_available(),
                                    reason="the compiled kernel was not built with this install")
pytestmark = pytest.mark.numeric

VARIANTS = osk.variants() if osk.compiled_available() else []


def bits(x: np.ndarray) -> np.ndarray:
    """The float64 array's bit patterns (so that -0.0 differs from 0.0 and NaN equals NaN)."""
    return np.ascontiguousarray(x, dtype=np.float64).view(np.int64)


def reference(scheme, keys: np.ndarray, tokens: np.ndarray, vocab: int):
    m = scheme._offset_matrix(NUMPY, keys, NUMPY.i64(tokens), vocab)
    return sc.offset_scores(NUMPY, scheme.scoring, m)


def compiled(scheme, keys: np.ndarray, tokens: np.ndarray, vocab: int, variant: str = ""):
    seq, active = scheme.randomness.key_sequence(NUMPY, keys)
    stat = scheme.sampler.compiled_offset_stat(vocab)
    assert stat is not None
    return osk.offset_scores(stat, scheme.scoring.kind, seq, active, tokens, vocab,
                             scheme.sampler.null_mean(vocab), psi=scheme.scoring.psi,
                             offsets=True, variant=variant)


SPECS = [
    "kgw:randomness=fixed,key_len=16",
    "kgw:randomness=fixed,key_len=7,gamma=0.5,skip=0.3",
    "kgw:randomness=fixed,key_len=9,score=edit",
    "kgw:randomness=fixed,key_len=1,score=edit,psi=0.0",
    "exp:randomness=fixed,key_len=16",
    "exp:randomness=fixed,key_len=11,skip=0.5",
    "exp:randomness=fixed,key_len=10,score=edit,psi=0.0",
    "exp:randomness=fixed,key_len=17,score=edit,psi=2.5",
    "its:randomness=fixed,key_len=16",
    "its:randomness=fixed,key_len=1",
    "its:randomness=fixed,key_len=13,score=edit,skip=0.2",
    "binary:randomness=fixed,key_len=8",
    "binary:randomness=fixed,key_len=5,score=edit,skip=0.4",
]

TEXTS = {
    "one token": lambda rng, v: rng.integers(0, v, 1),
    "fewer than key_len": lambda rng, v: rng.integers(0, v, 3),
    "more than key_len": lambda rng, v: rng.integers(0, v, 41),
    "repeated tokens": lambda rng, v: np.array([v - 1] * 9 + [0, v - 1] * 6),
}


@needs_compiled
@pytest.mark.parametrize("text", list(TEXTS))
@pytest.mark.parametrize("vocab", [2, 3, 1000, 32_000])
@pytest.mark.parametrize("spec", SPECS)
def test_every_variant_equals_numpy(spec: str, vocab: int, text: str) -> None:
    scheme = parse_watermark(spec)
    rng = np.random.default_rng(zlib.crc32(f"{spec} {vocab} {text}".encode()))
    tokens = TEXTS[text](rng, vocab).astype(np.int64)
    keys = kr.null_keys(NUMPY, 11, 5)
    want_best, want_arg = reference(scheme, keys, tokens, vocab)
    for variant in VARIANTS:
        best, arg = compiled(scheme, keys, tokens, vocab, variant)
        assert best.shape == want_best.shape
        assert np.array_equal(bits(best), bits(want_best)), variant
        assert np.array_equal(arg, want_arg), variant


@needs_compiled
@pytest.mark.parametrize("spec", ["kgw:randomness=fixed,key_len=3,score=edit",
                                  "exp:randomness=fixed,key_len=20,score=edit"])
def test_edit_state_beyond_the_l1_sized_case(spec: str) -> None:
    """A text longer than the DP's block of offsets keeps in cache (n > 250), and key
    lengths that are not multiples of the block (lanes left over in the last block)."""
    scheme = parse_watermark(spec)
    tokens = np.random.default_rng(3).integers(0, 500, 300)
    keys = kr.null_keys(NUMPY, 3, 2)
    want_best, want_arg = reference(scheme, keys, tokens, 500)
    best, arg = compiled(scheme, keys, tokens, 500)
    assert np.array_equal(bits(best), bits(want_best))
    assert np.array_equal(arg, want_arg)


@needs_compiled
@pytest.mark.parametrize("gamma", [1e-9, 0.999999, 1.0])
def test_kgw_green_fractions_at_the_ends(gamma: float) -> None:
    """Thresholds at 0 and 2**53 (gamma 1: every token green, which the spec keys do not
    allow but the statistic does)."""
    scheme = parse_watermark("kgw:randomness=fixed,key_len=12")
    sampler = DistributionShift(gamma, 2.0)
    scheme.sampler = sampler
    tokens = np.random.default_rng(5).integers(0, 300, 30)
    keys = kr.null_keys(NUMPY, 5, 4)
    want_best, want_arg = reference(scheme, keys, tokens, 300)
    best, arg = compiled(scheme, keys, tokens, 300)
    assert np.array_equal(bits(best), bits(want_best))
    assert np.array_equal(arg, want_arg)


@needs_compiled
def test_offsets_only_on_request_and_many_keys_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys split over several kernel calls give what one call gives."""
    scheme = parse_watermark("exp:randomness=fixed,key_len=6")
    tokens = np.random.default_rng(8).integers(0, 100, 25)
    keys = kr.null_keys(NUMPY, 8, 9)
    seq, active = scheme.randomness.key_sequence(NUMPY, keys)
    whole, arg = osk.offset_scores(osk.exp(), "align", seq, active, tokens, 100, 1.0)
    assert arg is None
    monkeypatch.setattr(osk, "KEYS_PER_CALL_ELEMENTS", 50)  # 2 keys a call
    split, _ = osk.offset_scores(osk.exp(), "align", seq, active, tokens, 100, 1.0)
    assert np.array_equal(bits(whole), bits(split))
    assert np.array_equal(bits(whole), bits(reference(scheme, keys, tokens, 100)[0]))


@needs_compiled
def test_kernel_rejects_bad_buffers_and_variants() -> None:
    """The extension checks what it is handed instead of reading past a buffer."""
    from evalrun.kernels import _offset_scores

    seq = np.zeros((2, 4), dtype=np.uint64)
    active = np.ones((2, 4), dtype=np.uint8)
    tokens = np.arange(3, dtype=np.uint64)
    empty_u8, empty_f, empty_i = (np.zeros(0, dtype=t) for t in (np.uint8, np.float64, np.int64))

    def call(**kw):
        args = dict(mode=0, kind=0, pos_words=seq, pos_floats=empty_f, active=active,
                    tok_words=tokens, tok_bits=empty_u8, tok_len=empty_i, keys=2, key_len=4,
                    n=3, depth=1, null_mean=0.25, denom=0.0, threshold=1 << 60,
                    all_green=False, vocab=10, bits=4, psi=0.5,
                    best=np.zeros((2, 3)), arg=empty_i)
        args.update(kw)
        return _offset_scores.scores(**args)

    assert call() in VARIANTS
    with pytest.raises(ValueError, match="best"):
        call(best=np.zeros((2, 2)))
    with pytest.raises(ValueError, match="pos_words"):
        call(keys=3, best=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="arg"):
        call(arg=np.zeros(5, dtype=np.int64))
    with pytest.raises(ValueError, match="variant"):
        call(variant="sse9")
    with pytest.raises(ValueError, match="mode"):
        call(mode=2)
    with pytest.raises(ValueError, match="pos_floats"):
        call(kind=2)
    with pytest.raises(ValueError, match="vocabulary"):
        call(kind=2, pos_floats=np.zeros((2, 4)), vocab=2, bits=2)


@needs_compiled
def test_every_x86_64_build_is_there() -> None:
    """On x86-64 the portable loops always run; the AVX2 and AVX-512 builds where the CPU
    has them."""
    assert VARIANTS[0] == "portable"
    assert set(VARIANTS) <= {"portable", "avx2", "avx512"}


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")) or
                    not sysconfig.get_paths().get("include"),
                    reason="no C compiler here: the install skips the optional kernel")
def test_the_kernel_is_built_where_a_compiler_is() -> None:
    """The extension is optional in setup.py, so a failed build would only show as slowness;
    where a compiler exists (CI), the install must have built it."""
    assert osk.compiled_available()


@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")) or
                    not sysconfig.get_paths().get("include"),
                    reason="no C compiler here")
def test_the_code_built_off_x86_equals_numpy(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel as arm64 (or any CPU but x86-64) builds it, one double per "vector": built
    here with OFFSET_SCORES_GENERIC, it must give numpy's bits too."""
    import importlib.util
    import subprocess
    from pathlib import Path

    src = Path(osk.__file__).with_name("offset_scores.c")
    out = tmp_path / ("_offset_scores" + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))
    cc = shutil.which("cc") or shutil.which("gcc")
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-ffp-contract=off", "-DOFFSET_SCORES_GENERIC",
                    f"-I{sysconfig.get_paths()['include']}", f"-I{src.parent}", str(src),
                    "-o", str(out)], check=True, capture_output=True, timeout=300)
    spec = importlib.util.spec_from_file_location("evalrun.kernels._offset_scores", out)
    assert spec is not None and spec.loader is not None
    generic = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generic)
    assert generic.variants() == ["portable"]
    monkeypatch.setattr(osk, "_compiled", generic)
    for spec_text in SPECS:
        scheme = parse_watermark(spec_text)
        for text, make in TEXTS.items():
            rng = np.random.default_rng(zlib.crc32(f"{spec_text} {text}".encode()))
            tokens = make(rng, 1000).astype(np.int64)
            keys = kr.null_keys(NUMPY, 13, 3)
            want_best, want_arg = reference(scheme, keys, tokens, 1000)
            best, arg = compiled(scheme, keys, tokens, 1000)
            assert np.array_equal(bits(best), bits(want_best)), (spec_text, text)
            assert np.array_equal(arg, want_arg), (spec_text, text)
