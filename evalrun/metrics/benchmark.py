"""The watermark benchmark's registered aggregates (MarkMyWords, Piet et al., section IV).

They apply to *detection packs* only -- packs whose graded labels are DETECTED/NOT_DETECTED
(:mod:`evalrun.pack.detection_grader`) -- and return nothing for any other rows. Each is a thin
wrapper: it reads the detector's evidence from the grade metadata and the judges' answers
from ``row["judgements"]``, and hands them to the pure functions of :mod:`evalrun.metrics`
with a seed derived from the records' own keys, so the same selection gives the same bits.

Records carry a bare metric name; their other dimensions are in ``params`` (the quality
source, the target FPR, the temperature), never in the name.

Per group (one pack, model, watermark, attack; :data:`~evalrun.metrics.aggregates.AGGREGATES`):

* ``detection_rate`` -- watermarked texts with ``p <= threshold`` (Wilson 95%);
* ``watermark_size`` -- MarkMyWords IV-B, the median of per-text sizes (tokens to the
  first detected prefix, never detected = +inf), bootstrap 95% over texts, one record per size
  rule (params ``{"size_rule": R}``; :mod:`evalrun.watermark.verdict`: ``alpha_spending``, the
  default, keeps an unwatermarked text's chance of any finite size at most the threshold;
  ``first_crossing`` is MarkMyWords' rule). When more than half of the texts are never
  detected the size is +inf, which metrics.json writes as ``null`` (JSON has no infinity; the
  report shows ∞). With params ``{"size_rule": R, "temperature": T}`` it is the same over the
  texts sampled at temperature T (MarkMyWords Fig. 1);
* ``mean_tokens_scored`` -- mean tokens the detector scored per text (bootstrap 95%);
* ``false_positive_rate`` -- unwatermarked texts detected anyway, one record per detector
  spec, with that spec in the record's ``watermark`` field (the group's is ``none``);
* ``quality``, params ``{"quality": <source>}`` -- mean quality of the graded texts that have
  one (bootstrap 95% over texts). Source ``rating`` is MarkMyWords' judge rating (IV-A);
  ``mauve`` its second measure, one score per group against the unwatermarked outputs
  (:mod:`evalrun.judges.mauve`), shown with its own bootstrap interval; a judge method whose
  parsed answer has a ``quality`` key and no source (e.g. ``perplexity``) is a *proxy*, source
  ``<method>-proxy`` here and in every metric derived from it.

Across groups (:data:`~evalrun.metrics.aggregates.SELECTION_AGGREGATES`), per pack and model:

* ``size_false_positive_rate`` (params ``{"size_rule": R}``) -- per watermark and attack: the
  share of the unwatermarked texts of the same model and attack that get a finite size under
  that watermark's detector and rule R (Wilson 95%); what "E at the threshold's FPR" promises.
  Under ``alpha_spending`` it is at most the threshold in expectation;
* ``roc_auc`` and ``tpr_at_fpr`` (params ``{"fpr": 0.01}`` / ``{"fpr": 0.02}``) -- per
  watermark and attack: the
  watermarked texts' ``-log10 p`` (positives) against the unwatermarked texts' ``-log10 p``
  under that watermark's detector (negatives), same attack; bootstrap 95% resampling each side
  within itself; ``n`` counts both sides;
The quality records below carry params ``{"quality": <source>}``:

* ``quality_retention`` -- per attacked group, MarkMyWords IV-C's ``Q_A = clip(mean
  attacked quality / mean quality of the same watermark's unattacked texts, 0, 1)``. The
  baseline is the same model and watermark without attack, as the paper's remark that an
  unchanged (contracted) text can score "up to 1% higher than the baseline" implies, and as
  MarkMyWords' ``summarize_robustness`` does (``base_q = stats[model][None].quality``);
* ``quality_degradation`` -- per watermark, unattacked:
  :func:`~evalrun.metrics.quality_degradation` of its texts against the unwatermarked texts;
* ``tamper_resistance`` -- per watermark, over its attacks (``attack`` is
  :data:`ALL_ATTACKS`): R of MarkMyWords IV-C from each attack's (quality retention, detection
  rate), paraphrase attacks (names starting ``paraphrase``, any case) left out, translations
  kept; bootstrap 95% via :func:`~evalrun.metrics.tamper_resistance_ci`. A point pairs each
  text's quality with its detection, so it uses the graded texts that have a quality answer
  (with MAUVE every text of a group carries the group's score, as in MarkMyWords, so each
  resample pairs resampled detections with the next bootstrap replicate of every group's
  MAUVE, and the interval is R ± 1.96 sd of those, as MAUVE's own; a ratio of two MAUVE
  scores takes its interval from the spread of their bootstrap replicates' ratios). Params
  ``{"quality": source, "saturated": true|false}``: saturated when every attack's detection rate is at least its
  quality retention, so the hull is the diagonal and R = 1 says only that the attacks
  removed too little (:meth:`TamperInputs.saturated`);
* a ``caveat`` note (:data:`SURFACE_CAVEAT`) on the quality retention of an attack that edits
  characters (typo, misspelling, lowercase; :attr:`evalrun.attacks.base.AttackDef.characters`)
  when the source is not the rating judge, and on R and the best attack when they rest on
  one: MAUVE over the embedded model's states keeps 1-2% of the quality after 5% typos and
  perplexity 16-18%, a loss of surface form no reader would see as lost content;
* ``best_attack`` -- the attack with the lowest detection rate among those keeping
  >= 80% quality retention (MarkMyWords Fig. 3), in the record's ``attack`` field; the value is
  its detection rate on the texts of its point (Wilson 95%). No record when no attack keeps
  80%.

All detection metrics need one p-value threshold per group (the pack's); a group graded at
several thresholds gets null values (run ``evalrun regrade``). A pack graded at a z-score
threshold (``z_threshold``, WaterBench's z >= 4) is counted by the grader's own rule
(:func:`evalrun.pack.detection_grader.is_detected`: z >= the threshold where the scheme gives a z),
not by ``p <= threshold``: at 40 tokens the two disagree on about one text in nine.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from evalrun._util.hashing import stable_int
from evalrun._util.specs import is_none
from evalrun.attacks.base import edits_characters
from evalrun.judges import JUDGES
from evalrun.judges.mauve_score import normal_interval
from evalrun.metrics import stats
from evalrun.metrics.aggregates import (
    AGGREGATES,
    SELECTION_AGGREGATES,
    Estimated,
    MetricRecord,
    Row,
    graded,
    record,
    row_metadata,
)
from evalrun.metrics.detection import detection_rate, false_positive_rate
from evalrun.metrics.intervals import (
    GroupReplicates,
    auroc_ci,
    tamper_resistance_ci,
    tpr_at_fpr_ci,
    watermark_size_ci,
)
from evalrun.metrics.quality import quality_degradation
from evalrun.metrics.tamper import best_attack, quality_retention
from evalrun.watermark.verdict import DEFAULT_SIZE_RULE, DETECTED, FIRST_CROSSING, NOT_DETECTED, is_detected

__all__ = ["ALL_ATTACKS", "DETECTION_LABELS", "FPR_TARGETS", "GROUP_INTERVAL", "RATING", "SURFACE_CAVEAT",
           "TamperInputs", "excluded_from_tamper", "is_detection", "is_proxy", "quality_by_source",
           "quality_judges", "quality_sources", "record_index", "source_of_method", "surface_sensitive", "tamper_inputs",
           "temperature"]

DETECTION_LABELS = frozenset({DETECTED, NOT_DETECTED})
#: the ``attack`` of a record about all of a watermark's attacks (tamper resistance)
ALL_ATTACKS = "*"
#: target false positive rates of the ``tpr_at_fpr`` records (their ``fpr`` param)
FPR_TARGETS = (0.01, 0.02)
#: the quality source of MarkMyWords' judge rating
RATING = "rating"
#: MarkMyWords' own quality measures, in the order the report shows them; every other source
#: is a proxy (:mod:`evalrun.judges.mauve` gives ``mauve``)
PAPER_SOURCES = (RATING, "mauve")
_NAN = stats.Estimate(math.nan, math.nan, math.nan)
#: the ``caveat`` note of a quality retention (and of R, and the best attack) that rests on a
#: character-level attack judged by a source other than the rating judge: MAUVE over an
#: embedder's states and perplexity both read a typo as a large loss of quality
SURFACE_CAVEAT = ("character-level attack under a surface-sensitive quality source: the loss measured is "
                  "mostly the edit of surface form, not of content")
#: how a group-level score's interval is made (the ``interval`` note of its records): the score
#: ± 1.96 standard deviations of bootstrap replicates that resample prompts (each with its own
#: k-means seed); coverage checked by ``benchmarks/mauve_interval_coverage.py``
GROUP_INTERVAL = "normal: score ± 1.96 sd of prompt-bootstrap replicates"

Key = tuple[str, str, str]  # (model, watermark, attack)


# -- reading rows --------------------------------------------------------------------------

def is_detection(rows: Iterable[Row]) -> bool:
    """True when the rows' graded labels are DETECTED/NOT_DETECTED (and there is one)."""
    labels = {r["label"] for r in rows if graded(r)}
    return bool(labels) and labels <= DETECTION_LABELS


