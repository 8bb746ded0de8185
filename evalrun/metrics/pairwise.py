"""Reading pairwise judge answers back from the store, and their aggregates for metrics.json.

A stored answer of a pairwise method (``pairwise``, ``simple``, or any judge built on
:class:`~evalrun.judges.pairwise.PairwiseJudge`) is keyed to its two results in the order they
were shown (``judged.position``; ``subjects_json`` holds the same order). The baseline is the
position named in the answer's ``extra_json`` (``baseline_position``), else the result whose
watermark is ``none``. Parsing happens here, now (a fixed parser applies to old answers).

Records (:func:`preference_records`), one group per pack, model, watermarked spec and attack,
each with params ``{"method": <method>, "judge": <judge model>}`` (plus what the list says):

* ``prefer_unwatermarked``, ``prefer_watermarked``, ``prefer_tie`` -- shares of pairs
  (:func:`evalrun.metrics.preference.preference_shares`); with a baseline other than ``none``
  the first is ``prefer_baseline`` and the record's ``watermark`` field reads
  ``<spec> vs <baseline>``;
* ``unparsed_rate`` -- answers that did not parse (asked again by ``--retry-unparsed``);
* ``first_position_rate`` -- decisive answers that picked the text shown first;
* ``position_consistency`` -- pairs asked in both orders whose answers agree;
* ``judge_score``, params also ``criterion`` and ``side`` (``unwatermarked``/``baseline`` or
  ``watermarked``) -- mean 1-5 score per criterion and side, ``pairwise`` only;
* ``judge_agreement``, params ``method``/``judge`` of the first judge and
  ``other_method``/``other_judge`` of the second -- for two judges (or two prompts) over the
  same pairs, the share decided alike; each pair's outcome is its coin-order answer.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Iterable, Mapping, Sequence

from evalrun._util.errors import EvalrunError
from evalrun._util.hashing import stable_int
from evalrun.judges import UNPARSED, get_judge
from evalrun.judges.pairwise import CRITERIA, PairwiseJudge, coin
from evalrun.metrics import preference
from evalrun.metrics.aggregates import MetricRecord, record
from evalrun.metrics.stats import wilson_interval
from evalrun.store.database import Store


@dataclass(frozen=True)
class PairAnswer:
    """One stored answer about one pair, parsed now."""

    judge: str
    method: str
    pack: str
    model: str
    watermark: str
    baseline: str
    attack: str
    case_id: str
    repetition: int
    watermarked_key: str
    baseline_key: str
    #: where the watermarked text was shown: 0 (LLM A) or 1 (LLM B)
    watermarked_position: int
    #: True for the order the seeded coin picked (False: the other order, --both-orders)
    coin_order: bool
    verdict: str | None
    error: str | None
    parsed: Mapping[str, Any] = field(default_factory=dict)

    @property
    def pair(self) -> tuple[str, str]:
        return (self.watermarked_key, self.baseline_key)

    @property
    def outcome(self) -> str | None:
        """Which text the answer preferred, whatever the order (None: error or unparsed)."""
        if self.error is not None or self.verdict is None:
            return None
        if self.verdict == "C":
            return preference.TIE
        picked = 0 if self.verdict == "A" else 1
        return preference.WATERMARKED if picked == self.watermarked_position else preference.BASELINE

    @property
    def side_scores(self) -> dict[str, dict[str, float | None]]:
        """Per-criterion scores by side (``watermarked``/``baseline``), from the parse."""
        scores = self.parsed.get("scores") or {}
        marked, base = ("A", "B") if self.watermarked_position == 0 else ("B", "A")
        return {preference.WATERMARKED: dict(scores.get(marked) or {}),
                preference.BASELINE: dict(scores.get(base) or {})}


def pairwise_methods(methods: Iterable[str]) -> list[str]:
    """The methods among ``methods`` whose judge is a pairwise one (known to this install)."""
    out = []
    for m in sorted(set(methods)):
        try:
            if isinstance(get_judge(m), PairwiseJudge):
                out.append(m)
        except EvalrunError:
            continue
    return out


def pair_answers(store: Store, rows: Sequence[Mapping[str, Any]]) -> list[PairAnswer]:
    """Every stored pairwise answer about two results of ``rows`` (a selection), parsed."""
    if not store.has_table("judgements"):
        return []
    methods = pairwise_methods(m for (m,) in store.conn.execute("SELECT DISTINCT method FROM judgements"))
    if not methods:
        return []
    by_key = {r["item_key"]: r for r in rows}
    marks = ",".join("?" * len(methods))
    out = []
    for j in store.conn.execute(
            f"SELECT judgement_key, judge, method, subjects_json, raw_answer, error, extra_json FROM judgements"
            f" WHERE method IN ({marks}) ORDER BY judge, method, judgement_key", methods):
        keys = json.loads(j["subjects_json"])
        if len(keys) != 2 or any(k not in by_key for k in keys):
            continue
        subjects = [by_key[k] for k in keys]
        extra = json.loads(j["extra_json"]) if j["extra_json"] else {}
        base_pos = extra.get("baseline_position")
        if base_pos not in (0, 1):
            nones = [i for i, s in enumerate(subjects) if s["watermark"] == "none"]
            if len(nones) != 1:
                continue
            base_pos = nones[0]
        marked, base = subjects[1 - base_pos], subjects[base_pos]
        parsed = dict(get_judge(j["method"]).parse(j["raw_answer"] or "")) if j["raw_answer"] is not None else {}
        verdict = parsed.get("verdict") if parsed.get("label") != UNPARSED else None
        first = coin(marked["item_key"], base["item_key"]) == 0  # the coin shows the watermarked text first
        out.append(PairAnswer(
            judge=j["judge"], method=j["method"], pack=marked["pack"], model=marked["model"],
            watermark=marked["watermark"], baseline=base["watermark"], attack=marked["attack"],
            case_id=marked["case_id"], repetition=marked["repetition"], watermarked_key=marked["item_key"],
            baseline_key=base["item_key"], watermarked_position=1 - base_pos, coin_order=(1 - base_pos == 0) == first,
            verdict=verdict, error=j["error"], parsed=parsed))
    return out


def _name(answer: PairAnswer) -> str:
    """``<method>:<judge>``: how judges are ordered (never parsed back: see :func:`_judge`)."""
    return f"{answer.method}:{answer.judge}"


def _judge(answer: PairAnswer) -> dict[str, str | float]:
    """The params naming an answer's judge: ``{"method": ..., "judge": ...}``."""
    return {"method": answer.method, "judge": answer.judge}


