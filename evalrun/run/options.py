"""Run options, declared once.

Each :class:`Option` below generates its ``evalrun run`` flag, its ``--evalrun-*`` pytest
option and its ``[tool.evalrun]`` key, and is checked by the same code wherever it came from:
the command line wins over ``[tool.evalrun]``, which wins over the default. The result is a
:class:`RunOptions`, what a run is parametrised by.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Callable, Iterable, Mapping, Sequence

from _pytest.mark.expression import Expression

from evalrun._util.checks import MAX_NEW_TOKENS, TEMPERATURE_RANGE, between
from evalrun._util.errors import EvalrunError
from evalrun._util.specs import is_none, parse_spec
from evalrun.attacks import canonical_attack
from evalrun.attacks.suites import read_suite
from evalrun.judges import get_judge
from evalrun.model.providers import ModelSpec, parse_model, provider_kind
from evalrun.pack.time_limit import DEFAULT_GRADER_TIMEOUT
from evalrun.run.executors import EXECUTORS
from evalrun.watermark.registry import KEY_ENV, parse_watermark


@dataclass(frozen=True)
class Option:
    """One run option. ``name`` is its RunOptions field and, dashed, its flag."""

    name: str
    kind: type
    help: str
    default: Any = None
    #: repeatable: ``--model a --model b`` / ``models = ["a", "b"]``
    many: bool = False
    metavar: str | None = None
    #: the ``evalrun run`` flag when it is not ``--<name>``
    flag: str | None = None
    #: the ``[tool.evalrun]`` key when it is not ``name`` (None: not settable there)
    toml: str | None = ""
    #: older ``[tool.evalrun]`` spellings still read
    toml_aliases: tuple[str, ...] = ()
    #: whether ``evalrun run`` and plain pytest have it (``False``: only one of them)
    cli: bool = True
    pytest: bool = True
    #: ``value -> problem`` (None when fine); the message names the option
    check: Callable[[Any], str | None] | None = None
    #: not shown in help (plumbing between ``evalrun run`` and its pytest)
    hidden: bool = False
    #: the pytest option when it is not ``--evalrun-`` + the run flag
    pytest_name: str | None = None

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def pytest_flag(self) -> str:
        return self.pytest_name or "--evalrun-" + self.cli_flag[2:]

    @property
    def dest(self) -> str:
        return "evalrun_" + self.name

    @property
    def toml_key(self) -> str | None:
        return None if self.toml is None else (self.toml or self.name)


#: the largest --vocab-size taken (well above any released model's, ~262k)
MAX_VOCAB_SIZE = 1 << 24
#: upper bounds of the count options: beyond them a value is a typo, not a plan
MAX_REPETITIONS = 10_000
MAX_WORKERS = 1_024
MAX_CONCURRENCY = 4_096
#: --seed is stored in an SQLite INTEGER: a signed 64-bit number
SEED_RANGE = (-(1 << 63), (1 << 63) - 1)


def _fail_under(v: Any) -> str | None:
    return None if v is None or (math.isfinite(v) and 0.0 <= v <= 1.0) else "must be a score in [0, 1]"


def _select(v: Any) -> str | None:
    """A ``-k`` expression pytest would refuse after generating every item, refused first."""
    if v is None:
        return None
    try:
        Expression.compile(v)
    except Exception as exc:  # noqa: BLE001 - SyntaxError in pytest 9, ParseError before
        return f"is not a pytest -k expression ({getattr(exc, 'msg', None) or getattr(exc, 'message', None) or exc})"
    return None


def _executor(v: Any) -> str | None:
    return None if v is None or v in EXECUTORS.names() else (
        f"unknown executor {v!r}; expected one of {', '.join(EXECUTORS.names())}")


OPTIONS: tuple[Option, ...] = (
    Option("models", str, "model spec, repeatable: embedded, reference, openai:<name>, hf:<path>, "
           "vllm:<path>, replay:<file.jsonl>; provider options as <spec>?key=value&...", many=True,
           metavar="SPEC", flag="--model", toml_aliases=("model",)),
    Option("model_args", str, "provider option for every model of that provider, repeatable: "
           "<provider>:<key>=<value> (e.g. vllm:max_model_len=2048)", many=True, metavar="ARG",
           flag="--model-arg"),
    Option("watermarks", str, "watermark spec, repeatable (default none)", many=True, metavar="SPEC",
           flag="--watermark", toml_aliases=("watermark",)),
    Option("attacks", str, "attack spec, repeatable (default none)", many=True, metavar="SPEC",
           flag="--attack", toml_aliases=("attack",)),
    Option("attack_suite", str, "a suite of attacks added to --attack, repeatable: a shipped name "
           "(mmw, quick) or a .toml file, with its placeholders as NAME:key=value (e.g. "
           "mmw:translator=openai:gpt-4o-mini)", many=True, metavar="NAME"),
    Option("judges", str, "judge stage of the run, repeatable: <method>:<model-spec>, e.g. "
           "rating:openai:gpt-4o-mini (MarkMyWords' quality rating) or perplexity:embedded (an offline "
           "quality proxy)", many=True, metavar="METHOD:MODEL", flag="--judge", toml_aliases=("judge",)),
    Option("key", str, f"secret watermark key (default: ${KEY_ENV}); never stored", toml=None),
    Option("n", int, f"repetitions per case (default 1, at most {MAX_REPETITIONS:,})", default=1,
           check=between(1, MAX_REPETITIONS)),
    Option("temperature", float, "sampling temperature (default: the pack's)", check=between(*TEMPERATURE_RANGE)),
    Option("max_tokens", int, f"max new tokens (default: the pack's; at most {MAX_NEW_TOKENS:,})",
           check=between(1, MAX_NEW_TOKENS)),
    Option("seed", int, "base seed (default 0; a signed 64-bit integer, as the store keeps it)", default=0,
           check=between(*SEED_RANGE)),
    Option("db", str, "results database (default results.sqlite)", default="results.sqlite", flag="--out",
           metavar="PATH", pytest_name="--evalrun-db"),
    Option("base_url", str, "OpenAI-compatible server (default: $OPENAI_BASE_URL)"),
    Option("tokenizer", str, "local tokenizer directory for API and replay models, so attacked and generated "
           "texts get token ids (detection needs them)", metavar="PATH"),
    Option("vocab_size", int, "vocabulary size that outputs produced outside evalrun were watermarked over (the "
           "model's logit width; default: the --tokenizer directory's config.json vocab_size, else its "
           "tokenizer's size)", metavar="N", check=between(1, MAX_VOCAB_SIZE)),
    Option("concurrency", int, f"concurrent API requests per model (default 32, at most {MAX_CONCURRENCY:,}; "
           "lowered automatically on HTTP 429)", default=32, check=between(1, MAX_CONCURRENCY)),
    Option("cases", str, "only the cases whose id matches GLOB (fnmatch, case-sensitive: 'c1*', 'book-00?'), "
           "repeatable; default every case", many=True, metavar="GLOB", toml=None),
    Option("packs_dirs", str, "extra pack directory, repeatable", many=True, metavar="DIR",
           flag="--packs-dir", toml_aliases=("packs_dir",),
           check=lambda v: None if v is None or os.path.isdir(v) else "no such directory"),
    Option("no_progress", bool, "no progress bar", default=False, toml=None),
    # evalrun run only: they become pytest's own options
    Option("select", str, "pytest -k expression over the whole item id (pack, case id, model, watermark and "
           "attack specs: -k 'kgw and not typo'); to pick cases by id, use --cases", metavar="EXPR", pytest=False,
           toml=None, check=_select),
    Option("workers", int, "parallel workers: pytest-xdist processes that grade (--executor local), or "
           "the executor's own workers, e.g. Ray actors each holding the model once (--executor ray; "
           f"default 2; at most {MAX_WORKERS:,})", default=0, pytest=False, toml=None,
           check=between(0, MAX_WORKERS)),
    Option("executor", str, "where a run's unique model calls run (generations, attacks, judges): "
           "local (this process) or ray (Ray actors; pip install \"evalrun[ray]\")", default="local",
           check=_executor),
    Option("ray_address", str, "Ray cluster to join with --executor ray (default: a local Ray)",
           metavar="ADDR"),
    Option("executor_workers", int, "workers per model of an executor that runs its own (Ray actors "
           "with --executor ray, default 2); evalrun run sets it with --workers", default=2,
           check=between(1, MAX_WORKERS), cli=False, toml_aliases=("ray_actors",)),
    Option("grader_timeout", float, f"seconds a grader may take on one item before the item is a GRADER_ERROR "
           f"(\"timed out after N s\") and the run goes on (default {DEFAULT_GRADER_TIMEOUT:g}; 0: no limit)",
           default=DEFAULT_GRADER_TIMEOUT, metavar="SECONDS", check=between(0.0, 86_400.0)),
    Option("commit_ms", float, "group the writes of fast results (a reference solver's) and of grades "
           "into one transaction per MS milliseconds of their work: a kill -9 then loses at "
           "most that much work, which the next run redoes; model calls are still stored one by one "
           "(default 0: one transaction per stored result)", default=0.0, metavar="MS",
           check=between(0.0, 60_000.0)),
    Option("report", str, "also write the run's report (Markdown, HTML, charts, metrics.json) into DIR",
           metavar="DIR", pytest=False, toml=None),
    Option("fail_under", float, "exit 1 when the run's mean score is below SCORE (default: exit 0 "
           "whatever the scores)", metavar="SCORE", pytest=False, toml=None, check=_fail_under),
    # plumbing from evalrun run to its pytest
    Option("run_id", str, "run id", cli=False, toml=None, hidden=True),
    Option("argv", str, "the command line as JSON", cli=False, toml=None, hidden=True),
)
BY_NAME = {o.name: o for o in OPTIONS}


@dataclass(frozen=True)
class RunOptions:
    """Everything a run is parametrised by. ``key`` is secret and never serialised."""

    models: tuple[ModelSpec, ...] = (ModelSpec("reference"),)
    watermarks: tuple[str, ...] = ("none",)
    attacks: tuple[str, ...] = ("none",)
    n: int = 1
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int = 0
    key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    concurrency: int = 32
    tokenizer: str | None = None
    #: vocabulary of token ids produced outside evalrun (None: the tokenizer's)
    vocab_size: int | None = None
    #: provider name -> {option: value} applied to every model of that provider
    model_args: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: (judge method, judge model spec) pairs run after the transform stage
    judges: tuple[tuple[str, ModelSpec], ...] = ()
    #: where model calls run (:mod:`evalrun.run.executors`); not part of the stored configuration:
    #: every executor stores the same results
    executor: str = "local"
    ray_address: str | None = None
    executor_workers: int = 2
    #: commit grouping of fast writes (:mod:`evalrun.store.commit_batch`); 0 = one transaction per
    #: stored result. Not stored: it changes when rows are written, never what they hold
    commit_ms: float = 0.0
    #: seconds a grader may take per item (0: no limit); not stored: it decides only whether a
    #: grade is reached, never what it is
    grader_timeout: float = DEFAULT_GRADER_TIMEOUT
    #: case-id globs (``--cases``); empty: every case. Not stored, as ``--select``: it chooses
    #: which items run, never what one computes
    cases: tuple[str, ...] = ()

    def selects(self, case_id: str) -> bool:
        """Whether ``--cases`` keeps the case ``case_id``."""
        return not self.cases or any(fnmatchcase(case_id, glob) for glob in self.cases)

    def as_json(self) -> dict[str, Any]:
        """The run's configuration as stored in ``runs.config_json`` (no key, no URL secrets)."""
        return {
            "models": [str(m) for m in self.models], "watermarks": list(self.watermarks),
            "attacks": list(self.attacks), "n": self.n, "temperature": self.temperature,
            "max_tokens": self.max_tokens, "seed": self.seed, "concurrency": self.concurrency,
            "tokenizer": self.tokenizer, "judges": [f"{m}:{j}" for m, j in self.judges],
            "model_args": {k: dict(v) for k, v in sorted(self.model_args.items())},
            **({"vocab_size": self.vocab_size} if self.vocab_size is not None else {}),
        }

    def resolved_key(self) -> str | None:
        """``--key``, else the environment's; a key that is not text (a non-UTF-8 environment
        variable arrives with lone surrogates) is one line naming where it came from."""
        key, where = (self.key, "--key") if self.key is not None else (os.environ.get(KEY_ENV), KEY_ENV)
        if key is not None:
            try:
                key.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise EvalrunError(f"{where}: not UTF-8 text (byte {exc.start} of the key); a watermark key must be "
                                   "text, e.g. the output of `python -c \"import secrets; "
                                   "print(secrets.token_hex(32))\"`") from None
        return key


