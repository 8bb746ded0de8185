"""The import graph, built from the source: imports run one way.

Every ``import`` counts -- module level, inside functions and under ``TYPE_CHECKING`` -- so a
cycle cannot hide in a function body. The folders are mapped to their installed names
(``plugins/`` -> ``evalrun.plugins`` ...), as ``pyproject.toml`` installs them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"evalrun": "evalrun", "plugins": "evalrun.plugins", "kernels": "evalrun.kernels",
           "report": "evalrun.report"}
#: the read side: turns stored rows into numbers and pages, never runs a stage
READ_SIDE = ("evalrun.metrics", "evalrun.report", "evalrun.view")
WRITE_SIDE = ("evalrun.run", "evalrun.analysis", "evalrun.plugins")


def _modules() -> dict[str, Path]:
    out = {}
    for folder, name in FOLDERS.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([name, *parts])] = path
    return out


def _graph() -> dict[str, set[str]]:
    """module -> the evalrun modules it imports (a name imported from a package counts as
    the submodule when there is one, else as the package)."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            deps.update(r for t in targets if t.startswith("evalrun") and (r := resolve(t)) and r != module)
        graph[module] = deps
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as a path, or None (iterative depth-first search)."""
    state: dict[str, int] = {}
    for start in sorted(graph):
        if start in state:
            continue
        stack = [(start, iter(sorted(graph[start])))]
        path = [start]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(sorted(graph.get(child, ())))))
                path.append(child)
    return None


def _area(module: str) -> str:
    """The concept folder a module belongs to (``evalrun.run.stages.grade`` -> ``run``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "evalrun"


def test_no_module_imports_itself_back() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or ())


def test_concept_folders_form_no_cycle() -> None:
    """Folder level: if ``pack`` imports ``metrics``, nothing in ``metrics`` imports ``pack``.
    The package facade (``evalrun/__init__``) is the API and may import any folder."""
    folders: dict[str, set[str]] = {}
    for module, deps in _graph().items():
        if module == "evalrun":
            continue
        folders.setdefault(_area(module), set()).update(
            _area(d) for d in deps if _area(d) != _area(module))
    assert "evalrun" not in {d for ds in folders.values() for d in ds}, "only users import the facade"
    cycle = _cycle(folders)
    assert cycle is None, "folder cycle: " + " -> ".join(cycle or ())


#: the folders in the order docs/layout.md gives: each imports only folders before it
ORDER = ("kernels", "_util", "testing", "assets", "store", "model", "watermark", "pack", "attacks", "judges",
         "metrics", "run", "analysis", "unlearning", "report", "view", "plugins", "cli", "api")


def test_each_folder_imports_only_the_folders_before_it() -> None:
    for module, deps in _graph().items():
        if module == "evalrun":
            continue
        area = _area(module)
        assert area in ORDER, f"{module}: folder {area!r} is missing from ORDER (and docs/layout.md)"
        later = {_area(d) for d in deps if _area(d) in ORDER and ORDER.index(_area(d)) > ORDER.index(area)}
        assert not later, f"{module} imports from {sorted(later)}, which come after {area!r}"


def test_the_read_side_never_reaches_the_write_side() -> None:
    """Metrics and the report read the store; running a stage is never a consequence of
    rendering one (transitively, not just directly)."""
    graph = _graph()
    for start in (m for m in graph if m.startswith(READ_SIDE)):
        seen, todo = {start}, [start]
        while todo:
            for dep in graph[todo.pop()]:
                assert not dep.startswith(WRITE_SIDE), f"{start} reaches {dep}"
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)


def test_outer_folders_are_imported_only_from_above() -> None:
    """kernels import nothing of ours; the core imports neither plugins nor report (the front
    ends do, the CLI and the Python API: they drive pytest and render reports; the viewer shows the report's numbers, and
    never imports plugins); plugins never import the report."""
    for module, deps in _graph().items():
        if module.startswith("evalrun.kernels"):
            assert all(d.startswith("evalrun.kernels") for d in deps), module
        elif module.startswith("evalrun.plugins"):
            assert not any(d.startswith("evalrun.report") for d in deps), module
        elif module.startswith("evalrun.view"):
            assert not any(d.startswith("evalrun.plugins") for d in deps), module
        elif not module.startswith(("evalrun.report", "evalrun.cli", "evalrun.api")) and module != "evalrun":
            up = {d for d in deps if d.startswith(("evalrun.plugins", "evalrun.report"))}
            assert not up, f"{module} imports {up}"


#: the only imports of evalrun's own modules made inside a function, each for a heavy or slow
#: dependency the importing module must not load on import
LAZY = {
    ("evalrun.watermark.schemes.kgw", "evalrun.watermark.schemes.kgw_compat"):
        "scipy and the compiled kernels: `evalrun detect` with native kgw starts without them",
    ("evalrun.plugins.providers.vllm", "evalrun.plugins.providers.vllm_watermark"):
        "it imports vLLM itself, an optional multi-GB dependency",
    ("evalrun.cli.run", "evalrun.report"): "the report loads matplotlib: only runs that ask for one",
    ("evalrun.cli.detect", "evalrun.model.token_logits"):
        "torch and a model: only schemes whose detector reads the model (SWEET, EWD, Unbiased)",
    ("evalrun.pack.detection_grader", "evalrun.model.token_logits"):
        "torch and a model: only schemes whose detector reads the model (SWEET, EWD, Unbiased)",
}


