"""The run plan: packs x cases x models x watermarks x attacks x repetitions -> items.

Keys: ``gen_key`` identifies one model call (shared by every attack of the same generation);
``item_key`` identifies one graded result. Both cover everything that changes an output --
including the rendered prompt, so editing a case re-generates it -- and nothing that does
not, so a re-run of the same command finds its finished work in the store.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from evalrun.errors import EvalrunError
from evalrun.generation import GenParams, GenerationRequest, Prompt
from evalrun.hashing import canonical_json, sha256_hex, stable_int
from evalrun.pack import Case, Pack
from evalrun.watermark.registry import parse_watermark

KEY_ENV = "EVALRUN_WATERMARK_KEY"


@dataclass(frozen=True)
class RunOptions:
    """Everything a run is parametrised by. ``key`` is secret and never serialised."""

    models: tuple[str, ...] = ("reference",)
    watermarks: tuple[str, ...] = ("none",)
    attacks: tuple[str, ...] = ("none",)
    n: int = 1
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int = 0
    key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    concurrency: int = 32

    def as_json(self) -> dict[str, Any]:
        """The run's configuration as stored in ``runs.config_json`` (no key, no URL secrets)."""
        return {
            "models": list(self.models), "watermarks": list(self.watermarks),
            "attacks": list(self.attacks), "n": self.n, "temperature": self.temperature,
            "max_tokens": self.max_tokens, "seed": self.seed, "concurrency": self.concurrency,
        }

    def params_for(self, pack: Pack) -> GenParams:
        defaults = pack.defaults
        temperature = self.temperature if self.temperature is not None else float(defaults.get("temperature", 0.0))
        max_tokens = self.max_tokens if self.max_tokens is not None else int(defaults.get("max_tokens", 512))
        return GenParams(temperature=temperature, max_tokens=max_tokens, seed=self.seed)

    def resolved_key(self) -> str | None:
        return self.key if self.key is not None else os.environ.get(KEY_ENV)


@lru_cache(maxsize=64)
def key_fingerprint(key: str | None) -> str:
    """A slow, salted digest of the watermark key that enters cache keys only.

    Different keys must not share cached generations, yet the store must not hold anything a
    weak key could be cheaply recovered from; the digest is never stored on its own.
    """
    if not key:
        return ""
    return hashlib.pbkdf2_hmac("sha256", key.encode(), b"evalrun-cache-key", 200_000).hex()


def display_model(model: str) -> str:
    """Model spec as shown in item ids: paths shortened to their last part."""
    name, sep, arg = model.partition(":")
    if sep and ("/" in arg or os.sep in arg):
        arg = arg.rstrip("/").rsplit("/", 1)[-1]
    return f"{name}:{arg}" if sep else name


def attack_seed(gen_key: str, attack: str) -> int:
    """Seed of an attack on one stored generation, so regrading re-applies it exactly."""
    return stable_int("attack", gen_key, attack)


@dataclass(frozen=True)
class Item:
    """One graded result to produce: what pytest turns into one test item."""

    pack: Pack
    case: Case
    model: str
    watermark: str
    attack: str
    repetition: int
    params: GenParams
    prompt: Prompt
    gen_key: str
    item_key: str

    @property
    def name(self) -> str:
        return f"{self.case.id}[{display_model(self.model)}-{self.watermark}-{self.attack}-r{self.repetition}]"

    def request(self, key: str | None) -> GenerationRequest:
        return GenerationRequest(
            gen_key=self.gen_key, pack=self.pack.name, case=self.case.data, prompt=self.prompt,
            params=self.params, repetition=self.repetition, watermark=self.watermark, key=key,
            solve=self.pack.solve if self.pack.has_reference else None,
        )

    def row(self, run_id: str, created_at: str) -> dict[str, Any]:
        """The item's identity columns, as stored with its generation."""
        return {
            "run_id": run_id, "pack": self.pack.name, "case_id": self.case.id, "model": self.model,
            "params_json": canonical_json(self.params.as_json()), "watermark": self.watermark,
            "attack": self.attack, "repetition": self.repetition,
            "prompt_json": canonical_json(self.prompt.as_json()), "created_at": created_at,
            "item_key": self.item_key, "gen_key": self.gen_key,
            "case_json": canonical_json(self.case.data), "group_value": self.pack.group_of(self.case.data),
        }


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _local_model_digest(path: Path) -> str:
    """Fingerprint of a local model directory: configs and tokenizer in full, weights by
    content when small and by name, size and mtime when large (hashing GBs per run is not
    worth it)."""
    parts = []
    for child in sorted(path.iterdir()):
        if not child.is_file():
            continue
        size = child.stat().st_size
        if size <= 64 * 1024 * 1024:
            parts.append((child.name, _file_digest(child)))
        else:
            parts.append((child.name, size, child.stat().st_mtime_ns))
    return sha256_hex(canonical_json(parts))


