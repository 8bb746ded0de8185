"""The run plan: packs x cases x models x watermarks x attacks x repetitions -> items.

Keys: ``gen_key`` identifies one model call (shared by every attack of the same generation);
``item_key`` identifies one graded result. Both cover everything that changes an output --
including the rendered prompt, so editing a case re-generates it -- and nothing that does
not, so a re-run of the same command finds its finished work in the store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from evalrun._util.cache_secret import key_fingerprint
from evalrun._util.hashing import canonical_json, sha256_hex, stable_int
from evalrun._util.specs import is_none
from evalrun.attacks import Attack, parse_attack
from evalrun.model.generation import GenerationRequest, GenParams, Prompt
from evalrun.model.providers import ModelSpec, model_revision
from evalrun.pack.loading import Case, Pack
from evalrun.run.options import KEY_ENV, RunOptions, check_options

__all__ = ["KEY_ENV", "Item", "RunOptions", "check_options", "make_items", "params_for", "unique_generations"]


def params_for(options: RunOptions, pack: Pack) -> GenParams:
    """Sampling parameters of a pack's items: the run's, else the pack's defaults."""
    defaults = pack.defaults
    temperature = options.temperature if options.temperature is not None else float(defaults.get("temperature", 0.0))
    max_tokens = options.max_tokens if options.max_tokens is not None else int(defaults.get("max_tokens", 512))
    return GenParams(temperature=temperature, max_tokens=max_tokens, seed=options.seed)


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
    #: the model's identity (stored, in keys and ids); ``model_spec`` also has run-only options
    model: str
    model_spec: ModelSpec
    watermark: str
    attack: str
    repetition: int
    params: GenParams
    prompt: Prompt
    gen_key: str
    item_key: str
    #: the stored forms of params, prompt and case (computed once per pack and case, shared)
    params_json: str
    prompt_json: str
    case_json: str
    #: what seeds the item's attack: the generation's identity without the watermark key, so
    #: attacked texts are the same on every machine (``gen_key`` holds the key's fingerprint)
    seed_key: str = ""

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
            "params_json": self.params_json, "watermark": self.watermark,
            "attack": self.attack, "repetition": self.repetition,
            "prompt_json": self.prompt_json, "created_at": created_at,
            "item_key": self.item_key, "gen_key": self.gen_key,
            "case_json": self.case_json, "group_value": self.pack.group_of(self.case.data),
        }


def make_items(pack: Pack, options: RunOptions, *, models: Sequence[ModelSpec] | None = None) -> Iterator[Item]:
    """Every item of one pack under ``options`` (cases in file order, then the run axes)."""
    params = params_for(options, pack)
    params_json = canonical_json(params.as_json())
    key_fp = key_fingerprint(options.resolved_key())
    specs = list(models or options.models)
    revisions = {m: model_revision(m, pack, options) for m in specs}
    rewrites = {a: prompt_rewrite(a) for a in options.attacks}
    for case in pack.cases:
        if not options.selects(case.id):
            continue
        base = pack.render_prompt(case.data)
        # a prompt attack (emoji) asks the model differently: its items get their own generation
        prompts = {a: (rw(base) if rw else base) for a, rw in rewrites.items()}
        case_json = canonical_json(case.data)
        prompt_jsons = {p: canonical_json(p.as_json()) for p in set(prompts.values())}
        # the whole case, not just the prompt: solvers and graders read fields the prompt hides
        # (canonical_json([prompt, case]), spelled from the parts already serialized)
        key_jsons = {p: f"[{j},{case_json}]" for p, j in prompt_jsons.items()}
        for model_spec in specs:
            model = model_spec.identity()
            for watermark in options.watermarks:
                wm_fp = key_fp if not is_none(watermark) else ""
                for rep in range(options.n):
                    for attack in options.attacks:
                        prompt = prompts[attack]
                        parts = (pack.name, case.id, model, revisions[model_spec], params_json, watermark)
                        gen_key = sha256_hex("gen", *parts, wm_fp, rep, key_jsons[prompt])
                        # the same without the key: what seeds the attacks, so that attacked texts
                        # do not depend on the cache secret (see evalrun._util.cache_secret)
                        seed_key = gen_key if not wm_fp else sha256_hex("gen", *parts, "", rep, key_jsons[prompt])
                        yield Item(pack=pack, case=case, model=model, model_spec=model_spec, watermark=watermark,
                                   attack=attack, repetition=rep, params=params, prompt=prompt,
                                   gen_key=gen_key, item_key=sha256_hex("item", gen_key, attack), seed_key=seed_key,
                                   params_json=params_json, prompt_json=prompt_jsons[prompt], case_json=case_json)


def prompt_rewrite(attack: str) -> Any:
    """The prompt rewrite of a prompt attack (``emoji``), else None."""
    parsed = parse_attack(attack)
    return parsed.definition.prompt if isinstance(parsed, Attack) else None


def unique_generations(items: Sequence[Item]) -> Mapping[str, list[Item]]:
    out: dict[str, list[Item]] = {}
    for item in items:
        out.setdefault(item.gen_key, []).append(item)
    return out
