"""Singh & Zou's pairwise judges (section 2.1 and appendix A): ``pairwise`` and
``simple``.

**Pairs.** Every watermarked result is paired with the *baseline* result (``--baseline``,
default ``none``: the unwatermarked one) of the same pack, case, model, attack and repetition;
a result without its baseline partner is not judged. The judge sees the two texts as "LLM A"
and "LLM B" in an order chosen by a seeded coin per pair, :func:`coin`, whose seed is the two
results' item keys -- so the order is deterministic, differs from pair to pair, and is
recoverable from the store: ``judged.position`` says where each result stood, and the coin
can be recomputed from the keys. ``--both-orders`` asks every pair in both orders (two stored
answers), which measures position bias (:func:`evalrun.metrics.preference.position_consistency`).

**Prompts** are the seed's, word for word (appendix A, Tables 2 and 3): the detailed prompt
(7 criteria on a 1-5 Likert scale, verdict ``[[A]]: [list of scores]``, ``[[B]]: ...`` or
``[[C]]`` for a tie) for ``pairwise``, the simple one (verdict only) for ``simple``, followed by
the seed's ``[Prompt]``, ``[LLM A's Answer]`` and ``[LLM B's Answer]`` sections, all in one user
message. The task shown under ``[Prompt]`` is the user prompt the results were generated for.

**Parsing** (pure, redone whenever an answer is read; :func:`parse_verdict`,
:func:`parse_criteria`):

* the verdict is a token ``[[A]]``, ``[[B]]`` or ``[[C]]`` (case-insensitive, blanks allowed
  inside the brackets). The seed asks for it "at the very end"; we take the answer's verdict
  tokens and accept the answer when they all name the same letter (``[[B]]`` repeated is
  fine). Two different letters (an answer that quotes the format, or changes its mind) are
  *ambiguous*; no token at all is *missing*. Both are the label ``UNPARSED`` with the reason
  in ``problem`` -- never a guessed verdict -- and ``evalrun judge --retry-unparsed`` asks again.
* labels: ``A`` or ``B`` (that position won), ``C`` (a tie), ``UNPARSED``.
* per-criterion scores (``pairwise`` only) are read from the body in the seed's layout: a
  criterion heading ``<n>. <name>:`` (n = 1..7, the prompt's order; markdown bold allowed)
  followed by lines ``- LLM A: 3`` / ``- LLM B: 5`` (``Assistant``/``Response`` also accepted,
  ``3/5`` too). A score outside 1..5, a missing line or a repeated one leaves that criterion
  ``None`` for that side; scores never change the verdict. The list after the verdict
  (``[[B]]: 3, 3, 5, 5, 4, 3, 5``) is kept as ``verdict_scores`` but not assigned to a side:
  the seed's own example list matches neither answer's body scores.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from evalrun._util.errors import SpecError
from evalrun._util.hashing import stable_int
from evalrun._util.specs import is_none
from evalrun.judges import UNPARSED, Judge, Subject
from evalrun.model.generation import GenParams, Prompt
from evalrun.watermark import parse_watermark

#: the seed's seven criteria, in the prompt's order (short names used in parses and metrics)
CRITERIA = ("relevance", "depth", "clarity", "coherence", "originality", "examples", "accuracy")
CRITERION_TITLES = ("Relevance to the prompt", "Depth of detail", "Clarity of writing",
                    "Coherence and logical flow", "Originality and insight", "Use of specific examples",
                    "Accuracy of information")

#: Singh & Zou, appendix A, Table 2 (the detailed judge prompt)
PAIRWISE_INSTRUCTIONS = (
    "Please act as an impartial judge and evaluate the quality of the text completions provided by two "
    "large language models to the prompt displayed below. Assess each response according to the criteria "
    "outlined, using a 1-5 Likert scale. After scoring each criterion, provide a summary for each response, "
    "including examples that influenced your scoring. Additionally, ensure that the order in which the "
    "responses are presented does not affect your decision.\n\n"
    "Criteria:\n" + "\n".join(f"{i}. {t}" for i, t in enumerate(CRITERION_TITLES, 1)) + "\n\n"
    "Start with a brief statement about which response you think is superior. Then, for each response and "
    "criterion, provide a score, followed by a brief justification for that score. At the very end of your "
    "response, declare your verdict by choosing one of the choices below, strictly following the given "
    "format:\n\n"
    '"[[A]]: [list of scores]" if assistant A is better, "[[B]]: [list of scores]" if assistant B is better, '
    'or "[[C]]" for a tie.'
)

#: Singh & Zou, appendix A, Table 3 (the simple judge prompt)
SIMPLE_INSTRUCTIONS = (
    "Please act as an impartial judge and evaluate the quality of the text completions provided by two "
    "large language models to the prompt displayed below. You should choose the LLM that completes the "
    "prompt better. Begin your evaluation by comparing the two responses and provide a short explanation. "
    "Avoid any position biases and ensure that the order in which the responses were presented does not "
    "influence your decision. Do not allow the length of the responses to influence your evaluation. Be as "
    "objective as possible. After providing your explanation, output your final verdict by strictly "
    'following this format: "[[A]]" if assistant A is better, "[[B]]" if assistant B is better, and "[[C]]" '
    "for a tie."
)

TIE = "C"
VERDICTS = ("A", "B", TIE)
_VERDICT = re.compile(r"\[\[\s*([ABCabc])\s*\]\]")
_AFTER_VERDICT = re.compile(r"\[\[\s*[ABCabc]\s*\]\]\s*:?\s*\[?\s*((?:\d+(?:\.\d+)?\s*[,;]?\s*){1,14})\]?")
_HEADING = re.compile(r"^\s*(?:#+\s*)?(?:\*\*)?\s*([1-7])\s*[.)]\s*(?:\*\*)?\s*([A-Za-z][^\n:]*?)\s*(?:\*\*)?\s*:?"
                      r"\s*(?:\*\*)?\s*$")
_SIDE_SCORE = re.compile(r"^\s*(?:[-*\u2022]\s*)?(?:\*\*)?\s*(?:LLM|Assistant|Response|Model)\s+([AB])\s*(?:\*\*)?"
                         r"\s*(?:'s\s+score|\u2019s\s+score|score)?\s*[:=]\s*(?:\*\*)?\s*(\d+(?:\.\d+)?)"
                         r"(?:\s*/\s*5)?", re.IGNORECASE)


def coin(watermarked_key: str, baseline_key: str) -> int:
    """The seeded coin of one pair: 0 shows the watermarked result first (as LLM A), 1 the
    baseline first. Its seed is the pair's item keys, so it is the same on every run."""
    return stable_int("pairwise-order", watermarked_key, baseline_key) & 1


