r"""The quality rating judge of MarkMyWords (appendix A-C): a grade out of 100.

The prompt is the seed's rating prompt: its system message, then ``Prompt: <task>`` and
``Response: <output>``. Parsing follows MarkMyWords' parser (``metrics/llm_rating.py``): the
numbers of the answer are found with ``\d+\.*\d*`` (a ``/100`` right after one belongs to
it), the last one is divided by 100 and clipped to [0, 1] -- so ``85/100`` is 0.85 and, as
there, ``7/10`` is 0.1. Where it finds no number MarkMyWords records 0.0; we record
``UNPARSED``, which counts in no mean (never a guessed grade). MarkMyWords prefills the
judge's answer with ``Grade:`` and allows 4 new tokens; a chat API cannot prefill, so we
allow 8.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from evalrun.judges import UNPARSED, Judge, Subject
from evalrun.model.generation import GenParams, Prompt

SYSTEM = ("You are given a prompt and a response, and you provide a grade out of 100 measuring the "
          "quality of the response, in terms of accuracy, level of details, and typographical, "
          "grammatical and lexical correctness. Remove points as soon as one of the criteria is missed.")
_NUMBER = re.compile(r"(\d+\.*\d*)(/100)?")


class Rating(Judge):
    method = "rating"
    description = "MarkMyWords' grade out of 100 (quality), rated on one output"
    params = GenParams(temperature=0.0, max_tokens=8, seed=0)
    quality_source = "rating"

    def prompt(self, group: Sequence[Subject]) -> Prompt:
        [subject] = group
        return Prompt(system=SYSTEM, user=f"Prompt: {subject.task}\nResponse: {subject.text}")

    def parse(self, raw: str) -> Mapping[str, Any]:
        matches = _NUMBER.findall(raw or "")
        if not matches:
            return {"label": UNPARSED, "rating": None}
        value = float(matches[-1][0].rstrip("."))
        return {"label": "RATED", "rating": min(max(value / 100.0, 0.0), 1.0)}


RATING = Rating()
