"""EXPGumbel (MarkLLM's Gumbel-max exponential watermark): MarkLLM agreement at two vocabulary
sizes, on-demand table rows equal to the full ``torch.rand`` table, bounded memory, the null,
generation with the embedded model, specs.

Reference values: ``tests/watermark/schemes/data/markllm_reference.json`` (``scripts/markllm_reference.py``,
MarkLLM 112fa74): per sequence, the ids and the ``score`` (a p-value) and ``is_watermarked`` of
``EXPGumbel.detect_watermark`` with MarkLLM's default config (seed 42).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from evalrun._util.errors import SpecError
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.keyed_hash import GOLDEN, mix64
from evalrun.watermark.engine.randomness import derive_key
from evalrun.watermark.registry import parse_watermark
from evalrun.watermark.schemes.exp_gumbel import TAG_EXP_GUMBEL, ExpGumbel, RowStream, torch_seed_key

REF = json.loads((Path(__file__).parent / "data" / "markllm_reference.json").read_text())
KEY = "exp-gumbel test key"


def _scheme(text: str = "exp_gumbel") -> ExpGumbel:
    scheme = parse_watermark(text)
    assert isinstance(scheme, ExpGumbel)
    return scheme


def _compat() -> ExpGumbel:
    return _scheme("exp_gumbel:compat=markllm")


# ------------------------------------------------------------------------------------------
# the table: on-demand rows are the full torch.rand table's rows, bit for bit
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [42, -3, 2**40 + 7])
def test_on_demand_rows_equal_the_full_torch_table(seed: int) -> None:
    import torch

    torch.set_num_threads(1)
    V = 1000
    full = torch.clamp(torch.rand((2 * V, V), generator=torch.Generator().manual_seed(seed),
                                  dtype=torch.float32), min=1e-20).numpy()
    stream = RowStream(torch_seed_key(seed), V, 2 * V, 1e-20)
    assert stream.every == 263  # checkpoints at least 2**18 draws apart
    # out of order, repeated, first and last rows: checkpoints and restarts all exercised
    for r in [5, 0, 1999, 1998, 700, 5, 3, 1500, 1]:
        assert np.array_equal(stream.row(r), full[r]), r
    small = RowStream(torch_seed_key(seed), V, 2 * V, 1e-20)
    small.every = 64  # sparse checkpoints: rows between them are reached by skipping draws
    for r in [1999, 63, 64, 65, 1000, 2, 1999]:
        assert np.array_equal(small.row(r), full[r]), r
    jumping = RowStream(torch_seed_key(seed), V, 2 * V, 1e-20)
    jumping.every, jumping.jump_draws = 10, 0  # every checkpoint reached by an MT19937 jump
    for r in [1999, 1237, 10, 11, 9, 640, 1990]:
        assert np.array_equal(jumping.row(r), full[r]), r
    assert sorted(jumping._checks) == [0, 10, 640, 1230, 1990]


def test_jump_ahead_equals_skipping_far_into_the_stream() -> None:
    """A jump of 3 * 10**8 + 7 draws lands where skipping them does (MT19937's recurrence)."""
    from evalrun.watermark.schemes.exp_gumbel import mt_jump

    init = torch_seed_key(42)
    bg = np.random.MT19937(0)
    bg.state = {"bit_generator": "MT19937", "state": {"key": init, "pos": 624}}
    first = np.asarray(bg.random_raw(19937 + 624), dtype=np.uint32)
    k = 3 * 10**8 + 7
    bg.state = {"bit_generator": "MT19937", "state": {"key": init, "pos": 624}}
    bg.random_raw(k, output=False)
    want = bg.random_raw(1500)
    bg.state = {"bit_generator": "MT19937", "state": {"key": mt_jump(first, k), "pos": 0}}
    assert np.array_equal(bg.random_raw(1500), want)


def test_memory_stays_bounded_at_v_128000() -> None:
    """Rows of the V = 128,000 table (131 GB in full) with peak RSS measured in a fresh process
    (VmHWM: ``ru_maxrss`` would carry over the forking pytest's peak)."""
    code = (
        "import resource, numpy as np\n"
        "from evalrun.watermark.registry import parse_watermark\n"
        "s = parse_watermark('exp_gumbel:compat=markllm')\n"
        "V = 128000\n"
        "ids = np.array([1000, 1000, 5, 3, 7, 1, 9, 2, 11, 5, 8, 0, 127999, 127998, 4], dtype=np.int64)\n"
        "d = s.detect(ids, '42', V)\n"
        "st = s.stream('42', V)\n"
        "hwm = [ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM')]\n"
        "print(d.extra['markllm_score'], len(st._checks), st.every,"
        " hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[3], timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout.split()
    score, checks, every, rss_kb = float(out[0]), int(out[1]), int(out[2]), int(out[3])
    assert 0.0 <= score <= 1.0
    # rows 2000, 127999 and 255997 (up to 3.3e10 draws in) are reached by jumps to the
    # checkpoints 2000, 127875 and 255875
    assert every == 125 and checks == 4 + 1
    assert rss_kb < 300 * 1024, f"peak RSS {rss_kb / 1024:.0f} MB"


# ------------------------------------------------------------------------------------------
# MarkLLM agreement
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("vocab", ["1000", "50257"])
def test_markllm_score_equals_markllm_for_every_stored_sequence(vocab: str) -> None:
    cfg = REF["configs"]["EXPGumbel"]
    scheme = _compat()
    assert (scheme.prefix_length, scheme.eps, scheme.threshold, scheme.temperature) == (
        cfg["prefix_length"], cfg["eps"], cfg["threshold"], cfg["temperature"])
    seqs = REF["vocab"][vocab]["algorithms"]["EXPGumbel"]
    assert {s["kind"] for s in seqs} == {"uniform-random", "model-sampled", "repeated-block", "watermarked"}
    flagged = 0
    for s in seqs:
        det = scheme.detect(s["ids"], str(cfg["seed"]), int(vocab))
        ref = float(s["score"])
        assert det.extra["markllm_score"] == pytest.approx(ref, rel=1e-6, abs=1e-12), s["kind"]
        assert det.extra["markllm_is_watermarked"] == (s["is_watermarked"] in (True, "True"))
        flagged += det.extra["markllm_is_watermarked"]
        # the per-token uniforms MarkLLM read
        u = scheme._analyse([s["ids"]], str(cfg["seed"]), int(vocab))[4][scheme.prefix_length:]
        assert np.array_equal(u.astype(np.float64), np.asarray(s["detail"]["u"], dtype=np.float64))
        if s["kind"] == "repeated-block":
            # MarkLLM counts the repeated cells again; evalrun scores each cell once
            assert det.extra["tokens_dropped_repeats"] > 0
            assert det.num_tokens_scored + det.extra["tokens_dropped_repeats"] == len(s["ids"]) - 2
        elif s["kind"] == "watermarked" and vocab == "50257":
            assert det.p_value < 0.01  # (at V=1000 the random model's 58 tokens are too few)
    if vocab == "50257":
        assert flagged == 3


def test_markllm_score_on_too_short_texts_and_wrong_key() -> None:
    scheme = _compat()
    for ids in ([], [5], [5, 6]):
        det = scheme.detect(ids, "42", 1000)
        assert det.extra["markllm_score"] is None and det.p_value == 1.0
        assert det.num_tokens_scored == 0
    marked = [s for s in REF["vocab"]["1000"]["algorithms"]["EXPGumbel"] if s["kind"] == "watermarked"]
    assert scheme.detect(marked[3]["ids"], "43", 1000).extra["markllm_score"] > 0.01


# ------------------------------------------------------------------------------------------
# the null
# ------------------------------------------------------------------------------------------
def _fpr_inside(pvals: np.ndarray, alpha: float = 0.02) -> None:
    k = int((pvals <= alpha).sum())
    lo, hi = scipy.stats.binom.interval(0.95, len(pvals), alpha)
    assert lo <= k <= hi, (k, lo, hi)


def test_null_fpr_and_uniformity_on_random_sequences() -> None:
    """(Checked once on 4,000 random texts under 200 keys: FPR 0.018 at p = 0.02, 0.104 at
    0.1, KS p = 0.34.)"""
    rng = np.random.default_rng(2)
    V = 1000
    scheme = _scheme()
    pvals = np.array([scheme.detect(rng.integers(0, V, 60).tolist(), f"{KEY}{i // 20}", V).p_value
                      for i in range(400)])
    _fpr_inside(pvals)
    assert scipy.stats.kstest(pvals, "uniform").pvalue > 1e-3
    # repetitive random texts (12 distinct ids, so (row, token) cells repeat): MarkLLM's sum
    # counts repeats again; evalrun's deduplicated statistic stays calibrated
    rep = np.array([scheme.detect(rng.integers(0, 12, 80).tolist(), f"{KEY}{i // 20}", V).p_value
                    for i in range(400)])
    _fpr_inside(rep)
    assert scipy.stats.kstest(rep, "uniform").pvalue > 1e-3


def test_prefix_p_values_match_detect() -> None:
    rng = np.random.default_rng(5)
    scheme = _scheme()
    arr = rng.integers(0, 50, 40)
    arr[20:30] = arr[0:10]  # repeats
    ids = arr.tolist()
    pre = scheme.prefix_p_values(ids, KEY, 1000)
    assert pre.shape == (40,) and np.all(pre[:2] == 1.0)
    for i in (2, 11, 25, 39):
        assert pre[i] == pytest.approx(scheme.detect(ids[: i + 1], KEY, 1000).p_value, rel=1e-12)


def _native_u(key: str, row: int, token: int) -> float:
    """The native table's cell from the module docstring, one Python integer at a time."""
    def h(x: int) -> int:
        return int(mix64(NUMPY, NUMPY.u64([x]))[0])

    seed = h(h(derive_key(key) ^ TAG_EXP_GUMBEL) ^ (row * GOLDEN % 2**64))
    return ((h(seed ^ (token * GOLDEN % 2**64)) >> 11) + 0.5) / 2**53


@pytest.mark.parametrize("prefix_length", [1, 2, 3])
def test_native_detection_equals_the_slow_definition(prefix_length: int) -> None:
    """Rows are sums of the previous ids, cells hashed, repeated (row, token) cells dropped, the
    sum of -log(1 - u) against Gamma(n, 1); detect_many, detect and prefix p-values agree."""
    V, rng = 400, np.random.default_rng(8)
    scheme = _scheme(f"exp_gumbel:prefix_length={prefix_length}")
    texts = [rng.integers(0, V, n) for n in (0, prefix_length, 50, 90)]
    texts[-1][60:80] = texts[-1][10:30]
    dets = scheme.detect_many(texts, KEY, V)
    for ids, det, pre in zip(texts, dets, scheme.prefix_p_values_many(texts, KEY, V)):
        seen: set[tuple[int, int]] = set()
        total, kept = 0.0, 0
        for t in range(prefix_length, len(ids)):
            cell = (int(ids[t - prefix_length:t].sum()), int(ids[t]))
            if cell not in seen:
                seen.add(cell)
                total, kept = total - np.log1p(-_native_u(KEY, *cell)), kept + 1
        assert det.num_tokens_scored == kept and det.score == pytest.approx(total, rel=1e-12)
        want = scipy.stats.gamma.sf(total, kept) if kept else 1.0
        assert det.p_value == pytest.approx(want, rel=1e-9)
        assert det.extra["tokens_dropped_repeats"] == max(len(ids) - prefix_length, 0) - kept
        assert det == scheme.detect(ids, KEY, V)
        assert np.array_equal(pre, scheme.prefix_p_values(ids, KEY, V))
    assert dets[-1].extra["tokens_dropped_repeats"] >= 20 - prefix_length


# ------------------------------------------------------------------------------------------
# generation
# ------------------------------------------------------------------------------------------
def test_native_processor_picks_the_gumbel_argmax() -> None:
    import torch

    V = 300
    proc = _scheme("exp_gumbel:temperature=0.5").logits_processor(KEY, V, temperature=1.0, seed=0)
    hist = torch.tensor([[1, 2, 3], [9, 200, 250], [0, 299, 299]])
    scores = torch.randn(3, V, generator=torch.Generator().manual_seed(4))
    out = proc(hist, scores.clone())
    for b in range(3):
        row = int(hist[b, -2:].sum())
        gumbel = [-np.log(-np.log(_native_u(KEY, row, v))) for v in range(V)]
        want = int(np.argmax(scores[b].double().numpy() / 0.5 + np.array(gumbel)))
        assert int(torch.argmax(out[b])) == want and torch.isinf(out[b]).sum() == V - 1
    short = proc(hist[:, :1], scores.clone())  # shorter than prefix_length: the plain argmax
    assert torch.equal(torch.argmax(short, dim=1), torch.argmax(scores, dim=1))


def test_processor_picks_markllm_gumbel_argmax() -> None:
    import torch

    scheme = _compat()
    V = 1000
    proc = scheme.logits_processor("42", V, temperature=1.0, seed=0)
    full = torch.clamp(torch.rand((2 * V, V), generator=torch.Generator().manual_seed(42)), min=1e-20)
    gumbel = -torch.log(torch.clamp(-torch.log(full), min=1e-20))
    hist = torch.tensor([[1, 2, 3], [9, 400, 500]])
    scores = torch.randn(2, V, generator=torch.Generator().manual_seed(1))
    out = proc(hist, scores.clone())
    for b in range(2):
        want = int(torch.argmax(scores[b] / 0.7 + gumbel[int(hist[b, -2:].sum())]))
        assert int(torch.argmax(out[b])) == want
        assert torch.isinf(out[b]).sum() == V - 1


def _generate(generate, spec: str, key: str | None, n: int = 4, seed: int = 11) -> dict:
    prompts = [f"Write a short report about the book number {i}." for i in range(n)]
    return {f"g{i}": gen for i, gen in enumerate(generate(spec, key, prompts, max_tokens=80, seed=seed))}


def test_embedded_generation_is_detected_and_reproducible(generate, false_alarms_allowed) -> None:
    spec = "exp_gumbel"
    scheme = _scheme(spec)
    first = _generate(generate, spec, KEY)
    again = _generate(generate, spec, KEY, seed=99)  # the seed does not enter
    detected = alarms = 0
    for name, gen in first.items():
        assert gen.error is None and len(gen.token_ids) >= 40
        assert again[name].token_ids == gen.token_ids
        vocab = gen.extra["vocab_size"]
        detected += scheme.detect(gen.token_ids, KEY, vocab).p_value <= 0.02
        alarms += sum(scheme.detect(gen.token_ids, f"another key {i}", vocab).p_value <= 0.001 for i in range(10))
    assert detected >= 3
    assert alarms <= false_alarms_allowed(10 * len(first), 0.001)


# ------------------------------------------------------------------------------------------
# specs and keys
# ------------------------------------------------------------------------------------------
def test_defaults_and_canonical_spec() -> None:
    scheme = _scheme()
    assert str(scheme.spec) == ("exp_gumbel:compat=none,eps=1e-20,prefix_length=2,"
                                "temperature=0.7,threshold=0.0001")
    assert str(_scheme(str(scheme.spec)).spec) == str(scheme.spec)
    assert KEY not in repr(scheme) and not any(KEY in v for v in vars(scheme).values() if isinstance(v, str))


@pytest.mark.parametrize("text,param", [
    ("exp_gumbel:gamma=0.5", "gamma"),
    ("exp_gumbel:prefix_length=0", "prefix_length"),
    ("exp_gumbel:prefix_length=x", "prefix_length"),
    ("exp_gumbel:temperature=0", "temperature"),
    ("exp_gumbel:temperature=nan", "temperature"),
    ("exp_gumbel:threshold=1.5", "threshold"),
    ("exp_gumbel:eps=0", "eps"),
    ("exp_gumbel:compat=other", "compat"),
])
def test_bad_specs_name_the_parameter(text: str, param: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_watermark(text)
    msg = str(err.value)
    assert "exp_gumbel" in msg and param in msg and "\n" not in msg


@pytest.mark.parametrize("key", ["abc", "4.5", "", " "])
def test_compat_key_must_be_an_integer(key: str) -> None:
    with pytest.raises(SpecError) as err:
        _compat().check_key(key)
    msg = str(err.value)
    assert "\n" not in msg and "exp_gumbel" in msg
    if key.strip():
        assert "compat" in msg and key not in msg
    _compat().check_key("42")
    _compat().check_key("-7")
    _scheme().check_key("any string")
