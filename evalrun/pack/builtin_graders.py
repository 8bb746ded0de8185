"""Graders a pack chooses in pack.toml (``grader = "contains"``) instead of writing grader.py.

Each is pure: a function of the case, the output and the pack's settings, returning a
:class:`~evalrun.pack.grade.Grade` whose ``reason`` says in one line why, and whose metadata
holds what was compared. A grader names the case fields it reads (checked when the pack loads,
and by ``evalrun validate``), the pack.toml keys it takes, its labels (the pack's default
``labels``) and, where one is obvious, a reference solver (``exact``, ``contains``, ``number``:
the target itself), so a drop-in pack runs under ``--model reference`` from its first commit.

A built-in grader enters the grader fingerprint stored with every grade as its name and
``version`` (``contains@1``) with the pack.toml bytes, in place of grader.py's bytes; the
version is raised whenever a grader's behaviour changes, so stored grades are known to be
stale. New graders register in :data:`GRADERS` (or, from another package, under the
``evalrun.graders`` entry-point group).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import jsonschema

from evalrun._util.registry import Registry
from evalrun.pack.grade import Grade

PASS, FAIL = "PASS", "FAIL"
#: pack.toml keys of the built-in graders and the checks of their values
SETTINGS: dict[str, Callable[[Any], str | None]] = {
    "case_sensitive": lambda v: None if isinstance(v, bool) else "must be true or false",
    "tolerance": lambda v: None if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    and v >= 0 else "must be a finite number >= 0",
}


@dataclass(frozen=True)
class BuiltinGrader:
    """A grader chosen by name in pack.toml."""

    name: str
    #: raised when what the grader decides changes (part of the stored grader fingerprint)
    version: int
    #: ``(case, output, settings) -> Grade``; ``settings``: pack.toml's keys of :attr:`settings`
    grade: Callable[..., Grade]
    #: case fields every case must have
    fields: tuple[str, ...]
    #: pack.toml keys it reads, with their defaults
    settings: Mapping[str, Any] = field(default_factory=dict)
    labels: tuple[str, ...] = (PASS, FAIL)
    #: ``(case, settings) -> output`` that passes, for ``--model reference``; None: no obvious one
    solve: Callable[..., str] | None = None
    #: ``(batch) -> None``: bulk work before grading (the detection grader's batched detection)
    prepare: Callable[..., None] | None = None
    #: whether ``grade`` takes the item's GradeContext as a fourth argument
    reads_context: bool = False
    #: ``case -> (field, problem) | None``: what makes a case ungradable beyond a missing field
    check: Callable[[Mapping[str, Any]], tuple[str, str] | None] | None = None

    @property
    def fingerprint(self) -> str:
        return f"{self.name}@{self.version}"

    def check_case(self, case: Mapping[str, Any]) -> tuple[str, str] | None:
        """``(field, problem)`` when the case cannot be graded, else None."""
        for name in self.fields:
            if name not in case:
                return name, f"field required by grader {self.name!r} is missing"
        return None if self.check is None else self.check(case)


GRADERS: Registry[BuiltinGrader] = Registry("grader", "evalrun.graders", option="grader")


def _verdict(ok: bool, reason: str, **metadata: Any) -> Grade:
    return Grade(1.0, PASS, reason, metadata) if ok else Grade(0.0, FAIL, reason, metadata)


def _short(text: str, limit: int = 60) -> str:
    shown = text if len(text) <= limit else text[:limit - 1] + "…"
    return json.dumps(shown, ensure_ascii=False)


def _fold(text: str, case_sensitive: bool) -> str:
    return text if case_sensitive else text.casefold()


def _targets(case: Mapping[str, Any]) -> list[str]:
    target = case["target"]
    return [target] if isinstance(target, str) else [str(t) for t in target]


def grade_exact(case: Mapping[str, Any], output: str, settings: Mapping[str, Any]) -> Grade:
    """The stripped output equals the case's ``target`` (case-folded unless ``case_sensitive``)."""
    sensitive = settings["case_sensitive"]
    got, want = output.strip(), str(case["target"]).strip()
    ok = _fold(got, sensitive) == _fold(want, sensitive)
    return _verdict(ok, f"output {'equals' if ok else 'differs from'} the target {_short(want)}",
                    target=want, case_sensitive=sensitive)


def grade_contains(case: Mapping[str, Any], output: str, settings: Mapping[str, Any]) -> Grade:
    """Every target (a string or a list of them) appears in the output."""
    sensitive = settings["case_sensitive"]
    haystack = _fold(output, sensitive)
    missing = [t for t in _targets(case) if _fold(t, sensitive) not in haystack]
    if missing:
        return _verdict(False, f"missing {len(missing)} of {len(_targets(case))}: "
                        + ", ".join(_short(t, 30) for t in missing[:3]) + (" …" if len(missing) > 3 else ""),
                        missing=missing, case_sensitive=sensitive)
    return _verdict(True, f"contains all {len(_targets(case))} target(s)", missing=[], case_sensitive=sensitive)


