"""Writing files so that a failure never leaves a half-written one where a good one was.

Every file evalrun writes besides the store (reports, charts, metrics.json, exports, ``--json``
outputs) is written to a temporary file in the same folder and renamed into place: a full disk,
a size limit or a crash midway leaves the old file as it was, and readers never see a partial
one. A destination that cannot be written is one :class:`EvalrunError` naming the option, and
so is one that exists and is not a regular file (a symbolic link, a FIFO, a device such as
``/dev/null``): renaming over it would replace the link or the node itself.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Iterator

from evalrun._util.errors import EvalrunError


def _problem(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file (a symbolic link, even to one;
    a FIFO, a device, a socket, a folder), else None."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return None
    for test, kind in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return kind
    return None


def _mode(path: Path) -> int:
    """The replaced file's permissions, or what a new file gets under the umask (the
    temporary file is created private)."""
    if path.exists():
        return path.stat().st_mode & 0o7777
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_open(path: str | Path, *, what: str, binary: bool = False, newline: str | None = None) -> Iterator[IO]:
    """Open a temporary file beside ``path`` for writing; on leaving without an exception it
    replaces ``path``, on an exception it is removed and ``path`` is untouched. ``what`` names
    the option in the one-line errors (``--out``)."""
    path = Path(path)
    kind = _not_regular(path)
    if kind is not None:
        raise EvalrunError(f"{what} {path}: is {kind}, not a regular file; evalrun writes a new file and renames it "
                           "into place, which would replace it: give the path of a regular file")
    blocker = next((a for a in path.parents if a.exists() and not a.is_dir()), None)
    if blocker is not None:
        raise EvalrunError(f"{what} {path}: cannot write there ({blocker} is a file, not a folder)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise EvalrunError(f"{what} {path}: cannot write there ({_problem(exc)})") from None
    try:
        handle: IO = (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline=newline))
        with handle as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode(path))
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise EvalrunError(f"{what} {path}: cannot write it ({_problem(exc)}); the previous file, if any, is "
                           "unchanged") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str | Path, text: str, *, what: str) -> Path:
    with atomic_open(path, what=what) as fh:
        fh.write(text)
    return Path(path)


def write_bytes(path: str | Path, data: bytes, *, what: str) -> Path:
    with atomic_open(path, what=what, binary=True) as fh:
        fh.write(data)
    return Path(path)