def _evidence(row: Row, spec: str | None = None) -> dict[str, Any] | None:
    """A graded row's detection evidence: its own watermark's, or (unwatermarked rows) the
    detection under ``spec``; None when there is none."""
    if not graded(row):
        return None
    meta = row_metadata(row)
    if spec is not None:
        meta = (meta.get("detections") or {}).get(spec) or {}
    return meta if isinstance(meta.get("p_value"), (int, float)) else None


def _threshold(rows: Iterable[Row]) -> float | None:
    """The p-value threshold the rows were graded at, None when they disagree (or say none)."""
    found = {float(m["threshold"]) for m in map(row_metadata, (r for r in rows if graded(r)))
             if isinstance(m.get("threshold"), (int, float))}
    return found.pop() if len(found) == 1 else None


def _z_threshold(rows: Iterable[Row]) -> float | None:
    """The z-score threshold the rows were graded at (a pack's ``z_threshold``, WaterBench's
    z >= 4), None when they were graded by p-value alone or disagree."""
    found = {float(m["z_threshold"]) for m in map(row_metadata, (r for r in rows if graded(r)))
             if isinstance(m.get("z_threshold"), (int, float))}
    return found.pop() if len(found) == 1 else None


def _detected(evidence: Mapping[str, Any], threshold: float, z_threshold: float | None) -> bool:
    """The grader's one rule (:func:`evalrun.pack.detection_grader.is_detected`) on stored evidence."""
    return is_detected(evidence.get("z_score"), float(evidence["p_value"]), threshold=threshold,
                       z_threshold=z_threshold)


