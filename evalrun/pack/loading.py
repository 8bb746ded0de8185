"""Loading packs: ``pack.toml``, ``case.schema.json``, ``cases/``, ``grader.py``, ``reference.py``.

A pack is a directory; dropping a case file in adds test items with no code change. A bad case
file becomes a :class:`CaseError` naming file, line and JSON path, and the pack's other cases
still load. Packs are found on a search path: the packs shipped with evalrun, then
``--packs-dir`` directories, then the ``EVALRUN_PACKS`` variable (``os.pathsep``-separated).
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import os
import string
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping, Sequence

import jsonschema

from evalrun._util.checks import MAX_NEW_TOKENS, TEMPERATURE_RANGE, between
from evalrun._util.errors import CaseError, PackError, SpecError, first_line
from evalrun._util.hashing import sha256_hex
from evalrun._util.jsonl import MAX_RECORD_BYTES, lone_surrogate, not_utf8, parse_json, read_lines, read_text
from evalrun.model.generation import Prompt
from evalrun.model.providers import file_digest
from evalrun.pack.builtin_graders import GRADERS, SETTINGS, BuiltinGrader, grader_settings
from evalrun.pack.grade import Grade, GradeContext

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

PACK_FILE = "pack.toml"
SCHEMA_FILE = "case.schema.json"
GOLDEN_FILE = "golden.jsonl"
_REQUIRED_KEYS = ("name", "description", "prompt_template")
#: pack.toml's optional keys that have a default (docs/packs.md)
DEFAULT_VERSION = "0"
DEFAULT_LABELS = ("PASS", "FAIL")
#: why a pack cannot run under ``--model reference`` (the built-in graders named are those whose
#: ``solve`` is set: tests/pack/test_builtin_graders.py holds the list to the registry)
NO_SOLVER = "no reference solver (a reference.py, or a built-in grader that implies one: contains, exact, number)"
#: pack.toml keys whose value is text
_TEXT_KEYS = ("name", "version", "description", "prompt_template", "system_prompt", "group_field", "grader")


def shipped_packs_dir() -> Path:
    """The packs that ship with evalrun (the repo's ``packs/`` in an editable install): found
    as a data location, never imported (the core does not depend on packs)."""
    spec = importlib.util.find_spec("evalrun.packs")
    assert spec is not None and spec.submodule_search_locations
    return Path(list(spec.submodule_search_locations)[0]).resolve()


def pack_search_path(extra_dirs: Sequence[str | Path] = ()) -> list[Path]:
    dirs = [shipped_packs_dir(), *(Path(d) for d in extra_dirs)]
    env = os.environ.get("EVALRUN_PACKS", "")
    dirs += [Path(d) for d in env.split(os.pathsep) if d]
    return dirs


def _declared(pack_dir: Path, key: str) -> str | None:
    """A top-level string of pack.toml, read without loading the pack (no grader import)."""
    try:
        value = tomllib.loads(read_text(pack_dir / PACK_FILE)).get(key)
    except (OSError, UnicodeDecodeError, RecursionError, tomllib.TOMLDecodeError):
        return None
    return value if isinstance(value, str) and value else None


def _declared_name(pack_dir: Path) -> str:
    """The name pack.toml declares (results are stored under it), else the folder's name."""
    return _declared(pack_dir, "name") or pack_dir.name


def declared_group_field(pack_dir: Path) -> str | None:
    """The case field a pack groups its results by (``family``, ``scheme``), if it says."""
    return _declared(pack_dir, "group_field")


def declared_report_view(pack_dir: Path) -> str | None:
    """The report view a pack asks for (optional ``report_view = "<name>"``, a name of
    :data:`evalrun.report.data.REPORT_VIEWS`), read without loading the pack; None when it
    names none (the report then uses the view registered under the pack's name, or its
    default view)."""
    return _declared(pack_dir, "report_view")


def discover_packs(extra_dirs: Sequence[str | Path] = ()) -> dict[str, Path]:
    """Pack name -> directory; a later directory on the path overrides an earlier one."""
    found: dict[str, Path] = {}
    for base in pack_search_path(extra_dirs):
        if (base / PACK_FILE).is_file():  # the directory is itself a pack
            found[_declared_name(base)] = base
            continue
        if not base.is_dir():
            continue
        for child in sorted(base.iterdir()):
            if (child / PACK_FILE).is_file():
                found[_declared_name(child)] = child
    return found


def resolve_pack(name_or_path: str, extra_dirs: Sequence[str | Path] = ()) -> Path:
    """A pack given by name (on the search path) or by directory path."""
    path = Path(name_or_path)
    if (path / PACK_FILE).is_file():
        return path.resolve()
    known = discover_packs(extra_dirs)
    if name_or_path in known:
        return known[name_or_path]
    raise PackError(
        f"--pack {name_or_path}: unknown pack; known: {', '.join(sorted(known)) or 'none'}"
        " (or give a directory containing pack.toml)"
    )


@dataclass(frozen=True)
class Case:
    """One case as loaded: its data plus where it came from (for error messages)."""

    data: Mapping[str, Any]
    source: str
    line: int | None = None

    @property
    def id(self) -> str:
        return str(self.data["id"])


@dataclass
class GoldenExample:
    case_id: str
    output: str
    label: str
    score: float
    note: str
    line: int
    case: Mapping[str, Any] | None = None


@dataclass
class Pack:
    """A loaded pack. Grading is pure: :meth:`grade` only calls the pack's grader."""

    name: str
    path: Path
    meta: Mapping[str, Any]
    cases: list[Case]
    case_errors: list[CaseError]
    grader_module: ModuleType
    reference_module: ModuleType | None
    schema: Mapping[str, Any] = field(default_factory=dict)
    #: the grader pack.toml names (``grader = "contains"``), when the pack has no grader.py
    builtin_grader: BuiltinGrader | None = None

    @property
    def version(self) -> str:
        return str(self.meta.get("version", DEFAULT_VERSION))

    @property
    def labels(self) -> list[str]:
        """pack.toml's ``labels``; by default the built-in grader's, or PASS and FAIL."""
        default = self.builtin_grader.labels if self.builtin_grader is not None else DEFAULT_LABELS
        return list(self.meta.get("labels", default))

    @property
    def pass_score(self) -> float:
        return float(self.meta.get("pass_score", 1.0))

    @property
    def group_field(self) -> str | None:
        return self.meta.get("group_field")

    @property
    def defaults(self) -> Mapping[str, Any]:
        return self.meta.get("defaults", {})

    @property
    def report_view(self) -> str | None:
        """The report view pack.toml names (optional ``report_view``; see
        :func:`declared_report_view`)."""
        return self.meta.get("report_view")

    @property
    def has_reference(self) -> bool:
        return self.reference_module is not None

    @property
    def reference_revision(self) -> str:
        """What decides the reference solver's outputs: reference.py's bytes, or the built-in
        grader's solver (its name and version); empty without a solver."""
        if (self.path / "reference.py").is_file():
            return file_digest(self.path / "reference.py")
        return f"builtin:{self.builtin_grader.fingerprint}" if self.has_reference and self.builtin_grader else ""

    @cached_property
    def grader_hash(self) -> str:
        """Fingerprint of the grading code (grader.py, or the built-in grader's name and
        version, plus pack.toml), stored with each grade."""
        grader = (self.builtin_grader.fingerprint.encode() if self.builtin_grader is not None
                  else (self.path / "grader.py").read_bytes())
        meta = (self.path / PACK_FILE).read_bytes()
        return sha256_hex(grader, meta)[:16]

    @cached_property
    def _grade_fn(self) -> Callable[..., Grade]:
        fn = getattr(self.grader_module, "grade", None)
        if not callable(fn):
            raise PackError(f"{self.path / 'grader.py'}: no function grade(case, output)")
        return fn

    @cached_property
    def grader_reads_context(self) -> bool:
        """Whether grade() takes a GradeContext: a text-only grader needs nothing but the case
        and the text, so nothing else is read or parsed for it."""
        params = inspect.signature(self._grade_fn).parameters
        return len(params) >= 3

    @property
    def prepares(self) -> bool:
        """Whether grader.py defines ``prepare`` (see :meth:`prepare`)."""
        return getattr(self.grader_module, "prepare", None) is not None

    def prepare(self, batch: Sequence[tuple[Mapping[str, Any], str, GradeContext]]) -> None:
        """Let the grader do in bulk what it would otherwise do item by item (optional
        ``prepare(batch)`` in grader.py, e.g. batched watermark detection): called with the
        ``(case, output, context)`` of items about to be graded, it may only make the later
        :meth:`grade` calls faster, never change them."""
        fn = getattr(self.grader_module, "prepare", None)
        if not self.prepares:
            return
        if not callable(fn):
            raise PackError(f"{self.path / 'grader.py'}: prepare is not a function")
        fn(list(batch))

    def group_of(self, case: Mapping[str, Any]) -> str | None:
        field_name = self.group_field
        return None if field_name is None else str(case.get(field_name, ""))

    def render_prompt(self, case: Mapping[str, Any]) -> Prompt:
        try:
            user = self.meta["prompt_template"].format_map(dict(case))
        except KeyError as exc:
            raise CaseError(self._case_source(case), None, f"$.{exc.args[0]}",
                            f"field used by prompt_template of pack {self.name} is missing") from None
        return Prompt(system=self.meta.get("system_prompt"), user=user)

    def grade(self, case: Mapping[str, Any], output: str,
              context: GradeContext | None = None) -> Grade:
        """Run the pack's grader and check its answer against the pack's declared labels."""
        if self.grader_reads_context:
            grade = self._grade_fn(dict(case), output, context or GradeContext())
        else:
            grade = self._grade_fn(dict(case), output)
        if not isinstance(grade, Grade):
            raise PackError(f"{self.path / 'grader.py'}: grade() returned {type(grade).__name__}, not Grade")
        if grade.label not in self.labels:
            raise PackError(
                f"{self.path / 'grader.py'}: label {grade.label!r} is not declared in"
                f" {self.path / PACK_FILE} labels {self.labels}"
            )
        return grade

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its directory (loaded again on the other side): pack modules are imported
        from files under private names, so they cannot be pickled themselves. Ray actors
        receive requests whose ``solve`` is a pack's bound method this way."""
        return (load_pack, (str(self.path),))

    def solve(self, case: Mapping[str, Any]) -> str:
        if self.reference_module is None:
            raise PackError(f"pack {self.name} has no reference.py solver")
        return self.reference_module.solve(dict(case))

    def _case_source(self, case: Mapping[str, Any]) -> str:
        for c in self.cases:
            if c.data is case:
                return c.source
        return str(self.path / "cases")

    def golden(self) -> list[GoldenExample]:
        """The pack's pinned grader examples (golden.jsonl), if any."""
        path = self.path / GOLDEN_FILE
        if not path.is_file():
            return []
        out = []
        try:
            text = read_text(path)
        except UnicodeDecodeError as exc:
            raise PackError(f"{path}: {not_utf8(exc)}") from None
        for lineno, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = parse_json(line)
                out.append(GoldenExample(
                    case_id=str(obj.get("case_id") or obj.get("case", {}).get("id")),
                    output=obj["output"], label=obj["label"], score=float(obj["score"]),
                    note=obj.get("note", ""), line=lineno, case=obj.get("case"),
                ))
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise PackError(f"{path}:{lineno}: bad golden example ({exc})") from None
        return out

    def check_golden(self) -> list[str]:
        """One message per golden example the current grader disagrees with."""
        by_id = {c.id: c.data for c in self.cases}
        problems = []
        for ex in self.golden():
            case = ex.case if ex.case is not None else by_id.get(ex.case_id)
            where = f"{self.path / GOLDEN_FILE}:{ex.line}"
            if case is None:
                problems.append(f"{where}: unknown case_id {ex.case_id!r}")
                continue
            try:
                grade = self.grade(case, ex.output)
            except Exception as exc:  # report every example, not just the first crash
                problems.append(f"{where}: grader raised {type(exc).__name__}: {exc}")
                continue
            if grade.label != ex.label or abs(grade.score - ex.score) > 1e-9:
                problems.append(f"{where}: expected {ex.label} {ex.score:g}, got {grade.label} {grade.score:g}"
                                f" ({grade.reason}){' -- ' + ex.note if ex.note else ''}")
        return problems

    def check_reference(self) -> list[str]:
        """One message per case on which the reference solver does not reach the pass score."""
        if self.reference_module is None:
            return []
        problems = []
        for case in self.cases:
            try:
                grade = self.grade(case.data, self.solve(case.data))
            except Exception as exc:
                problems.append(f"{case.source}: reference/grader raised {type(exc).__name__}: {exc}")
                continue
            if grade.score < self.pass_score:
                problems.append(f"{case.source}: reference scores {grade.label} {grade.score:g} ({grade.reason})")
        return problems


def load_pack_module(path: Path, pack_name: str, role: str) -> ModuleType:
    """Import one of a pack's Python files (grader, reference, a generator) under a private name."""
    mod_name = f"evalrun_pack_{pack_name}_{role}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise PackError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # sys.exit() at import too: an error of this pack, not the end of the process
        raise PackError(f"{path}: import failed: {type(exc).__name__}: {exc}") from None
    return module


#: pack.toml's numbers and their rules, the command line's where an option sets the same thing
#: (``--temperature``, ``--max-tokens``): (table or None, key, check, integer only)
_NUMBERS: tuple[tuple[str | None, str, Callable[[Any], str | None], bool], ...] = (
    (None, "pass_score", between(0.0, 1.0), False),
    (None, "detection_threshold", lambda v: between(0.0, 1.0)(v) or ("must be in (0, 1]" if v == 0 else None), False),
    (None, "z_threshold", lambda v: None if isinstance(v, (int, float)) and not isinstance(v, bool)
     and math.isfinite(v) else "must be a finite number (WaterBench uses 4)", False),
    ("defaults", "temperature", between(*TEMPERATURE_RANGE), False),
    ("defaults", "max_tokens", between(1, MAX_NEW_TOKENS), True),
)


def _check_numbers(meta: Mapping[str, Any], meta_path: Path) -> None:
    """pack.toml's numeric settings, checked as the options are: NaN, text, or a value out of
    range is a PackError naming the file and the key."""
    defaults = meta.get("defaults", {})
    if not isinstance(defaults, Mapping):
        raise PackError(f"{meta_path}: [defaults] must be a table")
    for table, key, check, integer in _NUMBERS:
        values = defaults if table else meta
        if key not in values:
            continue
        value = values[key]
        shown = f"[{table}] {key}" if table else key
        problem = ("must be an integer" if integer and (isinstance(value, bool) or not isinstance(value, int))
                   else check(value))
        if problem:
            raise PackError(f"{meta_path}: {shown} = {value!r}: {problem}")


def _json_path(error: jsonschema.ValidationError) -> str:
    path = "$"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _line_of_key(text: str, key: str | None) -> int | None:
    """Best-effort line number of a top-level key in a pretty-printed JSON file."""
    if key is None:
        return None
    needle = f'"{key}"'
    for lineno, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return lineno
    return None


def _iter_case_files(cases_dir: Path) -> Iterable[Path]:
    if not cases_dir.is_dir():
        return []
    return sorted(p for p in cases_dir.rglob("*") if p.suffix in (".json", ".jsonl") and p.is_file())


def load_cases(cases_dir: Path, schema: Mapping[str, Any],
               max_bytes: int = MAX_RECORD_BYTES) -> tuple[list[Case], list[CaseError]]:
    """Load and validate every case; invalid ones become errors, duplicates are errors, and so
    are cases over ``max_bytes`` (a .json file, or one line of a .jsonl file), which are
    never read into memory whole."""
    def over(size: int) -> str:
        return (f"case of {size:,} bytes is over the limit of {max_bytes:,} bytes per case"
                " (max_case_bytes in pack.toml)")

    validator_cls = jsonschema.validators.validator_for(schema) if schema else None
    validator = validator_cls(schema) if validator_cls else None
    cases: list[Case] = []
    errors: list[CaseError] = []
    seen: dict[str, str] = {}

    def accept(obj: Any, source: str, line: int | None, text: str) -> None:
        if not isinstance(obj, dict):
            errors.append(CaseError(source, line, "$", f"a case must be a JSON object, got {type(obj).__name__}"))
            return
        if validator is not None:
            try:
                problems = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
            except RecursionError:
                errors.append(CaseError(source, line, "$", "nested too deeply to check against case.schema.json"))
                return
            if problems:
                err = problems[0]
                top = err.absolute_path[0] if err.absolute_path else None
                where = line if line is not None else _line_of_key(text, top if isinstance(top, str) else None)
                extra = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
                message = err.message if len(err.message) <= 300 else err.message[:300] + "…"
                errors.append(CaseError(source, where, _json_path(err), message + extra))
                return
        if "id" not in obj or not isinstance(obj["id"], str) or not obj["id"]:
            errors.append(CaseError(source, line, "$.id", "every case needs a non-empty string id"))
            return
        unstorable = lone_surrogate(obj)
        if unstorable is not None:
            errors.append(CaseError(source, line, "$", f"case {obj['id']!r} holds a lone surrogate (a \\ud800-style "
                                    f"escape without its pair) at {unstorable[0]}, character {unstorable[1]}: not "
                                    "text, so it cannot be stored"))
            return
        cid = obj["id"]
        if cid in seen:
            errors.append(CaseError(source, line if line is not None else _line_of_key(text, "id"), "$.id",
                                    f"duplicate case id {cid!r} (first in {seen[cid]})"))
            return
        seen[cid] = source if line is None else f"{source}:{line}"
        cases.append(Case(data=obj, source=source, line=line))

    for path in _iter_case_files(cases_dir):
        source = str(path)
        try:
            if path.suffix == ".jsonl":
                for line in read_lines(path, max_bytes):
                    if line.text is None:
                        errors.append(CaseError(source, line.number, "$", line.problem or over(line.size)))
                        continue
                    try:
                        obj = parse_json(line.text)
                    except json.JSONDecodeError as exc:
                        errors.append(CaseError(source, line.number, "$",
                                                f"invalid JSON: {exc.msg} (column {exc.colno})"))
                        continue
                    accept(obj, source, line.number, line.text)
                continue
            size = path.stat().st_size
            if size > max_bytes:
                errors.append(CaseError(source, None, "$", over(size)))
                continue
            text = read_text(path)
        except OSError as exc:
            errors.append(CaseError(source, None, "$", f"unreadable: {exc.strerror or exc}"))
            continue
        except UnicodeDecodeError as exc:
            errors.append(CaseError(source, None, "$", not_utf8(exc)))
            continue
        try:
            obj = parse_json(text)
        except json.JSONDecodeError as exc:
            errors.append(CaseError(source, exc.lineno, "$", f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        accept(obj, source, None, text)
    return cases, errors


def load_pack(path: str | Path) -> Pack:
    """Load a pack directory; raises PackError when the pack as a whole is unusable."""
    path = Path(path).resolve()
    meta_path = path / PACK_FILE
    if not meta_path.is_file():
        raise PackError(f"{path}: no {PACK_FILE}")
    try:
        meta = tomllib.loads(read_text(meta_path))
    except tomllib.TOMLDecodeError as exc:
        raise PackError(f"{meta_path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise PackError(f"{meta_path}: {not_utf8(exc)}") from None
    except RecursionError:
        raise PackError(f"{meta_path}: nested deeper than the TOML reader allows") from None
    missing = [k for k in _REQUIRED_KEYS if k not in meta]
    if missing:
        raise PackError(f"{meta_path}: missing key(s) {', '.join(missing)}")
    for key in _TEXT_KEYS:
        if key in meta and not isinstance(meta[key], str):
            raise PackError(f"{meta_path}: {key} must be text (a quoted TOML string), got {meta[key]!r}")
    if "labels" in meta and (not isinstance(meta["labels"], list) or not meta["labels"]
                             or not all(isinstance(v, str) and v for v in meta["labels"])):
        raise PackError(f"{meta_path}: labels must be a non-empty list of strings")
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(meta["prompt_template"]) if f}
    except ValueError as exc:
        raise PackError(f"{meta_path}: prompt_template: {exc}") from None
    name = str(meta["name"])
    schema: dict[str, Any] = {}
    schema_path = path / SCHEMA_FILE
    if schema_path.is_file():
        try:
            schema = parse_json(read_text(schema_path))
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:  # its message runs to a dozen lines: the path and the reason
            raise PackError(f"{schema_path}: invalid schema at {exc.json_path}: {first_line(exc)}") from None
        except json.JSONDecodeError as exc:
            raise PackError(f"{schema_path}: invalid schema: {first_line(exc)}") from None
        except UnicodeDecodeError as exc:
            raise PackError(f"{schema_path}: {not_utf8(exc)}") from None
    builtin = _builtin_grader(meta, meta_path, path)
    grader_path = path / "grader.py"
    if builtin is not None:
        grader = _builtin_module(builtin, grader_settings(builtin, meta), name, "grader")
    elif grader_path.is_file():
        grader = load_pack_module(grader_path, name, "grader")
    else:
        raise PackError(f"{path}: no grader.py and no grader in {PACK_FILE} (grader = one of "
                        f"{', '.join(GRADERS.names())})")
    ref_path = path / "reference.py"
    reference = load_pack_module(ref_path, name, "reference") if ref_path.is_file() else None
    if reference is not None and not callable(getattr(reference, "solve", None)):
        raise PackError(f"{ref_path}: no function solve(case)")
    if reference is None and builtin is not None and builtin.solve is not None:
        reference = _builtin_module(builtin, grader_settings(builtin, meta), name, "reference")
    max_bytes = meta.get("max_case_bytes", MAX_RECORD_BYTES)
    if not isinstance(max_bytes, int) or isinstance(max_bytes, bool) or max_bytes < 1:
        raise PackError(f"{meta_path}: max_case_bytes must be a positive integer, got {max_bytes!r}")
    view = meta.get("report_view")
    if view is not None and not (isinstance(view, str) and view):
        raise PackError(f"{meta_path}: report_view must be the name of a report view, got {view!r}")
    _check_numbers(meta, meta_path)
    cases, errors = load_cases(path / "cases", schema, max_bytes)
    pack = Pack(name=name, path=path, meta=meta, cases=cases, case_errors=errors,
                grader_module=grader, reference_module=reference, schema=schema, builtin_grader=builtin)
    # A case missing a template field, or a field its built-in grader reads, is dropped with an
    # error rather than failing at run time.
    good = []
    for case in cases:
        absent = sorted(f for f in fields if f not in case.data)
        problem = ((absent[0], "field required by prompt_template is missing") if absent
                   else builtin.check_case(case.data) if builtin is not None else None)
        if problem:
            errors.append(CaseError(case.source, case.line, f"$.{problem[0]}", problem[1]))
        else:
            good.append(case)
    pack.cases = good
    return pack


def _builtin_grader(meta: Mapping[str, Any], meta_path: Path, path: Path) -> BuiltinGrader | None:
    """The built-in grader pack.toml names, its settings and labels checked; None without one."""
    name = meta.get("grader")
    if name is None:
        return None
    try:
        grader = GRADERS.get(name)
    except SpecError:
        raise PackError(f"{meta_path}: grader = {name!r} is not a built-in grader; expected one of "
                        f"{', '.join(GRADERS.names())}") from None
    if (path / "grader.py").is_file():
        raise PackError(f"{meta_path}: grader = {name!r} and {path / 'grader.py'} both grade this pack: "
                        "delete one")
    for key in grader.settings:
        problem = SETTINGS[key](meta[key]) if key in meta else None
        if problem:
            raise PackError(f"{meta_path}: {key} = {meta[key]!r}: {problem}")
    labels = meta.get("labels")
    if labels is not None and isinstance(labels, list) and not set(grader.labels) <= set(labels):
        raise PackError(f"{meta_path}: labels {labels} lack the labels of grader {name!r}: "
                        f"{', '.join(grader.labels)} (or leave labels out)")
    return grader


def _builtin_module(grader: BuiltinGrader, settings: Mapping[str, Any], pack_name: str, role: str) -> ModuleType:
    """A built-in grader (or its solver) in the shape of a pack's grader.py (reference.py)."""
    module = ModuleType(f"evalrun_pack_{pack_name}_{role}")
    if role == "reference":
        solve = grader.solve
        assert solve is not None
        module.solve = lambda case: solve(case, settings)  # type: ignore[attr-defined]
    elif grader.reads_context:
        module.grade = lambda case, output, context: grader.grade(case, output, settings, context)  # type: ignore[attr-defined]
    else:
        module.grade = lambda case, output: grader.grade(case, output, settings)  # type: ignore[attr-defined]
    if role == "grader" and grader.prepare is not None:
        module.prepare = grader.prepare  # type: ignore[attr-defined]
    return module
