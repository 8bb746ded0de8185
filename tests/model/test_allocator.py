"""The glibc allocator settings: applied once, on by default on glibc Linux, and off with
EVALRUN_MALLOC_TUNING=0 (checked in fresh interpreters, as the settings are process-wide)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from evalrun.model import allocator

PROBE = ("from evalrun.model.allocator import allocator_tuned, tune_allocator; "
         "before = allocator_tuned(); first = tune_allocator(); "
         "print(before, first, tune_allocator(), allocator_tuned())")


def _probe(value: str | None) -> str:
    env = dict(os.environ)
    env.pop(allocator.ENV, None)
    if value is not None:
        env[allocator.ENV] = value
    return subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                          text=True, check=True).stdout.split()


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="mallopt settings exist on glibc Linux only")
def test_settings_apply_once_on_glibc_and_are_idempotent() -> None:
    assert _probe(None) == ["None", "True", "True", "True"]


def test_the_environment_variable_turns_the_settings_off() -> None:
    assert _probe("0") == ["None", "False", "False", "False"]


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="mallopt settings exist on glibc Linux only")
@pytest.mark.parametrize("entry", [
    "import evalrun.cli.main as c; c.main(['report', '--help'])",
    "from evalrun.model.embedded import embedded_model_path; "
    "from evalrun.plugins.providers.hf import HFProvider; "
    "HFProvider(str(embedded_model_path()), spec='embedded')",
])
def test_running_a_command_or_loading_a_model_applies_them(entry: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != allocator.ENV}
    code = ("from evalrun.model.allocator import allocator_tuned; import sys\n"
            f"try:\n    {entry}\nexcept SystemExit:\n    pass\n"
            "print('tuned', allocator_tuned(), file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "tuned True" in run.stderr


def test_other_platforms_leave_the_allocator_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counterpart of the glibc-only tests above, run on every platform: elsewhere the
    settings are reported off and mallopt is never looked up."""
    def no_libc(*args: object, **kwargs: object) -> None:
        raise AssertionError("mallopt must not be looked up outside glibc")

    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.delenv(allocator.ENV, raising=False)
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("musl", "1.2"))
    monkeypatch.setattr(allocator.ctypes, "CDLL", no_libc)
    assert allocator.tune_allocator() is False
    assert allocator.allocator_tuned() is False
    monkeypatch.setattr(allocator, "_applied", None)
    monkeypatch.setattr(allocator.sys, "platform", "darwin")
    assert allocator.tune_allocator() is False