def _rate(evidence: Sequence[Mapping[str, Any]], threshold: float | None,
          z_threshold: float | None) -> stats.Estimate:
    """Share detected: :func:`detection_rate` at the p-value threshold, or with a z threshold
    the share the grader's rule detects (Wilson 95% either way)."""
    if threshold is None:
        return _NAN
    if z_threshold is None:
        return detection_rate([e["p_value"] for e in evidence], threshold)
    return stats.wilson_interval(sum(_detected(e, threshold, z_threshold) for e in evidence), len(evidence))


def temperature(row: Row) -> str | None:
    """The sampling temperature of a row's generation as text (``0.7``), None if unrecorded."""
    try:
        t = json.loads(row.get("params_json") or "{}").get("temperature")
    except (ValueError, AttributeError):
        return None
    return f"{float(t):g}" if isinstance(t, (int, float)) else None


def is_proxy(source: str) -> bool:
    """MarkMyWords' quality measures are its judge rating and MAUVE; every other source
    (perplexity, ...) is a proxy."""
    return source not in PAPER_SOURCES


def _source(j: Any, row: Row) -> tuple[str, Any] | None:
    """(source, value) of one parsed judge answer about ``row``, or None. ``rating`` is the
    rating; a parse with ``quality`` is its ``source`` (MAUVE) or the proxy ``<method>-proxy``.
    A group-level answer (MAUVE) names the group it is ``about``; it counts only for that
    group's rows, never for the unwatermarked partners it was computed against."""
    if j.error is not None:
        return None
    if j.method == RATING:
        return RATING, j.parsed.get("rating")
    if "quality" not in j.parsed:
        return None
    about = j.parsed.get("about")
    if isinstance(about, Mapping) and (about.get("watermark"), about.get("attack")) != (row.get("watermark"),
                                                                                      row.get("attack")):
        return None
    return str(j.parsed.get("source") or f"{j.method}-proxy"), j.parsed.get("quality")


def source_of_method(method: str) -> str:
    """The quality source a judge method's answers give (``rating``, ``mauve``, or the proxy
    ``<method>-proxy``): how ``evalrun sweep --judge METHOD:MODEL`` finds its quality."""
    judge = JUDGES.get(method) if method in JUDGES else None
    source = getattr(judge, "quality_source", None)
    return source if isinstance(source, str) else f"{method}-proxy"


def _group_answers(rows: Iterable[Row], source: str) -> list[Mapping[str, Any]]:
    """The distinct group-level answers (parses with ``pairs``: MAUVE) of ``source`` behind
    the graded ``rows``. A reference's answers (the unwatermarked group's 1) count once per
    scorer, the one with a noise floor first: a store judged before noise floors existed holds
    two, which say the same 1."""
    seen: dict[str, Mapping[str, Any]] = {}
    references: dict[Any, Mapping[str, Any]] = {}
    for r in rows:
        if not graded(r):
            continue
        for j in r.get("judgements") or ():
            found = _source(j, r)
            if found is None or found[0] != source or "pairs" not in j.parsed:
                continue
            if j.parsed.get("reference"):
                kept = references.get(j.parsed.get("scorer"))
                if kept is None or ("noise_floor" in j.parsed and "noise_floor" not in kept):
                    references[j.parsed.get("scorer")] = j.parsed
            else:
                seen.setdefault(j.raw or "", j.parsed)
    return [*references.values(), *seen.values()]


