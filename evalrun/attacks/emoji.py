"""The emoji attack (MarkMyWords, Table II): a prompt attack.

The attacker asks the model to put an emoji between every two words of its answer, then
deletes the emojis: the watermark was placed on a text interleaved with tokens that are now
gone, so context-seeded watermarks lose their contexts. The request is added to the user
message before generation (so an ``emoji`` item has its own generation); the stored text is
the answer with every emoji removed and the spaces around it collapsed. It needs a model that
follows instructions; the embedded model does not, and then it only removes whatever emojis
there are.
"""

from __future__ import annotations

import random
import re

from evalrun._util.specs import Spec
from evalrun.attacks.base import text_attack
from evalrun.model.generation import Prompt

INSTRUCTION = "Write your answer with an emoji between every two words."
#: emoji and their joiners: pictographs, symbols and dingbats, flags, modifiers, ZWJ, VS16
_EMOJI = re.compile("[\U0001F000-\U0001FAFF\U00002600-\U000027BF\U00002B00-\U00002BFF"
                    "\U0001F1E6-\U0001F1FF\U0001F3FB-\U0001F3FF\u200d\ufe0f\u20e3]+")
_SPACES = re.compile(r"[ \t]{2,}")


def ask_for_emojis(prompt: Prompt) -> Prompt:
    return Prompt(system=prompt.system, user=f"{prompt.user}\n\n{INSTRUCTION}")


@text_attack("emoji", random=False, prompt=ask_for_emojis)
def remove_emojis(text: str, spec: Spec, rng: random.Random) -> str:
    """Ask for an emoji between words, then remove every emoji."""
    stripped = _EMOJI.sub(" ", text)
    return "\n".join(_SPACES.sub(" ", line).strip() for line in stripped.split("\n"))
