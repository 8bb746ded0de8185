"""MAUVE as a quality source: each (model, watermark, attack) group's outputs against the
unwatermarked outputs of the same prompts (MarkMyWords section IV-A, Fig. 4).

As in MarkMyWords (``metrics/MAUVE.py``), one score stands for a whole group: the group's texts
(Q) against the unwatermarked, unattacked output of the same case and repetition (P), embedded
by the judge model (``--judge mauve:<embedder>``: ``embedded``, ``hf:<path>``, or any provider
with ``embed``), scored by :func:`evalrun.judges.mauve_score.mauve_with_interval`. Every result of the
group carries that score as its quality; the unwatermarked, unattacked group is the reference and
scores 1, as MarkMyWords gives its baseline. The answer is computed, not asked, and stored as JSON
with its pair count, bucket count, bootstrap interval and replicates, so a report re-reads it and
never recomputes. MarkMyWords embeds with GPT-2 large (last token); the default here is the
embedded model's mean-pooled hidden states, named in every answer.

The reference's answer also holds the *noise floor*: MAUVE between two disjoint halves of the
unwatermarked outputs (a split of the prompts drawn from the texts), with its interval. It is
what two samples of one distribution score at this size, the bar a watermark's MAUVE is read
against: MAUVE grows with the sample, so at half the texts the floor is, if anything, low.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Mapping, Sequence

import numpy as np

from evalrun._util.errors import EvalrunError
from evalrun._util.hashing import stable_int
from evalrun._util.specs import is_none
from evalrun.judges import UNPARSED, Judge, Subject
from evalrun.judges.mauve_score import mauve_with_interval
from evalrun.model.generation import Prompt, Provider

#: the quality source MAUVE answers give (not a proxy: MarkMyWords' second quality measure)
SOURCE = "mauve"


def _is_reference(subject: Subject) -> bool:
    return is_none(subject.watermark) and is_none(subject.attack)


class Mauve(Judge):
    method = "mauve"
    description = "MarkMyWords' second quality measure: MAUVE of a group's outputs against unwatermarked ones"
    local = True
    quality_source = SOURCE

    def groups(self, subjects: Sequence[Subject]) -> list[tuple[Subject, ...]]:
        """One question per (pack, model, watermark, attack): its results, then their
        unwatermarked, unattacked partners in the same order (results without one are left
        out); the reference group alone."""
        base = {(s.pack, s.model, s.case_id, s.repetition): s for s in subjects if _is_reference(s)}
        by_group: dict[tuple[str, str, str, str], list[Subject]] = defaultdict(list)
        for s in subjects:
            by_group[(s.pack, s.model, s.watermark, s.attack)].append(s)
        out = []
        for key in sorted(by_group):
            measured = sorted(by_group[key], key=lambda s: (s.case_id, s.repetition))
            if _is_reference(measured[0]):
                out.append(tuple(measured))
                continue
            paired = [(s, base[(s.pack, s.model, s.case_id, s.repetition)]) for s in measured
                      if (s.pack, s.model, s.case_id, s.repetition) in base]
            if paired:
                out.append(tuple(s for s, _ in paired) + tuple(b for _, b in paired))
        return out

    def prompt(self, group: Sequence[Subject]) -> Prompt:
        first = group[0]
        if _is_reference(first):
            return Prompt(system=None, user=(f"MAUVE reference and noise floor: {first.pack} / {first.model}, "
                                             f"{len(group)} outputs"))
        return Prompt(system=None, user=(f"MAUVE of {first.pack} / {first.model} / {first.watermark} / {first.attack} "
                                         f"against its unwatermarked outputs, {len(group) // 2} pairs"))

    def answer_locally(self, provider: Provider, scorer: str, groups: Sequence[Sequence[Subject]]) -> list[str]:
        """Raw answers (JSON), the texts embedded by ``provider`` in one call."""
        embed = getattr(provider, "embed", None)
        if embed is None:
            raise EvalrunError(f"--judge mauve:{scorer}: this provider cannot embed texts (use embedded, hf:<path> "
                               "or openai:<name>)")
        texts = sorted({s.text for g in groups for s in g})
        vectors = dict(zip(texts, np.asarray(embed(texts), dtype=np.float64))) if texts else {}
        answers = []
        for group in groups:
            first = group[0]
            about = {"watermark": first.watermark, "attack": first.attack}
            if _is_reference(first):
                answer: dict[str, Any] = {"mauve": 1.0, "reference": True, "about": about, "embedder": scorer,
                                          "q_count": len(group)}
                floor = noise_floor([vectors[s.text] for s in group], [s.text for s in group])
                if floor is not None:
                    answer["noise_floor"] = floor
                answers.append(json.dumps(answer, sort_keys=True))
                continue
            n = len(group) // 2
            q = np.stack([vectors[s.text] for s in group[:n]])
            p = np.stack([vectors[s.text] for s in group[n:]])
            # the bootstrap's seed comes from the texts (never the keys, which hold the cache secret)
            score = mauve_with_interval(p, q, bootstrap_seed=stable_int("mauve", *(s.text for s in group), bits=63))
            answers.append(json.dumps({
                "mauve": score.score, "low": score.low, "high": score.high, "p_count": score.p_count,
                "q_count": score.q_count, "buckets": score.buckets, "replicates": list(score.replicates),
                "about": about, "embedder": scorer}, sort_keys=True))
        return answers

    def parse(self, raw: str) -> Mapping[str, Any]:
        try:
            data = json.loads(raw)
            value = data["mauve"]
            about = data["about"]
        except (ValueError, KeyError, TypeError):
            return {"label": UNPARSED, "quality": None}
        if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0 or not isinstance(about, dict):
            return {"label": UNPARSED, "quality": None}
        out: dict[str, Any] = {"label": "SCORED", "quality": float(value), "source": SOURCE, "about": about,
                               "scorer": data.get("embedder"), "pairs": data.get("q_count"),
                               "reference": bool(data.get("reference", False))}
        if not out["reference"]:
            out.update(interval=[data.get("low"), data.get("high")], buckets=data.get("buckets"),
                       replicates=data.get("replicates") or [])
        elif isinstance(data.get("noise_floor"), dict):
            out["noise_floor"] = data["noise_floor"]
        return out


#: the fewest unwatermarked outputs that get a noise floor (two halves of 10)
FLOOR_MIN_TEXTS = 20


def noise_floor(vectors: Sequence[np.ndarray], texts: Sequence[str]) -> dict[str, Any] | None:
    """MAUVE between two disjoint halves of the unwatermarked outputs (module docstring), with
    its interval; None below :data:`FLOOR_MIN_TEXTS` outputs. The split is a permutation seeded
    by the texts (never the keys), so a rerun splits the same way."""
    if len(texts) < FLOOR_MIN_TEXTS:
        return None
    seed = stable_int("mauve-noise-floor", *texts, bits=63)
    order = np.random.default_rng(seed).permutation(len(texts))
    half = len(texts) // 2
    data = np.stack(vectors)
    score = mauve_with_interval(data[order[:half]], data[order[half:2 * half]], bootstrap_seed=seed)
    return {"mauve": score.score, "low": score.low, "high": score.high, "texts_per_half": half,
            "buckets": score.buckets, "replicates": list(score.replicates)}


MAUVE = Mauve()