def quality_by_source(row: Row) -> dict[str, float]:
    """source -> the row's quality from that source's parsed judge answers (their mean when
    several judges answered): ``rating`` the rating in [0, 1], ``mauve`` its group's MAUVE, a
    proxy ``<method>-proxy`` its ``quality``. Errors and unparsed answers count in nothing."""
    acc: dict[str, list[float]] = defaultdict(list)
    for j in row.get("judgements") or ():
        found = _source(j, row)
        if found is None:
            continue
        source, value = found
        if isinstance(value, (int, float)) and math.isfinite(value):
            acc[source].append(float(value))
    return {s: float(np.mean(v)) for s, v in sorted(acc.items())}


def quality_sources(rows: Iterable[Row]) -> list[str]:
    """The quality sources of any graded row: MarkMyWords' rating, then MAUVE, then proxies."""
    found = {s for r in rows if graded(r) for s in quality_by_source(r)}
    return sorted(found, key=lambda s: (is_proxy(s), PAPER_SOURCES.index(s) if s in PAPER_SOURCES else 0, s))


def quality_judges(rows: Iterable[Row], source: str) -> list[str]:
    """Who produced ``source``'s answers: the judge models (rating) or the scorers/embedders."""
    names = set()
    for r in rows:
        for j in r.get("judgements") or ():
            found = _source(j, r)
            if found is not None and found[0] == source:
                names.add(j.judge if source == RATING else str(j.parsed.get("scorer") or j.judge))
    return sorted(names)


def _quality(rows: Iterable[Row], source: str) -> list[float]:
    """Per-text quality of the graded rows that have one from ``source``."""
    return [q[source] for q in map(quality_by_source, (r for r in rows if graded(r))) if source in q]


def surface_sensitive(source: str, attacks: Iterable[str]) -> bool:
    """True when a quality source other than MarkMyWords' rating judges an attack that edits
    characters (:func:`evalrun.attacks.base.edits_characters`): the ``caveat`` of the module
    docstring."""
    return source != RATING and any(edits_characters(a) for a in attacks)


def excluded_from_tamper(attack: str) -> bool:
    """MarkMyWords IV-C leaves paraphrase attacks out of R (they need large or closed
    models); translations stay in."""
    return attack.strip().lower().startswith("paraphrase")


def _seed(*parts: Any) -> int:
    return stable_int("metrics", *parts, bits=31)


def _neg_log10(p: float) -> float:
    return math.inf if p <= 0.0 else -math.log10(p)


# -- per-group aggregates ------------------------------------------------------------------

