"""Model attacks (MarkMyWords, Table II): the text is rewritten by a model the user names.

``paraphrase:<model-spec>`` asks the model for a paraphrase; ``translate:<lang>:<model-spec>``
translates into ``<lang>`` and back into English, one call each. They run in the transform
stage, batched through the named provider like any generation, and their outputs are stored:
regrading never calls the model again. Each call is greedy (temperature 0) with a fixed seed,
so an attack is as reproducible as its provider is.

The wording of the requests is ours (MarkMyWords asks GPT-3.5 for a paraphrase and runs a
translation model; MarkMyWords prints neither prompt).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from evalrun._util.errors import SpecError
from evalrun.attacks.base import ATTACKS, ModelAttackDef
from evalrun.model.generation import Prompt
from evalrun.model.providers import ModelSpec, parse_model

#: ISO 639-1 codes the translate attack knows by name (others are passed as they are)
LANGUAGES = {"fr": "French", "ru": "Russian", "de": "German", "es": "Spanish", "it": "Italian",
             "zh": "Chinese", "ja": "Japanese", "pt": "Portuguese", "nl": "Dutch", "ar": "Arabic"}


@dataclass(frozen=True)
class ModelAttack:
    """A model attack bound to its arguments and model (``translate:fr:openai:gpt-4o-mini``)."""

    definition: ModelAttackDef
    params: Mapping[str, str]
    #: the attack model's spec (provider options included)
    model: ModelSpec
    name: str = field(default="")

    def prompts(self) -> tuple[Prompt, ...]:
        """Request templates; ``{text}`` in the user message is the text to rewrite."""
        return self.definition.steps(self.params)


def clean_answer(answer: str) -> str:
    """The rewritten text from a model's answer: surrounding whitespace, a fenced block
    around the whole answer and a wrapping pair of quotes removed, nothing else (no guessing
    at what the model meant)."""
    text = answer.strip()
    if len(text) >= 6 and text.startswith("```") and text.endswith("```"):
        first, _, body = text[3:-3].partition("\n")
        text = (body if first.strip().isalnum() or not first.strip() else text[3:-3]).strip()
    for left, right in (('"', '"'), ("\u201c", "\u201d")):
        if len(text) >= 2 and text.startswith(left) and text.endswith(right) and left not in text[1:-1]:
            text = text[1:-1].strip()
    return text


def _paraphrase(params: Mapping[str, str]) -> tuple[Prompt, ...]:
    return (Prompt(system="You rewrite texts.",
                   user="Paraphrase the following text. Keep its meaning, its length and its level of "
                        "detail, but change the wording and the sentence structure. Answer with the "
                        "paraphrase only.\n\n{text}"),)


def _translate(params: Mapping[str, str]) -> tuple[Prompt, ...]:
    lang = params["lang"]
    name = LANGUAGES.get(lang, lang)
    there = Prompt(system="You are a professional translator.",
                   user=f"Translate the following text into {name}. Answer with the translation only."
                        "\n\n{text}")
    back = Prompt(system="You are a professional translator.",
                  user="Translate the following text into English. Answer with the translation only.\n\n{text}")
    return (there, back)


# ATTACKS also holds model attacks: readers tell them apart with isinstance(..., ModelAttackDef)
PARAPHRASE = ATTACKS.register("paraphrase", ModelAttackDef(
    "paraphrase", (), _paraphrase, "Paraphrase by a model", "paraphrase:openai:gpt-4o-mini"))
TRANSLATE = ATTACKS.register("translate", ModelAttackDef(
    "translate", ("lang",), _translate, "Round trip through another language by a model",
    "translate:fr:openai:gpt-4o-mini"))


def bind(definition: ModelAttackDef, text: str) -> ModelAttack:
    """``<name>:<leading args>:<model-spec>`` -> a bound attack whose name is canonical (the
    model's identity, without options that only change how it runs)."""
    name, _, rest = text.strip().partition(":")
    parts = rest.split(":", len(definition.leading))
    if len(parts) <= len(definition.leading) or not all(parts):
        raise SpecError(f"--attack {text}: expected {definition.example or name + ':<model-spec>'}")
    params = dict(zip(definition.leading, parts[:-1]))
    for key, value in params.items():
        if not value.replace("-", "").isalnum():
            raise SpecError(f"--attack {text}: {key} {value!r} must be letters and digits (e.g. fr)")
    model = parse_model(parts[-1])  # the user's text enters here, inside --attack
    canonical = ":".join([name, *parts[:-1], model.identity()])
    return ModelAttack(definition=definition, params=params, model=model, name=canonical)
