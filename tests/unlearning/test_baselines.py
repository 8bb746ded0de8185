"""WaterDrum's baseline metrics: ROUGE-L, Min-K% / Min-K%++, Truth Ratio (golden values
computed by hand), their registry and their D1/D2 through the one ``summarize``."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalrun.metrics.membership import mia_aggregate, min_k_percent, min_k_plus_plus, token_log_probs
from evalrun.metrics.rouge import lcs_length, rouge_l, rouge_tokens
from evalrun.metrics.truth_ratio import truth_ratio, truth_score
from evalrun.unlearning.aggregates import Role, scale_to_original, summarize
from evalrun.unlearning.baselines import BASELINES, HOLDOUT, Evidence, baseline, point_scores, summarize_baseline

LN3 = math.log(3.0)


# --- ROUGE-L -------------------------------------------------------------------------

def test_lcs_lengths_by_hand() -> None:
    assert lcs_length(list("ABCBDAB"), list("BDCABA")) == 4  # CLRS 15.4's example
    assert lcs_length(list("BDCABA"), list("ABCBDAB")) == 4
    assert lcs_length([], list("abc")) == 0
    assert lcs_length(list("abc"), list("abc")) == 3
    assert lcs_length(list("abc"), list("xyz")) == 0


def test_rouge_tokens_follow_rouge_score() -> None:
    assert rouge_tokens("Hello, World! It's 2024 -- naïve") == ["hello", "world", "it", "s", "2024", "na", "ve"]


def test_rouge_l_by_hand() -> None:
    # reference: the cat sat on the mat (6); candidate: the cat on a mat (5); LCS the cat on mat
    s = rouge_l("The cat sat on the mat.", "the cat on a mat")
    assert (s.precision, s.recall, s.fmeasure) == pytest.approx((4 / 5, 4 / 6, 8 / 11))
    # rouge-score's README example: rougeL precision 0.625, recall 0.5556, F 0.5882
    s = rouge_l("The quick brown fox jumps over the lazy dog", "The quick brown dog jumps on the log.")
    assert (s.precision, s.recall, s.fmeasure) == pytest.approx((5 / 8, 5 / 9, 10 / 17))
    assert rouge_l("same words here", "Same, words; here!").fmeasure == 1.0
    assert rouge_l("", "anything") == rouge_l("anything", "") == rouge_l("a b", "c d")
    assert rouge_l("a b", "c d").fmeasure == 0.0


# --- Min-K% and Min-K%++ -------------------------------------------------------------

# row [0, ln 3, 0, 0] is p = (1/6, 1/2, 1/6, 1/6): mu = -ln(12)/2, sigma = ln(3)/2, so the
# token of p 1/2 has z = +1 and a token of p 1/6 has z = -1; a uniform row has sigma 0 (z 0)
LOGITS = np.array([[0.0, LN3, 0.0, 0.0], [0.0, LN3, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
IDS = [2, 1, 0, 3]


def test_token_log_probs_by_hand() -> None:
    assert token_log_probs(LOGITS, IDS) == pytest.approx([math.log(1 / 2), math.log(1 / 6), math.log(1 / 4)])
    with pytest.raises(ValueError, match="4 token ids need 3 logit rows"):
        token_log_probs(LOGITS[:2], IDS)


def test_min_k_percent_by_hand() -> None:
    lp = [-0.1, -3.0, -0.5, -2.0, -0.2]
    assert min_k_percent(lp, 0.4) == pytest.approx(-2.5)   # int(5 * 0.4) = 2 lowest
    assert min_k_percent(lp, 0.1) == pytest.approx(-3.0)   # at least one token
    assert min_k_percent(lp, 1.0) == pytest.approx(-5.8 / 5)
    assert math.isnan(min_k_percent([], 0.4))
    with pytest.raises(ValueError, match="k must lie in"):
        min_k_percent(lp, 0.0)


def test_min_k_plus_plus_by_hand() -> None:
    # z = [+1, -1, 0]
    assert min_k_plus_plus(LOGITS, IDS, 1.0) == pytest.approx(0.0)
    assert min_k_plus_plus(LOGITS, IDS, 0.4) == pytest.approx(-1.0)
    assert min_k_plus_plus(LOGITS, IDS, 0.7) == pytest.approx(-0.5)
    # invariant to a constant added to a row's logits
    assert min_k_plus_plus(LOGITS + 5.0, IDS, 0.7) == pytest.approx(-0.5)


def test_mia_aggregate_is_two_auroc_minus_one() -> None:
    assert mia_aggregate([3.0, 4.0], [1.0, 2.0]) == 1.0
    assert mia_aggregate([1.0, 2.0], [1.0, 2.0]) == 0.0
    assert math.isnan(mia_aggregate([], [1.0]))


# --- Truth Ratio ---------------------------------------------------------------------

def test_truth_ratio_by_hand() -> None:
    r = truth_ratio(1.0, [2.0, 3.0])  # exp(1 - 2.5)
    assert r == pytest.approx(math.exp(-1.5))
    assert truth_score(r) == pytest.approx(1 - math.exp(-1.5))
    assert truth_score(truth_ratio(2.0, [1.0])) == 0.0
    assert math.isnan(truth_ratio(1.0, []))


# --- the registry, scaling and D1/D2 -------------------------------------------------

def test_registry_and_unknown_name() -> None:
    assert {"rouge_l_recall", "rouge_l_f", "mia_min_k", "mia_min_k_pp"} <= set(BASELINES)
    assert [n for n, b in BASELINES.items() if b.needs_logits] == ["mia_min_k", "mia_min_k_pp"]
    with pytest.raises(ValueError, match="unknown baseline 'bleu'; known: "):
        baseline("bleu")


def test_scale_to_original() -> None:
    assert scale_to_original(0.5, 2.0) == 0.25
    assert math.isnan(scale_to_original(0.5, 0.0))
    assert math.isnan(scale_to_original(0.5, math.nan))


def _answers(outputs: dict[str, dict[str, str]]) -> dict[str, dict[str, list[Evidence]]]:
    refs = {"f1": "alpha beta gamma delta", "f2": "epsilon zeta eta theta",
            "r1": "iota kappa lambda mu", "r2": "nu xi omicron pi"}
    return {part: {c: [Evidence(refs[c], out)] for c, out in cases.items()}
            for part, cases in outputs.items()}


def test_rouge_point_scores_scaling_d1_d2() -> None:
    full = {"forget": {"f1": "alpha beta gamma delta", "f2": "epsilon zeta eta theta"},
            "retain": {"r1": "iota kappa lambda mu", "r2": "nu xi omicron pi"}}
    retrained = {"forget": {"f1": "alpha beta x y", "f2": "z z z z"},  # recall 0.5 and 0
                 "retain": full["retain"]}
    half = {"forget": {"f1": "alpha beta gamma delta", "f2": "z z z z"}, "retain": full["retain"]}
    per_model = {m: point_scores("rouge_l_recall", _answers(o))
                 for m, o in (("orig", full), ("re", retrained), ("cal", half))}
    assert per_model["re"]["forget"] == {"f1": 0.5, "f2": 0.0}
    roles = {"orig": Role("original"), "re": Role("retrained"), "cal": Role("calibration", 0.5)}
    s = summarize_baseline("rouge_l_recall", per_model, roles)
    assert s.models["re"]["forget_scaled"] == pytest.approx(0.25)
    assert s.models["orig"]["forget_scaled"] == s.models["orig"]["retain_scaled"] == 1.0
    assert s.d1_auroc == 1.0
    assert s.calibration == [(0.0, 0.25), (0.5, 0.5), (1.0, 1.0)]
    # same maths as WaterDrum's own summary (one implementation)
    assert s.d2_r2 == summarize(per_model, roles).d2_r2


def test_repetitions_are_averaged() -> None:
    ev = {"forget": {"f": [Evidence("a b", "a b"), Evidence("a b", "c d")]}}
    assert point_scores("rouge_l_f", ev) == {"forget": {"f": 0.5}}


def test_mia_scores_aggregate_against_the_holdout() -> None:
    # a member text is the likely token (z = +1 after the query), a holdout text the unlikely
    row = [0.0, LN3, 0.0, 0.0]
    logits = np.array([row, row, row])

    def ev(ids: list[int]) -> list[Evidence]:
        return [Evidence("ref", ids=ids, logits=logits, query_tokens=1)]

    likely, unlikely = ev([0, 1, 1, 1]), ev([0, 2, 2, 2])
    orig = {"forget": {"f": likely, "g": likely}, "retain": {"r": likely}, HOLDOUT: {"h": unlikely}}
    re = {"forget": {"f": unlikely, "g": unlikely}, "retain": {"r": likely}, HOLDOUT: {"h": unlikely}}
    scores = {m: point_scores("mia_min_k_pp", e) for m, e in (("o", orig), ("re", re))}
    assert scores["o"]["forget"]["f"] == pytest.approx(1.0)
    assert scores["re"]["forget"]["f"] == pytest.approx(-1.0)
    s = summarize_baseline("mia_min_k_pp", scores, {"o": Role("original"), "re": Role("retrained")})
    assert s.models["o"]["forget"] == 1.0 and s.models["re"]["forget"] == 0.0
    assert s.models["re"]["forget_scaled"] == 0.0
    mk = point_scores("mia_min_k", orig)
    assert mk["forget"]["f"] == pytest.approx(math.log(1 / 2))
    with pytest.raises(ValueError, match="needs the model's logits"):
        point_scores("mia_min_k", {"forget": {"f": [Evidence("ref", "out")]}})
