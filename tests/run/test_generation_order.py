"""The generation stage batches in an order of its own work, not of pytest's items.

A local model's floating-point sums depend on which rows share its batch, so a sampled token
can flip when the batch changes (5 of 300 outputs did, between two runs of the README's main
job before this order was fixed). pytest-randomly shuffles the items on every run; the
requests a provider sees must come in the same order whatever that shuffle was.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Sequence

from evalrun.model.generation import GenerationRequest
from evalrun.model.providers import make_provider, parse_model
from evalrun.pack.loading import load_pack
from evalrun.run.executors import LocalExecutor
from evalrun.run.options import RunOptions
from evalrun.run.plan import make_items
from evalrun.run.stages.generate import run_generation
from evalrun.store.database import Store


class Recording(LocalExecutor):
    """The in-process executor, remembering the order requests reach the provider."""

    def __init__(self) -> None:
        self.order: list[str] = []

    def generate(self, model: str, requests: Sequence[GenerationRequest], sink, make_provider) -> None:
        self.order += [r.gen_key for r in requests]
        super().generate(model, requests, sink, make_provider)


def test_requests_reach_the_provider_in_the_same_order_whatever_the_item_order(tmp_path: Path,
                                                                               make_pack) -> None:
    pack = load_pack(make_pack(cases=[{"id": f"c{i:02d}", "word": f"w{i}", "kind": "ab"[i % 2]}
                                      for i in range(12)]))
    options = RunOptions(models=(parse_model("reference"),), watermarks=("none", "kgw"), n=2, key="k")
    items = list(make_items(pack, options))
    assert len(items) == 48
    orders = []
    for shuffle_seed in (1, 2):
        shuffled = items[:]
        random.Random(shuffle_seed).shuffle(shuffled)
        store = Store(tmp_path / f"s{shuffle_seed}.sqlite")
        store.start_run("r", {}, {})
        executor = Recording()
        summary = run_generation(shuffled, store, "r", lambda spec: make_provider(spec), key="k",
                                 executor=executor)
        assert summary.generated == len(items)
        orders.append(executor.order)
    assert orders[0] == orders[1]
    assert len(orders[0]) == len(set(orders[0])) == len({it.gen_key for it in items})


def test_keys_and_stored_forms_are_those_of_the_documented_formula(make_pack) -> None:
    """make_items spells canonical_json([prompt, case]) from the parts it already serialized;
    the keys must be exactly those of the formula (stores of earlier runs are found by them)."""
    from evalrun._util.hashing import canonical_json, sha256_hex
    from evalrun.model.providers import model_revision
    from evalrun.run.plan import key_fingerprint, params_for

    pack = load_pack(make_pack(cases=[{"id": "c1", "word": "naïve \"quoted\" ünïcode", "kind": "a"}]))
    options = RunOptions(models=(parse_model("reference"),), watermarks=("none", "kgw"), attacks=("none", "emoji"), key="k")
    items = list(make_items(pack, options))
    assert len(items) == 4
    for it in items:
        wm_fp = "" if it.watermark == "none" else key_fingerprint("k")
        assert it.gen_key == sha256_hex("gen", pack.name, it.case.id, it.model,
                                        model_revision(parse_model("reference"), pack, options),
                                        canonical_json(params_for(options, pack).as_json()), it.watermark, wm_fp,
                                        it.repetition, canonical_json([it.prompt.as_json(), it.case.data]))
        assert it.item_key == sha256_hex("item", it.gen_key, it.attack)
        row = it.row("r", "now")
        assert (row["params_json"], row["prompt_json"], row["case_json"]) == (
            canonical_json(it.params.as_json()), canonical_json(it.prompt.as_json()), canonical_json(it.case.data))
