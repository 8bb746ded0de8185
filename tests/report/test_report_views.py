"""Per-pack report views as a registry (``REPORT_VIEWS``): a pack picks one with
``report_view`` in its pack.toml, else the view registered under its name, else the default
view; what differs between views is a field, never a name. And the report's rates: every
Wilson interval it shows is :func:`evalrun.metrics.stats.wilson_interval` on the same counts."""

from __future__ import annotations

import shutil
import sqlite3
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import pytest

from evalrun._util.errors import EvalrunError, PackError
from evalrun.metrics import stats
from evalrun.pack.loading import declared_report_view, load_pack
from evalrun.report import build_report, charts, tables
from evalrun.report.data import EXTRACTION, REPORT_VIEWS, WATERMARK, load, view_for

WR = "watermark_robustness"
HME = "hidden_message_extraction"
MINE = "my_extraction"


def test_the_shipped_packs_views_are_registered_under_their_pack_names() -> None:
    assert REPORT_VIEWS.group == "evalrun.report_views"
    assert {WR, HME} <= set(REPORT_VIEWS.names())
    assert REPORT_VIEWS.get(WR) is WATERMARK and REPORT_VIEWS.get(HME) is EXTRACTION
    assert view_for(HME, []) is EXTRACTION and view_for(WR, []) is WATERMARK
    # a pack without a view of its own and without report_view gets the default view
    assert view_for("toy_pack", []).blocks == ("generic_note",)


def test_behaviour_is_in_fields_not_in_the_name(three_model_store) -> None:
    """The extraction view's differences (accuracy, expected/got) come with the view under any
    name; the watermark view under the extraction's name does not take them."""
    data = load(three_model_store.db, None)
    items = data.packs[HME]
    renamed = replace(EXTRACTION, name="anything")
    summary = tables.label_summary(renamed, items)
    assert "accuracy" in summary.headers and summary.rows == tables.label_summary(EXTRACTION, items).rows
    assert {"expected", "got"} <= set(tables.per_case(renamed, items).headers)
    impostor = replace(WATERMARK, name=HME)
    wr_items = data.packs[WR]
    assert "accuracy" not in tables.label_summary(impostor, wr_items).headers
    assert "reason" in tables.per_case(impostor, wr_items).headers


def _store_with_pack_renamed(three_model_store, tmp_path: Path) -> Path:
    db = tmp_path / "renamed.sqlite"
    shutil.copy(three_model_store.db, db)
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE results SET pack = ? WHERE pack = ?", (MINE, HME))
    con.close()
    return db


def _with_report_view(pack: Path, line: str) -> Path:
    toml = pack / "pack.toml"
    toml.write_text(toml.read_text().replace("[defaults]", f"{line}\n[defaults]"))
    return pack


def test_a_pack_toml_report_view_selects_the_view(three_model_store, tmp_path: Path, make_pack, md_tables,
                                                   monkeypatch) -> None:
    db = _store_with_pack_renamed(three_model_store, tmp_path)
    pack = _with_report_view(make_pack(MINE, root=tmp_path / "packs"), f'report_view = "{HME}"')
    assert declared_report_view(pack) == HME and load_pack(pack).report_view == HME
    monkeypatch.setenv("EVALRUN_PACKS", str(tmp_path / "packs"))
    view = load(db, None).views[MINE]
    assert (view.name, view.title, view.chart_prefix) == (MINE, f"Hidden-message extraction ({MINE})", "my-extraction-")
    assert view.per_case_expected and view.rate_name == "accuracy" and view.blocks == EXTRACTION.blocks
    out = tmp_path / "report"
    build_report(db, out)
    md = md_tables((out / "report.md").read_text())
    summary = md[f"Hidden-message extraction ({MINE})"][0]
    assert {"accuracy", "FP rate on controls", *EXTRACTION.labels} <= set(summary[0])
    assert {"expected", "got"} <= set(md[f"Per-case results: Hidden-message extraction ({MINE})"][0][0])
    for name in ("extraction_by_scheme.png", "extraction_false_positives.png"):
        assert (out / f"my-extraction-{name}").stat().st_size > 1000
        assert not (out / name).exists()   # the view's own pack is not in this store
    # the numbers are those of the same results under the pack's own name (but the bootstrap,
    # whose seed comes from the group, pack name included)
    original = md_tables(build_report(three_model_store.db, tmp_path / "orig").read_text())["Hidden-message extraction"]
    assert [{**r, "95% CI (bootstrap)": ""} for r in summary] == [{**r, "95% CI (bootstrap)": ""} for r in original[0]]
    # without the key, the pack gets the default view; packs_dirs finds a pack as EVALRUN_PACKS does
    monkeypatch.delenv("EVALRUN_PACKS")
    plain = tmp_path / "plain"
    shutil.copytree(pack, plain / MINE)
    (plain / MINE / "pack.toml").write_text((pack / "pack.toml").read_text().replace(f'report_view = "{HME}"\n', ""))
    assert load(db, None, packs_dirs=[plain]).views[MINE].blocks == ("generic_note",)
    assert load(db, None, packs_dirs=[tmp_path / "packs"]).views[MINE].per_case_expected