def parse_verdict(raw: str | None) -> tuple[str | None, str | None]:
    """``(verdict, problem)``: the letter ``A``/``B``/``C`` and None, or None and why not
    (``missing`` / ``ambiguous: ...``). Pure."""
    found = [m.upper() for m in _VERDICT.findall(raw or "")]
    if not found:
        return None, "missing: no [[A]], [[B]] or [[C]] in the answer"
    letters = sorted(set(found))
    if len(letters) > 1:
        return None, f"ambiguous: the answer names {', '.join(f'[[{x}]]' for x in letters)}"
    return found[-1], None


def parse_criteria(raw: str | None) -> dict[str, dict[str, float | None]]:
    """Per-criterion Likert scores of each position, ``{"A": {criterion: score|None}, "B":
    ...}``, read from the seed's layout (see the module docstring). Pure."""
    scores: dict[str, dict[str, list[float]]] = {"A": {c: [] for c in CRITERIA}, "B": {c: [] for c in CRITERIA}}
    current: str | None = None
    for line in (raw or "").splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = CRITERIA[int(heading.group(1)) - 1]
            continue
        if current is None:
            continue
        side = _SIDE_SCORE.match(line)
        if side:
            scores[side.group(1).upper()][current].append(float(side.group(2)))
    out: dict[str, dict[str, float | None]] = {}
    for who, table in scores.items():
        out[who] = {c: (v[0] if len(v) == 1 and 1.0 <= v[0] <= 5.0 else None) for c, v in table.items()}
    return out


def parse_verdict_scores(raw: str | None) -> list[float]:
    """The numbers listed after the verdict token (``[[B]]: 3, 3, 5, ...``), as given."""
    match = None
    for match in _AFTER_VERDICT.finditer(raw or ""):  # noqa: B007 (the last match is wanted)
        pass
    if match is None:
        return []
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?", match.group(1))]


