"""Oversized case files and replay lines are rejected with the file and the size, without
being read into memory whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalrun._util.jsonl import read_lines
from evalrun.pack.loading import load_pack

BIG = 120 * 1000 * 1000


def _huge_jsonl(path: Path) -> None:
    """A small case, a 120 MB case on line 2, and a small case after it."""
    with path.open("w") as fh:
        fh.write(json.dumps({"id": "small1", "word": "a", "kind": "a"}) + "\n")
        fh.write('{"id": "huge", "word": "')
        chunk = "x" * 1_000_000
        for _ in range(BIG // len(chunk)):
            fh.write(chunk)
        fh.write('", "kind": "a"}\n')
        fh.write(json.dumps({"id": "small2", "word": "b", "kind": "b"}) + "\n")


def test_read_lines_reports_long_lines_by_size(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"short\n\n" + b"y" * 25 + b"\nlast")
    lines = list(read_lines(path, limit=10))
    assert [(ln.number, ln.text, ln.size) for ln in lines] == [(1, "short", 6), (3, None, 26), (4, "last", 4)]


def test_validate_of_a_120_mb_case_file_stays_small(tmp_path: Path, make_pack) -> None:
    pack = make_pack(root=tmp_path / "packs", cases=[])
    _huge_jsonl(pack / "cases" / "dump.jsonl")
    big_json = pack / "cases" / "big.json"
    big_json.write_text(json.dumps({"id": "big", "word": "z" * 1_500_000, "kind": "a"}))
    # VmHWM is the peak RSS of this process's own memory; getrusage's ru_maxrss would also count
    # the parent's peak, which Linux carries over a fork and exec (a full test worker's)
    code = ("import re, sys; from evalrun.cli.main import main; rc = main(['validate', sys.argv[1]]);"
            " hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1);"
            " print('maxrss_kb', hwm); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(pack)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{pack / 'cases' / 'dump.jsonl'}:2: $: case of 120,000,0" in proc.stdout
    assert "is over the limit of 1,000,000 bytes per case (max_case_bytes in pack.toml)" in proc.stdout
    assert f"{big_json}: $: case of 1,500,0" in proc.stdout
    assert "2 cases" in proc.stdout.splitlines()[0], proc.stdout  # the small cases around the huge one still load
    rss_mb = int(proc.stdout.split("maxrss_kb")[1].split()[0]) / 1024
    assert rss_mb < 400, f"validate took {rss_mb:.0f} MB"


def test_the_limit_is_configurable_per_pack(tmp_path: Path, make_pack) -> None:
    pack = make_pack(root=tmp_path / "packs")
    toml = pack / "pack.toml"
    toml.write_text(toml.read_text().replace('pass_score = 1.0', 'pass_score = 1.0\nmax_case_bytes = 20'))
    loaded = load_pack(pack)
    assert len(loaded.cases) == 0 and all("limit of 20 bytes" in str(e) for e in loaded.case_errors)
    toml.write_text(toml.read_text().replace("max_case_bytes = 20", "max_case_bytes = 5000"))
    assert len(load_pack(pack).cases) == 4
    toml.write_text(toml.read_text().replace("max_case_bytes = 5000", 'max_case_bytes = "big"'))
    with pytest.raises(Exception, match="max_case_bytes must be a positive integer"):
        load_pack(pack)


def test_an_oversized_replay_line_is_one_clear_error(tmp_path: Path) -> None:
    replay = tmp_path / "out.jsonl"
    replay.write_text(json.dumps({"case_id": "rewrite_001", "output": "o" * 2_000_000}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "evalrun.cli", "run", "--pack", "watermark_robustness",
                           "--model", f"replay:{replay}", "--out", str(tmp_path / "r.sqlite")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2
    size = replay.stat().st_size
    assert proc.stderr.strip() == (f"evalrun: error: {replay}:1: line of {size:,} bytes is over the limit of"
                                   " 1,000,000 bytes per replay line")
    assert not (tmp_path / "r.sqlite").exists()
