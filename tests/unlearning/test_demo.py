"""``evalrun unlearning demo`` end to end with a tiny setting (real watermarking, real torch
fine-tuning and unlearning, the real pack run and report), and ``evalrun watermark-data``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalrun.model.providers import parse_model
from evalrun.report.unlearning import write_report
from evalrun.unlearning.demo import FRACTIONS, DemoConfig, run_demo
from evalrun.unlearning.finetune import TrainConfig

pytest.importorskip("torch")
pytest.importorskip("transformers")

TINY = DemoConfig(owners=2, points=4, continuation_tokens=12, repetitions=1,
                  train=TrainConfig(epochs=2, lr=1e-3, batch_size=8),
                  unlearn=TrainConfig(epochs=1, lr=1e-4, batch_size=8))


#: WaterDrum Fig. 4's algorithms
ALL = ("ga", "gd", "kl", "tv", "scrub")


@pytest.mark.slow
def test_tiny_demo_writes_models_report_and_metrics(tmp_path: Path) -> None:
    headline = run_demo(tmp_path, config=TINY, threads=1, d4=True, secret="tiny-secret-42",
                        algorithms=ALL, log=lambda s: None, write_report=write_report)
    models = tmp_path / "models"
    names = {"original", "retrained", *(f"unlearned-{a}" for a in ALL),
             "retrained-d4", *(f"calibration-{f:g}" for f in FRACTIONS)}
    assert {p.name for p in models.iterdir()} == names
    for name in names:  # ordinary HF directories
        assert (models / name / "config.json").is_file()
        assert (models / name / "model.safetensors").is_file()
        assert (models / name / "tokenizer.json").is_file()
    report = tmp_path / "report"
    assert (report / "waterdrum_fig4_forget_vs_retain.png").stat().st_size > 1000
    md = (report / "report.md").read_text()
    assert "waterdrum_fig4_forget_vs_retain.png" in md and "D1 separability" in md
    metrics = json.loads((report / "metrics.json").read_text())
    by_name = {m["metric"]: m for m in metrics}
    d1 = by_name["waterdrum_d1_auroc"]["value"]
    assert d1 == pytest.approx(headline["d1_auroc"]) and 0.0 <= d1 <= 1.0
    assert "waterdrum_d2_calibration_r2" in by_name and "waterdrum_d4_exact_duplicate_auroc" in by_name
    scaled = [m for m in metrics if m["metric"] == "waterdrum_forget_scaled" and m["params"] == {"label": "original"}]
    assert scaled and scaled[0]["value"] == pytest.approx(1.0)
    # the per-model registered aggregate is there for every model too
    assert sum(m["metric"] == "waterdrum_auroc" for m in metrics) == len(names)
    timings = json.loads((tmp_path / "timings.json").read_text())
    assert timings["torch_threads"] == 1 and timings["steps"]
    # the secret (and the owner ids derived from it) reach no file: data, store, report
    from evalrun.unlearning.keys import owner_waterfall_id

    secrets = [b"tiny-secret-42", *(str(owner_waterfall_id(o, "tiny-secret-42")).encode()
                                    for o in range(TINY.owners))]
    for f in tmp_path.rglob("*"):
        if f.is_file() and f.suffix != ".safetensors":
            body = f.read_bytes()
            assert not any(s in body for s in secrets), f
    line = json.loads((tmp_path / "data" / "watermarked.jsonl").read_text().splitlines()[0])
    assert line["key_source"] == "derived from the secret key"
    # resumable: a second call reuses data and models (no model directory is rewritten)
    stamp = {n: (models / n / "model.safetensors").stat().st_mtime_ns for n in names}
    again = run_demo(tmp_path, config=TINY, threads=1, d4=True, secret="tiny-secret-42",
                     algorithms=ALL, log=lambda s: None, write_report=write_report)
    assert again["d1_auroc"] == pytest.approx(headline["d1_auroc"])
    assert stamp == {n: (models / n / "model.safetensors").stat().st_mtime_ns for n in names}


def test_watermark_data_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalrun.cli.main import main

    owners = tmp_path / "o.jsonl"
    owners.write_text(json.dumps({"id": "a", "owner": 3, "text": " ".join(["word"] * 20)}) + "\n")
    out = tmp_path / "wm.jsonl"
    code = main(["watermark-data", "--owners", str(owners), "--model", "embedded", "--mode",
                 "continue", "--max-tokens", "8", "--out", str(out), "--key", "sekrit"])
    assert code == 0
    line = json.loads(out.read_text())
    assert line["key_source"] == "derived from the secret key" and "sekrit" not in out.read_text()
    assert json.loads(capsys.readouterr().out)["records"] == 1
    assert main(["watermark-data", "--owners", str(tmp_path / "missing.jsonl"), "--model",
                 "embedded", "--out", str(out)]) == 2


def test_paraphrase_mode_queries_the_watermarked_text(tmp_path: Path) -> None:
    from evalrun.unlearning.data import PROMPT_WORDS, watermark_data

    rec = {"id": "p", "owner": 1, "text": " ".join(f"w{i}" for i in range(30))}
    line = watermark_data([rec], model=parse_model("embedded"), watermark="waterfall:kappa=2",
                          out=tmp_path / "p.jsonl", mode="paraphrase", max_tokens=40, seed=1)[0]
    words = line["text"].split()
    assert line["mode"] == "paraphrase" and line["completion_token_ids"] is None
    assert line["prompt"] == " ".join(words[:PROMPT_WORDS])
    assert line["completion"] == " ".join(words[PROMPT_WORDS:])
    assert line["original"] == rec["text"]


def test_unknown_algorithm_names_the_option(tmp_path: Path) -> None:
    from evalrun._util.errors import EvalrunError

    with pytest.raises(EvalrunError, match=r"^--algorithms gd,bogus: unknown bogus; known: ga, gd, "):
        run_demo(tmp_path, config=TINY, algorithms=("gd", "bogus"), log=lambda s: None,
                 write_report=write_report)
    assert not (tmp_path / "models").exists()