def _base_side(baseline: str) -> str:
    return "unwatermarked" if baseline == "none" else "baseline"


def _seed(*parts: Any) -> int:
    return stable_int("pairwise-metrics", *parts, bits=31)


def preference_records(answers: Sequence[PairAnswer]) -> list[MetricRecord]:
    """The records of the module docstring, in a stable order."""
    groups: dict[tuple[str, str, str, str, str], list[PairAnswer]] = defaultdict(list)
    for a in answers:
        groups[(a.pack, a.model, a.watermark, a.baseline, a.attack)].append(a)
    out: list[MetricRecord] = []
    for (pack, model, watermark, baseline, attack), members in sorted(groups.items()):
        shown = watermark if baseline == "none" else f"{watermark} vs {baseline}"
        base_side = _base_side(baseline)
        by_judge: dict[str, list[PairAnswer]] = defaultdict(list)
        for a in members:
            by_judge[_name(a)].append(a)
        coin_outcomes: dict[str, dict[tuple[str, str], str]] = {}
        judges: dict[str, dict[str, str | float]] = {}
        for name, answers_of in sorted(by_judge.items()):
            judges[name] = who = _judge(answers_of[0])
            seed = _seed(pack, model, watermark, baseline, attack, name)
            pairs: dict[tuple[str, str], list[PairAnswer]] = defaultdict(list)
            for a in answers_of:
                pairs[a.pair].append(a)
            outcomes = [[a.outcome for a in p if a.outcome is not None] for p in pairs.values()]
            outcomes = [o for o in outcomes if o]
            shares = preference.preference_shares(outcomes, seed=seed)
            for side, label in ((preference.BASELINE, base_side), (preference.WATERMARKED, "watermarked"),
                                (preference.TIE, "tie")):
                out.append(record(pack, f"prefer_{label}", shares[side], len(outcomes), model, shown, attack,
                                  params=who))
            unparsed = [a for a in answers_of if a.error is None and a.outcome is None]
            answered = [a for a in answers_of if a.error is None]
            out.append(record(pack, "unparsed_rate", wilson_interval(len(unparsed), len(answered)),
                              len(answered), model, shown, attack, params=who))
            decisive = [a for a in answers_of if a.verdict in ("A", "B")]
            out.append(record(pack, "first_position_rate",
                              preference.first_position_rate([a.verdict == "A" for a in decisive]), len(decisive),
                              model, shown, attack, params=who))
            both = []
            for p in pairs.values():
                coin_side = [a.outcome for a in p if a.coin_order and a.outcome is not None]
                other = [a.outcome for a in p if not a.coin_order and a.outcome is not None]
                if coin_side and other:
                    both.append((coin_side[0], other[0]))
            if both:
                out.append(record(pack, "position_consistency", preference.position_consistency(both),
                                  len(both), model, shown, attack, params=who))
            if any(a.parsed.get("scores") for a in answers_of):
                for criterion in _criteria():
                    for side, label in ((preference.BASELINE, base_side), (preference.WATERMARKED, "watermarked")):
                        values = [a.side_scores[side].get(criterion) for a in answers_of if a.outcome is not None]
                        est, n = preference.criterion_means(values, seed=_seed(seed, criterion, side))
                        out.append(record(pack, "judge_score", est, n, model, shown, attack,
                                          params={"criterion": criterion, "side": label, **who}))
            coin_outcomes[name] = {a.pair: a.outcome for a in answers_of if a.coin_order and a.outcome is not None}
        for first, second in combinations(sorted(coin_outcomes), 2):
            est, n = preference.agreement(coin_outcomes[first], coin_outcomes[second])
            if n:
                out.append(record(pack, "judge_agreement", est, n, model, shown, attack,
                                  params={**judges[first], "other_method": judges[second]["method"],
                                          "other_judge": judges[second]["judge"]}))
    return out


def _criteria() -> tuple[str, ...]:
    return CRITERIA
