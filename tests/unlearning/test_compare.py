"""``evalrun unlearning compare`` end to end with a tiny setting: unlearning_d1 / unlearning_d2
records for WaterDrum and every baseline in every similarity setting, Table 4's watermark
methods in the no-duplicate setting, and Fig. 4's unlearned models in the report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from evalrun.unlearning.baselines import BASELINES
from evalrun.unlearning.compare import WATERDRUM, run_compare
from evalrun.unlearning.demo import DemoConfig
from evalrun.unlearning.finetune import TrainConfig
from evalrun.unlearning.owner_watermarks import TABLE4
from evalrun.unlearning.similarity import SETTINGS

pytest.importorskip("torch")
pytest.importorskip("transformers")

TINY = DemoConfig(owners=2, points=4, continuation_tokens=12, repetitions=1,
                  train=TrainConfig(epochs=2, lr=1e-3, batch_size=8),
                  unlearn=TrainConfig(epochs=1, lr=1e-4, batch_size=8))


@pytest.mark.slow
def test_tiny_compare_writes_d1_d2_per_method_and_setting(tmp_path: Path) -> None:
    from evalrun.report.unlearning import FIG4, write_compare_report

    headline = run_compare(tmp_path, config=TINY, threads=1, fractions=(0.5,), algorithms=("gd", "kl"),
                           log=lambda s: None, write_report=write_compare_report)
    metrics = json.loads((tmp_path / "report" / "metrics.json").read_text())
    methods = [WATERDRUM, *BASELINES]
    for name in ("unlearning_d1", "unlearning_d2"):
        got = {(m["params"]["method"], m["params"]["similarity"]) for m in metrics if m["metric"] == name}
        assert got == {(m, s) for m in methods for s in SETTINGS}
        # WaterDrum's records name the watermark: Waterfall in every setting, Table 4's in "none"
        marks = {(m["params"]["similarity"], m["params"].get("watermark")) for m in metrics
                 if m["metric"] == name and m["params"]["method"] == WATERDRUM}
        assert marks == {(s, "waterfall") for s in SETTINGS} | {("none", w) for w in TABLE4}
        assert all("watermark" not in m["params"] for m in metrics
                   if m["metric"] == name and m["params"]["method"] != WATERDRUM)
    d1 = [m for m in metrics if m["metric"] == "unlearning_d1"]
    assert all(m["value"] is None or 0.0 <= m["value"] <= 1.0 for m in d1)
    wd = [m for m in d1 if m["params"]["method"] == WATERDRUM]
    assert all(m["value"] is not None and m["ci_low"] is not None for m in wd)
    assert not math.isnan(headline["d1"]["waterdrum/none"])
    assert headline["table4"]["waterfall"]["d1"] == headline["d1"]["waterdrum/none"]
    assert all(headline["table4"][w]["seconds_per_text"] > 0 for w in TABLE4)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "D1 separability" in md and "D2 calibration" in md and "rouge_l_recall" in md
    assert "Table 4" in md and "Kirchenbauer et al." in md and "Kuditipudi et al." in md and "0.996" in md
    assert FIG4 in md and (tmp_path / "report" / FIG4).stat().st_size > 1000
    assert set(headline["fig4"]) >= {"original", "retrained", "gd", "kl"}
    models = {p.parent.name + "/" + p.name for p in (tmp_path / "models").glob("*/*")}
    kinds = ("original", "retrained", "calibration-0.5")
    assert models == ({f"{s}/{m}" for s in SETTINGS for m in kinds} | {"none/unlearned-gd", "none/unlearned-kl"}
                      | {f"table4-{w}/{m}" for w in TABLE4 if w != "waterfall" for m in kinds})


def test_unknown_watermark_method_names_the_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from evalrun.cli.main import main

    assert main(["unlearning", "compare", "--out", str(tmp_path / "o"), "--watermarks", "kgw,bogus"]) == 2
    assert "--watermarks bogus: unknown WaterDrum watermark method 'bogus'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_both_sizes_leave_passages_for_the_mia_holdout() -> None:
    """The full-size comparison once took every shipped passage and stopped at once with 'no
    passages are left over for the MIA holdout set'; each size keeps a holdout no model
    trains on, as many passages as an owner has in the experiment."""
    from evalrun.unlearning.compare import COMPARE_FULL, holdout_points
    from evalrun.unlearning.demo import QUICK, select_points

    for config in (QUICK, COMPARE_FULL):
        chosen = select_points(config)
        held = holdout_points(config, chosen)
        assert len(held) == config.points
        assert not {p["id"] for p in held} & {p["id"] for p in chosen}
