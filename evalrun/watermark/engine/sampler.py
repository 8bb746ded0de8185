"""The sampling half of a native scheme: algorithm C and its per-token statistic s (MarkMyWords,
Piet et al., section VII). Detection and generation both use it; :mod:`.engine` combines it with
a randomness source and a score."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Callable

from evalrun.kernels.backend import Ops
from evalrun.kernels.keyed_hash import code, pair
from evalrun.kernels.token_stats import first_occurrence
from evalrun.watermark.engine.buffers import Workspace

if TYPE_CHECKING:
    from evalrun.kernels.offset_scores import CompiledStat


class Sampler(ABC):
    """Sampling algorithm C and its per-token statistic s (evidence: larger = watermarked)."""

    name: str
    #: "binomial" or "erlang" when the sum score has an exact null, else None
    exact_null: str | None = None
    green_list: bool = False
    #: names of the sampler's own spec keys
    keys: frozenset[str] = frozenset()
    #: the share of the vocabulary a green list holds, for the binomial null (green lists)
    green_fraction: float | None = None
    #: what one scored unit is when a token holds several (``bits`` for binary), reported as
    #: ``num_<unit>_scored``
    unit_name: str | None = None

    def params(self) -> dict[str, str]:
        return {}

    def units_per_token(self, vocab_size: int) -> int:
        """Work per (seed, token) pair, for sizing chunks."""
        return 1

    @abstractmethod
    def token_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        """Evidence of (seed, token) pairs (shapes broadcast)."""

    @abstractmethod
    def null_mean(self, vocab_size: int) -> float:
        """Expected evidence of one scored unit under the null hypothesis."""

    def centered_stat(self, ops: Ops, seeds: Any, tokens: Any, vocab_size: int) -> Any:
        """Evidence minus its null mean (0 contributes nothing to align/edit)."""
        return ops.f64(self.token_stat(ops, seeds, tokens, vocab_size)) - self.null_mean(vocab_size)

    def compiled_offset_stat(self, vocab_size: int) -> "CompiledStat | None":
        """:meth:`centered_stat` as the compiled fixed-key kernel computes it
        (:mod:`evalrun.kernels.offset_scores`), or None: fixed-key detection then builds the
        evidence with numpy. A sampler that returns one must compute exactly that statistic
        (tests compare the two paths bit for bit); a subclass that changes the statistic
        must return None or its own."""
        return None

    #: :meth:`token_stat` from the pairs' words ``pair(seed, code(token))``: a method
    #: ``word_stat(ops, words)`` on samplers whose statistic is a function of that word alone
    #: (kgw, exp), None on the others. With it :meth:`sum_terms` hashes each pair once, for
    #: both the statistic and the repeat mask
    word_stat: Callable[[Ops, Any], Any] | None = None

    def sum_terms(self, ops: Ops, seeds: Any, tokens: Any, scored: Any, vocab_size: int,
                  count_repeats: bool, segments: Any = None) -> tuple[Any, Any]:
        """Per-position evidence and number of scored units for the sum score, zero at
        unscored positions and (unless ``count_repeats``) at repeated (seed, token) pairs.

        ``segments`` (int64 ``[N]``) marks which text each position belongs to when several
        texts lie end to end in ``tokens`` (ragged batches): repeats are then looked for
        within a text only, which gives each text the terms it gets on its own."""
        mask = scored
        words = None
        if not count_repeats or self.word_stat is not None:
            words = pair(ops, seeds, code(ops, tokens))
        if not count_repeats:
            mask = mask & first_occurrence(ops, words, segments)
        if self.word_stat is not None:
            stat = self.word_stat(ops, words)
        else:
            stat = self.token_stat(ops, seeds, tokens, vocab_size)
        ev = ops.where(mask, ops.f64(stat), 0.0)
        return ev, ops.f64(mask)

    @property
    def workspace(self) -> Workspace:
        """This sampler's reusable step buffers (made on first use)."""
        work = self.__dict__.get("_workspace")
        if work is None:
            work = self.__dict__["_workspace"] = Workspace()
        return work

    #: True when the sampler picks each watermarked token itself (exp, binary, its), so the
    #: caller does not sample those rows; False when it reshapes the scores (kgw)
    chooses: bool = False
    #: True when :meth:`apply` writes into the ``logits`` it is given
    overwrites: bool = False
    #: how :meth:`seed_table` rows are kept: "float" in the scores' dtype, "index" as int64,
    #: both in numpy when :func:`host_view` works on the scores and on their device otherwise;
    #: "host" always as numpy float64
    table_kind: str = "float"

    @abstractmethod
    def seed_table(self, ops: Ops, seeds: Any, width: int, vocab_size: int) -> Any:
        """``[m, W]`` rows that depend on the seed alone (memoised per seed by the processor);
        ``width`` is the number of score columns (``>= vocab_size``)."""

    #: set by samplers whose table rows are ``mask_bias`` on a mask and 0 elsewhere and whose
    #: step only adds them (kgw): their rows may be kept as packed bits
    #: (:mod:`evalrun.watermark.engine.mask_tables`)
    mask_bias: float | None = None

    def seed_mask(self, ops: Ops, seeds: Any, width: int) -> Any:
        """Boolean ``[m, W]`` masks of the columns that get :attr:`mask_bias`: here the
        nonzero entries of :meth:`seed_table`; samplers may compute the mask directly."""
        return self.seed_table(ops, seeds, width, width) != 0

    def apply_words(self, ops: Ops, logits: Any, temperature: float, vocab_size: int,
                    hash_ops: Ops, words: list[int]) -> Any | None:
        """:meth:`apply` without table rows: the same result computed from the seed words
        alone (the compiled vocabulary kernels of :mod:`evalrun.kernels.vocab_rows`), for
        float32 scores in host memory; None when this sampler or these scores have no such
        path, and then ``logits`` is left untouched and the caller takes :meth:`apply`. A
        vocabulary-wide table row costs more to build than this step, and at a real model's
        vocabulary most seeds are new: this path keeps no table."""
        return None

    @abstractmethod
    def apply(self, ops: Ops, rows: list[Any], logits: Any, temperature: float, vocab_size: int,
              hash_ops: Ops, words: list[int]) -> Any:
        """The watermarked step of the rows ``logits [B, V']`` (the scores' dtype, before
        temperature; ``temperature > 0`` unless the sampler is a green list), computed with
        ``ops`` (the scores' backend), given each row's table row ``rows[b]`` and seed word
        ``words[b]``: new scores to sample at temperature 1 (argmax at 0), or the chosen
        tokens ``[B]`` when :attr:`chooses`. The caller owns ``logits`` for the call: samplers
        that :attr:`overwrite <overwrites>` work in place rather than in a new ``[B, V]`` array
        (on CPU a fresh array per step costs its page faults, and every array a step touches
        beyond the model's own logits comes cold from memory after the forward pass)."""
