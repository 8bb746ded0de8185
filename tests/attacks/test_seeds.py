"""Issue 18, item 4: every attack is deterministic given its spec and seed, and a random
attack uses its seed. An attack that ignored its seed (drew from a fixed or global generator)
would pass tests that only look at one output; here, for each in-tree attack: one pinned output
on a fixed paragraph, the same text for the same seed, and different texts for different seeds
where the attack is random (the same text for every seed where it is not).
"""

from __future__ import annotations

import pytest

from evalrun.attacks import ATTACKS, AttackDef, parse_attack

PARAGRAPH = (
    "Researchers have developed several watermarking schemes that embed hidden signals in "
    "generated text. They are useful, but it is not clear whether they survive simple edits. "
    "We don't know yet; the results were surprising, and definitely worth a closer look!\n"
    "Already, the new product is not available in the shops."
)
SEED = 2024

#: one spec per in-tree attack -> its output on PARAGRAPH with SEED
PINNED = {
    'contraction': (
        'Researchers have developed several watermarking schemes that embed hidden '
        "signals in generated text. They're useful, but it's not clear whether they "
        "survive simple edits. We don't know yet; the results were surprising, and "
        "definitely worth a closer look!\nAlready, the new product isn't available in the "
        'shops.'
    ),
    'expansion': (
        'Researchers have developed several watermarking schemes that embed hidden '
        'signals in generated text. They are useful, but it is not clear whether they '
        'survive simple edits. We do not know yet; the results were surprising, and '
        'definitely worth a closer look!\nAlready, the new product is not available in the '
        'shops.'
    ),
    'lowercase': (
        'researchers have developed several watermarking schemes that embed hidden '
        'signals in generated text. they are useful, but it is not clear whether they '
        "survive simple edits. we don't know yet; the results were surprising, and "
        'definitely worth a closer look!\nalready, the new product is not available in the '
        'shops.'
    ),
    'misspelling:p=0.5': (
        'Researchers hvea developped several watermarking schemes that embed hidden '
        'signals in generated text. They are useful, but it is not claer whther they '
        "survive simple edits. We don't know yet; the results were surprizing, anbd "
        'definitely worth a closer look!\nAlready, the new product is not available in the '
        'shops.'
    ),
    'neighbour_swap:p=0.3': (
        'Researchers have developed several watermarking schemes embed that signals '
        'hidden in generated text. They are useful, but it is not whether clear they '
        "survive simple edits. don't We yet; know the were results surprising, and worth "
        'definitely a closer look!\nAlready, the product new is not in available the '
        'shops.'
    ),
    'random_letters:p=0.05': (
        'Researchers have developed several watermarkhng schemes that embed hidden '
        'signals in generated text. They are usefvl, but it is not clear whether they '
        "burvive simple edits. We don't know yet; the rksults were sukprising, add "
        'definitely worth a closer look!\nAlready, the new product is not available in the '
        'shops.'
    ),
    'swap:p=0.3': (
        'Researchers have developed that watermarking schemes several embed text signals '
        'in generated hidden. They are useful, but edits is they clear whether whether '
        "not survive simple it. a don't know know yet; the results were surprising, and "
        'definitely worth closer We look!\nshops, the new product is not not available the '
        'in Already.'
    ),
    'synonym:p=0.5': (
        'Researchers have modernized several watermarking outlines that embed hidden '
        'signals in generated text. They are useful, but it is not absolved whether they '
        "survive simple edits. We don't acknowledge yet; the results were surprising, and "
        'definitely deserving a closer look!\nAlready, the new product is not available in '
        'the shops.'
    ),
    'typo:p=0.05': (
        'Researchers have developed several watermarkkng schemes that embed hidden '
        'signals in generated text. They are usefyl, but it is not clear whether theg '
        "survive simple edits. We don'r know yet; the fesults were sjrprising, qnd "
        'definitely worth a closer look!\nAlready, the new product is not available in the '
        'shops.'
    ),
}


def in_tree_attacks() -> list[str]:
    """In-tree text attacks (model attacks are pinned by the transform stage's tests, the
    emoji prompt attack by tests/attacks/test_extensions.py: there is no emoji in the paragraph)."""
    return sorted(name for name in ATTACKS.names() if isinstance(ATTACKS.get(name), AttackDef)
                  and ATTACKS.get(name).prompt is None
                  and ATTACKS.get(name).fn.__module__.startswith("evalrun.attacks."))


def test_every_in_tree_attack_is_pinned() -> None:
    assert sorted(spec.partition(":")[0] for spec in PINNED) == in_tree_attacks()


@pytest.mark.parametrize("spec", sorted(PINNED))
def test_pinned_output(spec: str) -> None:
    out = parse_attack(spec).apply(PARAGRAPH, SEED)
    assert out == PINNED[spec]
    assert out != PARAGRAPH, "the pinned case must show the attack doing something"


@pytest.mark.parametrize("spec", sorted(PINNED))
def test_same_seed_same_text(spec: str) -> None:
    first = parse_attack(spec).apply(PARAGRAPH, 7)
    assert parse_attack(spec).apply(PARAGRAPH, 7) == first
    assert parse_attack(spec).apply(PARAGRAPH, SEED) == PINNED[spec]


@pytest.mark.parametrize("spec", sorted(PINNED))
def test_different_seeds_different_texts_exactly_when_random(spec: str) -> None:
    attack = parse_attack(spec)
    outputs = [attack.apply(PARAGRAPH, seed) for seed in range(10)]
    if attack.definition.random:
        assert len(set(outputs)) == len(outputs), "each of 10 seeds gives its own text"
    else:
        assert set(outputs) == {PINNED[spec]}, "a non-random attack ignores the seed"
