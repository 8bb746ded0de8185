"""Attacks: perturbations of a stored output, applied before it is graded.

Public API: :func:`parse_attack` (spec text -> :class:`Attack`), :func:`canonical_attack`,
the registry :data:`ATTACKS`, the :func:`text_attack` decorator and :func:`load_suite`
(``--attack-suite``). Each attack is deterministic given its spec and a seed.

In-tree text attacks (MarkMyWords, Table II), one module per concept: :mod:`.swap` (``swap``),
:mod:`.synonym` (``synonym``), :mod:`.misspelling` (``misspelling``), :mod:`.typo`
(``typo``), :mod:`.contraction` (``contraction``, ``expansion``) and :mod:`.text`
(``lowercase``, and ``neighbour_swap``/``random_letters``, the attacks formerly named
``swap``/``typo``). Word-level attacks share the tokenisation of :mod:`.words`.
"""

from __future__ import annotations

from evalrun._util.errors import SpecError
from evalrun._util.specs import check_keys, is_none, parse_spec
from evalrun.attacks import contraction as _contraction  # noqa: F401  (each import registers its attacks)
from evalrun.attacks import emoji as _emoji  # noqa: F401
from evalrun.attacks import misspelling as _misspelling  # noqa: F401
from evalrun.attacks import model as _model  # noqa: F401
from evalrun.attacks import swap as _swap  # noqa: F401
from evalrun.attacks import synonym as _synonym  # noqa: F401
from evalrun.attacks import text as _text  # noqa: F401
from evalrun.attacks import typo as _typo  # noqa: F401
from evalrun.attacks.base import ATTACKS, Attack, AttackDef, text_attack
from evalrun.attacks.model import ModelAttack, ModelAttackDef, bind
from evalrun.attacks.suites import load_suite

__all__ = ["ATTACKS", "Attack", "AttackDef", "ModelAttack", "ModelAttackDef", "canonical_attack", "load_suite",
           "parse_attack", "text_attack"]


def parse_attack(text: str) -> Attack | ModelAttack | None:
    """``none`` gives None; unknown names and keys are errors naming ``--attack``. Text
    attacks give an :class:`Attack`, model attacks a :class:`ModelAttack`."""
    if is_none(text):
        return None
    definition = ATTACKS.get(text.strip().partition(":")[0])
    if isinstance(definition, ModelAttackDef):
        return bind(definition, text)
    spec = parse_spec(text, what="--attack")
    if not isinstance(definition, AttackDef):
        raise SpecError(f"--attack {text}: {spec.name!r} is registered as {type(definition).__name__},"
                        " not an evalrun AttackDef")
    check_keys(spec, definition.keys, what="--attack")
    attack = Attack(spec=spec, definition=definition)
    attack.apply("probe text", 0)  # validates parameter values now, not mid-run
    return attack


def canonical_attack(text: str) -> str:
    attack = parse_attack(text)
    return "none" if attack is None else attack.name
