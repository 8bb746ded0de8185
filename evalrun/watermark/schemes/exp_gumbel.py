"""EXPGumbel: the Gumbel-max form of the exponential (Aaronson) watermark as MarkLLM ships it,
``exp_gumbel:prefix_length=2,temperature=0.7``.

Source: Aaronson's Gumbel-max watermark (Scott Aaronson, "Watermarking of large language
models", 2023; Kuditipudi et al., "Robust distortion-free watermarks", 2023, section 2) in
MarkLLM's implementation, ``watermark/exp_gumbel/exp_gumbel.py`` and ``config/EXPGumbel.json``
of THU-BPM/MarkLLM at commit 112fa74 (defaults: prefix_length 2, eps 1e-20, threshold 1e-4,
sequence_length 200, temperature 0.7, seed 42).

Key table (``compat=markllm``). MarkLLM draws one table ``U = clamp(torch.rand((L*V, V), generator=seed), min=eps)``
(float32, L = prefix_length) and reads row ``r = ids[t-L] + ... + ids[t-1]``, the SUM of the
previous L ids: different id pairs with the same sum share a row. At V = 50,257 the table is
2*V^2 floats (20 GB, and MarkLLM keeps a second one of Gumbel values). Here rows are computed on
demand, bit for bit: CPU ``torch.rand`` in float32 draws one 32-bit word per entry from the
generator's MT19937 stream, in row-major order, and keeps its low 24 bits (``(w & 0xFFFFFF) *
2**-24``), so row r is draws ``r*V .. r*V+V-1`` of that stream, reproduced here with numpy's
MT19937 set to the state torch's ``manual_seed`` makes (Knuth's ``init_genrand`` of the seed's
low 32 bits). :class:`RowStream` reaches a row by jumping ahead in the stream (:func:`mt_jump`:
MT19937's output obeys a GF(2)-linear recurrence of degree 19937, so the state k draws on is
a fixed XOR of the first 19937 + 624 outputs, chosen by ``x**k mod phi``; about 0.1-0.2 s
for any k) or, when the target is near a saved state, by skipping draws without storing them
(``random_raw(output=False)``, about 3.5 ns each). It keeps the generator state (2.5 kB) at
up to 2048 evenly spaced rows (at least 2**18 draws apart), plus up to 64 MB of recent rows.
Measured at V = 128,000 (the full table: 131 GB): 200 random ids score in 15-18 s on one
core with a peak RSS of 170 MB, interpreter included; bit-identical to the full table (tested
at V = 1000, and against MarkLLM's own numbers at V = 50,257).

Native table (``compat=none``, the default): the same rows ``r`` (the sum of the previous L ids),
but ``U[r, v] = uniform(pair(seed_r, v))`` from the keyed-hash kernels of
:mod:`evalrun.kernels.keyed_hash`, with ``seed_r = pair(key word, r)`` and the key word
:func:`~evalrun.watermark.randomness.derive_key` of ``--key`` tagged for this scheme: the
``exp`` scheme's uniforms (``(top 53 bits + 0.5) / 2**53``, never 0 or 1, so ``eps`` never
binds). One cell costs two hashes, with no generator stream to walk: ``detect_many`` scores
all texts in one vectorised pass.

Generation (MarkLLM's ``EXPGumbelLogitsProcessor`` plus its greedy ``watermark_logits_argmax``):
the chosen token is ``argmax(logits / temperature + g)`` with ``g = -log(clamp(-log U[r],
min=eps))`` (float32, as MarkLLM; native: float64 ``exp_gumbel`` noise of
:mod:`evalrun.kernels.token_stats`), i.e. the Gumbel-max trick; the processor returns -inf
everywhere but that token (histories shorter than L: the plain argmax, as MarkLLM). The run's
own ``--temperature`` does not enter; the scheme's ``temperature`` does. ``seed`` is unused:
generation is a function of the key and the history only.

Detection. MarkLLM sums ``log(1 / (1 - u))`` over every position t >= L and reports the
p-value ``gamma.sf(S, L_text - L)``. That is not a valid null when cells repeat: a repeated
(row, token) cell (a repeated n-gram, or any two prefixes with the same id sum followed by the
same token) adds the same Exp(1) value twice. evalrun's statistic keeps only the FIRST
occurrence of each (row, token) cell: for a text fixed independently of the key, the kept
cells are distinct entries of an i.i.d. table, so their ``-log(1 - u)`` are independent, and
with u on float32's grid ``k / 2**24`` (below a continuous uniform) each is stochastically
at most Exp(1). The p-value ``P[Gamma(n, 1) >= S]`` (n kept tokens,
:func:`evalrun.watermark.nulls.erlang_p`, S summed in float64 left to right with
``-log1p(-u)``) is therefore exact for continuous uniforms and conservative by at most the
2**-24 grid. Native terms are ``-log(1 - u)`` (numpy's ``log`` of the exact complement word's uniform,
as ``exp_stat`` computes it), Exp(1) up to the 2**-53 grid, so the same Gamma null holds.
Distinct cells in one shared row are still independent, so positions are dropped only for a
repeated cell, not for a repeated row.

Keys. Native mode: any non-blank string (the key word above). ``compat=markllm``: ``--key`` is MarkLLM's integer ``seed`` and the table is MarkLLM's exactly;
``detect`` then adds ``markllm_score``, the p-value MarkLLM's ``detect_watermark`` returns for
those ids (float32 ``1 - u`` and division, float64 log and sum, scipy's ``gamma.sf``; None
where the text has no more than L tokens, for which MarkLLM returns NaN), and
``markllm_is_watermarked`` (``markllm_score < threshold``).
"""