def pair_subjects(subjects: Sequence[Subject], baseline: str = "none") -> list[tuple[Subject, Subject]]:
    """``(watermarked, baseline)`` pairs: each result whose watermark is not ``baseline`` with
    the ``baseline`` result of the same pack, case, model, attack and repetition (results
    without a partner are left out), in the subjects' order."""
    base = {(s.pack, s.case_id, s.model, s.attack, s.repetition): s for s in subjects if s.watermark == baseline}
    pairs = []
    for s in subjects:
        if s.watermark == baseline:
            continue
        partner = base.get((s.pack, s.case_id, s.model, s.attack, s.repetition))
        if partner is not None:
            pairs.append((s, partner))
    return pairs


def _render(instructions: str, group: Sequence[Subject]) -> Prompt:
    a, b = group
    return Prompt(system=None, user=(f"{instructions}\n\n[Prompt]\n{a.task}\n\n[LLM A's Answer]\n{a.text}\n\n"
                                     f"[LLM B's Answer]\n{b.text}"))


@dataclass(frozen=True)
class _PairOptions:
    baseline: str = "none"
    both_orders: bool = False


class PairwiseJudge(Judge):
    """Singh & Zou's detailed pairwise judge (7 criteria, verdict ``[[A]]``/``[[B]]``/``[[C]]``)."""

    method = "pairwise"
    description = "Singh & Zou's pairwise judge: 7 criteria on a 1-5 scale and a verdict, order by a seeded coin"
    # seven criteria, two answers, a justification each: room for the whole answer
    params = GenParams(temperature=0.0, max_tokens=1536, seed=0)
    instructions = PAIRWISE_INSTRUCTIONS
    criteria = True

    def __init__(self, options: _PairOptions = _PairOptions()) -> None:
        self.options = options

    def configured(self, **options: Any) -> "PairwiseJudge":
        unknown = sorted(k for k, v in options.items() if v is not None and k not in ("baseline", "both_orders"))
        if unknown:
            raise SpecError(f"--method {self.method}: unknown option(s) {', '.join(unknown)}")
        baseline = options.get("baseline") or "none"
        if not is_none(baseline):

            parse_watermark(baseline)  # a bad spec fails here, before anything is asked
        else:
            baseline = "none"
        return type(self)(_PairOptions(baseline=baseline, both_orders=bool(options.get("both_orders"))))

    def groups(self, subjects: Sequence[Subject]) -> list[tuple[Subject, ...]]:
        out: list[tuple[Subject, ...]] = []
        for marked, base in pair_subjects(subjects, self.options.baseline):
            first = (marked, base) if coin(marked.item_key, base.item_key) == 0 else (base, marked)
            out.append(first)
            if self.options.both_orders:
                out.append(first[::-1])
        return out

    def annotate(self, group: Sequence[Subject]) -> dict[str, Any]:
        """Stored with the answer: which subject is the baseline (the order is in ``judged``)."""
        return {"baseline": self.options.baseline,
                "baseline_position": next((i for i, s in enumerate(group) if s.watermark == self.options.baseline),
                                          None)}

    def prompt(self, group: Sequence[Subject]) -> Prompt:
        if len(group) != 2:
            raise ValueError(f"{self.method} judges pairs, got {len(group)} subject(s)")
        return _render(self.instructions, group)

    def parse(self, raw: str) -> Mapping[str, Any]:
        verdict, problem = parse_verdict(raw)
        out: dict[str, Any] = {"label": verdict if verdict else UNPARSED, "verdict": verdict}
        if problem:
            out["problem"] = problem
        if self.criteria:
            out["scores"] = parse_criteria(raw)
            out["verdict_scores"] = parse_verdict_scores(raw)
        return out


class SimpleJudge(PairwiseJudge):
    """Singh & Zou's simple pairwise prompt: a short explanation and the verdict only."""

    method = "simple"
    description = "Singh & Zou's simple pairwise judge: a verdict only, order by a seeded coin"
    params = GenParams(temperature=0.0, max_tokens=512, seed=0)
    instructions = SIMPLE_INSTRUCTIONS
    criteria = False


PAIRWISE = PairwiseJudge()
SIMPLE = SimpleJudge()
