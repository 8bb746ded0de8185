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

from evalrun.executors import LocalExecutor
from evalrun.generation import GenerationRequest
from evalrun.generation_phase import run_generation
from evalrun.options import RunOptions
from evalrun.pack import load_pack
from evalrun.plan import make_items
from evalrun.providers import make_provider
from evalrun.store import Store


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
    options = RunOptions(models=("reference",), watermarks=("none", "kgw"), n=2, key="k")
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
