"""An offline quality proxy: the perplexity of an output under a local scorer model.

MarkMyWords measures quality with an LLM judge's rating (:mod:`evalrun.judges.rating`); where no
judge model is at hand (offline, on a CPU) this proxy stands in, and everything that shows it
says it is a proxy and names the scorer. The answer is computed, not asked: the scorer model
(``hf:``/``embedded``) reads the task prompt and scores the output's tokens after it; the stored
raw answer is the JSON ``{"perplexity", "tokens", "scorer"}`` and its parse gives
``quality = 1 / perplexity`` in (0, 1], higher is better, so that quality retention is a ratio
of like to like. A perplexity measures fluency under the scorer, not helpfulness: a proxy.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.judges import UNPARSED, Judge, Subject
from evalrun.model.generation import Prompt, Provider


class PerplexityProxy(Judge):
    method = "perplexity"
    description = "offline quality proxy: 1 / perplexity of the output under a local scorer model"
    local = True

    def prompt(self, group: Sequence[Subject]) -> Prompt:
        [subject] = group
        return Prompt(system=None, user=subject.task)

    def answer_locally(self, provider: Provider, scorer: str, groups: Sequence[Sequence[Subject]]) -> list[str]:
        """Raw answers (JSON) for ``groups``, scored by ``provider`` (a local model)."""
        score = getattr(provider, "perplexities", None)
        if score is None:
            raise EvalrunError(f"--judge perplexity:{scorer}: the perplexity proxy needs a local model "
                               "(hf:<path> or embedded) to score texts")
        pairs = [(self.prompt(g), g[0].text) for g in groups]
        answers = []
        for nll, tokens in score(pairs):
            ppl = math.exp(nll) if tokens and math.isfinite(nll) else None
            answers.append(json.dumps({"perplexity": ppl, "tokens": tokens, "scorer": scorer}, sort_keys=True))
        return answers

    def parse(self, raw: str) -> Mapping[str, Any]:
        try:
            data = json.loads(raw)
            ppl = data["perplexity"]
        except (ValueError, KeyError, TypeError):
            return {"label": UNPARSED, "quality": None}
        if not isinstance(ppl, (int, float)) or not ppl > 0:
            return {"label": UNPARSED, "quality": None, "tokens": data.get("tokens")}
        return {"label": "SCORED", "quality": 1.0 / ppl, "perplexity": float(ppl), "tokens": data.get("tokens"),
                "scorer": data.get("scorer")}


PERPLEXITY = PerplexityProxy()
