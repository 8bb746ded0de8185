"""The calls of the transform stage, as executor tasks (:data:`evalrun.run.executors.Task`).

They take plain inputs (:class:`AttackInput`) and return plain outcomes
(:class:`AttackOutcome`), so an executor may run them in another process; the transform stage
turns outcomes into stored rows. Each outcome is a function of its input: a text attack is
seeded by :func:`attack_seed` (the generation and the attack), a model attack's calls are
greedy with seed 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from evalrun.attacks import Attack, ModelAttack, parse_attack
from evalrun.attacks.model import clean_answer
from evalrun.model.generation import Generation, GenerationRequest, GenParams, Prompt, Provider
from evalrun.run.executors import Emit
from evalrun.run.plan import attack_seed


@dataclass(frozen=True, eq=False)
class AttackInput:
    """One stored output to attack: its transform key, the generation identity that seeds the
    attack (without the watermark key: :attr:`evalrun.run.plan.Item.seed_key`), text, and the
    pack and case its calls are labelled with."""

    key: str
    gen_key: str
    text: str
    pack: str
    case_id: str


@dataclass
class AttackOutcome:
    """The attacked text, or the error; the text attack's seed, the model attack's last call
    and its raw answers."""

    text: str | None
    error: str | None = None
    seed: int | None = None
    gen: Generation | None = None
    answers: list[str] | None = field(default=None)

    def extra(self) -> dict[str, Any] | None:
        return {"answers": self.answers} if self.answers is not None else None


@lru_cache(maxsize=None)
def _attack(spec: str) -> Attack | ModelAttack | None:
    """The attack of ``spec``, built once per process."""
    return parse_attack(spec)


def text_attack_task(spec: str, provider: Provider, inputs: list[AttackInput], emit: Emit) -> None:
    """A text attack on each input, seeded per generation; one bad input fails alone."""
    attack = _attack(spec)
    assert isinstance(attack, Attack), spec
    for item in inputs:
        seed = attack_seed(item.gen_key, spec)
        try:
            outcome = AttackOutcome(attack.apply(item.text, seed), seed=seed)
        except Exception as exc:  # one bad input must not end the run
            outcome = AttackOutcome(None, f"{type(exc).__name__}: {exc}", seed=seed)
        emit(item, outcome)


def request_budget(text: str) -> int:
    """max_tokens of an attack call: room for a rewrite somewhat longer than the input."""
    return min(4096, 3 * len(text.split()) + 64)


def model_attack_task(spec: str, provider: Provider, inputs: list[AttackInput], emit: Emit) -> None:
    """A model attack's calls step by step over all inputs with the attack model's provider:
    each step rewrites the previous step's answer; an input whose call fails stops there."""
    attack = _attack(spec)
    assert isinstance(attack, ModelAttack), spec
    texts = {item.key: item.text for item in inputs}
    answers: dict[str, list[str]] = {item.key: [] for item in inputs}
    alive = list(inputs)
    steps = attack.prompts()
    for number, template in enumerate(steps):
        by_key = {f"{item.key}:{number}": item for item in alive}
        requests = [GenerationRequest(
            gen_key=rk, pack=item.pack, case={"id": item.case_id},
            prompt=Prompt(system=template.system, user=template.user.replace("{text}", texts[item.key])),
            params=GenParams(temperature=0.0, max_tokens=request_budget(texts[item.key]), seed=0),
            repetition=0) for rk, item in by_key.items()]
        failed: set[str] = set()

        def sink(request: GenerationRequest, gen: Generation, _by_key=by_key, _number=number,
                 _final=number == len(steps) - 1) -> None:  # noqa: B008 (binds this step's values)
            item = _by_key[request.gen_key]
            if gen.error or gen.text is None:
                failed.add(item.key)
                emit(item, AttackOutcome(None, f"{attack.name} call {_number + 1}: {gen.error or 'no text'}",
                                         gen=gen, answers=answers[item.key]))
                return
            answers[item.key].append(gen.text)
            texts[item.key] = clean_answer(gen.text)
            if _final:
                emit(item, AttackOutcome(texts[item.key], gen=gen, answers=answers[item.key]))

        provider.generate(requests, sink)
        alive = [item for item in alive if item.key not in failed]
