"""Owners' files, ``watermark-data`` (resume included), fine-tuning / unlearning with real
torch on the embedded model, and the ``waterdrum`` pack on the resulting ``hf:`` model."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from evalrun._util.errors import EvalrunError
from evalrun.model.providers import parse_model
from evalrun.unlearning.data import case_of, load_owners, prompt_of, shipped_owners_path, similarity, watermark_data
from evalrun.watermark.schemes.waterfall import Waterfall

pytest.importorskip("torch")
pytest.importorskip("transformers")


def owners_file(tmp_path: Path, n: int = 4) -> Path:
    records = [r for r in load_owners(shipped_owners_path()) if r["owner"] in (0, 1)]
    path = tmp_path / "owners.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records[:n // 2] + records[24:24 + n // 2]))
    return path


def test_owner_file_errors_name_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "o.jsonl"
    bad.write_text('{"id": "a", "owner": 0, "text": "' + "w " * 20 + '"}\n{"id": "b", "owner": -1, "text": "x"}\n')
    with pytest.raises(EvalrunError, match=r"o.jsonl:2: field 'owner'"):
        load_owners(bad)
    bad.write_text('{"id": "a", "owner": 0, "text": "too short"}\n')
    with pytest.raises(EvalrunError, match=r"o.jsonl:1: field 'text'"):
        load_owners(bad)


def test_shipped_owners_and_cases() -> None:
    records = load_owners(shipped_owners_path())
    assert len(records) == 288 and len({r["owner"] for r in records}) == 12
    prompts = [prompt_of(r["text"]) for r in records]
    assert len(set(prompts)) == len(prompts) and all(len(p.split()) == 12 for p in prompts)
    case = case_of(records[0], [0])
    assert case["set"] == "forget" and case["prompt"] == prompts[0]
    assert case_of(records[30], [0])["set"] == "retain"
    assert similarity("the cat sat", "the cat sat") == 1.0 and similarity("a b", "c d") == 0.0


def test_watermark_data_continue_mode_verifies_and_resumes(tmp_path: Path) -> None:
    path = owners_file(tmp_path)
    records = load_owners(path)
    out = tmp_path / "wm.jsonl"
    # one row per batch: a resumed run regenerates fewer rows together, and another batch
    # rounds logits differently (a draw near a CDF edge could go the other way)
    kw = dict(model=parse_model("embedded?batch_size=1"), watermark="waterfall:kappa=2", out=out, mode="continue",
              max_tokens=24, seed=3)
    lines = watermark_data(records, **kw)
    assert [line["id"] for line in lines] == [r["id"] for r in records]
    for line, rec in zip(lines, records):
        assert line["prompt"] == prompt_of(rec["text"]) and line["original"] == rec["text"]
        assert len(line["completion_token_ids"]) == 24
        det = Waterfall().detect(line["completion_token_ids"], str(rec["owner"]), 8192)
        assert line["verification_score"] == pytest.approx(det.score)
        assert "key" not in line
    # kappa = 2 on a high-entropy model: each continuation carries its owner's mark
    assert sum(line["verification_score"] for line in lines) / len(lines) > 0.15
    first = out.read_text()
    # resume: a torn last line is redone, finished lines are kept as they are
    out.write_text(first.splitlines(keepends=True)[0] + first.splitlines()[1][:40])
    again = watermark_data(records, **kw)
    assert again[0] == lines[0] and out.read_text().count("\n") == len(records)
    assert [a["completion_token_ids"] for a in again] == [b["completion_token_ids"] for b in lines]
    with pytest.raises(EvalrunError, match="made with seed=3"):
        watermark_data(records, **{**kw, "seed": 4})


#: WaterDrum Fig. 4's unlearning algorithms
UNLEARNED = ("ga", "gd", "kl", "tv", "scrub")


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A 3-epoch fine-tune of the embedded model on 4 watermarked points, and both
    unlearning algorithms applied to it for 2 epochs (seconds on a CPU)."""
    from evalrun.model.embedded import embedded_model_path
    from evalrun.unlearning.finetune import TrainConfig, train, unlearn

    root = tmp_path_factory.mktemp("wd")
    records = load_owners(owners_file(root))
    points = watermark_data(records, model=parse_model("embedded"), watermark="waterfall:kappa=2",
                            out=root / "wm.jsonl", mode="continue", max_tokens=16, seed=0)
    forget = [p for p in points if p["owner"] == 0]
    retain = [p for p in points if p["owner"] != 0]
    cfg = TrainConfig(epochs=3, lr=1e-3, batch_size=4, seed=0)
    original = train(embedded_model_path(), points, root / "original", cfg)
    ucfg = TrainConfig(epochs=2, lr=1e-4, batch_size=4, seed=0)
    made = {name: unlearn(original, forget, retain, name, root / name, ucfg) for name in UNLEARNED}
    return {"root": root, "points": points, "forget": forget, "retain": retain,
            "original": original, **made}