from __future__ import annotations

import functools
import hashlib
import math
from typing import Any, Sequence

import numpy as np
from scipy import stats

from evalrun._util.errors import SpecError
from evalrun._util.lru import LRU
from evalrun._util.specs import Spec, check_keys, spec_float, spec_int
from evalrun.kernels import vocab_rows
from evalrun.kernels.backend import NUMPY
from evalrun.kernels.keyed_hash import code, complement, pair, tag, uniform
from evalrun.kernels.token_stats import exp_gumbel, first_occurrence
from evalrun.watermark.base import BatchedScheme, Detection, finite_param, token_id_arrays
from evalrun.watermark.engine import nulls
from evalrun.watermark.engine.detection import _Layout as Layout
from evalrun.watermark.engine.markllm_compat import MarkLLMKeyed, compat_mode
from evalrun.watermark.engine.randomness import derive_key

WHAT = "--watermark"
NAME = "exp_gumbel"
ALLOWED_KEYS = frozenset({"prefix_length", "eps", "threshold", "temperature", "compat"})
DEFAULTS = {"prefix_length": 2, "eps": 1e-20, "threshold": 1e-4, "temperature": 0.7}
_MT_N = 624
#: how many generator states a stream keeps at most (2.5 kB each)
MAX_CHECKPOINTS = 2048
#: a skip longer than this many draws jumps ahead instead (see :func:`mt_jump`)
JUMP_DRAWS = 1 << 25
#: the fewest draws between two checkpoints
MIN_SKIP = 1 << 18
#: bytes of cached float32 rows a stream keeps for generation
ROW_CACHE_BYTES = 64 << 20
#: domain tag of this scheme's native key word
TAG_EXP_GUMBEL = 0x6C3E_A915_0B7D_F248


def torch_seed_key(seed: int) -> np.ndarray:
    """The MT19937 state ``torch.Generator().manual_seed(seed)`` makes (CPU): Knuth's
    ``init_genrand`` of the seed's low 32 bits (negative seeds wrap as uint64 first)."""
    s = seed % (1 << 64) & 0xFFFFFFFF
    key = np.empty(_MT_N, dtype=np.uint32)
    key[0] = s
    for j in range(1, _MT_N):
        s = (1812433253 * (s ^ (s >> 30)) + j) & 0xFFFFFFFF
        key[j] = s
    return key


def _uniform(words: np.ndarray, eps: np.float32) -> np.ndarray:
    """torch's float32 uniform from raw MT19937 words, clamped like MarkLLM."""
    u = ((words & 0xFFFFFF).astype(np.float64) * 2.0**-24).astype(np.float32)
    return np.maximum(u, eps)