def _function_local_imports() -> list[tuple[str, str]]:
    """(module, imported module) of every import of evalrun's own modules made inside a function."""
    found = []
    for module, path in _modules().items():
        for fn in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evalrun"):
                    found.append((module, node.module))
                elif isinstance(node, ast.Import):
                    found += [(module, a.name) for a in node.names if a.name.startswith("evalrun")]
    return found


def test_imports_inside_functions_are_only_the_listed_heavy_ones() -> None:
    found = set(_function_local_imports())
    assert found == set(LAZY), f"unlisted: {sorted(found - set(LAZY))}; gone: {sorted(set(LAZY) - found)}"


_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}


def test_docs_layout_states_what_the_code_does() -> None:
    """docs/layout.md's import order is ORDER; its table of function-local imports is LAZY's
    pairs, and the counts its sentence states are the code's."""
    import re

    doc = (REPO / "docs" / "layout.md").read_text(encoding="utf-8")
    order = re.search(r"```\n(kernels →[^\n]*)\n```", doc)
    assert order is not None and tuple(order.group(1).split(" → ")) == ORDER
    rows = {(a, b) for a, b, _why in re.findall(r"^\| `(evalrun[\w.]*)` \| `(evalrun[\w.]*)` \| ([^|\n]+) \|$", doc, re.M)}
    assert rows == set(LAZY), f"docs/layout.md's table: {sorted(rows ^ set(LAZY))}"
    stated = re.search(r"(\w+) imports, in (\w+) pairs of modules, stay inside a function", doc)
    assert stated is not None, "docs/layout.md no longer states how many imports stay inside a function"
    found = _function_local_imports()
    assert (_WORDS[stated.group(1).lower()], _WORDS[stated.group(2)]) == (len(found), len(set(found)))


#: the modules that turn a model spec's text into a ModelSpec: where the text enters, and nowhere
#: downstream (every function past these takes the ModelSpec)
PARSE_MODEL_SITES = {
    "evalrun.run.options": "a run's --model and --judge specs: the command line, pytest's twins, "
                           "[tool.evalrun] and the command's default model",
    "evalrun.attacks.model": "the model named inside a model attack's spec (--attack paraphrase:<model>)",
    "evalrun.model.providers": "model_argument, the type of a command's own model option, and stored_model, "
                               "a spec read back from a store",
}


def test_model_specs_are_parsed_only_where_their_text_enters() -> None:
    calls: dict[str, int] = {}
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "parse_model":
                calls[module] = calls.get(module, 0) + 1
    assert set(calls) == set(PARSE_MODEL_SITES), f"parse_model called in {sorted(calls)}"
    assert sum(calls.values()) <= 4, calls


def test_packs_import_only_the_pack_api() -> None:
    """The shipped graders keep the import names packs have always used (their text is their
    stored fingerprint); new packs may use the folder names."""
    allowed = {"evalrun", "evalrun.grading", "evalrun.detection_grading", "evalrun.pack.grade",
               "evalrun.pack.detection_grader", "evalrun.unlearning.grading"}
    for path in (REPO / "packs").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evalrun"):
                assert node.module in allowed, f"{path} imports {node.module}"


def test_import_evalrun_loads_neither_torch_nor_numpy() -> None:
    code = "import sys, evalrun; print(sorted(m for m in ('torch', 'numpy', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("old, new", [
    ("evalrun.grading", "evalrun.pack.grade"),
    ("evalrun.detection_grading", "evalrun.pack.detection_grader"),
    ("evalrun.registry", "evalrun._util.registry"),
    ("evalrun.providers", "evalrun.model.providers"),
    ("evalrun.options", "evalrun.run.options"),
])
def test_names_from_before_the_layout_still_import(old: str, new: str) -> None:
    """A pack or plugin written against the flat layout gets the very same module object."""
    import importlib

    assert importlib.import_module(old) is importlib.import_module(new)


def test_replaced_flat_modules_still_answer_their_names() -> None:
    from evalrun.cli import console_main
    from evalrun.cli.main import console_main as main_console
    from evalrun.pack import load_pack
    from evalrun.pack.loading import load_pack as loading_load_pack
    from evalrun.store import Store
    from evalrun.store.database import Store as DatabaseStore

    assert (Store, load_pack, console_main) == (DatabaseStore, loading_load_pack, main_console)


def test_every_legacy_name_points_at_a_module() -> None:
    import importlib

    from evalrun._util.legacy import MOVED

    for old, new in MOVED.items():
        assert importlib.import_module(new).__name__ == new, old
