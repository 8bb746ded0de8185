"""``evalrun tune`` (WaterBench, section 3.2): the search on a synthetic strength
surface (pure), grid overrides and their errors, and the command end to end on the embedded
model with generations cached in the store."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest

from evalrun._util.errors import EvalrunError
from evalrun._util.specs import parse_spec
from evalrun.analysis.tune import STRENGTH_GRIDS, Trial, apply_grid, search

KGW = STRENGTH_GRIDS.get("kgw")


def surface(tpr_of):
    """A measure function over a synthetic TPR surface; records what it was asked."""
    asked: list[str] = []

    def measure(spec: str) -> Trial:
        params = parse_spec(spec).params
        tpr = tpr_of(float(params["gamma"]), float(params["delta"]))
        asked.append(spec)
        n = 1000
        return Trial(watermark=spec, outer=math.nan, inner=math.nan, tpr=tpr, ci_low=tpr, ci_high=tpr, n=n,
                     detected=round(tpr * n))
    return measure, asked


def logistic(gamma: float, delta: float) -> float:
    """TPR grows with delta; a larger gamma needs more delta (the shape of WaterBench Fig. 3)."""
    return 1 / (1 + math.exp(-(delta - 2 - 8 * gamma) * 2))


def test_bisection_finds_the_delta_of_the_target_per_gamma() -> None:
    measure, asked = surface(logistic)
    grid = apply_grid(KGW, ["gamma=0.25,0.5"])
    chosen, tried = search(measure, parse_spec("kgw"), grid, target=0.7, steps=8, tolerance=0.02, refine=False)
    assert abs(chosen.tpr - 0.7) <= 0.02
    # the exact delta of TPR 0.7 at gamma 0.25 is 4 + ln(0.7/0.3)/2 = 4.42; at gamma 0.5, 6.42
    best = {g: min((t for t in tried if t.outer == g), key=lambda t: abs(t.tpr - 0.7)) for g in (0.25, 0.5)}
    assert best[0.25].inner == pytest.approx(4.42, abs=0.2) and best[0.5].inner == pytest.approx(6.42, abs=0.2)
    assert chosen == min(tried, key=lambda t: abs(t.tpr - 0.7))
    assert len(asked) == len(set(asked)) == len(tried) <= 2 * 9
    assert all(t.inner == round(t.inner, 2) for t in tried)
    assert tried[0].inner == 15.0  # the top of the range first


def test_refinement_fits_the_delta_of_the_target_from_all_measurements() -> None:
    from evalrun.analysis.tune import fit_inner

    measure, _ = surface(logistic)
    # coarse bisection (2 steps) stays far from the target; the fit over its points finds delta
    chosen, tried = search(measure, parse_spec("kgw"), apply_grid(KGW, ["gamma=0.25,0.5"]), target=0.7, steps=2)
    assert chosen.outer == 0.25 and chosen.inner == pytest.approx(4.42, abs=0.02)  # 4 + ln(7/3)/2
    assert chosen.tpr == pytest.approx(0.7, abs=0.01) and chosen is tried[-2]  # gamma 0.5's refined point is last
    assert tried[-1].outer == 0.5 and tried[-1].inner == pytest.approx(6.42, abs=0.02)
    coarse = [t for t in tried if t.outer == 0.25][:-1]
    assert min(abs(t.tpr - 0.7) for t in coarse) > 0.1  # what the plain rule would have had to choose from
    # noisy measurements: the fit pools them instead of trusting the luckiest one
    noisy = [Trial("s", 0.25, d, tpr=k / 64, ci_low=0, ci_high=1, n=64, detected=k)
             for d, k in [(1.0, 5), (1.5, 35), (1.62, 42), (1.66, 49), (1.69, 56), (1.75, 51), (2.0, 60)]]
    assert 1.5 < fit_inner(noisy, 0.7) < 1.69
    assert fit_inner(noisy[:2], 0.7) is None  # no bracket: both below 0.7


def test_ties_go_to_the_smaller_delta_then_the_default_gamma() -> None:
    measure, _ = surface(lambda g, d: logistic(0.25, d))  # gamma makes no difference
    chosen, tried = search(measure, parse_spec("kgw"), apply_grid(KGW, ["gamma=0.5,0.1,0.25"]), target=0.7,
                           refine=False)
    assert {t.inner for t in tried if t.outer == 0.5} == {t.inner for t in tried if t.outer == 0.25}
    assert chosen.outer == 0.25 and chosen.inner == min(t.inner for t in tried if t.tpr == chosen.tpr)


def test_an_unreachable_gamma_costs_one_measurement() -> None:
    measure, asked = surface(lambda g, d: 0.3 if g > 0.6 else logistic(g, d))
    chosen, tried = search(measure, parse_spec("kgw"), apply_grid(KGW, ["gamma=0.9,0.25"]), target=0.7)
    assert [t.outer for t in tried].count(0.9) == 1 and chosen.outer == 0.25


def test_the_closest_configuration_is_chosen_when_none_is_within_tolerance() -> None:
    # a step function: TPR 0 below delta 3, 1 from 3 on -- nothing near 0.7
    measure, _ = surface(lambda g, d: 1.0 if d >= 3 else 0.0)
    chosen, tried = search(measure, parse_spec("kgw"), apply_grid(KGW, ["gamma=0.25", "delta=0:8"]), target=0.7,
                           steps=6, refine=False)
    assert chosen.tpr == 1.0 and chosen.inner == min(t.inner for t in tried if t.tpr == 1.0)
    assert 3.0 <= chosen.inner < 3.25


def test_grid_overrides_and_their_errors() -> None:
    grid = apply_grid(KGW, ["gamma=0.1,0.5", "delta=1:6"])
    assert grid.outer_values == (0.1, 0.5) and grid.inner_range == (1.0, 6.0)
    for bad, message in [("gamma", "expected gamma=v1"), ("gamma=x", "not a number"), ("delta=3", "lo:hi"),
                         ("delta=5:1", "lo < hi"), ("context=2", "grid has gamma"), ("delta=0:inf", "finite")]:
        with pytest.raises(EvalrunError, match=message):
            apply_grid(KGW, [bad])
    with pytest.raises(EvalrunError, match="strength grid 'exp'"):
        STRENGTH_GRIDS.get("exp")


def _pack(make_detection_pack, root: Path, cases: int = 10) -> Path:
    return make_detection_pack(root, "tiny_detect", cases, description="test pack: detection on short continuations",
                          z_threshold=2.0, topic="the garden")


@pytest.mark.slow
def test_tune_end_to_end_on_the_embedded_model(tmp_path: Path, capsys, monkeypatch, make_detection_pack) -> None:
    from evalrun.cli.main import main

    monkeypatch.delenv("EVALRUN_WATERMARK_KEY", raising=False)
    pack = _pack(make_detection_pack, tmp_path)
    db, out = tmp_path / "tune.sqlite", tmp_path / "tune.json"
    secret = "tune-secret-key-123"
    args = ["tune", "--pack", str(pack), "--scheme", "kgw", "--target-tpr", "0.7", "--grid", "gamma=0.25",
            "--grid", "delta=0:8", "--steps", "2", "--out", str(db), "--json", str(out), "--key", secret]
    assert main(args) == 0
    captured = capsys.readouterr()
    result = json.loads(out.read_text())
    assert set(result) >= {"watermark", "tpr", "tried"} and result["z_threshold"] == 2.0  # the pack's
    assert result["watermark"] in [t["watermark"] for t in result["tried"]]
    chosen = next(t for t in result["tried"] if t["watermark"] == result["watermark"])
    assert chosen["tpr"] == result["tpr"] and result["refine"] is True
    # top of the range, two bisection steps, and at most one refined point
    assert [t["inner"] for t in result["tried"]][:1] == [8.0] and 2 <= len(result["tried"]) <= 4
    assert all(t["n"] == 10 and t["generated"] == 10 for t in result["tried"])
    assert f"tune: chose {result['watermark']}" in captured.out
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT watermark, label, metadata_json FROM results").fetchall()
        analyses = conn.execute("SELECT kind, result_json FROM analyses").fetchall()
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert len(rows) == 10 * len(result["tried"])
    by_spec: dict[str, list] = {}
    for watermark, _label, meta in rows:
        by_spec.setdefault(watermark, []).append(json.loads(meta))
    for t in result["tried"]:  # the TPR is the share of stored outputs at z >= 2
        assert t["detected"] == sum(m["z_score"] is not None and m["z_score"] >= 2.0 for m in by_spec[t["watermark"]])
    assert [k for k, _ in analyses] == ["tune"] and json.loads(analyses[0][1])["watermark"] == result["watermark"]
    assert secret not in dump  # the key is used, never stored
    # again: every configuration comes from the store
    assert main(args) == 0
    again = json.loads(out.read_text())
    assert again["watermark"] == result["watermark"]
    assert all(t["generated"] == 0 and t["cached"] == 10 for t in again["tried"])
    capsys.readouterr()
    # the report and metrics.json show the chosen configuration's TPR
    assert main(["report", "--db", str(db), "--out", str(tmp_path / "r")]) == 0
    records = [r for r in json.loads((tmp_path / "r" / "metrics.json").read_text())
               if r["metric"] == "tuned_tpr" and r["params"] == {"target_tpr": 0.7}]
    assert records and records[0]["watermark"] == result["watermark"] and records[0]["value"] == result["tpr"]
    assert "Strength tuning" in (tmp_path / "r" / "report.md").read_text()


def test_tune_refuses_what_it_cannot_do(tmp_path: Path, capsys, monkeypatch, make_detection_pack) -> None:
    from evalrun.cli.main import main

    monkeypatch.delenv("EVALRUN_WATERMARK_KEY", raising=False)
    pack = _pack(make_detection_pack, tmp_path)
    base = ["tune", "--pack", str(pack), "--out", str(tmp_path / "x.sqlite")]
    for extra, message in [(["--scheme", "kgw", "--target-tpr", "0.7"], "needs the watermark key"),
                           (["--scheme", "kgw", "--target-tpr", "1.5", "--key", "k"], "--target-tpr 1.5"),
                           (["--scheme", "kgw:delta=2", "--target-tpr", "0.7", "--key", "k"], "delta is what the search"),
                           (["--scheme", "exp", "--target-tpr", "0.7", "--key", "k"], "unknown strength grid"),
                           (["--scheme", "kgw", "--target-tpr", "0.7", "--key", "k", "--model", "embedded",
                             "--model", "reference"], "one model at a time")]:
        assert main([*base, *extra]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "x.sqlite").exists()