def _marked(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Evidence of a watermarked detection group's graded rows; [] for any other group."""
    if not rows or is_none(rows[0]["watermark"]) or not is_detection(rows):
        return []
    return [e for e in map(_evidence, rows) if e is not None]


@AGGREGATES.register("detection_rate")
def _detection_rate(rows: Sequence[Row], seed: int) -> list[Estimated]:
    """Share of watermarked texts detected (MarkMyWords IV-C's W_A for an attacked group)."""
    ev = _marked(rows)
    if not ev:
        return []
    est = _rate(ev, _threshold(rows), _z_threshold(rows))
    return [("detection_rate", est, len(ev))]


def _sizes(evidence: Mapping[str, Any]) -> dict[str, Any]:
    """size rule -> a text's size; a grade of earlier releases stored only MarkMyWords'
    first-crossing ``size``."""
    sizes = evidence.get("sizes")
    return dict(sizes) if isinstance(sizes, Mapping) else {FIRST_CROSSING: evidence.get("size")}


def _rules(sizes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The size rules every text has a size under (``sizes``: each text's :func:`_sizes`), the
    default first."""
    found = [set(s) for s in sizes]
    common = set.intersection(*found) if found else set()
    return sorted(common, key=lambda r: (r != DEFAULT_SIZE_RULE, r))


@AGGREGATES.register("watermark_size")
def _watermark_size(rows: Sequence[Row], seed: int) -> list[Estimated]:
    """MarkMyWords IV-B's size E over the group, and per sampling temperature (Fig. 1), under
    each size rule (params ``size_rule``)."""
    if not _marked(rows):
        return []
    # each row's sizes and temperature, read once for every rule
    texts = [(_sizes(e), temperature(r)) for r in rows if (e := _evidence(r)) is not None]
    out: list[Estimated] = []
    for rule in _rules(sizes for sizes, _ in texts):
        rule_seed = seed if rule == DEFAULT_SIZE_RULE else _seed(seed, f"watermark_size:{rule}")
        out.append(("watermark_size", watermark_size_ci([sizes[rule] for sizes, _ in texts], seed=rule_seed),
                    len(texts), None, {"size_rule": rule}))
        by_t: dict[str, list[Any]] = defaultdict(list)
        for sizes, t in texts:
            if t is not None:
                by_t[t].append(sizes[rule])
        for t, chosen in sorted(by_t.items(), key=lambda kv: float(kv[0])):
            salt = f"watermark_size:temperature={t}"  # the seed salt of earlier releases: same bits
            out.append(("watermark_size", watermark_size_ci(chosen, seed=_seed(rule_seed, salt)), len(chosen), None,
                        {"size_rule": rule, "temperature": float(t)}))
    return out


@AGGREGATES.register("mean_tokens_scored")
def _mean_tokens_scored(rows: Sequence[Row], seed: int) -> list[Estimated]:
    """How many tokens the detector scored per watermarked text: sizes read against it."""
    ev = _marked(rows)
    if not ev:
        return []
    tokens = [float(e["num_tokens_scored"]) for e in ev]
    return [("mean_tokens_scored", stats.bootstrap_mean_ci(tokens, seed=_seed(seed, "tokens")), len(ev))]


@AGGREGATES.register("false_positive_rate")
def _false_positive_rate(rows: Sequence[Row], seed: int) -> list[Estimated]:
    """Unwatermarked texts detected under each detector spec; the record names the spec."""
    if not rows or not is_none(rows[0]["watermark"]) or not is_detection(rows):
        return []
    specs = sorted({s for r in rows if graded(r) for s in (row_metadata(r).get("detections") or {})})
    t, z = _threshold(rows), _z_threshold(rows)
    out: list[Estimated] = []
    for spec in specs:
        ev = [e for e in (_evidence(r, spec) for r in rows) if e is not None]
        est = (_rate(ev, t, z) if z is not None else
               false_positive_rate([e["p_value"] for e in ev], t) if t is not None else _NAN)
        out.append(("false_positive_rate", est, len(ev), spec))
    return out


@AGGREGATES.register("quality")
def _quality_aggregate(rows: Sequence[Row], seed: int) -> list[Estimated]:
    """MarkMyWords IV-A's Q, the mean rating (or proxy quality) of the group's texts."""
    if not is_detection(rows):
        return []
    out: list[Estimated] = []
    for source in quality_sources(rows):
        values = _quality(rows, source)
        answers = _group_answers(rows, source)
        params: dict[str, str | float] = {"quality": source}
        if len(answers) == 1:  # one score for the group (MAUVE): its own bootstrap interval
            est = _stored_estimate(answers[0])
            if answers[0].get("replicates"):
                params["interval"] = GROUP_INTERVAL
        else:
            salt = f"quality:{source}"  # the seed salt of earlier releases: same bits
            est = stats.bootstrap_mean_ci(values, seed=_seed(seed, salt))
        out.append(("quality", est, len(values), None, params))
    return out


@AGGREGATES.register("quality_noise_floor")
def _quality_noise_floor(rows: Sequence[Row], seed: int) -> list[Estimated]:
    """What two samples of unwatermarked outputs score against each other (MAUVE between two
    halves of the reference group, :func:`evalrun.judges.mauve.noise_floor`): the bar beside
    the reference's 1."""
    if not rows or not (is_none(rows[0]["watermark"]) and is_none(rows[0]["attack"])) or not is_detection(rows):
        return []
    out: list[Estimated] = []
    for source in quality_sources(rows):
        for answer in _group_answers(rows, source):
            floor = answer.get("noise_floor")
            if isinstance(floor, Mapping) and isinstance(floor.get("mauve"), (int, float)):
                est = _stored_estimate({"quality": floor["mauve"], "interval": [floor.get("low"), floor.get("high")]})
                out.append(("quality_noise_floor", est, 2 * int(floor.get("texts_per_half") or 0), None,
                            {"quality": source, "interval": GROUP_INTERVAL}))
    return out


def _stored_estimate(answer: Mapping[str, Any]) -> stats.Estimate:
    """A group-level answer's score with its stored interval (the reference: no interval)."""
    low, high = (answer.get("interval") or [math.nan, math.nan])[:2]
    return stats.Estimate(float(answer["quality"]), math.nan if low is None else float(low),
                          math.nan if high is None else float(high))


def _replicates(answer: Mapping[str, Any]) -> np.ndarray:
    """A group-level answer's bootstrap replicates; the reference's are its score."""
    values = answer.get("replicates") or []
    return np.asarray(values if values else [answer["quality"]], dtype=float)


def _group_ratio(top: Mapping[str, Any], bottom: Mapping[str, Any], ratio: Any,
                 bounds: tuple[float, float]) -> stats.Estimate:
    """``ratio(top, bottom)`` of two group-level scores, with the interval of
    :func:`~evalrun.judges.mauve_score.normal_interval` over the ratios of their bootstrap
    replicates taken pairwise (they are independent draws), clipped to ``bounds`` and to what
    the ratio can be: a group-level score lies in [0, 1] (MAUVE), so against a baseline of 1
    a degradation lies in [0, 1] and never below."""
    a, b = _replicates(top), _replicates(bottom)
    size = max(len(a), len(b))
    a, b = np.resize(a, size), np.resize(b, size)
    values = [ratio(float(x), float(y)) for x, y in zip(a, b) if y > 0.0]
    base = float(bottom["quality"])
    if not base > 0.0:
        return stats.Estimate(math.nan, math.nan, math.nan)
    point = ratio(float(top["quality"]), base)
    lowest, highest = sorted((ratio(0.0, base), ratio(1.0, base)))
    low, high = normal_interval(point, values, max(bounds[0], lowest), min(bounds[1], highest))
    return stats.Estimate(point, low, high)


# -- selection aggregates ------------------------------------------------------------------

def _detection_packs(rows: Iterable[Row]) -> dict[str, dict[Key, list[Row]]]:
    """pack -> (model, watermark, attack) -> rows, for the detection packs of the selection."""
    packs: dict[str, dict[Key, list[Row]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        packs[r["pack"]][(r["model"], r["watermark"], r["attack"])].append(r)
    return {p: dict(g) for p, g in sorted(packs.items())
            if is_detection(r for rs in g.values() for r in rs)}


def _unmarked_key(groups: Mapping[Key, Sequence[Row]], model: str, attack: str) -> Key | None:
    return next((k for k in sorted(groups) if k[0] == model and k[2] == attack and is_none(k[1])), None)


def _unattacked_key(groups: Mapping[Key, Sequence[Row]], model: str, watermark: str) -> Key | None:
    return next((k for k in sorted(groups) if k[0] == model and k[1] == watermark and is_none(k[2])), None)


def _unmarked_evidence(groups: Mapping[Key, list[Row]]) -> Iterable[tuple[Key, list[dict[str, Any]]]]:
    """(key, evidence) per watermarked group that has unwatermarked texts of the same model and
    attack: their detections under its watermark (the false-positive side of its detector)."""
    for key in sorted(groups):
        model, wm, attack = key
        unmarked = _unmarked_key(groups, model, attack)
        if not is_none(wm) and unmarked is not None:
            yield key, [e for e in (_evidence(r, wm) for r in groups[unmarked]) if e is not None]


def _detector_samples(groups: Mapping[Key, list[Row]]) -> Iterable[tuple[Key, list[float], list[float]]]:
    """(key, positives, negatives) per watermarked group with unwatermarked texts of the same
    model and attack that were detected under its watermark."""
    for key, negatives in _unmarked_evidence(groups):
        pos = [_neg_log10(e["p_value"]) for e in map(_evidence, groups[key]) if e is not None]
        neg = [_neg_log10(e["p_value"]) for e in negatives]
        if pos and neg:
            yield key, pos, neg


@SELECTION_AGGREGATES.register("roc_auc")
def _roc_auc(rows: Sequence[Row]) -> list[MetricRecord]:
    """AUROC of -log10 p, watermarked against unwatermarked texts (MarkMyWords' detector)."""
    out = []
    for pack, groups in _detection_packs(rows).items():
        for (model, wm, attack), pos, neg in _detector_samples(groups):
            est = auroc_ci(pos, neg, seed=_seed(pack, model, wm, attack, "roc_auc"))
            out.append(record(pack, "roc_auc", est, len(pos) + len(neg), model, wm, attack))
    return out


@SELECTION_AGGREGATES.register("tpr_at_fpr")
def _tpr_at_fpr(rows: Sequence[Row]) -> list[MetricRecord]:
    """TPR at 1% and 2% empirical FPR (the threshold set on the unwatermarked texts)."""
    out = []
    for pack, groups in _detection_packs(rows).items():
        for (model, wm, attack), pos, neg in _detector_samples(groups):
            for fpr in FPR_TARGETS:
                salt = f"tpr_at_fpr:{fpr:g}"  # the seed salt of earlier releases: same bits
                est = tpr_at_fpr_ci(pos, neg, fpr, seed=_seed(pack, model, wm, attack, salt))
                out.append(record(pack, "tpr_at_fpr", est, len(pos) + len(neg), model, wm, attack,
                                  params={"fpr": fpr}))
    return out


@SELECTION_AGGREGATES.register("size_false_positive_rate")
def _size_false_positive_rate(rows: Sequence[Row]) -> list[MetricRecord]:
    """The share of unwatermarked texts that get a finite size under each watermark's detector
    and size rule (Wilson 95%): the false-positive rate of the size E beside it."""
    out = []
    for pack, groups in _detection_packs(rows).items():
        for key, ev in _unmarked_evidence(groups):
            sizes = [_sizes(e) for e in ev]
            for rule in _rules(sizes):
                sized = sum(s[rule] is not None for s in sizes)
                out.append(record(pack, "size_false_positive_rate", stats.wilson_interval(sized, len(ev)), len(ev),
                                  *key, params={"size_rule": rule}))
    return out


def _ratio_ci(top: Sequence[float], bottom: Sequence[float], ratio: Any, seed: int) -> stats.Estimate:
    """``ratio(mean top, mean bottom)`` with a bootstrap CI resampling each side within
    itself; NaN where the bottom mean is not positive."""
    def statistic(a: np.ndarray, b: np.ndarray) -> float:
        base = float(b.mean())
        return ratio(float(a.mean()), base) if base > 0.0 else math.nan

    return stats.bootstrap_groups_ci([np.asarray(top, float), np.asarray(bottom, float)], statistic, seed)


def _quality_ratios(rows: Sequence[Row], name: str, ratio: Callable[[float, float], float],
                    baseline_of: Callable[[Mapping[Key, list[Row]], Key], Key | None],
                    bounds: tuple[float, float]) -> list[MetricRecord]:
    """``ratio`` of each group's mean quality to its baseline group's (``baseline_of``; None:
    the group has no such metric), per quality source (params ``{"quality": source}``), with a
    bootstrap CI (a group-level source's within ``bounds``, the ratio's range)."""
    out = []
    for pack, groups in _detection_packs(rows).items():
        for key in sorted(groups):
            base = baseline_of(groups, key)
            if base is None:
                continue
            for source in quality_sources(groups[key]):
                measured, baseline = _quality(groups[key], source), _quality(groups[base], source)
                if not baseline:
                    continue
                top, bottom = _group_answers(groups[key], source), _group_answers(groups[base], source)
                params: dict[str, str | float] = {"quality": source}
                if surface_sensitive(source, [key[2]]):
                    params["caveat"] = SURFACE_CAVEAT
                if len(top) == 1 and len(bottom) == 1:  # one score per group (MAUVE)
                    est = _group_ratio(top[0], bottom[0], ratio, bounds)
                    params["interval"] = GROUP_INTERVAL
                else:
                    salt = f"{name}:{source}"  # the seed salt of earlier releases: same bits
                    est = _ratio_ci(measured, baseline, ratio, _seed(pack, *key, salt))
                out.append(record(pack, name, est, len(measured), *key, params=params))
    return out


@SELECTION_AGGREGATES.register("quality_retention")
def _quality_retention(rows: Sequence[Row]) -> list[MetricRecord]:
    """MarkMyWords IV-C's Q_A per attacked group against the same watermark unattacked."""
    return _quality_ratios(rows, "quality_retention", quality_retention,
                           lambda groups, key: None if is_none(key[2]) else _unattacked_key(groups, key[0], key[1]),
                           (0.0, 1.0))


@SELECTION_AGGREGATES.register("quality_degradation")
def _quality_degradation(rows: Sequence[Row]) -> list[MetricRecord]:
    """Relative quality lost to each watermark (unattacked, against unwatermarked texts)."""
    return _quality_ratios(rows, "quality_degradation", quality_degradation,
                           lambda groups, key: (None if is_none(key[1]) or not is_none(key[2])
                                                else _unmarked_key(groups, key[0], key[2])),
                           (-math.inf, 1.0))


@dataclass
class TamperInputs:
    """What R is computed from for one (pack, model, watermark, quality source): the
    unattacked texts' quality and, per attack, its texts' (quality, detected) pairs."""

    baseline: list[float]
    attacks: dict[str, tuple[list[float], list[bool]]] = field(default_factory=dict)
    #: paraphrase attacks, shown on the plot but left out of R (MarkMyWords IV-C)
    excluded: dict[str, tuple[list[float], list[bool]]] = field(default_factory=dict)
    threshold: float | None = None
    #: a group-level source's bootstrap replicates (the baseline's score's, each attack's), so R's
    #: interval varies quality with detections; None for per-text sources
    replicates: GroupReplicates | None = None

    @staticmethod
    def point(baseline: Sequence[float], sample: tuple[list[float], list[bool]]) -> tuple[float, float]:
        """(quality retention, detection rate) of one attack's texts."""
        quality, detected = sample
        return (quality_retention(float(np.mean(quality)), float(np.mean(baseline))),
                float(np.mean(detected)))

    def points(self) -> dict[str, tuple[float, float]]:
        """The attacks R is computed from, as points of MarkMyWords Fig. 3."""
        return {a: self.point(self.baseline, s) for a, s in self.attacks.items()}

    def excluded_points(self) -> dict[str, tuple[float, float]]:
        return {a: self.point(self.baseline, s) for a, s in self.excluded.items()}

    def saturated(self) -> bool:
        """True when R is 1 because no attack lies below the diagonal (every attack's detection
        rate at least its quality retention): the suite removed too little to measure
        resistance, which says the attacks were weak, not that the scheme resists tampering."""
        return all(d >= q for q, d in self.points().values())


def tamper_inputs(groups: Mapping[Key, Sequence[Row]], model: str, watermark: str,
                  source: str) -> TamperInputs | None:
    """The texts behind one tamper-resistance record, or None when it cannot be computed: no
    unattacked texts with quality, a mean baseline quality that is not positive, no attack
    with quality, or detections graded at several thresholds."""
    base = _unattacked_key(groups, model, watermark)
    if base is None:
        return None
    baseline = _quality(groups[base], source)
    keys = [k for k in sorted(groups) if k[0] == model and k[1] == watermark and not is_none(k[2])]
    threshold = _threshold(r for k in [base, *keys] for r in groups[k])
    z_threshold = _z_threshold(r for k in [base, *keys] for r in groups[k])
    if not baseline or not float(np.mean(baseline)) > 0.0 or threshold is None:
        return None
    out = TamperInputs(baseline=baseline, threshold=threshold)
    for key in keys:
        pairs = [(q[source], _detected(e, threshold, z_threshold)) for r in groups[key]
                 if (e := _evidence(r)) is not None and source in (q := quality_by_source(r))]
        if not pairs:
            continue  # an attack without quality answers cannot be placed
        sample = ([q for q, _ in pairs], [d for _, d in pairs])
        (out.excluded if excluded_from_tamper(key[2]) else out.attacks)[key[2]] = sample
    if not out.attacks:
        return None
    scores = {k[2]: _group_answers(groups[k], source) for k in [base, *keys] if k[2] in out.attacks or k == base}
    if all(len(a) == 1 and a[0].get("replicates") for a in scores.values()):
        out.replicates = (_replicates(scores[base[2]][0]).tolist(),
                          {name: _replicates(a[0]).tolist() for name, a in scores.items() if name != base[2]})
    return out


@SELECTION_AGGREGATES.register("tamper_resistance")
def _tamper_resistance(rows: Sequence[Row]) -> list[MetricRecord]:
    """MarkMyWords IV-C's R per watermark over its attacks, and the best attack keeping 80%."""
    out = []
    for pack, groups in _detection_packs(rows).items():
        for model, wm in sorted({(k[0], k[1]) for k in groups if not is_none(k[1])}):
            base = _unattacked_key(groups, model, wm)
            for source in quality_sources(groups[base]) if base else []:
                inputs = tamper_inputs(groups, model, wm, source)
                if inputs is None:
                    continue
                salt = f"tamper_resistance:{source}"  # the seed salt of earlier releases: same bits
                est = tamper_resistance_ci(inputs.baseline, inputs.attacks, replicates=inputs.replicates,
                                           seed=_seed(pack, model, wm, ALL_ATTACKS, salt))
                n = len(inputs.baseline) + sum(len(q) for q, _ in inputs.attacks.values())
                params: dict[str, str | float] = {"quality": source, "saturated": inputs.saturated()}
                if inputs.replicates is not None:
                    params["interval"] = GROUP_INTERVAL
                if surface_sensitive(source, inputs.attacks):
                    params["caveat"] = SURFACE_CAVEAT
                out.append(record(pack, "tamper_resistance", est, n, model, wm, ALL_ATTACKS, params=params))
                best = best_attack(inputs.points())
                if best is not None:  # its point's detection rate, with the Wilson interval
                    detected = inputs.attacks[best.name][1]
                    est = stats.wilson_interval(sum(detected), len(detected))
                    params = {"quality": source}
                    if surface_sensitive(source, [best.name]):
                        params["caveat"] = SURFACE_CAVEAT
                    out.append(record(pack, "best_attack", est, len(detected), model, wm, best.name, params=params))
    return out


#: how the report looks a record up: (pack, metric, model, watermark, attack, params key)
RecordKey = tuple[str, str, str, str, str, tuple[tuple[str, "str | float"], ...]]


def record_index(records: Iterable[MetricRecord]) -> dict[RecordKey, MetricRecord]:
    """(pack, metric, model, watermark, attack, params key) -> record, the params key being
    :func:`~evalrun.metrics.aggregates.params_key` of the record's params: how the report
    looks numbers up."""
    return {(r.pack, r.metric, r.model, r.watermark, r.attack, r.params_key): r for r in records}