def model_revision(model: str, pack: Pack, options: "RunOptions") -> str:
    """What besides the spec decides a model's output, folded into the cache key: the solver
    code for ``reference``, the file for ``replay:``, the weights for local models, the
    endpoint for ``openai:``. Changing any of them regenerates instead of reusing."""
    name, _, arg = model.partition(":")
    if name == "reference" and pack.has_reference:
        return _file_digest(pack.path / "reference.py")
    if name == "replay":
        return _file_digest(Path(arg)) if Path(arg).is_file() else "missing"
    if name == "embedded":
        from evalrun.embedded import embedded_model_path

        try:
            return _local_model_digest(embedded_model_path())
        except EvalrunError:
            return "missing"
    if name in ("hf", "vllm") and Path(arg).is_dir():
        return _local_model_digest(Path(arg))
    if name == "openai":
        from evalrun.provenance import redact_url

        base = options.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        return redact_url(base)
    return ""


def make_items(pack: Pack, options: RunOptions, *, models: Sequence[str] | None = None) -> Iterator[Item]:
    """Every item of one pack under ``options`` (cases in file order, then the run axes)."""
    params = options.params_for(pack)
    params_json = canonical_json(params.as_json())
    key_fp = key_fingerprint(options.resolved_key())
    revisions: dict[str, str] = {}
    for case in pack.cases:
        prompt = pack.render_prompt(case.data)
        # the whole case, not just the prompt: solvers and graders read fields the prompt hides
        prompt_json = canonical_json([prompt.as_json(), case.data])
        for model in (models or options.models):
            revision = revisions.setdefault(model, model_revision(model, pack, options))
            for watermark in options.watermarks:
                wm_fp = key_fp if watermark != "none" else ""
                for rep in range(options.n):
                    gen_key = sha256_hex("gen", pack.name, case.id, model, revision, params_json,
                                         watermark, wm_fp, rep, prompt_json)
                    for attack in options.attacks:
                        yield Item(pack=pack, case=case, model=model, watermark=watermark,
                                   attack=attack, repetition=rep, params=params, prompt=prompt,
                                   gen_key=gen_key, item_key=sha256_hex("item", gen_key, attack))


def check_options(options: RunOptions) -> None:
    if options.n < 1:
        raise EvalrunError(f"--n {options.n}: must be at least 1")
    if options.max_tokens is not None and options.max_tokens < 1:
        raise EvalrunError(f"--max-tokens {options.max_tokens}: must be at least 1")
    if options.temperature is not None and not 0.0 <= options.temperature <= 5.0:
        raise EvalrunError(f"--temperature {options.temperature}: must be in [0, 5]")
    marked = [w for w in options.watermarks if w != "none"]
    if marked and not options.resolved_key():
        raise EvalrunError(f"--watermark needs a secret key: pass --key or set {KEY_ENV}")
    for text in marked:
        scheme = parse_watermark(text)
        if scheme is not None:
            scheme.check_key(options.resolved_key() or "")


def unique_generations(items: Sequence[Item]) -> Mapping[str, list[Item]]:
    out: dict[str, list[Item]] = {}
    for item in items:
        out.setdefault(item.gen_key, []).append(item)
    return out