# ---- MT19937 jump-ahead ----------------------------------------------------------------------
# The MT19937 output stream satisfies a linear recurrence over GF(2) whose characteristic
# polynomial phi has degree 19937, so output k+i is the XOR of the outputs j+i over the set
# bits j of g = x**k mod phi (for every i). Given the stream's first 19937 + 624 outputs, the
# 624 outputs from k on, untempered, are the generator state at k.
_MT_DEG = 19937


def _poly_bits(a: int, n: int) -> np.ndarray:
    raw = np.frombuffer(a.to_bytes((n + 7) // 8, "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n]


def _poly_int(bits: np.ndarray) -> int:
    return int.from_bytes(np.packbits(bits.astype(np.uint8), bitorder="little").tobytes(), "little")


def _clmul(a: int, b: int) -> int:
    """Product in GF(2)[x] (bit i = coefficient of x**i) by one float FFT convolution; the
    integer counts stay below 2**15, far inside float64's exact range."""
    if a == 0 or b == 0:
        return 0
    na, nb = a.bit_length(), b.bit_length()
    size = 1 << (na + nb).bit_length()
    fa = np.fft.rfft(_poly_bits(a, na).astype(np.float64), size)
    fb = np.fft.rfft(_poly_bits(b, nb).astype(np.float64), size)
    counts = np.rint(np.fft.irfft(fa * fb, size)[: na + nb - 1]).astype(np.int64)
    return _poly_int(counts & 1)


def _clsquare(a: int) -> int:
    """Square in GF(2)[x]: the bits spread apart (cross terms cancel in pairs)."""
    n = a.bit_length()
    spread = np.zeros(2 * n, dtype=np.uint8)
    spread[::2] = _poly_bits(a, n)
    return _poly_int(spread)


def _gf2_div(a: int, b: int) -> int:
    q, db = 0, b.bit_length() - 1
    while a.bit_length() - 1 >= db:
        shift = a.bit_length() - 1 - db
        q |= 1 << shift
        a ^= b << shift
    return q


@functools.lru_cache(maxsize=1)
def _mt_charpoly() -> tuple[int, int]:
    """(phi, floor(x**(2*19937) / phi)): MT19937's characteristic polynomial, found by
    Berlekamp-Massey on 2*19937 output bits, and its Barrett constant."""
    bits = (np.random.MT19937(1).random_raw(2 * _MT_DEG) & 1).astype(np.uint8)
    n_bits = len(bits)
    rev = _poly_int(bits[::-1])  # bit n_bits-1-t holds bit t of the sequence
    conn, prev, length, gap = 1, 1, 0, 1
    for n in range(n_bits):
        if ((rev >> (n_bits - 1 - n)) & conn).bit_count() & 1:
            old = conn
            conn ^= prev << gap
            if 2 * length <= n:
                length, prev, gap = n + 1 - length, old, 1
                continue
        gap += 1
    if length != _MT_DEG:
        raise RuntimeError(f"MT19937 recurrence of degree {length}, expected {_MT_DEG}")
    phi = _poly_int(_poly_bits(conn, length + 1)[::-1])  # the reciprocal of the connection poly
    return phi, _gf2_div(1 << (2 * _MT_DEG), phi)


def _x_pow_mod(k: int) -> int:
    phi, mu = _mt_charpoly()
    g = 1
    for bit in bin(k)[2:]:
        sq = _clsquare(g)
        g = sq ^ _clmul(_clmul(sq >> _MT_DEG, mu) >> _MT_DEG, phi)  # Barrett: exact in GF(2)[x]
        if bit == "1":
            g <<= 1
            if g >> _MT_DEG & 1:
                g ^= phi
    return g


def _untemper(y: np.ndarray) -> np.ndarray:
    y = y.astype(np.uint32)
    y ^= y >> np.uint32(18)
    y ^= (y << np.uint32(15)) & np.uint32(0xEFC60000)
    t = y.copy()
    for _ in range(5):
        t = y ^ ((t << np.uint32(7)) & np.uint32(0x9D2C5680))
    y, t = t, t.copy()
    for _ in range(3):
        t = y ^ (t >> np.uint32(11))
    return t


def mt_jump(first_outputs: np.ndarray, k: int) -> np.ndarray:
    """The MT19937 key (with ``pos`` 0) whose next outputs are outputs ``k, k+1, ...`` of the
    stream whose first ``19937 + 624`` outputs are ``first_outputs``."""
    taps = np.flatnonzero(_poly_bits(_x_pow_mod(k), _MT_DEG))
    out = np.zeros(_MT_N, dtype=np.uint32)
    window = np.arange(_MT_N)
    for c in range(0, len(taps), 256):
        out ^= np.bitwise_xor.reduce(first_outputs[taps[c:c + 256, None] + window], axis=0)
    return _untemper(out)


class RowStream:
    """Rows of the ``(rows, V)`` uniform table of one MT19937 stream, computed on demand."""

    def __init__(self, init_key: np.ndarray, vocab_size: int, rows: int, eps: float) -> None:
        self.V = int(vocab_size)
        self.rows = int(rows)
        self.eps = np.float32(eps)
        # a checkpoint every ``every`` rows: at most MAX_CHECKPOINTS of them, and none closer
        # than MIN_SKIP draws apart (reading a state costs about as much as 5,000 draws)
        self.every = max(1, -(-self.rows // MAX_CHECKPOINTS), -(-MIN_SKIP // self.V))
        self._bg = np.random.MT19937(0)
        #: checkpoint row -> generator state there (row multiple of ``every``)
        self._checks: dict[int, tuple[np.ndarray, int]] = {0: (init_key.copy(), _MT_N)}
        self._at = -1  # the row the generator stands at (-1: unknown)
        self._init_key = init_key.copy()
        self._first: np.ndarray | None = None  # the stream's first 19937 + 624 outputs
        #: skips longer than this many draws jump instead (a jump costs ~0.1-0.2 s)
        self.jump_draws = JUMP_DRAWS
        self._rows: LRU[int, np.ndarray] = LRU(max(1, ROW_CACHE_BYTES // (4 * self.V)))

    def _seek(self, row: int) -> None:
        """Move the generator to the start of ``row``, recording checkpoints on the way."""
        start = max(r for r in self._checks if r <= row)
        base = (row // self.every) * self.every
        if (row - max(start, self._at if self._at <= row else -1)) * self.V > self.jump_draws \
                and base > start:
            if self._first is None:
                self._bg.state = {"bit_generator": "MT19937",
                                  "state": {"key": self._init_key, "pos": _MT_N}}
                self._first = np.asarray(self._bg.random_raw(_MT_DEG + _MT_N), dtype=np.uint32)
            self._checks[base] = (mt_jump(self._first, base * self.V), 0)
            start, self._at = base, -1
        if not start <= self._at <= row:
            key, pos = self._checks[start]
            self._bg.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": pos}}
            self._at = start
        while self._at < row:
            nxt = min(row, (self._at // self.every + 1) * self.every)
            self._bg.random_raw((nxt - self._at) * self.V, output=False)
            self._at = nxt
            if nxt % self.every == 0 and nxt not in self._checks:
                st = self._bg.state["state"]
                self._checks[nxt] = (np.array(st["key"], dtype=np.uint32), int(st["pos"]))

    def row(self, r: int) -> np.ndarray:
        """Row ``r`` (float32, clamped at eps); bit-identical to the full table's."""
        if not 0 <= r < self.rows:
            raise IndexError(f"row {r} outside [0, {self.rows})")
        return self._rows.get_or_build(r, lambda: self._draw(r))

    def _draw(self, r: int) -> np.ndarray:
        self._seek(r)
        words = self._bg.random_raw(self.V)
        self._at = r + 1
        return _uniform(np.asarray(words), self.eps)

    def cells(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """``U[rows[i], cols[i]]`` for every i, visiting each row once in increasing order."""
        out = np.empty(len(rows), dtype=np.float32)
        for r in np.unique(rows):
            sel = rows == r
            out[sel] = self.row(int(r))[cols[sel]]
        return out


#: (key fingerprint, V, rows, eps) -> stream: one pass over a stream serves every later call
_STREAMS: LRU[tuple[bytes, int, int, float], RowStream] = LRU(4)


def stream_for(init_key: np.ndarray, vocab_size: int, rows: int, eps: float) -> RowStream:
    fp = hashlib.sha256(init_key.tobytes()).digest()
    k = (fp, int(vocab_size), int(rows), float(eps))
    return _STREAMS.get_or_build(k, lambda: RowStream(init_key, vocab_size, rows, eps))


class ExpGumbel(BatchedScheme, MarkLLMKeyed):
    """MarkLLM's EXPGumbel with on-demand table rows and an exact (conservative) null."""

    markllm_key_field = "seed"

    def __init__(self, *, prefix_length: int = 2, eps: float = 1e-20, threshold: float = 1e-4,
                 temperature: float = 0.7, compat: str = "none") -> None:
        compat = compat_mode(NAME, compat)
        self.prefix_length = int(prefix_length)
        self.eps = float(eps)
        self.threshold = float(threshold)
        self.temperature = float(temperature)
        self.compat = compat
        self.spec = Spec(name=NAME, params={
            "compat": compat, "eps": repr(self.eps), "prefix_length": str(self.prefix_length),
            "temperature": repr(self.temperature), "threshold": repr(self.threshold),
        })

    @property
    def shared_context(self) -> int | None:
        """Reads the last ``prefix_length`` ids only, ignores ``seed``, keeps no state."""
        return self.prefix_length

    def stream(self, key: str, vocab_size: int) -> RowStream:
        """compat=markllm: MarkLLM's table of the integer seed ``key``, rows on demand."""
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        self.check_key(key)
        if self.compat != "markllm":
            raise ValueError(f"{self.spec}: only compat=markllm draws its table from MT19937")
        return stream_for(torch_seed_key(int(key.strip())), vocab_size,
                          self.prefix_length * vocab_size, self.eps)

    def native_key_word(self, key: str) -> int:
        """Native mode's 64-bit key word: :func:`derive_key` of ``key`` tagged for this scheme."""
        self.check_key(key)
        return int(tag(NUMPY, NUMPY.u64([derive_key(key)]), TAG_EXP_GUMBEL)[0])

    # ---- detection ----------------------------------------------------------------------
    def _rows(self, ids: np.ndarray, local: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(scored positions ``local >= L``, their table rows: the sum of the L ids before)."""
        at = np.flatnonzero(local >= self.prefix_length)
        rows = np.zeros(len(at), dtype=np.int64)
        for back in range(1, self.prefix_length + 1):
            rows += ids[at - back]
        return at, rows

    def _analyse(self, token_id_seqs: Sequence[Sequence[int]], key: str,
                 vocab_size: int) -> tuple[Layout, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """All texts laid end to end; per position (0 where not scored): kept (first
        occurrence of its (row, token) cell in its text), the running kept count and
        evalrun's running sum of its text, and u (compat; NaN in native mode)."""
        self.check_key(key)
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        lay = Layout(token_id_arrays(token_id_seqs, vocab_size))
        at, rows = self._rows(lay.flat, lay.local)
        tokens = lay.flat[at]
        u = np.full(lay.size, np.nan, dtype=np.float32)
        if self.compat == "markllm":
            u[at] = self.stream(key, vocab_size).cells(rows, tokens)
            terms = -np.log1p(-u[at].astype(np.float64))
        else:
            seeds = pair(NUMPY, self.native_key_word(key), code(NUMPY, rows))
            words = pair(NUMPY, seeds, code(NUMPY, tokens))
            # -log(1 - u) as -log of the exact complement word's uniform (exp_stat's value up
            # to exact_log's last-ulp agreement across backends, which numpy-only code skips)
            terms = -np.log(uniform(NUMPY, complement(NUMPY, words)))
        kept = np.zeros(lay.size, dtype=bool)
        kept[at] = first_occurrence(NUMPY, (rows * vocab_size + tokens).astype(np.uint64), lay.segment[at])
        evidence = np.zeros(lay.size, dtype=np.float64)
        evidence[at] = np.where(kept[at], terms, 0.0)
        return lay, kept, lay.int_cumsum(kept.astype(np.int64)), lay.ordered_cumsum(NUMPY, evidence), u

    def markllm_score(self, u: np.ndarray) -> float | None:
        """MarkLLM's ``detect_watermark`` score for the scored uniforms ``u`` (None: NaN there)."""
        if len(u) == 0:
            return None
        one = np.float32(1.0)
        inv = one / (one - u.astype(np.float32))  # float32, as torch's 1 / (1 - u)
        total = 0.0
        for x in inv.tolist():
            total += math.log(x)
        return float(stats.gamma.sf(total, len(u), loc=0, scale=1))

    def detect_batch(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                     vocab_size: int) -> list[Detection]:
        """:meth:`detect` of every text, from one vectorised pass over all of them."""
        lay, _kept, counts, sums, u = self._analyse(token_id_arrays, key, vocab_size)
        n, total = lay.last(counts), lay.last(sums)
        p = nulls.erlang_p(total, n)
        scored = np.maximum(lay.lengths - self.prefix_length, 0)
        us = lay.split(u) if self.compat == "markllm" else []
        out = []
        for i, (n_i, s_i, p_i, m_i) in enumerate(zip(n.tolist(), total.tolist(), p.tolist(),
                                                     scored.tolist())):
            extra: dict[str, Any] = {}
            if self.compat == "markllm":
                m = self.markllm_score(us[i][self.prefix_length:])
                extra["markllm_score"] = m
                extra["markllm_is_watermarked"] = None if m is None else bool(m < self.threshold)
            extra["tokens_dropped_repeats"] = m_i - n_i
            out.append(Detection(num_tokens_scored=n_i, score=s_i if n_i else 0.0, p_value=p_i,
                                 extra=extra))
        return out

    def prefix_batch(self, token_id_arrays: Sequence[Sequence[int]], key: str,
                     vocab_size: int) -> list[np.ndarray]:
        """:meth:`prefix_p_values` of every text, from one pass over all of them."""
        lay, _kept, counts, sums, _u = self._analyse(token_id_arrays, key, vocab_size)
        return lay.split(np.asarray(nulls.erlang_p(sums, counts), dtype=np.float64))

    # ---- generation ---------------------------------------------------------------------
    def logits_processor(self, key: str, vocab_size: int, *, temperature: float,
                         seed: int) -> "ExpGumbelLogitsProcessor":
        if self.compat == "markllm":
            return ExpGumbelLogitsProcessor(self.stream(key, vocab_size), self.prefix_length,
                                            self.temperature, self.eps)
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        return ExpGumbelLogitsProcessor(None, self.prefix_length, self.temperature, self.eps,
                                        vocab_size=vocab_size, key_word=self.native_key_word(key))


class ExpGumbelLogitsProcessor:
    """Per row: -inf everywhere but ``argmax(scores / temperature + gumbel[row sum])``; the
    Gumbel rows from MarkLLM's table (``stream``) or, native, from ``key_word``."""

    def __init__(self, stream: RowStream | None, prefix_length: int, temperature: float, eps: float,
                 *, vocab_size: int = 0, key_word: int | None = None) -> None:
        self.stream = stream
        self.prefix_length = prefix_length
        self.temperature = temperature
        self.eps = eps
        self.vocab_size = stream.V if stream is not None else int(vocab_size)
        self.rows = prefix_length * self.vocab_size
        self._key_word = key_word
        self._gumbel: LRU[int, Any] = LRU(max(1, ROW_CACHE_BYTES // (8 * self.vocab_size)))

    def __repr__(self) -> str:
        return f"ExpGumbelLogitsProcessor(prefix_length={self.prefix_length}, vocab_size={self.vocab_size})"

    def gumbel_row(self, r: int) -> Any:
        """MarkLLM's ``gumbel[r]``: ``-log(clamp(-log(U[r]), min=eps))`` in float32 torch;
        native: the float64 ``exp_gumbel`` noise of row r's seed word."""

        return self._gumbel.get_or_build(r, lambda: self._noise(r))

    def _noise(self, r: int) -> Any:
        import torch

        if self.stream is not None:
            u = torch.from_numpy(self.stream.row(r))
            return -torch.log(torch.clamp(-torch.log(u), min=self.eps))
        assert self._key_word is not None
        seed = pair(NUMPY, self._key_word, code(NUMPY, np.array([r], dtype=np.int64)))
        return torch.from_numpy(np.asarray(exp_gumbel(NUMPY, seed, self.vocab_size))[0])

    def _choose_native(self, hist: Any, scores: Any, n: int) -> np.ndarray:
        """Native mode, every row's history long enough: the argmax over the first ``n``
        tokens of ``f32(logits / temperature) + gumbel[r]`` in float64 (what torch computes
        row by row), from the rows' seed words, the exact noise computed only where it could
        win (:func:`evalrun.kernels.vocab_rows.keyed_argmax`)."""
        import torch

        assert self._key_word is not None
        r = hist[:, -self.prefix_length:].sum(dim=1).numpy() % self.rows
        seeds = pair(NUMPY, self._key_word, code(NUMPY, r))
        x = (scores[:, :n].detach().float().cpu() / self.temperature).contiguous()
        assert x.dtype == torch.float32
        return vocab_rows.keyed_argmax(x.numpy(), seeds, n, vocab_rows.NOISE_GUMBEL,
                                       vocab_rows.COMBINE_F64_OF_F32)

    def choose(self, input_ids: Any, scores: Any, *, reuse: bool = False,
               ) -> tuple[None, np.ndarray]:
        """The provider's step (``[B, W]`` scores): ``(None, tokens)``, the token
        :meth:`__call__` leaves at 0 in every row, so the caller need not sample its one-hot
        rows."""
        import torch

        n = min(int(scores.shape[-1]), self.vocab_size)
        hist = input_ids.detach().cpu().long()
        if (self.stream is None and vocab_rows.compiled_available() and n >= 1
                and hist.shape[1] >= self.prefix_length):
            return None, self._choose_native(hist, scores, n)
        out = self(input_ids, scores)
        return None, torch.argmax(out, dim=-1).cpu().numpy().astype(np.int64)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        V = self.vocab_size
        width = int(scores.shape[-1])
        n = min(width, V)
        out = torch.full_like(scores, float("-inf"))
        hist = input_ids.detach().cpu().long()
        if (self.stream is None and vocab_rows.compiled_available() and n >= 1
                and scores.ndim == 2 and hist.shape[1] >= self.prefix_length):
            chosen = torch.from_numpy(self._choose_native(hist, scores, n)).to(out.device)
            out[torch.arange(len(chosen)), chosen] = 0.0
            return out
        for b in range(scores.shape[0]):
            logits = scores[b, :n].detach().float().cpu()
            if hist.shape[1] < self.prefix_length:
                choice = int(torch.argmax(logits))
            else:
                r = int(hist[b, -self.prefix_length:].sum()) % self.rows
                choice = int(torch.argmax(logits / self.temperature + self.gumbel_row(r)[:n]))
            out[b, choice] = 0.0
        return out


def build(spec: Spec) -> ExpGumbel:
    """Validate ``exp_gumbel:prefix_length=...,eps=...,threshold=...,temperature=...,compat=...``
    (MarkLLM's defaults: 2, 1e-20, 1e-4, 0.7; compat none)."""
    check_keys(spec, ALLOWED_KEYS, what=WHAT)
    pl = spec_int(spec, "prefix_length", 2, what=WHAT, lo=1, hi=16)
    eps = finite_param(spec, "eps", spec_float(spec, "eps", 1e-20, what=WHAT, lo=0.0, hi=1e-3))
    if eps <= 0:
        raise SpecError(f"{WHAT} {spec}: eps={spec.params['eps']} must be > 0")
    thr = finite_param(spec, "threshold", spec_float(spec, "threshold", 1e-4, what=WHAT, lo=0.0, hi=1.0))
    if not 0.0 < thr < 1.0:
        raise SpecError(f"{WHAT} {spec}: threshold={spec.params['threshold']} must lie strictly between 0 and 1")
    temp = finite_param(spec, "temperature", spec_float(spec, "temperature", 0.7, what=WHAT, lo=0.0))
    if temp <= 0:
        raise SpecError(f"{WHAT} {spec}: temperature={spec.params['temperature']} must be > 0")
    compat = compat_mode(spec, spec.params.get("compat"))
    return ExpGumbel(prefix_length=pl, eps=eps, threshold=thr, temperature=temp, compat=compat)
