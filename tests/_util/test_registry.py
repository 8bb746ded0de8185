"""The registry behind every extensible concept: in-tree entries, lazy ones, entry points."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from evalrun._util.errors import SpecError
from evalrun._util.registry import Registry

GROUP = "evalrun.test_registry_group"


def _distribution(root: Path, name: str, entries: str) -> None:
    """An installed-looking distribution ``name`` declaring ``entries`` in the test group."""
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{entries}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return tmp_path


def _registry() -> Registry[object]:
    reg: Registry[object] = Registry("widget", GROUP, option="--widget")
    reg.register("plain", len)
    reg.register_lazy("lazy", "json:dumps")
    return reg


def test_a_plugin_adds_a_name_and_loads_on_first_use(site: Path) -> None:
    _distribution(site, "widgets", "extra = json:loads")
    reg = _registry()
    assert reg.names() == ["extra", "lazy", "plain"]
    import json

    assert reg.get("extra") is json.loads and reg.get("lazy") is json.dumps and reg.get("plain") is len


@pytest.mark.parametrize("clash, builtin", [("plain", "evalrun (builtins)"), ("lazy", "evalrun (json:dumps)")])
def test_a_plugin_clashing_with_a_built_in_name_is_an_error_naming_both(site: Path, clash: str,
                                                                         builtin: str) -> None:
    _distribution(site, "widgets", f"{clash} = json:loads")
    reg = _registry()
    for ask in (reg.names, lambda: reg.get("unknown-name")):
        with pytest.raises(SpecError) as err:
            ask()
        message = str(err.value)
        assert f"widget {clash!r} is registered twice: by {builtin}" in message
        assert f"the entry point '{clash} = json:loads' of package widgets 1.0" in message


def test_two_plugins_with_one_name_is_an_error_naming_both(site: Path) -> None:
    _distribution(site, "first", "twin = json:loads")
    _distribution(site, "second", "twin = json:dumps")
    with pytest.raises(SpecError) as err:
        _registry().names()
    message = str(err.value)
    assert "widget 'twin' is registered twice" in message
    assert "package first 1.0" in message and "package second 1.0" in message


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(SpecError, match=r"--widget nope: unknown widget 'nope'; known: lazy, plain"):
        _registry().get("nope")


def test_two_threads_loading_one_lazy_entry_both_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second ``get`` that loads the entry while the first is importing it (the viewer's
    request threads and its cache warmer) leaves the first a KeyError-free answer (was: ``del``
    of the lazy reference the second had already removed)."""
    reg = _registry()
    real = importlib.import_module
    inner: list[object] = []

    def import_module(name: str) -> object:
        if not inner:  # the other thread's load, finished while this one imports
            inner.append(None)
            inner[0] = reg.get("lazy")
        return real(name)

    monkeypatch.setattr(importlib, "import_module", import_module)
    import json

    assert reg.get("lazy") is json.dumps and inner == [json.dumps]
