"""The ``replay:<file.jsonl>`` model: outputs produced elsewhere, graded here.

One JSON object per line: ``case_id``, ``output``, and ``pack`` when the file spans packs;
optionally ``repetition``, ``output_tokens`` (with ``vocab_size``, the logit width they index)
and ``watermark``, the spec the output was generated under elsewhere. The same format feeds
``evalrun grade``.

Watermarks are detected, never applied: a run's ``--watermark SPEC`` (by default, the specs
the file's lines name) selects the lines generated under SPEC, or lines naming none, and
grades them under SPEC's detector. Such outputs are stored with ``watermark_origin: outside
evalrun`` in their extra fields, which the report shows.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Sequence

from evalrun._util.errors import EvalrunError
from evalrun._util.jsonl import MAX_RECORD_BYTES, lone_surrogate, parse_json, read_lines
from evalrun._util.specs import SpecError, is_none
from evalrun.model.generation import WATERMARKED_ELSEWHERE, Generation, GenerationRequest, ResultSink
from evalrun.model.providers import ModelSpec, PackFiles, ProviderKind, RunSettings, file_digest
from evalrun.watermark.registry import parse_watermark

ReplayKey = tuple[str | None, str, int | None, str | None]


def _watermark(value: Any, where: str) -> str | None:
    """A line's ``watermark``, canonical (None when the line names none)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise EvalrunError(f"{where}: field 'watermark' must be a spec string such as \"kgw:gamma=0.25,delta=2\"")
    try:
        scheme = parse_watermark(value)
    except (SpecError, EvalrunError, ValueError) as exc:
        raise EvalrunError(f"{where}: field 'watermark': {exc}") from None
    return "none" if scheme is None else scheme.spec.canonical()


def _token_fields(obj: dict[str, Any], where: str) -> None:
    tokens, vocab = obj.get("output_tokens"), obj.get("vocab_size")
    if tokens is not None and (not isinstance(tokens, list)
                               or not all(isinstance(t, int) and not isinstance(t, bool) and t >= 0 for t in tokens)):
        raise EvalrunError(f"{where}: field 'output_tokens' must be a list of non-negative integers")
    if vocab is not None:
        if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1:
            raise EvalrunError(f"{where}: field 'vocab_size' must be a positive integer")
        if tokens and max(tokens) >= vocab:
            raise EvalrunError(f"{where}: token id {max(tokens)} is outside vocab_size {vocab}")


