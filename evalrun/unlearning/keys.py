"""Which Waterfall id verifies an owner's data.

In the Waterfall reference code (and WaterDrum, section 4, P1) the key *is* the data
owner's integer id. evalrun keeps that convention when no secret is given: owner ``i`` is
verified with id ``i``. With a secret (``--key`` / ``EVALRUN_WATERMARK_KEY``) each owner's id
is derived from it, so case files, the store and reports (which all name owners by their
public index) never reveal a key: id = the first 4 bytes (big-endian) of
``sha256("waterdrum\\0" + secret + "\\0" + str(owner))``, a valid ``RandomState`` seed word.
"""

from __future__ import annotations

import hashlib

from evalrun._util.errors import SpecError

#: how the owner's id was chosen, recorded in grade metadata (never the id itself)
FROM_OWNER = "owner index (no secret given)"
FROM_SECRET = "derived from the secret key"


def owner_waterfall_id(owner: int, secret: str | None) -> int:
    """The Waterfall id (``--key``) of owner ``owner``: ``owner`` itself without a secret,
    else a 32-bit id derived from the secret (see the module docstring)."""
    if isinstance(owner, bool) or not isinstance(owner, int) or owner < 0:
        raise SpecError(f"owner must be a non-negative integer, got {owner!r}")
    if not secret:
        if owner >= 2**32:
            raise SpecError(f"owner {owner}: Waterfall ids lie in [0, 2**32)")
        return owner
    digest = hashlib.sha256(f"waterdrum\0{secret}\0{owner}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def key_source(secret: str | None) -> str:
    return FROM_SECRET if secret else FROM_OWNER
