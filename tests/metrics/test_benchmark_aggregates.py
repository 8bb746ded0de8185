"""evalrun.metrics.benchmark: the watermark benchmark's registered aggregates (MarkMyWords IV),
on small hand-built rows shaped as the store gives them (``with_judgements`` dicts)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from evalrun import metrics
from evalrun._util.hashing import stable_int
from evalrun._util.registry import Registry
from evalrun.judges import get_judge
from evalrun.metrics import aggregates, stats
from evalrun.metrics.aggregates import (
    FIELDS,
    MetricRecord,
    compute,
    group_seed,
    params_key,
    record,
    write_metrics_json,
)
from evalrun.metrics.analyses import sweep_records, tune_records
from evalrun.metrics.benchmark import ALL_ATTACKS, GROUP_INTERVAL, excluded_from_tamper, record_index
from evalrun.metrics.intervals import tpr_at_fpr_ci
from evalrun.metrics.quality_records import distinguish_records
from evalrun.pack.grade import Judgement

PACK = "mmw_news"
MODEL = "hf:tiny"
KGW = "kgw:gamma=0.5,delta=2"
EXP = "exp"
T = 0.02


def rating(q: float | None, judge: str = "openai:judge") -> Judgement:
    parsed = {"label": "RATED" if q is not None else "UNPARSED", "rating": q}
    return Judgement(judge=judge, method="rating", raw=str(q), position=0, parsed=parsed)


def proxy(q: float, scorer: str = "embedded") -> Judgement:
    return Judgement(judge=scorer, method="perplexity", raw="{}", position=0,
                     parsed={"label": "SCORED", "quality": q, "perplexity": 1 / q, "scorer": scorer})


def detection(p: float, size: int | None = 20, tokens: int = 100, threshold: float = T,
              first_crossing: int | None = None) -> dict[str, Any]:
    """A grade's evidence: ``size`` under the default rule, MarkMyWords' first crossing no later."""
    crossing = size if first_crossing is None else first_crossing
    return {"p_value": p, "z_score": None, "score": 1.0, "num_tokens_scored": tokens, "size": size,
            "sizes": {"alpha_spending": size, "first_crossing": crossing}, "detected": p <= threshold}


_ids = iter(range(10**6))


def marked(p: float, *, wm: str = KGW, attack: str = "none", size: int | None = 20, tokens: int = 100,
           judgements: tuple = (), threshold: float = T, temperature: float = 1.0, pack: str = PACK,
           error: str | None = None, first_crossing: int | None = None) -> dict[str, Any]:
    meta = {**detection(p, size, tokens, threshold, first_crossing), "threshold": threshold}
    return _row(pack, wm, attack, "DETECTED" if p <= threshold else "NOT_DETECTED", meta, judgements,
                temperature, error)


def unmarked(ps: dict[str, float], *, attack: str = "none", judgements: tuple = (), threshold: float = T,
             pack: str = PACK) -> dict[str, Any]:
    found = {spec: detection(p, None, 100, threshold) for spec, p in ps.items()}
    fired = any(d["detected"] for d in found.values())
    meta = {"threshold": threshold, "detections": found}
    return _row(pack, "none", attack, "DETECTED" if fired else "NOT_DETECTED", meta, judgements, 1.0, None)


def _row(pack: str, wm: str, attack: str, label: str, meta: dict, judgements: tuple, temperature: float,
         error: str | None) -> dict[str, Any]:
    i = next(_ids)
    return {"pack": pack, "model": MODEL, "watermark": wm, "attack": attack, "case_id": f"c{i}", "repetition": 0,
            "params_json": json.dumps({"temperature": temperature, "max_tokens": 64, "seed": 0}),
            "label": None if error else label, "score": None if error else float(label == "DETECTED"),
            "error": error, "metadata_json": None if error else json.dumps(meta), "judgements": judgements}


def find(records, metric: str, watermark: str = KGW, attack: str = "none", pack: str = PACK, **params):
    """The one record of ``metric`` with exactly ``params`` (none: a record without params; notes
    such as ``saturated`` aside, as the report looks records up)."""
    hits = [r for r in records if (r.pack, r.metric, r.watermark, r.attack, r.params_key)
            == (pack, metric, watermark, attack, params_key(params))]
    assert len(hits) == 1, (metric, watermark, attack, params,
                            [(r.metric, r.params, r.watermark, r.attack) for r in records])
    return hits[0]


def metric_keys(records) -> set[tuple]:
    """(metric, sorted params items) of each record, its notes (``saturated``) aside."""
    return {(r.metric, *r.params_key) for r in records}


# -- which rows they apply to --------------------------------------------------------------

def test_other_packs_get_only_the_existing_records() -> None:
    rows = [{**marked(0.001), "pack": "watermark_robustness", "label": lab, "score": s, "metadata_json": None}
            for lab, s in (("PASS", 1.0), ("DROPPED", 0.0))]
    rows += [{**unmarked({KGW: 0.5}), "pack": "watermark_robustness", "label": "PASS", "score": 1.0}]
    records = compute(rows)
    assert metric_keys(records) == {("mean_score",), ("rate", ("label", "PASS")), ("rate", ("label", "DROPPED")),
                                    ("error_rate",)}
    assert {r.watermark for r in records} == {KGW, "none"}


def test_existing_records_are_unchanged_for_detection_packs() -> None:
    rows = [marked(0.001), marked(0.5), unmarked({KGW: 0.3})]
    records = compute(rows)
    mean = find(records, "mean_score")
    assert (mean.value, mean.n) == (0.5, 2)
    assert find(records, "rate", label="DETECTED").value == 0.5
    assert find(records, "rate", watermark="none", label="NOT_DETECTED").value == 1.0


# -- per-group aggregates ------------------------------------------------------------------

def test_detection_rate_is_wilson_over_graded_watermarked_texts() -> None:
    rows = [marked(p) for p in (0.001, 0.02, 0.03, 1e-9)] + [marked(0.001, error="TimeoutError")]
    rec = find(compute(rows), "detection_rate")
    want = stats.wilson_interval(3, 4)
    assert (rec.value, rec.ci_low, rec.ci_high, rec.n) == (0.75, want.low, want.high, 4)
    assert not [r for r in compute([unmarked({KGW: 0.001})]) if r.metric == "detection_rate"]


def test_watermark_size_is_the_median_with_inf_written_as_null(tmp_path) -> None:
    rows = [marked(0.001, size=s) for s in (10, 30)] + [marked(0.5, size=None) for _ in range(3)]
    records = compute(rows)
    rec = find(records, "watermark_size", size_rule="alpha_spending")
    assert rec.value == math.inf and rec.n == 5    # 3 of 5 never detected: E = +inf (MarkMyWords IV-B)
    assert rec.as_json()["value"] is None
    path = write_metrics_json(records, tmp_path / "metrics.json")   # JSON has no inf: null
    on_disk = [r for r in json.loads(path.read_text()) if r["metric"] == "watermark_size"]
    assert on_disk[0]["value"] is None and on_disk[0]["n"] == 5

    finite = find(compute([marked(0.001, size=s) for s in (10, 20)] + [marked(0.5, size=None)]), "watermark_size",
                  size_rule="alpha_spending")
    assert finite.value == 20.0 and finite.n == 3
    assert finite.ci_low <= 20.0 <= finite.ci_high


def test_watermark_size_per_temperature() -> None:
    rows = ([marked(0.001, size=s, temperature=0.7) for s in (40, 50, 60)]
            + [marked(0.001, size=s, temperature=1.0) for s in (10, 12)])
    records = compute(rows)
    rule = {"size_rule": "alpha_spending"}
    assert find(records, "watermark_size", temperature=0.7, **rule).value == 50.0
    assert find(records, "watermark_size", temperature=1.0, **rule).value == 11.0  # the mean of 10 and 12
    assert find(records, "watermark_size", temperature=1.0, **rule).n == 2
    assert find(records, "watermark_size", **rule).value == 40.0   # all five, pooled


def test_watermark_size_under_each_rule_and_from_older_grades() -> None:
    rows = [marked(0.001, size=s, first_crossing=s // 2) for s in (10, 30, 50)]
    records = compute(rows)
    assert find(records, "watermark_size", size_rule="alpha_spending").value == 30.0
    assert find(records, "watermark_size", size_rule="first_crossing").value == 15.0
    # a grade of an earlier release stored MarkMyWords' first-crossing size alone
    old = [marked(0.001, size=s) for s in (10, 30, 50)]
    for r in old:
        meta = json.loads(r["metadata_json"])
        del meta["sizes"]
        r["metadata_json"] = json.dumps(meta)
    sizes = [r for r in compute(old) if r.metric == "watermark_size"]
    assert [(r.params, r.value) for r in sizes] == [({"size_rule": "first_crossing"}, 30.0),
                                                   ({"size_rule": "first_crossing", "temperature": 1.0}, 30.0)]


def test_size_false_positive_rate_counts_unwatermarked_texts_with_a_finite_size() -> None:
    rows = [marked(0.001, size=8) for _ in range(3)]
    for i in range(10):  # the unwatermarked texts' detections under kgw: 1 and 4 of 10 get a size
        found = {KGW: {**detection(0.5, 12 if i == 0 else None, first_crossing=12 if i < 4 else None), "threshold": T}}
        rows.append(_row(PACK, "none", "none", "NOT_DETECTED", {"threshold": T, "detections": found}, (), 1.0, None))
    records = compute(rows)
    for rule, sized in (("alpha_spending", 1), ("first_crossing", 4)):
        rec = find(records, "size_false_positive_rate", size_rule=rule)
        want = stats.wilson_interval(sized, 10)
        assert (rec.value, rec.ci_low, rec.ci_high, rec.n) == (sized / 10, want.low, want.high, 10)


def test_mean_tokens_scored() -> None:
    rec = find(compute([marked(0.001, tokens=n) for n in (100, 120, 200)]), "mean_tokens_scored")
    assert rec.value == pytest.approx(140.0) and rec.n == 3
    assert rec.ci_low <= 140.0 <= rec.ci_high


def test_false_positive_rate_records_carry_the_detector_spec() -> None:
    rows = [unmarked({KGW: p, EXP: q}) for p, q in ((0.001, 0.5), (0.5, 0.5), (0.3, 0.01), (0.9, 0.9))]
    records = compute(rows)
    fprs = [r for r in records if r.metric == "false_positive_rate"]
    assert {r.watermark for r in fprs} == {KGW, EXP}      # never "none"
    assert find(records, "false_positive_rate", watermark=KGW).value == 0.25
    assert find(records, "false_positive_rate", watermark=EXP).value == 0.25
    assert find(records, "false_positive_rate", watermark=KGW).n == 4
    want = metrics.false_positive_rate([0.001, 0.5, 0.3, 0.9])
    assert find(records, "false_positive_rate", watermark=KGW).ci_high == want.high
    # the group's own records keep watermark "none"
    assert find(records, "rate", watermark="none", label="DETECTED").value == 0.5


def test_mixed_thresholds_give_null_detection_metrics() -> None:
    rows = [marked(0.001, threshold=0.02), marked(0.001, threshold=0.05)]
    rec = find(compute(rows), "detection_rate")
    assert rec.value is None and rec.n == 2


def test_quality_is_the_mean_rating_and_a_proxy_is_labelled() -> None:
    rows = [marked(0.001, judgements=(rating(0.8), proxy(0.05))),
            marked(0.001, judgements=(rating(0.6), proxy(0.15))),
            marked(0.001, judgements=(rating(None),)),                     # unparsed: in no mean
            marked(0.001, judgements=(Judgement("openai:judge", "rating", None, 0, {}, "HTTP 500"),)),
            marked(0.001, judgements=(rating(0.1),), error="TimeoutError")]  # no grade: in no mean
    records = compute(rows)
    assert find(records, "quality", quality="rating").value == pytest.approx(0.7)
    assert find(records, "quality", quality="rating").n == 2
    assert find(records, "quality", quality="perplexity-proxy").value == pytest.approx(0.1)
    assert not any(r.params.get("quality") == "perplexity" for r in records)
    assert not any("quality" in r.params or r.metric.startswith("quality") for r in compute([marked(0.001)]))


# -- selection aggregates ------------------------------------------------------------------

def test_roc_auc_and_tpr_at_fpr_pair_each_scheme_with_unwatermarked_texts() -> None:
    pos = [1e-6, 1e-3, 0.2, 0.5]
    neg = {KGW: [0.3, 0.9, 1e-4, 0.6, 0.05], EXP: [0.5] * 5}
    rows = [marked(p, attack="swap") for p in pos] + [marked(1e-9, wm=EXP, attack="swap")]
    rows += [unmarked({KGW: a, EXP: b}, attack="swap") for a, b in zip(neg[KGW], neg[EXP])]
    rows += [marked(1e-9, attack="lowercase")]             # no unwatermarked lowercase texts
    records = compute(rows)
    score = lambda ps: [-math.log10(p) for p in ps]  # noqa: E731
    auc = find(records, "roc_auc", attack="swap")
    assert auc.value == pytest.approx(metrics.auroc(score(pos), score(neg[KGW])))
    assert auc.n == 9
    assert find(records, "roc_auc", watermark=EXP, attack="swap").value == 1.0
    for fpr in (0.01, 0.02):
        rec = find(records, "tpr_at_fpr", attack="swap", fpr=fpr)
        assert rec.value == pytest.approx(metrics.tpr_at_fpr(score(pos), score(neg[KGW]), fpr))
    assert find(records, "tpr_at_fpr", attack="swap", fpr=0.01).params == {"fpr": 0.01}
    assert not [r for r in records if r.attack == "lowercase" and r.metric in ("roc_auc", "tpr_at_fpr")]
    assert not [r for r in records if r.metric == "roc_auc" and r.watermark == "none"]


def test_roc_auc_of_p_value_zero_is_infinite_score_not_an_error() -> None:
    rows = [marked(0.0), marked(0.001), unmarked({KGW: 0.5}), unmarked({KGW: 0.0})]
    # inf beats 0.3 and ties inf; 3 beats 0.3 and loses to inf: (1 + 0.5 + 1 + 0) / 4
    assert find(compute(rows), "roc_auc").value == pytest.approx(0.625)


def test_quality_retention_uses_the_same_watermark_unattacked_as_baseline() -> None:
    rows = [marked(0.001, judgements=(rating(q),)) for q in (0.8, 0.8)]
    rows += [marked(0.5, attack="swap:p=0.1", judgements=(rating(q),)) for q in (0.5, 0.7)]
    rows += [marked(0.5, attack="contraction", judgements=(rating(0.81),))]
    rows += [unmarked({KGW: 0.5}, judgements=(rating(0.9),))]     # not the baseline of Q_A
    records = compute(rows)
    rec = find(records, "quality_retention", attack="swap:p=0.1", quality="rating")
    assert rec.value == pytest.approx(0.75) and rec.n == 2       # 0.6 / 0.8
    assert rec.ci_low <= rec.value <= rec.ci_high
    assert find(records, "quality_retention", attack="contraction", quality="rating").value == 1.0   # clipped


def test_quality_degradation_against_unwatermarked_texts() -> None:
    rows = [marked(0.001, judgements=(rating(q),)) for q in (0.7, 0.74)]
    rows += [unmarked({KGW: 0.5}, judgements=(rating(q),)) for q in (0.8, 0.8)]
    rows += [marked(0.001, wm=EXP, judgements=(rating(0.88),))]
    records = compute(rows)
    assert find(records, "quality_degradation", quality="rating").value == pytest.approx(0.1)
    assert find(records, "quality_degradation", watermark=EXP, quality="rating").value == pytest.approx(-0.1)
    assert not [r for r in records if r.metric == "quality_degradation" and r.watermark == "none"]


def _attack_rows(attack: str, quality: float, detected: int, n: int = 10, judge=rating) -> list[dict]:
    return [marked(0.001 if i < detected else 0.5, attack=attack, judgements=(judge(quality),)) for i in range(n)]


def tamper_rows(judge=rating) -> list[dict]:
    rows = [marked(0.001, judgements=(judge(0.8),)) for _ in range(4)]
    rows += _attack_rows("swap:p=0.1", 0.72, 3, judge=judge)          # (0.9, 0.3)
    rows += _attack_rows("synonym:p=0.25", 0.4, 5, judge=judge)       # (0.5, 0.5)
    rows += _attack_rows("translate:fr:openai:t", 0.68, 6, judge=judge)  # (0.85, 0.6): kept
    rows += _attack_rows("Paraphrase:openai:gpt", 0.8, 0, judge=judge)   # (1.0, 0.0): left out of R
    return rows


def test_tamper_resistance_says_when_no_attack_lowered_detection() -> None:
    rows = [marked(0.001, judgements=(rating(0.8),)) for _ in range(4)]
    rows += _attack_rows("swap:p=0.1", 0.72, 10) + _attack_rows("synonym:p=0.25", 0.4, 9)  # (0.9, 1), (0.5, 0.9)
    rec = find(compute(rows), "tamper_resistance", attack=ALL_ATTACKS, quality="rating")
    assert rec.value == 1.0 and rec.params == {"quality": "rating", "saturated": True}
    rows += _attack_rows("typo:p=0.05", 0.76, 8)  # (0.95, 0.8): below the diagonal
    rec = find(compute(rows), "tamper_resistance", attack=ALL_ATTACKS, quality="rating")
    assert rec.value < 1.0 and rec.params["saturated"] is False


def test_character_attacks_under_a_surface_sensitive_source_carry_a_caveat() -> None:
    def caveats(judge) -> dict[tuple[str, str], bool]:
        rows = [marked(0.001, judgements=(judge(0.8),)) for _ in range(4)]
        rows += _attack_rows("typo:p=0.05", 0.2, 9, judge=judge) + _attack_rows("swap:p=0.1", 0.72, 3, judge=judge)
        return {(r.metric, r.attack): "caveat" in r.params for r in compute(rows)
                if r.metric in ("quality_retention", "tamper_resistance", "best_attack")}

    # the proxy reads surface form: typo's retention and R (which rests on it) say so, swap's not
    assert caveats(proxy) == {("quality_retention", "typo:p=0.05"): True, ("quality_retention", "swap:p=0.1"): False,
                              ("tamper_resistance", ALL_ATTACKS): True, ("best_attack", "swap:p=0.1"): False}
    # MarkMyWords' rating judge reads content: no caveat anywhere
    assert not any(caveats(rating).values())


def test_tamper_resistance_leaves_paraphrase_out_and_names_the_best_attack() -> None:
    records = compute(tamper_rows())
    rec = find(records, "tamper_resistance", attack=ALL_ATTACKS, quality="rating")
    points = {"swap:p=0.1": (0.9, 0.3), "synonym:p=0.25": (0.5, 0.5), "translate:fr:openai:t": (0.85, 0.6)}
    assert rec.value == pytest.approx(metrics.tamper_resistance(points))
    assert rec.value > 0.2   # with the paraphrase at (1, 0) it would be 0
    assert metrics.tamper_resistance({**points, "p": (1.0, 0.0)}) == 0.0
    assert rec.ci_low <= rec.value <= rec.ci_high and rec.n == 4 + 30
    assert rec.params["saturated"] is False   # swap lies below the diagonal
    best = [r for r in records if r.metric == "best_attack" and r.params == {"quality": "rating"}]
    assert [(b.attack, b.value, b.n) for b in best] == [("swap:p=0.1", 0.3, 10)]
    # the points are the quality_retention and detection_rate records of the attacks
    for attack, (q, d) in points.items():
        assert find(records, "quality_retention", attack=attack, quality="rating").value == pytest.approx(q)
        assert find(records, "detection_rate", attack=attack).value == pytest.approx(d)


def test_no_tamper_record_without_quality_or_attacks() -> None:
    no_quality = [marked(0.001), *[marked(0.5, attack="swap") for _ in range(3)]]
    only_paraphrase = [marked(0.001, judgements=(rating(0.8),)),
                       marked(0.5, attack="paraphrase:openai:x", judgements=(rating(0.8),))]
    for rows in (no_quality, only_paraphrase):
        assert not [r for r in compute(rows) if r.metric in ("tamper_resistance", "best_attack")]
    assert excluded_from_tamper("PARAPHRASE:dipper") and not excluded_from_tamper("translate:ru:x")


def test_derived_metrics_from_a_proxy_say_so() -> None:
    rows = tamper_rows(judge=proxy) + [unmarked({KGW: 0.5}, judgements=(proxy(0.8),))]
    keys = metric_keys(compute(rows))
    for metric in ("quality", "quality_retention", "quality_degradation", "tamper_resistance", "best_attack"):
        assert (metric, ("quality", "perplexity-proxy")) in keys
        assert (metric, ("quality", "rating")) not in keys


def test_compute_is_deterministic_and_writes_valid_json(tmp_path) -> None:
    rows = tamper_rows() + [unmarked({KGW: p}, attack=a, judgements=(rating(0.8),))
                            for p in (0.5, 0.01) for a in ("none", "swap:p=0.1")]
    first = compute(rows)
    assert first == compute(list(reversed(rows)))
    path = write_metrics_json(first, tmp_path / "m.json")
    assert len(json.loads(path.read_text())) == len(first)


def test_quality_degradation_function() -> None:
    assert metrics.quality_degradation(0.72, 0.8) == pytest.approx(0.1)
    assert metrics.quality_degradation(0.88, 0.8) == pytest.approx(-0.1)
    for bad in ((0.5, 0.0), (math.nan, 0.8), (0.5, math.inf)):
        with pytest.raises(ValueError):
            metrics.quality_degradation(*bad)


# -- records as data: bare names, dimensions in params ------------------------------------

def _benchmark_rows() -> list[dict[str, Any]]:
    rows = tamper_rows() + [unmarked({KGW: p}, attack=a, judgements=(rating(0.8),))
                            for p in (0.5, 0.01) for a in ("none", "swap:p=0.1")]
    return rows + [marked(0.001, size=s, temperature=0.7, judgements=(proxy(0.2),)) for s in (10, 30)]


def test_records_carry_params_and_metrics_json_writes_them(tmp_path) -> None:
    rows = _benchmark_rows()
    records = compute(rows)
    assert records and not [r.metric for r in records if ":" in r.metric]   # no dimension packed in a name
    params = {(r.metric, *sorted(r.params)) for r in records if r.params}
    assert params == {("rate", "label"), ("watermark_size", "size_rule"), ("watermark_size", "size_rule", "temperature"),
                      ("tpr_at_fpr", "fpr"), ("size_false_positive_rate", "size_rule"),
                      ("tamper_resistance", "quality", "saturated"),
                      *((m, "quality") for m in ("quality", "quality_retention", "quality_degradation",
                                                 "best_attack"))}
    assert {r.params["temperature"] for r in records
            if r.metric == "watermark_size" and "temperature" in r.params} == {0.7, 1.0}
    assert {r.params["fpr"] for r in records if r.metric == "tpr_at_fpr"} == {0.01, 0.02}
    assert {r.params["quality"] for r in records if r.metric == "quality"} == {"rating", "perplexity-proxy"}
    on_disk = json.loads(write_metrics_json(records, tmp_path / "metrics.json").read_text())
    assert [list(r) for r in on_disk] == [list(FIELDS)] * len(records)   # params after metric, every record
    assert [r["params"] for r in on_disk] == [r.params for r in records]
    assert [r.as_json() for r in records] == on_disk
    # the order stays deterministic whatever the rows' order (the same rows: case ids come from
    # a counter, and a bootstrap resamples cases in case-id order)
    assert compute(list(reversed(rows))) == records


def test_records_keep_the_bootstrap_seeds_of_the_old_names() -> None:
    """A record's interval is seeded as when its dimensions were in its name, so every number
    of an existing store comes out as before."""
    rows = _benchmark_rows()
    records = compute(rows)
    seed = group_seed(PACK, MODEL, KGW, "none")
    values = [q for r in rows if (r["watermark"], r["attack"]) == (KGW, "none")
              for q in [next((j.parsed["rating"] for j in r["judgements"] if j.method == "rating"), None)]
              if q is not None]
    want = stats.bootstrap_mean_ci(values, seed=stable_int("metrics", seed, "quality:rating", bits=31))
    got = find(records, "quality", quality="rating")
    assert (got.value, got.ci_low, got.ci_high) == (want.value, want.low, want.high)
    score = lambda ps: [-math.log10(p) for p in ps]  # noqa: E731
    pos = score([json.loads(r["metadata_json"])["p_value"] for r in rows
                 if (r["watermark"], r["attack"]) == (KGW, "swap:p=0.1")])
    neg = score([json.loads(r["metadata_json"])["detections"][KGW]["p_value"] for r in rows
                 if (r["watermark"], r["attack"]) == ("none", "swap:p=0.1")])
    salt = stable_int("metrics", PACK, MODEL, KGW, "swap:p=0.1", "tpr_at_fpr:0.01", bits=31)
    want = tpr_at_fpr_ci(pos, neg, 0.01, seed=salt)
    got = find(records, "tpr_at_fpr", attack="swap:p=0.1", fpr=0.01)
    assert (got.value, got.ci_low, got.ci_high) == (want.value, want.low, want.high)


def test_record_is_the_one_constructor_and_checks_params() -> None:
    est = stats.Estimate(0.5, 0.4, 0.6)
    rec = record("p", "quality", est, 3, "m", "w", "a", params={"quality": "rating"})
    assert rec.params == {"quality": "rating"} and rec.as_json()["params"] == {"quality": "rating"}
    assert record("p", "mean_score", est, 3, "m", "w", "a").params == {}
    assert rec != record("p", "quality", est, 3, "m", "w", "a", params={"quality": "perplexity-proxy"})
    assert len({rec, record("p", "quality", est, 3, "m", "w", "a", params={"quality": "rating"})}) == 1
    for bad in (math.nan, math.inf, True, None, [1]):
        with pytest.raises(ValueError, match="param 'x'"):
            record("p", "m", est, 1, "m", "w", "a", params={"x": bad})
    index = record_index([rec, record("p", "quality", est, 3, "m", "w", "a", params={"quality": "proxy"})])
    assert index[("p", "quality", "m", "w", "a", (("quality", "rating"),))] is rec


def test_an_aggregate_may_return_params_and_old_shapes_still_work(monkeypatch) -> None:
    registry: Registry = Registry("metric", "evalrun.test_metrics", option="--metric")

    @registry.register("shapes")
    def _shapes(rows, seed):
        est = stats.Estimate(1.0, 1.0, 1.0)
        return [("plain", est, 1), ("about", est, 1, "other-wm"), ("with_params", est, 1, None, {"k": 2.5}),
                ("both", est, 1, "other-wm", {"k": "v"})]

    monkeypatch.setattr(aggregates, "AGGREGATES", registry)
    monkeypatch.setattr(aggregates, "SELECTION_AGGREGATES", Registry("s", "evalrun.test_selection", option="-"))
    got = [(r.metric, r.watermark, r.params) for r in compute([marked(0.001)])]
    assert got == [("plain", KGW, {}), ("about", "other-wm", {}), ("with_params", KGW, {"k": 2.5}),
                   ("both", "other-wm", {"k": "v"})]


def test_analysis_records_carry_their_dimensions_as_params() -> None:
    [tuned] = tune_records([{"pack": "wb", "model": "m", "watermark": "kgw:delta=2", "target_tpr": 0.7, "tpr": 0.7,
                             "tpr_ci": [0.5, 0.85], "n": 20}])
    assert (tuned.metric, tuned.params) == ("tuned_tpr", {"target_tpr": 0.7})
    [swept] = sweep_records([{"pack": "mmw", "model": "m", "watermark": "kgw:delta=2", "aggregate_size": "inf",
                              "aggregate_size_ci": [12, None], "aggregate_n": 16, "max_quality_degradation": 0.01,
                              "min_tamper_resistance": 0.2}])
    assert (swept.metric, swept.params) == ("aggregate_size", {"max_quality_degradation": 0.01,
                                                               "min_tamper_resistance": 0.2})
    assert swept.value is None and swept.ci_low == 12.0
    fold = {"mean": 0.75, "folds": [0.5, 1.0]}
    found = distinguish_records([{"packs": ["a", "b"], "embedder": "openai:e", "n": 8, "model": "m",
                                  "watermark": "kgw", "attack": "none",
                                  "classifiers": {"logreg": {"fold_sizes": [4, 4], "accuracy": fold,
                                                             "roc_auc": fold}}}])
    assert [(r.pack, r.metric, r.params) for r in found] == [
        ("a+b", "distinguish_accuracy", {"classifier": "logreg", "embedder": "openai:e"}),
        ("a+b", "distinguish_roc_auc", {"classifier": "logreg", "embedder": "openai:e"})]
    assert isinstance(found[0], MetricRecord) and found[0].ci_low == stats.wilson_interval(6, 8).low


def mauve_answer(score: float, wm: str, attack: str = "none", replicates: tuple[float, ...] = (),
                 reference: bool = False, noise_floor: dict[str, Any] | None = None) -> Judgement:
    """A MAUVE answer as :mod:`evalrun.judges.mauve` stores it, parsed by the registered judge."""
    data: dict[str, Any] = {"mauve": score, "about": {"watermark": wm, "attack": attack}, "embedder": "embedded",
                            "q_count": 3}
    if reference:
        data["reference"] = True
        if noise_floor is not None:
            data["noise_floor"] = noise_floor
    else:
        low, high = (min(replicates), max(replicates)) if replicates else (score, score)
        data.update(low=low, high=high, p_count=3, buckets=2, replicates=list(replicates))
    raw = json.dumps(data, sort_keys=True)
    return Judgement(judge="embedded", method="mauve", raw=raw, position=0,
                     parsed=dict(get_judge("mauve").parse(raw)))


def test_mauve_noise_floor_is_the_reference_answers_and_counts_once() -> None:
    floor = {"mauve": 0.96, "low": 0.81, "high": 1.0, "texts_per_half": 3, "buckets": 2, "replicates": [0.9, 1.0]}
    ref = mauve_answer(1.0, "none", reference=True, noise_floor=floor)
    old_ref = mauve_answer(1.0, "none", reference=True)   # judged before noise floors: the same 1
    kgw = mauve_answer(0.9, KGW, replicates=(0.8, 0.85, 0.95, 0.99))
    rows = [unmarked({KGW: 0.5}, judgements=(old_ref, ref, kgw)) for _ in range(6)]
    rows += [marked(0.001, judgements=(kgw,)) for _ in range(6)]
    records = compute(rows)
    rec = find(records, "quality_noise_floor", watermark="none", quality="mauve")
    assert (rec.value, rec.ci_low, rec.ci_high, rec.n) == (0.96, 0.81, 1.0, 6)
    # two reference answers count as one: the degradation still comes from the replicates
    degradation = find(records, "quality_degradation", quality="mauve")
    assert degradation.value == pytest.approx(0.1) and degradation.ci_low < degradation.ci_high
    assert not [r for r in compute(rows[6:]) if r.metric == "quality_noise_floor"]


def test_mauve_is_a_group_score_with_its_stored_interval_and_not_a_proxy() -> None:
    ref = mauve_answer(1.0, "none", reference=True)
    kgw = mauve_answer(0.9, KGW, replicates=(0.8, 0.85, 0.95, 0.99))
    swap = mauve_answer(0.45, KGW, "swap:p=0.1", replicates=(0.4, 0.5))
    # the baseline rows also carry the watermarked groups' answers (they were computed against
    # them): those count for the group they are about only
    rows = [unmarked({KGW: 0.5}, judgements=(ref, kgw, swap)) for _ in range(3)]
    rows += [marked(0.001, judgements=(kgw,)) for _ in range(3)]
    rows += [marked(0.5 if i else 0.001, attack="swap:p=0.1", judgements=(swap,)) for i in range(3)]
    records = compute(rows)
    quality = find(records, "quality", quality="mauve")
    assert (quality.value, quality.ci_low, quality.ci_high, quality.n) == (0.9, 0.8, 0.99, 3)
    assert find(records, "quality", watermark="none", quality="mauve").value == 1.0
    degradation = find(records, "quality_degradation", quality="mauve")
    assert degradation.value == pytest.approx(0.1)
    # centred on the point: ± 1.96 sd of 1 - replicate / 1 over the replicates, clipped to what a
    # MAUVE degradation against the reference's 1 can be: [0, 1] (0.1 - spread < 0)
    spread = 1.959963984540054 * np.std([0.2, 0.15, 0.05, 0.01], ddof=1)
    assert (degradation.ci_low, degradation.ci_high) == pytest.approx((0.0, 0.1 + spread))
    assert 0.1 - spread < 0.0
    # each MAUVE record says how its interval was made (a note, not part of its key)
    assert quality.params["interval"] == degradation.params["interval"] == GROUP_INTERVAL
    retention = find(records, "quality_retention", attack="swap:p=0.1", quality="mauve")
    assert retention.value == pytest.approx(0.5)   # 0.45 / 0.9
    assert 0.0 <= retention.ci_low < 0.5 < retention.ci_high <= 1.0
    tamper = find(records, "tamper_resistance", attack=ALL_ATTACKS, quality="mauve")
    assert tamper.n == 6 and 0.0 < tamper.value < 1.0
    # quality varies with detections: R's interval comes from MAUVE's replicates too, so it is
    # wider than resampling the detections alone gives
    assert tamper.params["interval"] == GROUP_INTERVAL and tamper.ci_low <= tamper.value <= tamper.ci_high
    alone = metrics.tamper_resistance_ci([0.9] * 3, {"swap:p=0.1": ([0.45] * 3, [True, False, False])},
                                         seed=1)
    assert tamper.ci_high - tamper.ci_low > alone.high - alone.low
    assert not any(r.params.get("quality") == "mauve-proxy" for r in records)