def test_an_unknown_report_view_names_the_pack_toml(three_model_store, tmp_path: Path, make_pack) -> None:
    db = _store_with_pack_renamed(three_model_store, tmp_path)
    pack = _with_report_view(make_pack(MINE, root=tmp_path / "packs"), 'report_view = "no_such_view"')
    with pytest.raises(EvalrunError, match=r"pack\.toml: report_view 'no_such_view': unknown report view; "
                                           rf"known: .*{HME}"):
        load(db, None, packs_dirs=[tmp_path / "packs"])
    _with_report_view(make_pack("bad", root=tmp_path / "other"), "report_view = 3")
    with pytest.raises(PackError, match="report_view must be the name of a report view"):
        load_pack(tmp_path / "other" / "bad")
    assert declared_report_view(pack) == "no_such_view"


# -- every Wilson interval the report shows is the metrics' one ----------------------------

def test_report_wilson_numbers_equal_wilson_interval_on_the_same_counts(three_model_report: Path, three_model_store,
                                                                       md_tables) -> None:
    """The summary's rate and FP columns, the per-group breakdown and the extraction chart's bars
    are ``stats.wilson_interval`` of the counts the table itself shows."""
    md = md_tables((three_model_report / "report.md").read_text())
    checked = 0
    for heading, view, rate in (("Watermark robustness", WATERMARK, "PASS rate"),
                                ("Hidden-message extraction", EXTRACTION, "accuracy")):
        summary, breakdown = md[heading][0], md[heading][1]
        for row in summary:
            counts = {lab: int(row[lab]) for lab in view.labels}
            est = stats.wilson_interval(counts[view.success], sum(counts.values()))
            assert (row[rate], row["95% CI (Wilson)"]) == (tables.pct(est.value), tables.pct_ci(est))
            checked += 1
        for row in breakdown:
            counts = {lab: int(row[lab]) for lab in view.labels}
            est = stats.wilson_interval(counts[view.success], sum(counts.values()))
            assert (row[f"{view.success} rate"], row["95% CI"]) == (tables.pct(est.value), tables.pct_ci(est))
            checked += 1
    assert checked > 20
    data = load(three_model_store.db, None)
    items = data.packs[HME]
    counts: dict[tuple[str, str], Counter] = defaultdict(Counter)
    controls: dict[str, Counter] = defaultdict(Counter)
    for r in items:
        if r.graded:
            counts[(r.system, r.group)][r.label] += 1
            if r.group == EXTRACTION.control_group:
                controls[r.system][r.label] += 1
    rates = charts.scheme_rates(EXTRACTION, items)
    assert set(rates) == set(counts)
    for key, c in counts.items():
        assert rates[key] == stats.wilson_interval(c["CORRECT"], sum(c.values()))
    by_model = {row["model"]: row for row in md["Hidden-message extraction"][0]}
    for system, c in controls.items():
        fp = stats.wilson_interval(c["FALSE_POSITIVE"], sum(c.values()))
        assert tables.false_positive_rate(EXTRACTION, [r for r in items if r.system == system]) == fp
        assert (by_model[system]["FP rate on controls"], by_model[system]["FP 95% CI"]) == (
            tables.pct(fp.value), tables.pct_ci(fp))


def test_the_report_has_no_wilson_formula_of_its_own() -> None:
    """Rates come from evalrun.metrics: no normal quantile or square root in report/."""
    import evalrun.report as report_package

    for path in Path(report_package.__file__).parent.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        for formula in ("math.sqrt", "np.sqrt", "1.96", "ndtri", "norm.ppf", "Z_DEFAULT_LEVEL"):
            assert formula not in text, (path.name, formula)


def test_evalrun_report_packs_dir_finds_the_packs_view(three_model_store, tmp_path: Path, make_pack,
                                                       monkeypatch) -> None:
    """The command line reaches the view too: ``evalrun report --packs-dir DIR``."""
    import subprocess
    import sys

    db = _store_with_pack_renamed(three_model_store, tmp_path)
    _with_report_view(make_pack(MINE, root=tmp_path / "packs"), f'report_view = "{HME}"')
    monkeypatch.delenv("EVALRUN_PACKS", raising=False)
    outs = {}
    for name, extra in (("without", []), ("with", ["--packs-dir", str(tmp_path / "packs")])):
        out = tmp_path / name
        proc = subprocess.run([sys.executable, "-m", "evalrun.cli", "report", "--db", str(db), "--out", str(out),
                               *extra], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        outs[name] = (out / "report.md").read_text()
    assert f"Hidden-message extraction ({MINE})" in outs["with"]
    assert f"Hidden-message extraction ({MINE})" not in outs["without"]
