"""``evalrun detect``: run a watermark detector on texts or token ids, print JSON lines.

    evalrun detect --watermark SPEC --key K (--text FILE --tokenizer PATH
                                             | --tokens FILE.jsonl --vocab-size V) [--model SPEC]

``--text FILE`` (``-`` for stdin) is one text, tokenized without special tokens by the
tokenizer at PATH (a ``tokenizer.json`` file or a Hugging Face tokenizer directory; ``embedded``
for the embedded model's) or, without ``--tokenizer``, by ``--model``'s own tokenizer.
``--tokens FILE.jsonl`` holds one JSON object per line with ``token_ids`` and optional ``id``;
it is read as it streams, ``CHUNK_TEXTS`` texts at a time, each chunk detected in one batched
call (:meth:`~evalrun.watermark.base.WatermarkScheme.detect_many`) and its results printed
before the next chunk is read. One JSON object is printed per input, in input order: ``num_tokens_scored``, ``score``, ``p_value`` (and
``num_green_tokens``, ``z_score`` for green-list schemes, ``id`` when given). Schemes whose
detector reads the model (SWEET, EWD, Unbiased) need ``--model SPEC``, the model that generated
the texts; for every scheme its logit width is then the default ``--vocab-size``. The key may come
from ``EVALRUN_WATERMARK_KEY`` and is never printed. Bad inputs are reported one line each on
stderr (naming file and line) with exit status 2, after the valid inputs were printed.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, NoReturn, Sequence, TextIO

import numpy as np

from evalrun._util.errors import EvalrunError, first_line
from evalrun._util.jsonl import not_utf8, read_text
from evalrun._util.token_lines import decode_lines
from evalrun.model.embedded import embedded_model_path
from evalrun.model.providers import ModelSpec, model_argument, tokenizer_source
from evalrun.model.tokenization import model_vocab_size
from evalrun.watermark.base import WatermarkScheme
from evalrun.watermark.key_strength import warn_if_weak
from evalrun.watermark.registry import KEY_ENV, parse_watermark


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # exit 2 with one line, like other errors
        raise EvalrunError(f"evalrun detect: {message}")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="evalrun detect", description="Detect a watermark in texts or token ids.")
    p.add_argument("--watermark", required=True, help="scheme spec, e.g. kgw:gamma=0.25,delta=2")
    p.add_argument("--key", default=None, help=f"secret key (default: ${KEY_ENV})")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="text file to score ('-' for stdin)")
    src.add_argument("--tokens", help="JSONL file: one {\"token_ids\": [...], \"id\": ...} per line")
    p.add_argument("--tokenizer", help="tokenizer.json, a model directory whose config.json vocab_size sets"
                        " the vocabulary size, or 'embedded' (with --text; default: --model's tokenizer)")
    p.add_argument("--vocab-size", type=int, help="vocabulary size: the model's logit width (with --tokens; overrides --tokenizer's)")
    p.add_argument("--model", default=None, type=model_argument,
                   help="the model that generated the texts (embedded, hf:PATH): schemes whose detector "
                        "reads its logits (sweet, ewd, unbiased) need it; it also sets the tokenizer and "
                        "--vocab-size")
    p.add_argument("--backend", choices=("numpy", "torch"), default=None,
                   help="kernel backend (default: automatic, or $EVALRUN_KERNELS)")
    return p


def load_tokenizer(path: str) -> tuple[Any, int]:
    """(encode function, vocabulary size) for a tokenizer file or a model directory.

    The vocabulary size that green lists are drawn over is the model's logit width: a model
    directory's config.json ``vocab_size`` wins over the tokenizer's own count, since many
    models pad their embedding matrix beyond the tokenizer.
    """
    p = Path(path)
    if not p.exists():
        raise EvalrunError(f"--tokenizer {path}: not found")
    try:
        # here, not at the top: only --text loads a tokenizer (transformers takes seconds to
        # import; `evalrun detect --tokens` starts without it)
        if p.is_file():
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(p))
            return (lambda text: tok.encode(text, add_special_tokens=False).ids), tok.get_vocab_size()
        from transformers import AutoTokenizer

        hf = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
    except Exception as exc:  # tokenizers/transformers raise many kinds; one line names the path
        raise EvalrunError(f"--tokenizer {path}: cannot load ({type(exc).__name__}: {first_line(exc)})") from None
    vocab_size = model_vocab_size(p, len(hf))
    return (lambda text: hf.encode(text, add_special_tokens=False)), vocab_size


def _tokenizer_path(tokenizer: str | None, model: ModelSpec | None) -> str | None:
    """``--tokenizer`` (``embedded``: the embedded model's, wherever evalrun is installed), else
    the tokenizer of ``--model`` (a local model's own directory), else None."""
    if tokenizer == "embedded":
        return str(embedded_model_path())
    if tokenizer is not None:
        return tokenizer
    if model is None:
        return None
    source = tokenizer_source(model, None)
    if source is None:
        raise EvalrunError(f"evalrun detect: --model {model}: evalrun has no tokenizer for it; pass --tokenizer PATH")
    return source


def _read_text(path: str) -> str:
    """The ``--text`` file (``-``: stdin) as UTF-8; anything else is one line naming the byte."""
    try:
        return sys.stdin.buffer.read().decode("utf-8") if path == "-" else read_text(Path(path))
    except UnicodeDecodeError as exc:
        raise EvalrunError(f"{'stdin' if path == '-' else path}: cannot read: {not_utf8(exc)}") from None
    except OSError as exc:
        raise EvalrunError(f"{path}: cannot read: {exc.strerror or exc}") from None


#: texts per batched detection call of ``--tokens`` (results are printed after each chunk)
CHUNK_TEXTS = 1000


def _token_records(path: str, errors: list[tuple[int, str]],
                   chunk: int | None = None) -> Iterator[list[tuple[int, Any, Any]]]:
    """Chunks of (line number, id, token ids) of the valid lines, read as the file streams
    (at most ``chunk`` records at a time); problems are appended to ``errors``. Token ids
    are int64 arrays where :mod:`evalrun._util.token_lines` reads them fast, lists elsewhere.

    Lines are split at ``\n``, ``\r\n`` and ``\r`` (Python's universal newlines)."""
    try:
        fh = open(path, encoding="utf-8")
    except OSError as exc:
        raise EvalrunError(f"{path}: cannot read: {exc.strerror or exc}") from None
    chunk = chunk or CHUNK_TEXTS
    with fh:
        numbered = ((no, line) for no, line in enumerate(fh, start=1) if line.strip())
        while True:
            try:
                batch = list(itertools.islice(numbered, chunk))
            except UnicodeDecodeError as exc:
                raise EvalrunError(f"{path}: cannot read: not UTF-8 ({exc.reason})") from None
            except OSError as exc:
                raise EvalrunError(f"{path}: cannot read: {exc.strerror or exc}") from None
            if not batch:
                return
            out: list[tuple[int, Any, Any]] = []
            for (no, _), decoded in zip(batch, decode_lines([line for _, line in batch])):
                if isinstance(decoded, json.JSONDecodeError):
                    errors.append((no, f"{path}:{no}: bad JSON: {decoded.msg}"))
                    continue
                obj, ids = decoded
                # JSON integers decode to int exactly (booleans to bool, which is refused)
                if not isinstance(ids, (list, np.ndarray)) or (
                        isinstance(ids, list) and not set(map(type, ids)) <= _INT):
                    errors.append((no, f"{path}:{no}: token_ids: expected a list of integers"))
                    continue
                out.append((no, obj.get("id"), ids))
            if out:
                yield out


_INT = {int}


def _as_arrays(records: list[tuple[int, Any, Any]]) -> list[Any]:
    """The records' token ids as int64 arrays (the reader's arrays as they are, its lists of
    ints converted in one call); the lists themselves where an id does not fit in 64 bits
    (the scheme then rejects it with its own message)."""
    if all(isinstance(ids, np.ndarray) for _, _, ids in records):
        return [ids for _, _, ids in records]
    lengths = [len(ids) for _, _, ids in records]
    try:
        flat = np.fromiter(itertools.chain.from_iterable(ids for _, _, ids in records),
                           dtype=np.int64, count=sum(lengths))
    except OverflowError:
        return [ids for _, _, ids in records]
    return np.split(flat, np.cumsum(lengths)[:-1]) if records else []


def _detect_chunk(scheme: Any, records: list[tuple[Any, Any, list[int]]], key: str,
                  vocab_size: int, kwargs: dict[str, Any], source: str,
                  errors: list[tuple[int, str]]) -> list[tuple[Any, Any]]:
    """(id, Detection) of every record that detects; the others go to ``errors``.

    One batched call (:meth:`WatermarkScheme.detect_many`) for the whole chunk; when it
    raises (some text is invalid for the scheme, e.g. an id outside the vocabulary), the
    chunk is detected text by text so that each bad line is reported by itself, with the
    message of the single-text detector."""
    batched = type(scheme).detect_many is not WatermarkScheme.detect_many
    try:
        inputs = _as_arrays(records) if batched else [ids for _, _, ids in records]
        dets = scheme.detect_many(inputs, key, vocab_size, **kwargs)
        return [(item_id, det) for (_, item_id, _), det in zip(records, dets)]
    except (EvalrunError, ValueError):
        pass
    out = []
    for no, item_id, ids in records:
        where = f"{source}:{no}" if no is not None else source
        try:
            det = scheme.detect(ids, key, vocab_size, **kwargs)
        except (EvalrunError, ValueError) as exc:  # e.g. a token id outside the vocabulary
            errors.append((no or 0, f"{where}: {exc}"))
            continue
        out.append((item_id, det))
    return out


def main(argv: Sequence[str]) -> int:
    """``evalrun detect ...`` as :mod:`evalrun.cli.main` hands it over: the arguments after
    ``evalrun``, the command name first."""
    return detect_main(list(argv[1:]))


def detect_main(argv: list[str], stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Entry point of ``evalrun detect``; returns the exit status (0 ok, 2 input errors)."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        return _run(argv, out, err)
    except EvalrunError as exc:
        print(str(exc), file=err)
        return 2


def _run(argv: list[str], out: TextIO, err: TextIO) -> int:
    args = _parser().parse_args(argv)
    key = args.key if args.key is not None else os.environ.get(KEY_ENV)
    if not key:
        raise EvalrunError(f"evalrun detect: no watermark key; pass --key or set {KEY_ENV}")
    scheme = parse_watermark(args.watermark)
    if scheme is None:
        raise EvalrunError("evalrun detect: --watermark none has nothing to detect")
    scheme.check_key(key)
    # a tokenizer for a text, or for the logit width of a model whose logits are not read
    wanted = args.text is not None or (args.model is not None and not scheme.needs_model and args.vocab_size is None)
    tokenizer = _tokenizer_path(args.tokenizer, args.model) if wanted else None
    if args.text is not None and tokenizer is None:
        raise EvalrunError("evalrun detect: --text needs --tokenizer PATH (or embedded), or --model SPEC")
    kwargs: dict[str, Any] = {}
    model_vocab: int | None = None
    if scheme.needs_model:
        if not args.model:
            raise EvalrunError(f"evalrun detect: --watermark {scheme.spec} reads the generating model's logits "
                               "at detection: pass --model SPEC (embedded, hf:PATH)")
        # here, not at the top: only these schemes load a model (torch takes seconds to import)
        from evalrun.model.token_logits import model_logits

        kwargs["logits"] = model_logits(args.model)
        model_vocab = kwargs["logits"].vocab_size
    elif args.model and args.text is None and args.vocab_size is None:  # the model's width, from its tokenizer
        model_vocab = load_tokenizer(str(tokenizer))[1]
    errors: list[tuple[int, str]] = []  # (line, message), reported in line order
    if args.text is not None:
        encode, vocab_size = load_tokenizer(str(tokenizer))
        if args.vocab_size is not None:
            vocab_size = args.vocab_size
        chunks: Iterable[list[tuple[Any, Any, list[int]]]] = [
            [(None, None, list(encode(_read_text(args.text))))]]
        source = args.text
    else:
        width = args.vocab_size if args.vocab_size is not None else model_vocab
        if width is None:
            raise EvalrunError("evalrun detect: --tokens needs --vocab-size V")
        vocab_size = int(width)
        chunks = _token_records(args.tokens, errors)
        source = args.tokens
    if args.backend:
        if "backend" not in inspect.signature(scheme.detect).parameters:
            raise EvalrunError(f"--backend applies to the native schemes, not {scheme.spec}")
        kwargs["backend"] = args.backend
    for records in chunks:  # streamed: each chunk's results are printed before the next is read
        lines = []
        for item_id, det in _detect_chunk(scheme, records, key, vocab_size, kwargs, source,
                                          errors):
            record = det.as_json()
            if item_id is not None:
                record = {"id": item_id, **record}
            lines.append(json.dumps(record))
        if lines:
            out.write("\n".join(lines) + "\n")
            out.flush()
    out.flush()
    warn_if_weak(key, from_option=args.key is not None, stream=err)  # after a detection, not a refusal
    for _, message in sorted(errors):
        print(message, file=err)
    return 2 if errors else 0
