"""Key hashing: the digest of length-prefixed parts, stable across releases (stored keys)."""

from __future__ import annotations

import hashlib

from evalrun._util.hashing import sha256_hex


def test_sha256_hex_is_the_digest_of_length_prefixed_parts() -> None:
    parts = ("gen", "pack", 3, b"raw", "ünïcode", None, 0.5, "")
    h = hashlib.sha256()
    for part in parts:
        data = part if isinstance(part, bytes) else str(part).encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    assert sha256_hex(*parts) == h.hexdigest()
    assert sha256_hex("ab", "c") != sha256_hex("a", "bc")
    assert sha256_hex() == hashlib.sha256().hexdigest()
