"""WaterDrum's data-similarity settings (section 5 D4, App. E.4): the data D_s added to the
retain set, similar to the forget set F, so that a metric must tell "F still influences the
model" from "a copy of F's content does".

Registered (:data:`SETTINGS`; ``--similarity NAME``):

* ``none`` -- D_s is empty (the conventional setting);
* ``exact`` -- every forget passage again, word for word ("exact duplicate", mean STS and
  ROUGE-L 1.00 in WaterDrum);
* ``semantic`` -- every forget passage paraphrased ("semantic duplicate"; WaterDrum has GPT-4
  paraphrase, mean STS 0.97 and ROUGE-L 0.69 on WaterDrum-Ax). Offline, with no model that
  can paraphrase (the embedded 5 M model cannot), the best means at hand is the ``synonym``
  attack's WordNet table (:mod:`evalrun.attacks.synonym`) at p = 1: every replaceable word
  becomes a WordNet synonym in the same inflection and case. It keeps the passage's structure
  and much of its meaning, but WordNet's first senses are often the wrong ones ("a soul" ->
  "a person", "quiet" -> "hushed", but also "hatches" -> "broods"), so it is a weaker
  paraphrase than GPT-4's; each point records how close it is (:func:`closeness`).

Each D_s point is owned by a retain owner (round robin over them), so that the watermarking
step marks it under that owner's key, as WaterDrum App. C.3 watermarks duplicates with the
key of the owner who holds them; it keeps ``duplicate_of`` (the forget point's id) and
``similarity_setting`` (the setting).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.attacks import parse_attack
from evalrun.metrics.rouge import rouge_l
from evalrun.unlearning.data import similarity as unigram_f1

#: the synonym attack's rate for the semantic setting: every replaceable word
SEMANTIC_SPEC = "synonym:p=1"


def paraphrase(text: str, seed: int) -> str:
    """The semantic setting's offline paraphrase (see the module docstring)."""
    attack = parse_attack(SEMANTIC_SPEC)
    return attack.apply(text, seed)  # type: ignore[union-attr]  # a text attack


@dataclass(frozen=True)
class Setting:
    """One similarity setting: how a forget passage's similar copy is made (None: no copy)."""

    name: str
    description: str
    rewrite: Callable[[str, int], str] | None
    #: a copy's id is ``<id_prefix>-<forget id>``; the model trained with the copies is
    #: ``models/retrained-<model_tag>`` (distinct per setting, so runs into one directory
    #: never reuse another setting's copies)
    id_prefix: str = "dup"
    model_tag: str = "d4"


SETTINGS: dict[str, Setting] = {}


def register(setting: Setting) -> Setting:
    if setting.name in SETTINGS:
        raise ValueError(f"similarity setting {setting.name!r} is registered twice")
    SETTINGS[setting.name] = setting
    return setting


register(Setting("none", "no duplicate of the forget set in the retain set", None))
register(Setting("exact", "an exact copy of every forget passage in the retain set", lambda text, _seed: text))
register(Setting("semantic", "a WordNet-synonym paraphrase of every forget passage in the retain set",
                 paraphrase, id_prefix="para", model_tag="d4-semantic"))


def setting(name: str) -> Setting:
    """The registered setting ``name``; one line naming the option and the known ones."""
    found = SETTINGS.get(name)
    if found is None:
        raise EvalrunError(f"--similarity {name}: unknown; known: {', '.join(SETTINGS)}")
    return found


def closeness(original: str, copy: str) -> dict[str, float]:
    """How close a copy is to its original: unigram F1 of lower-cased words and ROUGE-L
    recall (WaterDrum quotes ROUGE-L for its paraphrases)."""
    return {"unigram_f1": round(unigram_f1(original, copy), 4),
            "rouge_l_recall": round(rouge_l(original, copy).recall, 4)}


def similar_points(name: str, points: Sequence[Mapping[str, Any]], forget_owners: Sequence[int],
                   owners: Sequence[int], seed: int = 0) -> list[dict[str, Any]]:
    """D_s of setting ``name`` for the forget points among ``points``: one copy per forget
    passage (ids ``<id_prefix>-<id>``), owned round robin by the owners in ``owners`` that are not
    forgotten, with its closeness to the original."""
    how = setting(name)
    if how.rewrite is None:
        return []
    retain_owners = [o for o in owners if o not in set(forget_owners)]
    if not retain_owners:
        raise EvalrunError(f"--similarity {name}: needs at least one retain owner to hold the copies")
    forget = [p for p in points if p["owner"] in set(forget_owners)]
    out = []
    for i, p in enumerate(forget):
        text = how.rewrite(str(p["text"]), seed + i)
        out.append({**p, "id": f"{how.id_prefix}-{p['id']}", "owner": retain_owners[i % len(retain_owners)],
                    "text": text, "duplicate_of": p["id"], "similarity_setting": name,
                    "closeness": closeness(str(p["text"]), text)})
    return out


def mean_closeness(copies: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The mean of each closeness figure over D_s (empty for the ``none`` setting)."""
    if not copies:
        return {}
    keys = copies[0]["closeness"].keys()
    return {k: round(sum(c["closeness"][k] for c in copies) / len(copies), 4) for k in keys}