def completion_nll(model_dir: Path, points: list[dict]) -> float:
    import torch

    from evalrun.unlearning.finetune import _batch, _nll, load, sequences

    model, tok = load(model_dir)
    model.eval()
    with torch.no_grad():
        return float(_nll(model, _batch(sequences(tok, points), int(tok.pad_token_id))))


def test_fine_tuning_learns_and_unlearning_forgets(tiny_models: dict) -> None:
    from evalrun.model.embedded import embedded_model_path

    info = json.loads((tiny_models["original"] / "training.json").read_text())
    assert info["epoch_losses"][-1] < info["epoch_losses"][0]
    base = completion_nll(embedded_model_path(), tiny_models["points"])
    tuned = completion_nll(tiny_models["original"], tiny_models["points"])
    assert tuned < base - 0.3
    forget_orig = completion_nll(tiny_models["original"], tiny_models["forget"])
    for name in UNLEARNED:
        assert completion_nll(tiny_models[name], tiny_models["forget"]) > forget_orig, name
        assert json.loads((tiny_models[name] / "training.json").read_text())["kind"].startswith("unlearning:")


def test_training_is_seeded(tiny_models: dict, tmp_path: Path) -> None:
    from evalrun.model.embedded import embedded_model_path
    from evalrun.unlearning.finetune import TrainConfig, train

    cfg = TrainConfig(epochs=3, lr=1e-3, batch_size=4, seed=0)
    again = train(embedded_model_path(), tiny_models["points"], tmp_path / "again", cfg)
    a = json.loads((again / "training.json").read_text())["epoch_losses"]
    b = json.loads((tiny_models["original"] / "training.json").read_text())["epoch_losses"]
    assert a == pytest.approx(b, rel=1e-5)


def test_waterdrum_pack_runs_on_the_fine_tuned_hf_model(tiny_models: dict) -> None:
    from evalrun.cli.main import main
    from evalrun.unlearning.demo import write_pack

    pack = write_pack(tiny_models["root"] / "pack" / "waterdrum",
                      [case_of(p, [0]) for p in tiny_models["points"]])
    db = tiny_models["root"] / "r.sqlite"
    code = main(["run", "--pack", str(pack), "--model", f"hf:{tiny_models['original']}",
                 "--model", "embedded", "--max-tokens", "16", "--out", str(db), "--no-progress"])
    assert code in (0, 1)
    rows = sqlite3.connect(db).execute(
        "SELECT model, case_id, label, metadata_json FROM results WHERE pack = 'waterdrum'").fetchall()
    assert len(rows) == 2 * len(tiny_models["points"])
    for _model, case_id, label, meta in rows:
        m = json.loads(meta)
        assert label in ("VERIFIED", "NOT_VERIFIED") and m["num_tokens_scored"] > 0
        assert m["set"] == ("forget" if case_id.startswith("o00") else "retain")
        assert -1.0 <= m["verification_score"] <= 1.0