def _convert(option: Option, value: Any, where: str, toml: bool) -> Any:
    """``value`` as the option's type: strings from the command line, TOML values as typed."""
    if option.many:
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise EvalrunError(f"{where} = {value!r} has the wrong type (expected a list of strings)")
        return tuple(_convert_one(option, v, where, toml) for v in items)
    return _convert_one(option, value, where, toml)


def _convert_one(option: Option, value: Any, where: str, toml: bool) -> Any:
    kind = option.kind
    if toml:
        fits = (isinstance(value, bool) if kind is bool else
                isinstance(value, (int, float)) and not isinstance(value, bool) if kind is float else
                isinstance(value, kind) and not isinstance(value, bool))
        if not fits:
            raise EvalrunError(f"{where} = {value!r} has the wrong type")
        return kind(value)
    if kind is bool:
        return bool(value)
    try:
        return kind(value)
    except (TypeError, ValueError):
        wanted = {int: "an integer", float: "a number", str: "a string"}[kind]
        raise EvalrunError(f"{where} {value!r}: must be {wanted}") from None


def resolve(cli: Mapping[str, Any], tool: Mapping[str, Any], *, tool_path: str = "[tool.evalrun]",
            flag: Callable[[Option], str] = lambda o: o.cli_flag) -> dict[str, Any]:
    """Each option's value: ``cli`` (None or absent: not given) over ``tool`` over the
    default, converted and checked; errors name the flag or the file and key. Unknown
    ``[tool.evalrun]`` keys are errors."""
    known = {o.toml_key for o in OPTIONS if o.toml_key} | {a for o in OPTIONS for a in o.toml_aliases}
    unknown = sorted(set(tool) - known)
    if unknown:
        raise EvalrunError(f"{tool_path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values: dict[str, Any] = {}
    for option in OPTIONS:
        raw, where, toml = cli.get(option.name), flag(option), False
        if raw is None or raw == []:
            raw = None
            for key in (option.toml_key, *option.toml_aliases):
                if key and key in tool:
                    raw, where, toml = tool[key], f"{tool_path}: {key}", True
                    break
        value = option.default if raw is None else _convert(option, raw, where, toml)
        if option.check is not None:
            for v in (value if option.many and value is not None else [value]):
                problem = option.check(v)
                if problem:
                    raise EvalrunError(f"{where} = {v!r}: {problem}" if toml else f"{where} {v}: {problem}")
        values[option.name] = value
    return values


def parse_model_args(args: Iterable[str]) -> dict[str, dict[str, str]]:
    """``["vllm:max_model_len=2048", ...]`` -> ``{"vllm": {"max_model_len": "2048"}}``."""
    out: dict[str, dict[str, str]] = {}
    for text in args:
        provider, sep, rest = text.partition(":")
        key, eq, value = rest.partition("=")
        if not sep or not eq or not provider or not key or value == "":
            raise EvalrunError(f"--model-arg {text!r}: expected <provider>:<key>=<value>, e.g. "
                               "vllm:max_model_len=2048")
        out.setdefault(provider, {})[key] = value
    return out


def _argparse_kwargs(o: Option, dest: str) -> dict[str, Any]:
    """One declaration's argparse settings, the same for its CLI flag and its pytest twin
    (default None: "not given", so ``[tool.evalrun]`` and the declared default fill it in)."""
    kwargs: dict[str, Any] = {"dest": dest, "default": None,
                              "help": argparse.SUPPRESS if o.hidden else o.help}
    if o.kind is bool:
        kwargs.update(action="store_const", const=True)
    else:
        kwargs.update(action="append" if o.many else "store", metavar=o.metavar)
    return kwargs


def add_cli_options(parser: argparse.ArgumentParser, *, skip: Sequence[str] = ()) -> None:
    """The ``evalrun run`` flags (values default to None: "not given", so ``[tool.evalrun]``
    and the declared default can fill them in)."""
    for o in OPTIONS:
        if not o.cli or o.name in skip:
            continue
        flags = [o.cli_flag] + (["-k"] if o.name == "select" else [])
        parser.add_argument(*flags, **_argparse_kwargs(o, o.name))


def add_pytest_options(group: Any) -> None:
    """The ``--evalrun-*`` twins of the same declarations."""
    for o in OPTIONS:
        if not o.pytest:
            continue
        group.addoption(o.pytest_flag, **_argparse_kwargs(o, o.dest))


def pytest_args_for(values: Mapping[str, Any]) -> list[str]:
    """``--evalrun-*`` arguments that hand the resolved values of ``evalrun run`` to pytest
    (the key excepted: it travels in the environment, never on a command line)."""
    out: list[str] = []
    for o in OPTIONS:
        value = values.get(o.name)
        if not o.pytest or value is None or o.name == "key":
            continue
        if o.kind is bool:
            if value:
                out.append(o.pytest_flag)
        elif o.many:
            for v in value:
                out += [o.pytest_flag, str(v)]
        else:
            out += [o.pytest_flag, str(value)]
    return out


def expand_suites(suites: Iterable[str]) -> list[str]:
    """Attack specs of ``--attack-suite NAME[:placeholder=value,...]`` arguments."""
    out: list[str] = []
    for text in suites:
        name, sep, rest = text.partition(":")
        fill = dict(parse_spec(f"suite:{rest}", what="--attack-suite").params) if sep else {}
        out += read_suite(name if sep else text).fill(fill)
    return out


def parse_judge(text: str) -> tuple[str, ModelSpec]:
    """``<method>:<model-spec>`` -> (method, model spec), both checked (nothing loaded)."""
    method, sep, model = text.partition(":")
    if not sep or not model:
        raise EvalrunError(f"--judge {text}: expected <method>:<model-spec>, e.g. perplexity:embedded")
    get_judge(method)
    return method, model_specs([model])[0]


def model_specs(texts: Iterable[str], model_args: Mapping[str, Mapping[str, str]] | None = None) -> list[ModelSpec]:
    """The model specs a run names (``--model``, ``--judge``'s model, pytest's twins,
    ``[tool.evalrun]``, the command's default model), parsed once here and passed down as values;
    ``--model-arg`` options fill what a spec leaves unset."""
    return [parse_model(text, model_args) for text in texts]


def check_options(options: RunOptions) -> None:
    """What the declared per-option checks cannot see: the key the watermarks need."""
    marked = [w for w in options.watermarks if not is_none(w)]
    if marked and not options.resolved_key():
        raise EvalrunError(f"--watermark needs a secret key: pass --key or set {KEY_ENV}")
    for text in marked:
        scheme = parse_watermark(text)
        if scheme is not None:
            scheme.check_key(options.resolved_key() or "")


def named_watermarks(models: Sequence[ModelSpec]) -> list[str]:
    """The watermarks the models' outputs say they carry (a replay file's ``"watermark"``
    fields): a run's watermarks when ``--watermark`` is not given."""
    named: list[str] = []
    for spec in models:
        named += provider_kind(spec.name).named_watermarks(spec)
    return list(dict.fromkeys(named))


def run_options(values: Mapping[str, Any], *, default_models: Sequence[str]) -> RunOptions:
    """RunOptions from resolved option values: specs canonical and checked, suites expanded,
    provider options merged into each model's spec."""
    model_args = parse_model_args(values.get("model_args") or ())
    models = model_specs([str(m) for m in values.get("models") or default_models], model_args)
    watermarks = []
    for w in values.get("watermarks") or named_watermarks(models) or ["none"]:
        scheme = parse_watermark(w)
        watermarks.append("none" if scheme is None else scheme.spec.canonical())
    attack_specs = [*(values.get("attacks") or ()), *expand_suites(values.get("attack_suite") or ())]
    attacks = [canonical_attack(a) for a in attack_specs or ["none"]]
    options = RunOptions(
        models=tuple(dict.fromkeys(models)), watermarks=tuple(dict.fromkeys(watermarks)),
        attacks=tuple(dict.fromkeys(attacks)), n=values.get("n", 1), temperature=values.get("temperature"),
        max_tokens=values.get("max_tokens"), seed=values.get("seed", 0), key=values.get("key"),
        base_url=values.get("base_url"), concurrency=values.get("concurrency", 32),
        tokenizer=values.get("tokenizer"), vocab_size=values.get("vocab_size"), model_args=model_args,
        judges=tuple(dict.fromkeys(parse_judge(j) for j in values.get("judges") or ())),
        executor=values.get("executor") or "local", ray_address=values.get("ray_address"),
        executor_workers=values.get("executor_workers") or 2, commit_ms=float(values.get("commit_ms") or 0.0),
        grader_timeout=float(values.get("grader_timeout", DEFAULT_GRADER_TIMEOUT)),
        cases=tuple(values.get("cases") or ()),
    )
    check_options(options)
    return options
