"""Stable hashing helpers (independent of PYTHONHASHSEED) for keys, seeds and fingerprints."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the form every hash below is taken over."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(*parts: Any) -> str:
    """Digest of the parts, each prefixed with its length (so parts never run together),
    hashed in one call: two items' keys are made per test item."""
    chunks: list[bytes] = []
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode("utf-8")
        chunks += (len(data).to_bytes(8, "little"), data)
    return hashlib.sha256(b"".join(chunks)).hexdigest()


def stable_int(*parts: Any, bits: int = 63) -> int:
    """A non-negative integer derived from ``parts`` (for per-item seeds)."""
    return int(sha256_hex(*parts)[:16], 16) & ((1 << bits) - 1)