def grade_regex(case: Mapping[str, Any], output: str, settings: Mapping[str, Any]) -> Grade:
    """The case's ``pattern`` (a Python regular expression) is found in the output."""
    flags = 0 if settings["case_sensitive"] else re.IGNORECASE
    found = re.search(case["pattern"], output, flags)
    if found is None:
        return _verdict(False, f"pattern {_short(case['pattern'], 40)} not found", match=None)
    return _verdict(True, f"pattern matches {_short(found.group(0), 40)} at {found.start()}", match=found.group(0))


#: a decimal number as people write it: sign, digits with optional thousands commas, decimals, exponent
_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+−]?\.\d+(?:[eE][-+]?\d+)?")


def first_number(text: str) -> float | None:
    """The first number written in ``text`` (``1,234.5``, ``-3``, ``2e-3``, a Unicode minus), or None."""
    found = _NUMBER.search(text)
    return None if found is None else float(found.group(0).replace(",", "").replace("−", "-"))


def grade_number(case: Mapping[str, Any], output: str, settings: Mapping[str, Any]) -> Grade:
    """The first number in the output is within ``tolerance`` (absolute; the case's own
    ``tolerance`` field, else pack.toml's, default 0) of the case's numeric ``target``."""
    target = float(case["target"])
    tolerance = float(case.get("tolerance", settings["tolerance"]))
    got = first_number(output)
    if got is None:
        return _verdict(False, "no number in the output", found=None, target=target, tolerance=tolerance)
    ok = abs(got - target) <= tolerance
    return _verdict(ok, f"first number {got:g} is {'within' if ok else 'not within'} {tolerance:g} of {target:g}",
                    found=got, target=target, tolerance=tolerance)


_FENCE = re.compile(r"^```[\w-]*\n(.*)\n```$", re.S)


def grade_json(case: Mapping[str, Any], output: str, settings: Mapping[str, Any]) -> Grade:
    """The output (stripped; a single fenced code block is unwrapped) parses as JSON and, when the
    case has a ``schema``, validates against it (JSON Schema, the draft it declares)."""
    text = output.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return _verdict(False, f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", valid_json=False)
    schema = case.get("schema")
    if schema is None:
        return _verdict(True, "parses as JSON", valid_json=True)
    problems = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(value),
                      key=lambda e: list(e.absolute_path))
    if problems:
        where = "$" + "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in problems[0].absolute_path)
        message = problems[0].message if len(problems[0].message) <= 120 else problems[0].message[:119] + "…"
        return _verdict(False, f"JSON does not match the schema at {where}: {message}", valid_json=True,
                        schema_errors=len(problems))
    return _verdict(True, "JSON matches the schema", valid_json=True, schema_errors=0)


def _check_target_text(case: Mapping[str, Any]) -> tuple[str, str] | None:
    target = case["target"]
    if isinstance(target, str) or (isinstance(target, list) and target and all(isinstance(t, str) for t in target)):
        return None
    return "target", "must be a string or a non-empty list of strings"


def _check_pattern(case: Mapping[str, Any]) -> tuple[str, str] | None:
    if not isinstance(case["pattern"], str):
        return "pattern", "must be a string (a Python regular expression)"
    try:
        re.compile(case["pattern"])
    except re.error as exc:
        return "pattern", f"not a regular expression: {exc}"
    return None


def _check_number(case: Mapping[str, Any]) -> tuple[str, str] | None:
    for name in ("target", "tolerance"):
        value = case.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return name, "must be a finite number"
    return None


def _check_schema(case: Mapping[str, Any]) -> tuple[str, str] | None:
    if "schema" not in case:
        return None
    try:
        jsonschema.validators.validator_for(case["schema"]).check_schema(case["schema"])
    except jsonschema.SchemaError as exc:
        return "schema", f"not a JSON Schema: {exc.message}"
    return None


def _check_exact(case: Mapping[str, Any]) -> tuple[str, str] | None:
    return None if isinstance(case["target"], str) else ("target", "must be a string")


def _join_targets(case: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    return " ".join(_targets(case))


GRADERS.register("exact", BuiltinGrader("exact", 1, grade_exact, ("target",), {"case_sensitive": True},
                                        solve=lambda case, settings: str(case["target"]), check=_check_exact))
GRADERS.register("contains", BuiltinGrader("contains", 1, grade_contains, ("target",), {"case_sensitive": False},
                                           solve=_join_targets, check=_check_target_text))
GRADERS.register("regex", BuiltinGrader("regex", 1, grade_regex, ("pattern",), {"case_sensitive": True},
                                        check=_check_pattern))
GRADERS.register("number", BuiltinGrader("number", 1, grade_number, ("target",), {"tolerance": 0.0},
                                         solve=lambda case, settings: repr(float(case["target"])), check=_check_number))
GRADERS.register("json", BuiltinGrader("json", 1, grade_json, (), check=_check_schema))
#: the watermark detection grader of the detection packs (DETECTED / NOT_DETECTED)
GRADERS.register_lazy("detection", "evalrun.pack.detection_grader:BUILTIN")


def grader_settings(grader: BuiltinGrader, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The grader's pack.toml settings, defaults filled in (values checked by the loader)."""
    return {k: meta.get(k, default) for k, default in grader.settings.items()}

