"""WaterDrum's data-similarity settings (``--similarity none|exact|semantic``) in the demo's
data builder."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalrun._util.errors import EvalrunError
from evalrun.unlearning.demo import QUICK, duplicates, select_points
from evalrun.unlearning.similarity import SETTINGS, closeness, mean_closeness, paraphrase, setting, similar_points


def test_registered_settings() -> None:
    assert list(SETTINGS) == ["none", "exact", "semantic"]
    with pytest.raises(EvalrunError, match=r"^--similarity bogus: unknown; known: none, exact, semantic$"):
        setting("bogus")


def test_none_adds_nothing_exact_copies_word_for_word() -> None:
    points = select_points(QUICK)
    assert similar_points("none", points, (0,), range(QUICK.owners)) == []
    copies = duplicates(points, QUICK, "exact")
    forget = [p for p in points if p["owner"] == 0]
    assert len(copies) == len(forget) == QUICK.points
    assert [c["text"] for c in copies] == [p["text"] for p in forget]
    assert [c["duplicate_of"] for c in copies] == [p["id"] for p in forget]
    assert all(c["id"] == f"dup-{c['duplicate_of']}" for c in copies)
    assert [c["owner"] for c in copies[:4]] == [1, 2, 3, 1]  # retain owners, round robin
    assert mean_closeness(copies) == {"unigram_f1": 1.0, "rouge_l_recall": 1.0}


def test_semantic_paraphrases_seeded_and_measures_closeness() -> None:
    points = select_points(QUICK)
    copies = duplicates(points, QUICK, "semantic")
    again = duplicates(points, QUICK, "semantic")
    assert copies == again
    assert all(c["id"].startswith("para-") and c["similarity_setting"] == "semantic" for c in copies)
    assert all(c["owner"] != 0 for c in copies)
    originals = {p["id"]: p["text"] for p in points}
    assert all(c["text"] != originals[c["duplicate_of"]] for c in copies)
    close = mean_closeness(copies)
    # WordNet synonyms at p = 1 on the KJV forget owner: most words kept, many replaced
    assert 0.6 < close["rouge_l_recall"] < 0.95 and 0.6 < close["unigram_f1"] < 0.95
    assert copies[0]["closeness"] == closeness(originals[copies[0]["duplicate_of"]], copies[0]["text"])


def test_paraphrase_keeps_structure() -> None:
    text = "At last, stepping on board the Pequod, we found everything in profound quiet."
    out = paraphrase(text, 0)
    assert out != text and out.startswith("At ") and "Pequod" in out and out.endswith(".")


def test_retain_owner_needed() -> None:
    with pytest.raises(EvalrunError, match="--similarity exact: needs at least one retain owner"):
        similar_points("exact", [{"id": "a", "owner": 0, "text": "x"}], (0,), (0,))


def test_cli_names_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    from evalrun.cli.waterdrum import main

    assert main(["unlearning", "demo", "--out", str(tmp_path), "--similarity", "bogus"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["evalrun: error: --similarity bogus: unknown; known: none, exact, semantic"]
    assert main(["unlearning", "demo", "--out", str(tmp_path), "--d4", "--similarity", "semantic"]) == 2
    assert "--d4 is --similarity exact" in capsys.readouterr().err


@pytest.mark.slow
def test_tiny_demo_with_semantic_duplicates(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import json

    from evalrun.report.unlearning import write_report
    from evalrun.unlearning.demo import DemoConfig, run_demo
    from evalrun.unlearning.finetune import TrainConfig

    TINY = DemoConfig(owners=2, points=4, continuation_tokens=12, repetitions=1,
                      train=TrainConfig(epochs=2, lr=1e-3, batch_size=8),
                      unlearn=TrainConfig(epochs=1, lr=1e-4, batch_size=8))

    headline = run_demo(tmp_path, config=TINY, threads=1, similarity="semantic",
                        log=lambda s: None, write_report=write_report)
    assert headline["similarity"] == "semantic" and 0.0 <= headline["d4_auroc"] <= 1.0
    assert (tmp_path / "models" / "retrained-d4-semantic" / "model.safetensors").is_file()
    assert not (tmp_path / "models" / "retrained-d4").exists()
    data = [json.loads(line) for line in (tmp_path / "data" / "watermarked.jsonl").read_text().splitlines()]
    paras = [d for d in data if d["id"].startswith("para-")]
    assert len(paras) == TINY.points and all(d["owner"] == 1 for d in paras)
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    d4 = [m for m in metrics if m["metric"] == "waterdrum_d4_semantic_duplicate_auroc"]
    assert d4 and d4[0]["value"] == pytest.approx(headline["d4_auroc"])
    md = (tmp_path / "report" / "report.md").read_text()
    assert "D4 (semantic duplicates" in md and "rouge l recall" in md
