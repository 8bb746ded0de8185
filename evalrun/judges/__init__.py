"""Judges: model calls whose prompt is built from stored results (the judge stage).

A :class:`Judge` says which stored results one question is about (one output, or a pair such
as the watermarked and unwatermarked outputs of the same case), builds the prompt, and parses
the raw answer -- a pure function, redone whenever the answer is read, so ``evalrun regrade``
and reports re-parse and never re-ask. Answers are stored in their own table keyed to the
results they judge (:mod:`evalrun.run.stages.judge`). Judges register in :data:`JUDGES` (third-party
ones through the ``evalrun.judges`` entry-point group) under the name ``--method`` gives.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from evalrun._util.errors import SpecError
from evalrun._util.registry import Registry
from evalrun.model.generation import GenParams, Prompt, Provider

#: label of an answer that cannot be parsed: kept as it is, never guessed
UNPARSED = "UNPARSED"


@dataclass(frozen=True)
class Subject:
    """One stored result a judge reads: its key, the text it shows (after any attack), the
    task prompt, and the row's run axes."""

    item_key: str
    text: str
    task: str
    case_id: str
    pack: str
    model: str
    watermark: str
    attack: str
    repetition: int


class Judge(ABC):
    """One judging method."""

    method: str
    description: str = ""
    #: sampling of the judge model: greedy, short answers by default
    params: GenParams = GenParams(temperature=0.0, max_tokens=16, seed=0)
    #: True when the answer is computed by the judge model (scored) rather than generated:
    #: the judge stage calls :meth:`answer_locally` instead of the provider's generate
    local: bool = False
    #: the quality source the metrics file this method's answers under: MarkMyWords' measures
    #: name theirs (``rating``, ``mauve``); None: a proxy, ``<method>-proxy``, when its parse
    #: has a ``quality``
    quality_source: str | None = None

    def answer_locally(self, provider: Provider, scorer: str, groups: Sequence[Sequence[Subject]]) -> list[str]:
        """Raw answers of a :attr:`local` judge, one per group (only local judges have it)."""
        raise TypeError(f"judge {self.method} asks its model; it computes no answers itself")

    def groups(self, subjects: Sequence[Subject]) -> list[tuple[Subject, ...]]:
        """The questions to ask: by default one per result."""
        return [(s,) for s in subjects]

    def configured(self, **options: Any) -> "Judge":
        """This judge with the method's options (``evalrun judge --baseline``, ``--both-orders``);
        options left at None are not given. A judge that takes none refuses any."""
        given = sorted(k for k, v in options.items() if v not in (None, False))
        if given:

            raise SpecError(f"--method {self.method} takes no option {', '.join('--' + g.replace('_', '-') for g in given)}")
        return self

    def annotate(self, group: Sequence[Subject]) -> Mapping[str, Any]:
        """Facts about a question stored beside its answer (``judgements.extra_json``)."""
        return {}

    @abstractmethod
    def prompt(self, group: Sequence[Subject]) -> Prompt:
        """The question about ``group`` (deterministic)."""

    @abstractmethod
    def parse(self, raw: str) -> Mapping[str, Any]:
        """The answer's content, with ``label`` (``UNPARSED`` when the answer does not say)."""


JUDGES: Registry[Judge] = Registry("judge method", "evalrun.judges", option="--method")
JUDGES.register_lazy("rating", "evalrun.judges.rating:RATING")
JUDGES.register_lazy("perplexity", "evalrun.judges.perplexity:PERPLEXITY")
JUDGES.register_lazy("mauve", "evalrun.judges.mauve:MAUVE")
JUDGES.register_lazy("pairwise", "evalrun.judges.pairwise:PAIRWISE")
JUDGES.register_lazy("simple", "evalrun.judges.pairwise:SIMPLE")


def get_judge(method: str) -> Judge:
    judge = JUDGES.get(method)
    if not isinstance(judge, Judge):

        raise SpecError(f"--method {method}: registered as {type(judge).__name__}, not a Judge")
    return judge
