"""The baseline unlearning metrics WaterDrum compares itself with (section 5, App. E.3), over
the ``waterdrum`` pack's stored answers, in the shape :func:`evalrun.unlearning.aggregates.summarize`
reads, so D1, D2 and the scaling to the original model have one implementation for all.

Registered (:data:`BASELINES`), each a per-point score and a set aggregate:

* ``rouge_l_recall`` -- ROUGE-L recall of the model's answer against the data point's text
  after its query (the answer continues the query, so the query itself would only add tokens
  both share); WaterDrum's ROUGE (TOFU, MUSE); :mod:`evalrun.metrics.rouge`.
* ``rouge_l_f`` -- the same pair's ROUGE-L F1, the form ROUGE-L is usually quoted in.
* ``mia_min_k`` / ``mia_min_k_pp`` -- Min-K% Prob (WaterDrum's MIA, K = 40%) and Min-K%++
  of the data point's text after its query, scored by the model under evaluation;
  :mod:`evalrun.metrics.membership`. Their set aggregate is ``2 AUROC - 1`` against the
  ``holdout`` set's scores (points no model was trained on), as in WaterDrum's App. E.3.

Not registered, because the demo's data cannot carry them: KnowMem (ROUGE-L recall on
question-answer pairs generated from the data by GPT-4 in WaterDrum; the shipped passages
have no QA pairs and the embedded model cannot write them) and Truth Ratio (needs a
paraphrased correct answer and perturbed wrong answers per question, TOFU's data); the pure
Truth Ratio is :mod:`evalrun.metrics.truth_ratio`, ROUGE-L recall is KnowMem's scorer.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from evalrun.metrics.membership import DEFAULT_K, mia_aggregate, min_k_percent, min_k_plus_plus, token_log_probs
from evalrun.metrics.rouge import rouge_l
from evalrun.unlearning.aggregates import Role, SetAggregate, Summary, summarize, uniform_mean

HOLDOUT = "holdout"


@dataclass(frozen=True)
class Evidence:
    """What a baseline may read about one answer: the data point's text after its query
    (``reference``), the model's answer (``output``) and, for the MIA scores, the model's
    next-token ``logits`` (``[n - 1, V]``) on the token ids ``ids`` of query and reference."""

    reference: str
    output: str = ""
    ids: Sequence[int] | None = None
    logits: Any = None
    #: how many leading ids are the query's (not scored by the MIA scores)
    query_tokens: int = 0


def _reference_logits(e: Evidence) -> tuple[Any, Sequence[int]]:
    if e.logits is None or e.ids is None:
        raise ValueError("an MIA score needs the model's logits on the data point")
    start = max(e.query_tokens - 1, 0)  # row t predicts ids[t + 1]
    return e.logits[start:], list(e.ids)[start:]


def _min_k(e: Evidence) -> float:
    logits, ids = _reference_logits(e)
    return min_k_percent(token_log_probs(logits, ids), DEFAULT_K)


def _min_k_pp(e: Evidence) -> float:
    logits, ids = _reference_logits(e)
    return min_k_plus_plus(logits, ids, DEFAULT_K)


def against_holdout(scores: Mapping[str, Mapping[str, float]], part: str) -> float:
    """MIA's set aggregate: ``2 AUROC - 1`` of the set's scores against the holdout's."""
    return mia_aggregate(list(scores.get(part, {}).values()), list(scores.get(HOLDOUT, {}).values()))


@dataclass(frozen=True)
class Baseline:
    """One baseline metric: its per-point score and its set aggregate."""

    name: str
    description: str
    point: Callable[[Evidence], float]
    aggregate: SetAggregate = uniform_mean
    #: whether the score reads the model's logits (WaterDrum D3(b): only MIA may)
    needs_logits: bool = False


BASELINES: dict[str, Baseline] = {}


def register(baseline: Baseline) -> Baseline:
    if baseline.name in BASELINES:
        raise ValueError(f"baseline {baseline.name!r} is registered twice")
    BASELINES[baseline.name] = baseline
    return baseline


register(Baseline("rouge_l_recall", "ROUGE-L recall of the answer against the data point",
                  lambda e: rouge_l(e.reference, e.output).recall))
register(Baseline("rouge_l_f", "ROUGE-L F1 of the answer against the data point",
                  lambda e: rouge_l(e.reference, e.output).fmeasure))
register(Baseline("mia_min_k", f"Min-K% Prob (K = {DEFAULT_K:.0%}) of the data point, "
                  "2 AUROC - 1 against the holdout", _min_k, against_holdout, needs_logits=True))
register(Baseline("mia_min_k_pp", f"Min-K%++ (K = {DEFAULT_K:.0%}) of the data point, "
                  "2 AUROC - 1 against the holdout", _min_k_pp, against_holdout, needs_logits=True))


def baseline(name: str) -> Baseline:
    """The registered baseline ``name``; one line naming the known ones otherwise."""
    found = BASELINES.get(name)
    if found is None:
        raise ValueError(f"unknown baseline {name!r}; known: {', '.join(sorted(BASELINES))}")
    return found


def point_scores(name: str, evidence: Mapping[str, Mapping[str, Sequence[Evidence]]]
                 ) -> dict[str, dict[str, float]]:
    """``{set: {case_id: score}}`` of one model: the baseline's score of each answer, a
    point's repetitions averaged (as WaterDrum averages its outputs per query)."""
    metric = baseline(name)
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for part, cases in evidence.items():
        for case_id, answers in sorted(cases.items()):
            if answers:
                values = [metric.point(e) for e in answers]
                out[part][case_id] = sum(values) / len(values)
    return dict(out)


def summarize_baseline(name: str, per_model: Mapping[str, Mapping[str, Mapping[str, float]]],
                       roles: Mapping[str, Role]) -> Summary:
    """D1, D2 and the aggregates scaled to the original model of baseline ``name`` from each
    model's :func:`point_scores`."""
    return summarize(per_model, roles, aggregate=baseline(name).aggregate)
