"""Tokenizers outside the providers: re-tokenizing attacked texts for detection, and the one
way a prompt becomes token ids (the local providers generate from it; fine-tuning trains on it).

A watermark is detected on token ids. After an attack the text must be tokenized again, with
the tokenizer that generated it: :func:`load_tokenizer` reads a local tokenizer (transformers,
never downloading) and :func:`tokenizer_fingerprint` is the hash stored with every output, so
the transform stage can check it has the same tokenizer before it trusts the ids.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from evalrun._util.errors import EvalrunError, first_line
from evalrun._util.hashing import canonical_json
from evalrun.model.generation import Prompt


def render_plain(prompt: Prompt) -> str:
    """Prompt text for tokenizers without a chat template: system, blank line, user, blank line."""
    parts = [prompt.system] if prompt.system else []
    parts.append(prompt.user)
    return "\n\n".join(parts) + "\n\n"


def prompt_text(tokenizer: Any, prompt: Prompt) -> str:
    """The exact text fed to the model (the chat template when the tokenizer has one)."""
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(prompt.messages(), tokenize=False, add_generation_prompt=True)
    return render_plain(prompt)


def encode_prompt(tokenizer: Any, prompt: Prompt) -> list[int]:
    """Prompt token ids; a chat template already holds the special tokens it wants."""
    templated = bool(getattr(tokenizer, "chat_template", None))
    return list(tokenizer(prompt_text(tokenizer, prompt), add_special_tokens=not templated)["input_ids"])


def tokenizer_fingerprint(tokenizer: Any, source: str | Path) -> str:
    """sha256 of tokenizer.json, else of the vocabulary: stored with every output so that
    detection can check it tokenizes the way generation did."""
    tj = Path(source) / "tokenizer.json"
    if tj.is_file():
        return hashlib.sha256(tj.read_bytes()).hexdigest()
    return hashlib.sha256(canonical_json(tokenizer.get_vocab()).encode()).hexdigest()


def model_vocab_size(source: str | Path, tokenizer_count: int) -> int:
    """The vocabulary a watermark's green lists are drawn over: the model's logit width.

    A model directory's ``config.json`` ``vocab_size`` wins over the tokenizer's own count,
    since many models pad their embedding matrix beyond the tokenizer (a detector given the
    tokenizer's count would draw other green lists than the generator did)."""
    config = Path(source) / "config.json"
    if not config.is_file():
        return tokenizer_count
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("vocab_size", tokenizer_count)
    except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise EvalrunError(f"{config}: cannot read vocab_size ({type(exc).__name__}: {exc})") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise EvalrunError(f"{config}: vocab_size {value!r} is not a positive integer")
    return value


@dataclass(frozen=True)
class TextTokenizer:
    """``encode(text) -> ids`` without special tokens, the tokenizer's fingerprint, and the
    vocabulary size its ids index (:func:`model_vocab_size`)."""

    encode: Callable[[str], list[int]]
    fingerprint: str
    source: str
    vocab_size: int
    #: ids -> text, special tokens left out (the viewer shows each token's share of the text)
    decode: Callable[[Sequence[int]], str]


@lru_cache(maxsize=8)
def load_tokenizer(source: str) -> TextTokenizer:
    """The tokenizer in a local directory (or a hub id's local cache); one-line errors."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise EvalrunError(f"--tokenizer {source}: needs transformers; install evalrun[hf] ({exc})") from None
    try:
        tok = AutoTokenizer.from_pretrained(source, local_files_only=True)
    except Exception as exc:  # OSError, ValueError, ... from transformers
        raise EvalrunError(f"--tokenizer {source}: cannot load a tokenizer from local files ({first_line(exc)})") from None

    def encode(text: str) -> list[int]:
        return list(tok.encode(text, add_special_tokens=False))

    def decode(ids: Sequence[int]) -> str:
        return str(tok.decode(list(ids), skip_special_tokens=True))

    return TextTokenizer(encode=encode, fingerprint=tokenizer_fingerprint(tok, source), source=source,
                         vocab_size=model_vocab_size(source, len(tok)), decode=decode)
