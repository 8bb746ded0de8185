"""``evalrun sweep`` (MarkMyWords' aggregate metric, section IV-D / Table V): the pure parts
on hand-made results, and the command end to end on the embedded model."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from evalrun._util.errors import EvalrunError
from evalrun.analysis.sweep import choose, grid_points, median_absolute_deviation, remeasure_key, summarise
from evalrun.judges import get_judge
from evalrun.pack.grade import Judgement

W = "kgw:delta=2"


def _row(watermark: str, attack: str, quality: float | None, *, size=None, detected: bool = True) -> dict:
    raw = None if quality is None else json.dumps({"perplexity": 1 / quality, "tokens": 10, "scorer": "s"})
    judgements = () if raw is None else (Judgement(judge="s", method="perplexity", raw=raw, position=0,
                                                   parsed=dict(get_judge("perplexity").parse(raw))),)
    return {"watermark": watermark, "attack": attack, "error": None,
            "label": "DETECTED" if detected else "NOT_DETECTED", "metadata_json": json.dumps({"size": size}),
            "judgements": judgements}


def test_summarise_by_hand() -> None:
    rows = [_row("none", "none", 0.5), _row("none", "none", 0.3),
            _row(W, "none", 0.4, size=10), _row(W, "none", 0.2, size=30), _row(W, "none", 0.3, size=None),
            # an attack keeping all quality and removing the mark from 2 of 3 texts, one keeping 1%
            # and removing all: R = 2 * area under the hull (0,0), (0.01,0), (1,1/3), (1,1) = 0.99/3
            _row(W, "lowercase", 0.3, detected=True), _row(W, "lowercase", 0.3, detected=False),
            _row(W, "lowercase", 0.3, detected=False),
            _row(W, "swap", 0.003, detected=False), _row(W, "swap", 0.003, detected=False)]
    s = summarise(rows, W, "perplexity", seed=0)
    assert s["n"] == 3 and s["size"] == 30.0  # median of 10, 30, inf
    assert s["quality_degradation"] == pytest.approx(1 - 0.3 / 0.4)
    assert s["attack_points"]["lowercase"] == pytest.approx([1.0, 1 / 3])
    assert s["attack_points"]["swap"] == pytest.approx([0.01, 0.0])
    assert s["tamper_resistance"] == pytest.approx(0.99 / 3)


def test_choose_the_smallest_eligible_size() -> None:
    configs = [{"watermark": "a", "size": 20.0, "quality_degradation": 0.005, "tamper_resistance": 0.5},
               {"watermark": "b", "size": 10.0, "quality_degradation": 0.05, "tamper_resistance": 0.5},
               {"watermark": "c", "size": 5.0, "quality_degradation": 0.0, "tamper_resistance": 0.1},
               {"watermark": "d", "size": math.inf, "quality_degradation": 0.0, "tamper_resistance": 0.9},
               {"watermark": "e", "size": 10.0, "quality_degradation": 0.02, "tamper_resistance": 0.3}]
    assert choose(configs, max_degradation=0.01, min_tamper=0.2)["watermark"] == "a"
    assert choose(configs, max_degradation=0.1, min_tamper=0.2)["watermark"] == "e"  # ties: less degradation
    assert choose(configs, max_degradation=0.1, min_tamper=0.0)["watermark"] == "c"
    assert choose(configs, max_degradation=0.001, min_tamper=0.95) is None


def test_grid_points_and_helpers() -> None:
    _, specs = grid_points("kgw:context=2", ["gamma=0.25,0.5", "delta=1,4"])
    assert len(specs) == 4 and all("context=2" in s for s in specs)
    for bad, message in [(["delta=0:4"], "sweep tries listed values"), (["tau=1"], "grid has gamma")]:
        with pytest.raises(EvalrunError, match=message):
            grid_points("kgw", bad)
    with pytest.raises(EvalrunError, match="delta is what the sweep sets"):
        grid_points("kgw:delta=2", [])
    assert median_absolute_deviation([40.0, 48.0, 43.0]) == 3.0 and math.isnan(median_absolute_deviation([]))
    assert remeasure_key("k", 0) != remeasure_key("k", 1) != "k"


@pytest.mark.slow
def test_sweep_end_to_end_on_the_embedded_model(tmp_path: Path, capsys, monkeypatch,
                                                 make_detection_pack) -> None:
    from evalrun.cli.main import main

    monkeypatch.delenv("EVALRUN_WATERMARK_KEY", raising=False)
    pack = make_detection_pack(tmp_path, "tiny_p", 8, description="test pack", topic="a garden")
    db, out, secret = tmp_path / "s.sqlite", tmp_path / "s.json", "sweep-secret-key-9"
    assert main(["sweep", "--pack", str(pack), "--scheme", "kgw", "--grid", "gamma=0.25", "--grid", "delta=3,8",
                 "--attack", "lowercase", "--max-degradation", "10", "--min-tamper", "-1", "--remeasure", "2",
                 "--key", secret, "--out", str(db), "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [c["n"] for c in result["configs"]] == [8, 8] and result["attacks"] == ["lowercase"]
    sizes = {c["watermark"]: c["size"] for c in result["configs"]}
    assert float(sizes[result["watermark"]]) == min(float(v) for v in sizes.values())  # "inf" reads as inf
    assert [e["seed"] for e in result["remeasure"]] == [1000, 2000] and result["aggregate_n"] == 16
    conn = sqlite3.connect(db)
    try:
        dump = "\n".join(conn.iterdump())
        runs = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        remeasured = conn.execute("SELECT COUNT(*) FROM results WHERE watermark = ? AND attack = 'none'",
                                  (result["watermark"],)).fetchone()[0]
    finally:
        conn.close()
    assert runs == 4 and remeasured == 8 * 3  # the sweep's key and two others
    assert secret not in dump and remeasure_key(secret, 0) not in dump
    capsys.readouterr()
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "r")]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "Aggregate metric (MarkMyWords)" in md and "size per key" in md
    records = [r for r in json.loads((tmp_path / "r" / "metrics.json").read_text())
               if r["metric"] == "aggregate_size"]
    assert len(records) == 1 and records[0]["watermark"] == result["watermark"] and records[0]["n"] == 16
    assert records[0]["params"] == {"max_quality_degradation": result["max_quality_degradation"],
                                    "min_tamper_resistance": result["min_tamper_resistance"]}
    # refusals name the option
    for extra, message in [(["--attack", "none"], "needs attacks"), (["--attack", "lowercase", "--remeasure", "0"],
                                                                      "--remeasure 0")]:
        assert main(["sweep", "--pack", str(pack), "--scheme", "kgw", "--key", "k", "--out", str(db), *extra]) == 2
        assert message in capsys.readouterr().err


def _rated(watermark: str, attack: str, grade: int, *, size=None, detected: bool = True) -> dict:
    """A result with MarkMyWords' rating judge's answer (a grade out of 10)."""
    raw = f"[[{grade}]]"
    parsed = dict(get_judge("rating").parse(raw))
    return {"watermark": watermark, "attack": attack, "error": None,
            "label": "DETECTED" if detected else "NOT_DETECTED", "metadata_json": json.dumps({"size": size}),
            "judgements": (Judgement(judge="j", method="rating", raw=raw, position=0, parsed=parsed),)}


def test_a_rating_judge_that_rates_every_text_the_same_degrades_nothing_and_a_config_is_chosen() -> None:
    rows = [_rated("none", "none", 7), _rated("none", "none", 7),
            _rated(W, "none", 7, size=12), _rated(W, "none", 7, size=20),
            _rated(W, "lowercase", 7, detected=True), _rated(W, "lowercase", 7, detected=False),
            # a paraphrase that removes every mark: left out of R (MarkMyWords IV-C)
            _rated(W, "paraphrase:openai:m", 7, detected=False), _rated(W, "paraphrase:openai:m", 7, detected=False)]
    s = summarise(rows, W, "rating", seed=0)
    assert s["quality_degradation"] == 0.0 and s["quality_n"] == [2, 2]
    assert set(s["attack_points"]) == {"lowercase"} and s["attack_points"]["lowercase"] == pytest.approx([1.0, 0.5])
    assert s["tamper_resistance"] == pytest.approx(0.5)
    assert choose([s], max_degradation=0.01, min_tamper=0.2)["watermark"] == W


def test_sweep_with_a_rating_judge_over_http_measures_degradation_and_chooses(tmp_path: Path, capsys, monkeypatch,
                                                                             make_detection_pack) -> None:
    """MarkMyWords' own quality (a judge's grade), asked over real HTTP of an OpenAI-compatible
    server that grades every text 85/100: degradation is exactly 0 and a configuration is
    chosen (the sweep once read a field the rating judge never gives, and chose nothing)."""
    from evalrun.cli.main import main
    from evalrun.testing.chat_server import ChatServer

    monkeypatch.delenv("EVALRUN_WATERMARK_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "local-test")
    pack = make_detection_pack(tmp_path, "tiny_r", 6, description="test pack", topic="a harbour")
    out = tmp_path / "s.json"
    with ChatServer(responder=lambda body: "Grade: 85/100") as server:
        assert main(["sweep", "--pack", str(pack), "--scheme", "kgw", "--grid", "gamma=0.25", "--grid", "delta=4,8",
                     "--attack", "lowercase", "--judge", "rating:openai:judge", "--base-url", server.base_url,
                     "--max-degradation", "0", "--min-tamper", "0", "--remeasure", "1", "--key", "rating-sweep",
                     "--out", str(tmp_path / "s.sqlite"), "--json", str(out)]) == 0
        asked = server.requests_seen
    result = json.loads(out.read_text())
    assert asked > 0
    assert [c["quality_degradation"] for c in result["configs"]] == [0.0, 0.0]
    assert all(c["quality_n"][0] == 6 for c in result["configs"])
    assert result["watermark"] in {c["watermark"] for c in result["configs"]}