def load_replay(path: Path) -> dict[ReplayKey, dict[str, Any]]:
    """(pack or None, case_id, repetition or None, watermark or None) -> line; errors name
    file and line. Read once per version of the file (checking, the default watermarks and the
    provider all ask for it)."""
    if not path.is_file():
        raise EvalrunError(f"--model replay:{path}: no such file")
    stat = path.stat()
    return _read_replay(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _read_replay(path: Path, mtime_ns: int, size: int) -> dict[ReplayKey, dict[str, Any]]:
    table: dict[ReplayKey, dict[str, Any]] = {}
    try:
        lines = list(read_lines(path, MAX_RECORD_BYTES))
    except OSError as exc:
        raise EvalrunError(f"--model replay:{path}: unreadable: {exc.strerror or exc}") from None
    for line in lines:
        lineno = line.number
        if line.problem is not None:
            raise EvalrunError(f"{path}:{lineno}: {line.problem}")
        if line.text is None:
            raise EvalrunError(f"{path}:{lineno}: line of {line.size:,} bytes is over the limit of"
                               f" {MAX_RECORD_BYTES:,} bytes per replay line")
        try:
            obj = parse_json(line.text)
        except json.JSONDecodeError as exc:
            raise EvalrunError(f"{path}:{lineno}: invalid JSON: {exc.msg}") from None
        if not isinstance(obj, dict):
            raise EvalrunError(f"{path}:{lineno}: expected a JSON object")
        for field_name, kind in (("case_id", str), ("output", str)):
            if not isinstance(obj.get(field_name), kind):
                raise EvalrunError(f"{path}:{lineno}: field {field_name!r} must be a string")
        pack = obj.get("pack")
        rep = obj.get("repetition")
        if rep is not None and not isinstance(rep, int):
            raise EvalrunError(f"{path}:{lineno}: field 'repetition' must be an integer")
        where = f"{path}:{lineno}"
        found = lone_surrogate(obj)
        if found is not None:  # this line only: its case gets the reason, the others are stored
            field_path, at = found
            unstorable = (f"{where}: field {field_path.removeprefix('$.')!r} is not text: a lone surrogate at "
                          f"character {at}; the line is left out")
            obj = {"case_id": obj["case_id"], "pack": pack, "repetition": rep, UNSTORABLE: unstorable}
            table.setdefault((pack if isinstance(pack, str) else None, obj["case_id"], rep, None), obj)
            continue
        _token_fields(obj, where)
        watermark = _watermark(obj.get("watermark"), where)
        key = (pack, obj["case_id"], rep, watermark)
        if key in table:
            raise EvalrunError(f"{where}: duplicate output for case {obj['case_id']!r}"
                               + (f" in pack {pack!r}" if pack else "")
                               + (f" under watermark {watermark}" if watermark else ""))
        table[key] = obj
    return table


#: the key of a left-out line's reason (no JSON field of a replay line starts with a space)
UNSTORABLE = " unstorable"


class ReplayProvider:
    supports_watermark = False

    def __init__(self, path: str, spec: str, vocab_size: int | None = None) -> None:
        self.path = Path(path)
        self.spec = spec
        self.vocab_size = vocab_size
        self.table = load_replay(self.path)

    def _lookup(self, request: GenerationRequest) -> dict[str, Any] | None:
        cid, rep, pack = request.case_id, request.repetition, request.pack
        for wm in (request.watermark, None):  # a line generated under it, else one naming none
            for key in ((pack, cid, rep, wm), (pack, cid, None, wm), (None, cid, rep, wm), (None, cid, None, wm)):
                if key in self.table:
                    return self.table[key]
        return None

    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None:
        for request in requests:
            line = self._lookup(request)
            if line is not None and UNSTORABLE in line:
                sink(request, Generation(text=None, error=line[UNSTORABLE]))
                continue
            if line is None:
                # the row names its case: one message for every missing case, said once with a count
                sink(request, Generation(text=None, error=f"{self.path}: no output for this case of pack {request.pack}"
                                         + ("" if is_none(request.watermark) else f" under {request.watermark}")))
                continue
            tokens = line.get("output_tokens")
            extra: dict[str, Any] = {} if is_none(request.watermark) else dict(WATERMARKED_ELSEWHERE)
            vocab = line.get("vocab_size", self.vocab_size if tokens else None)
            if vocab is not None:
                extra["vocab_size"] = vocab
            sink(request, Generation(text=line["output"], token_ids=list(tokens) if tokens else None,
                                     served_model=line.get("model"), extra=extra))

    def close(self) -> None:
        pass


class ReplayKind(ProviderKind):
    """Outputs produced elsewhere: the file's content is what decides them."""

    name = "replay"
    example = "replay:<outputs.jsonl>"
    detects_only = True
    run_options = frozenset({"vocab_size"})

    def check(self, spec: ModelSpec) -> None:
        load_replay(Path(str(spec.arg)))  # read and validate the whole file before the run

    def named_watermarks(self, spec: ModelSpec) -> list[str]:
        named = {key[3] for key in load_replay(Path(str(spec.arg)))}
        # lines naming no watermark are unwatermarked outputs when others name one
        return sorted({"none" if w is None else w for w in named}, key=lambda w: (not is_none(w), w)) \
            if named - {None} else []

    def revision(self, spec: ModelSpec, pack: PackFiles | None, options: RunSettings) -> str:
        path = Path(str(spec.arg))
        digest = file_digest(path) if path.is_file() else "missing"
        # --vocab-size decides the stored vocabulary of the file's token ids
        return digest if options.vocab_size is None else f"{digest};vocab_size={options.vocab_size}"

    def make(self, spec: ModelSpec, *, vocab_size: int | None = None, **_: Any) -> ReplayProvider:
        return ReplayProvider(str(spec.arg), spec=spec.identity(), vocab_size=vocab_size)


KIND = ReplayKind()
