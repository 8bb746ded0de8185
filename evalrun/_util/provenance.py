"""Where a run came from: code version, environment and command line (secrets redacted)."""

from __future__ import annotations

import platform
import subprocess
import sys
from datetime import datetime, timezone
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit, urlunsplit

from evalrun._util.version import __version__

#: packages whose versions decide results; recorded in runs.packages_json
TRACKED_PACKAGES = ("evalrun", "pytest", "pytest-xdist", "openai", "jsonschema", "numpy", "scipy",
                    "torch", "transformers", "tokenizers", "vllm", "matplotlib", "tabulate")
#: options whose value is secret; their values are replaced in the stored argv
SECRET_OPTIONS = ("--key", "--evalrun-key", "--api-key")
#: options whose value is a URL that may carry user:password
URL_OPTIONS = ("--base-url", "--evalrun-base-url")


def utc_now() -> str:
    """ISO-8601 UTC timestamp with microseconds (sortable as text)."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def redact_url(url: str) -> str:
    """The URL without any user:password part (endpoints are provenance, credentials are not)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def redact_argv(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    hide_next = url_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
            continue
        if url_next:
            out.append(redact_url(arg))
            url_next = False
            continue
        name, eq, value = arg.partition("=")
        if name in URL_OPTIONS:
            out.append(f"{name}={redact_url(value)}" if eq else arg)
            url_next = not eq
            continue
        if name in SECRET_OPTIONS:
            if eq:
                out.append(f"{name}=***")
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(arg)
    return out


def git_state(cwd: Path | None = None) -> tuple[str | None, int | None]:
    """(HEAD sha, 1 if the work tree has uncommitted changes) of the repo around ``cwd``."""
    where = str(cwd or Path.cwd())
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True,
                             text=True, timeout=10)
        if sha.returncode != 0:
            return None, None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=30)
        return sha.stdout.strip(), int(bool(dirty.stdout.strip()))
    except (OSError, subprocess.SubprocessError):
        return None, None


#: the checkout evalrun runs from, when it runs from one (an editable or source install): the
#: folder holding the ``evalrun`` package and a ``.git``; an install in site-packages has none
SOURCE_ROOT = Path(__file__).resolve().parents[2]


@lru_cache(maxsize=1)
def evalrun_version() -> str:
    """``__version__``, with the source commit as a PEP 440 local label (``0.1.0+g<12 hex>``,
    ``.dirty`` when the checkout has uncommitted changes) when evalrun runs from a git checkout:
    the code that made a run, whatever folder the run was started in."""
    if not (SOURCE_ROOT / ".git").exists():
        return __version__
    sha, dirty = git_state(SOURCE_ROOT)
    if sha is None:
        return __version__
    return f"{__version__}+g{sha[:12]}" + (".dirty" if dirty else "")


def package_versions() -> dict[str, str]:
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def collect(argv: Sequence[str]) -> dict[str, Any]:
    sha, dirty = git_state()
    return {
        "started_at": utc_now(),
        "git_sha": sha,
        "git_dirty": dirty,
        "evalrun_version": evalrun_version(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "argv": redact_argv(argv),
        "packages": package_versions(),
    }
