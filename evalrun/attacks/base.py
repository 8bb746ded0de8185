"""What an attack is: a registered definition plus the spec that parametrises it.

A *text attack* is a pure function ``(text, spec, rng) -> text``: deterministic given its
spec and the seed of ``rng``, so the transform stage can store its output and a user can
reproduce it with ``evalrun attack``. Definitions live in :data:`ATTACKS`; third-party packages
add theirs through the ``evalrun.attacks`` entry-point group (the object an entry point names
is an :class:`AttackDef`, typically made by :func:`text_attack`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Mapping

from evalrun._util.registry import Registry
from evalrun._util.specs import Spec
from evalrun.model.generation import Prompt

TextFn = Callable[[str, Spec, random.Random], str]


@dataclass(frozen=True)
class AttackDef:
    """A registered attack: its spec keys and how it changes a text."""

    name: str
    #: spec keys it accepts (``swap:p=0.1`` -> ``{"p"}``)
    keys: frozenset[str]
    fn: TextFn
    #: whether the output depends on the seed (false for ``lowercase``)
    random: bool = True
    description: str = ""
    #: a prompt attack also rewrites the prompt before generation (the ``emoji`` attack asks
    #: for emojis that ``fn`` then removes): its items get a generation of their own
    prompt: Callable[[Prompt], Prompt] | None = None
    #: it edits characters inside words (typos, case): a quality source that reads surface form
    #: (an embedder's states, a perplexity) scores such text far lower than a reader would
    characters: bool = False


#: text attacks, and the model attacks :mod:`evalrun.attacks.model` registers (readers tell
#: them apart with isinstance)
@dataclass(frozen=True)
class ModelAttackDef:
    """A registered model attack: the leading arguments it takes before the model spec and
    the prompts of its calls, in order (each call rewrites the previous call's answer)."""

    name: str
    leading: tuple[str, ...]
    steps: Callable[[Mapping[str, str]], tuple[Prompt, ...]]
    description: str = ""
    example: str = ""


ATTACKS: Registry[AttackDef | ModelAttackDef] = Registry("attack", "evalrun.attacks", option="--attack")


def text_attack(name: str, *, keys: tuple[str, ...] | frozenset[str] = (), random: bool = True,
                registry: Registry[AttackDef] | Registry[AttackDef | ModelAttackDef] | None = ATTACKS,
                prompt: Callable[[Prompt], Prompt] | None = None,
                characters: bool = False) -> Callable[[TextFn], AttackDef]:
    """Register ``fn(text, spec, rng) -> text`` as the attack ``name`` (its docstring's first
    line becomes the description). ``registry=None`` only builds the definition, for a
    third-party entry point."""
    def wrap(fn: TextFn) -> AttackDef:
        doc = (fn.__doc__ or "").strip().splitlines()
        definition = AttackDef(name=name, keys=frozenset(keys), fn=fn, random=random,
                               description=doc[0] if doc else "", prompt=prompt, characters=characters)
        if registry is not None:
            registry.register(name, definition)
        return definition

    return wrap


@dataclass(frozen=True)
class Attack:
    """An attack definition bound to one spec (``swap:p=0.1``)."""

    spec: Spec
    definition: AttackDef

    @property
    def name(self) -> str:
        return self.spec.canonical()

    def apply(self, text: str, seed: int) -> str:
        return self.definition.fn(text, self.spec, random.Random(seed))


def edits_characters(attack: str) -> bool:
    """Whether the attack a stored spec names (``typo:p=0.05``) edits characters inside words
    (:attr:`AttackDef.characters`); False for ``none``, model attacks and unknown names."""
    name = attack.split(":", 1)[0].strip()
    if not name or name.lower() == "none" or name not in ATTACKS:
        return False
    definition = ATTACKS.get(name)
    return isinstance(definition, AttackDef) and definition.characters
