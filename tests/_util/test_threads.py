"""evalrun starts torch's OpenMP threads with a short spin, unless the user chose otherwise."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from evalrun._util.threads import SPIN_COUNT, USER_SETTINGS, share_cores


def test_sets_the_spin_count_when_the_user_set_nothing() -> None:
    environ: dict[str, str] = {"PATH": "/bin"}
    assert share_cores(environ) is True
    assert environ == {"PATH": "/bin", "GOMP_SPINCOUNT": SPIN_COUNT}


@pytest.mark.parametrize("name", USER_SETTINGS)
def test_keeps_what_the_user_chose(name: str) -> None:
    environ = {name: "ACTIVE" if name == "OMP_WAIT_POLICY" else "300000"}
    assert share_cores(environ) is False
    assert environ == {name: environ[name]}


def _environment_seen_by_torch(extra: dict[str, str]) -> str:
    """GOMP_SPINCOUNT as a fresh ``import evalrun`` leaves it, and whether torch was still
    unloaded then (libgomp reads the variable when torch loads it)."""
    env = {k: v for k, v in os.environ.items() if k not in USER_SETTINGS} | extra
    code = ("import sys, os, evalrun; "
            "print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_import_evalrun_sets_it_before_torch_loads() -> None:
    assert _environment_seen_by_torch({}) == f"{SPIN_COUNT} False"
    assert _environment_seen_by_torch({"GOMP_SPINCOUNT": "7"}) == "7 False"
    assert _environment_seen_by_torch({"OMP_WAIT_POLICY": "PASSIVE"}) == "None False"
