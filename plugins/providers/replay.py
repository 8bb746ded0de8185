"""The ``replay:<file.jsonl>`` model: outputs produced elsewhere, graded here.

One JSON object per line: ``case_id``, ``output``, and ``pack`` when the file spans packs;
optionally ``repetition`` and ``output_tokens``. The same format feeds ``evalrun grade``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from evalrun._util.errors import EvalrunError
from evalrun._util.jsonl import MAX_RECORD_BYTES, read_lines
from evalrun.model.generation import Generation, GenerationRequest, ResultSink
from evalrun.model.providers import ModelSpec, PackFiles, ProviderKind, RunSettings, file_digest


def load_replay(path: Path) -> dict[tuple[str | None, str, int | None], dict[str, Any]]:
    """(pack or None, case_id, repetition or None) -> line; errors name file and line."""
    if not path.is_file():
        raise EvalrunError(f"--model replay:{path}: no such file")
    table: dict[tuple[str | None, str, int | None], dict[str, Any]] = {}
    try:
        lines = list(read_lines(path, MAX_RECORD_BYTES))
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalrunError(f"--model replay:{path}: unreadable: {exc}") from None
    for line in lines:
        lineno = line.number
        if line.text is None:
            raise EvalrunError(f"{path}:{lineno}: line of {line.size:,} bytes is over the limit of"
                               f" {MAX_RECORD_BYTES:,} bytes per replay line")
        try:
            obj = json.loads(line.text)
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
        key = (pack, obj["case_id"], rep)
        if key in table:
            raise EvalrunError(f"{path}:{lineno}: duplicate output for case {obj['case_id']!r}"
                               + (f" in pack {pack!r}" if pack else ""))
        table[key] = obj
    return table


class ReplayProvider:
    supports_watermark = False

    def __init__(self, path: str, spec: str) -> None:
        self.path = Path(path)
        self.spec = spec
        self.table = load_replay(self.path)

    def _lookup(self, request: GenerationRequest) -> dict[str, Any] | None:
        cid, rep = request.case_id, request.repetition
        for key in ((request.pack, cid, rep), (request.pack, cid, None), (None, cid, rep), (None, cid, None)):
            if key in self.table:
                return self.table[key]
        return None

    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None:
        for request in requests:
            line = self._lookup(request)
            if line is None:
                sink(request, Generation(text=None, error=f"{self.path}: no output for case {request.case_id!r}"
                                         f" of pack {request.pack!r}"))
                continue
            tokens = line.get("output_tokens")
            sink(request, Generation(text=line["output"], token_ids=list(tokens) if tokens else None,
                                     served_model=line.get("model")))

    def close(self) -> None:
        pass


class ReplayKind(ProviderKind):
    """Outputs produced elsewhere: the file's content is what decides them."""

    name = "replay"
    example = "replay:<outputs.jsonl>"

    def check(self, spec: ModelSpec) -> None:
        load_replay(Path(str(spec.arg)))  # read and validate the whole file before the run

    def revision(self, spec: ModelSpec, pack: PackFiles | None, options: RunSettings) -> str:
        path = Path(str(spec.arg))
        return file_digest(path) if path.is_file() else "missing"

    def make(self, spec: ModelSpec, **_: Any) -> ReplayProvider:
        return ReplayProvider(str(spec.arg), spec=spec.identity())


KIND = ReplayKind()
