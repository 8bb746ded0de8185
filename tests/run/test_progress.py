"""The run's progress bars: one per stage, each counting the stage's own work, in the words of
its closing line.

One model call fills the results of every attack of its generation: the README's main job
makes 300 calls for 2,100 results. The generation bar counts the texts (model calls), which
take the time; a bar counting results crept along at 2-3 "results" a second. The closing line
names both ("2100 results generated, 0 cached, from 300 new texts"). Grading counts results.
"""

from __future__ import annotations

import io
from pathlib import Path

from evalrun.model.providers import make_provider, parse_model
from evalrun.pack.loading import load_pack
from evalrun.run.options import RunOptions
from evalrun.run.plan import make_items, unique_generations
from evalrun.run.stages.generate import ProgressBar, run_generation
from evalrun.store.database import Store


def _items(make_pack, attacks: tuple[str, ...], n: int = 1) -> list:
    pack = load_pack(make_pack(cases=[{"id": f"c{i}", "word": f"w{i}", "kind": "a"} for i in range(4)]))
    return list(make_items(pack, RunOptions(models=(parse_model("reference"),), watermarks=("none", "kgw"),
                                            attacks=attacks, n=n, key="k")))


def test_the_generation_bar_counts_texts_the_model_calls(tmp_path: Path, make_pack) -> None:
    items = _items(make_pack, ("none", "swap:p=0.1", "lowercase"))
    calls = len(unique_generations(items))
    assert (len(items), calls) == (24, 8)  # three results per model call
    store = Store(tmp_path / "s.sqlite")
    store.start_run("r", {}, {})
    seen: list[tuple[int, int]] = []
    summary = run_generation(items, store, "r", make_provider, key="k",
                             progress=lambda done, total: seen.append((done, total)))
    assert (summary.generated, summary.texts) == (len(items), calls)
    assert seen[0] == (0, calls) and seen[-1] == (calls, calls)
    assert [d for d, _ in seen] == list(range(calls + 1))


def test_a_resumed_run_counts_only_the_texts_it_makes(tmp_path: Path, make_pack) -> None:
    """Cached results are not in the bar, nor is a new attack on a stored generation, which
    reuses its output (no call); the closing line counts both among the results."""
    store = Store(tmp_path / "s.sqlite")
    store.start_run("r1", {}, {})
    run_generation(_items(make_pack, ("none",)), store, "r1", make_provider, key="k")
    store.start_run("r2", {}, {})
    seen: list[tuple[int, int]] = []
    items = _items(make_pack, ("none", "lowercase"), n=2)  # 8 cached, 8 reused, 8 calls for 16
    summary = run_generation(items, store, "r2", make_provider, key="k",
                             progress=lambda done, total: seen.append((done, total)))
    assert (summary.cached, summary.generated, summary.texts) == (8, 24, 8)
    assert seen[0] == (0, 8) and seen[-1] == (8, 8) and len(seen) == 8 + 1


def test_the_bar_names_its_unit() -> None:
    out = io.StringIO()
    bar = ProgressBar("evalrun: generating", stream=out, unit="results")
    bar(0, 2100)
    bar(2100, 2100)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith("evalrun: generating [") and " 2100/2100 results (" in last
    plain = io.StringIO()
    ProgressBar("evalrun: judging", stream=plain)(3, 3)
    assert "] 3/3 (" in plain.getvalue()


def test_a_jupyter_cell_gets_the_bar_redrawn_in_place() -> None:
    """ipykernel's streams are no tty but redraw a line on carriage return: the bar redraws
    there (every 0.2 s) instead of printing a new line every 10 s."""
    stream_type = type("OutStream", (io.StringIO,), {"__module__": "ipykernel.iostream"})
    cell = stream_type()
    bar = ProgressBar("evalrun: generating", stream=cell, unit="results", min_interval=0.0)
    for done in range(5):
        bar(done, 4)
    drawn = cell.getvalue()
    assert bar.tty and drawn.count("\r") == 5 and drawn.count("\n") == 1 and drawn.endswith(")\n")
    assert "] 4/4 results (" in drawn.rsplit("\r", 1)[1]
