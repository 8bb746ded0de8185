"""Extension by registration: a third-party attack through an entry point, `evalrun attack`,
and the direction of imports between the layers."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from evalrun.model.providers import parse_model

REPO = Path(__file__).resolve().parents[2]


def evalrun(*args: str, cwd: Path, env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalrun.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, input=stdin, timeout=600)


def _plugin_package(root: Path) -> dict[str, str]:
    """An installed-looking distribution that registers the attack ``shout``."""
    (root / "shoutpkg.py").write_text(textwrap.dedent('''
        from evalrun.attacks import text_attack

        def _shout(text, spec, rng):
            """Upper-case every word."""
            return text.upper()

        SHOUT = text_attack("shout", random=False, registry=None)(_shout)
    '''))
    info = root / "shoutpkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: shoutpkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[evalrun.attacks]\nshout = shoutpkg:SHOUT\n")
    return {"PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}


def test_a_third_party_attack_registered_by_entry_point_runs(tmp_path: Path, make_pack) -> None:
    site = tmp_path / "site"
    site.mkdir()
    env = _plugin_package(site)
    (tmp_path / "in.txt").write_text("keep calm and carry on")
    proc = evalrun("attack", "--attack", "shout", "--text", str(tmp_path / "in.txt"), cwd=tmp_path, env=env)
    assert proc.returncode == 0 and proc.stdout == "KEEP CALM AND CARRY ON", proc.stderr
    pack = make_pack()
    db = tmp_path / "r.sqlite"
    proc = evalrun("run", "--pack", str(pack), "--model", "reference", "--attack", "shout", "--out", str(db),
                   "--no-progress", cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = sqlite3.connect(db).execute("SELECT attack, attacked_output, label FROM results ORDER BY case_id").fetchall()
    assert rows == [("shout", f"W{i}", "BAD") for i in range(1, 5)]
    # without the package the name is unknown, and the error lists what is registered
    proc = evalrun("attack", "--attack", "shout", cwd=tmp_path, stdin="x")
    assert proc.returncode == 2 and "unknown attack 'shout'; known: contraction, emoji, expansion" in proc.stderr


def test_evalrun_attack_shows_a_seeded_attack_on_stdin(tmp_path: Path) -> None:
    text = "The quick brown fox jumps over the lazy dog near the quiet river bank today."
    one = evalrun("attack", "--attack", "swap:p=0.5", "--seed", "1", cwd=tmp_path, stdin=text)
    again = evalrun("attack", "--attack", "swap:p=0.5", "--seed", "1", cwd=tmp_path, stdin=text)
    other = evalrun("attack", "--attack", "swap:p=0.5", "--seed", "2", cwd=tmp_path, stdin=text)
    assert one.returncode == 0 and one.stdout == again.stdout and one.stdout not in (text, other.stdout)
    from evalrun.attacks import parse_attack

    assert one.stdout == parse_attack("swap:p=0.5").apply(text, 1)  # the stage's own code path
    proc = evalrun("attack", "--attack", "paraphrase:openai:m", cwd=tmp_path, stdin=text)
    assert proc.returncode == 2 and "a model attack runs in the transform stage" in proc.stderr


def test_the_emoji_attack_asks_for_emojis_and_removes_them(tmp_path: Path, make_pack) -> None:
    """A prompt attack: its items have their own prompt and generation; the stored text has
    no emoji left."""
    from evalrun.pack.loading import load_pack
    from evalrun.run.options import RunOptions
    from evalrun.run.plan import make_items

    pack = load_pack(make_pack())
    items = list(make_items(pack, RunOptions(models=(parse_model("reference"),), attacks=("none", "lowercase", "emoji"))))
    by_attack = {it.attack: it for it in items if it.case.id == "c1"}
    assert by_attack["none"].gen_key == by_attack["lowercase"].gen_key != by_attack["emoji"].gen_key
    assert by_attack["emoji"].prompt.user == "Say w1\n\nWrite your answer with an emoji between every two words."
    from evalrun.attacks import parse_attack

    assert parse_attack("emoji").apply("The 🐈 cat 👍🏽 sat\non 🇫🇷 the mat ❤️", 0) == "The cat sat\non the mat"
