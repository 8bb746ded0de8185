"""MarkLLM compatibility (THU-BPM/MarkLLM at 112fa74), shared by the schemes that offer it.

``<scheme>:compat=markllm`` keys a scheme exactly as MarkLLM's config does, so that
``evalrun detect`` can print MarkLLM's own score beside evalrun's p-value; ``--key`` is then the
integer the config holds (DiPmark's ``key``, PF's ``salt_key``, MorphMark's ``hash_key``,
EXPGumbel's ``seed``). ``compat=none`` (the default) keys the scheme from evalrun's string key.
"""

from __future__ import annotations

import re

from evalrun._util.errors import SpecError
from evalrun.watermark.base import WatermarkScheme

#: the values of the ``compat`` spec parameter
COMPAT = ("none", "markllm")
MARKLLM = "markllm"
_INTEGER = re.compile(r"[+-]?[0-9]+")


def compat_mode(scheme: object, compat: str | None) -> str:
    """``none`` or ``markllm`` (None reads as none); a one-line error naming the scheme and
    ``compat`` otherwise."""
    mode = "none" if compat is None else compat
    if mode not in COMPAT:
        raise SpecError(f"--watermark {scheme}: compat={compat!r} unknown; expected none or markllm")
    return mode


def check_key(scheme: object, compat: str, key: str, field: str, *, low: int = -(2**63),
              high: int = 2**64) -> int | None:
    """Validate ``--key`` for a scheme in mode ``compat``: natively any non-blank string (None
    is returned); with ``compat=markllm`` MarkLLM's integer config ``field`` in ``[low, high)``,
    returned as an int. Errors are one line and never show the key."""
    text = key.strip()
    if compat != MARKLLM:
        if not text:
            raise SpecError(f"--key: the watermark key for {scheme} must not be blank")
        return None
    if not _INTEGER.fullmatch(text) or not low <= int(text) < high:
        raise SpecError(f"--key: {scheme} (compat=markllm) needs MarkLLM's integer {field} as the key "
                        f"(a decimal integer in [{low}, {high})); the key given is not one")
    return int(text)


class MarkLLMKeyed(WatermarkScheme):
    """A scheme with a ``compat`` mode whose ``--key`` is then MarkLLM's integer config field
    ``markllm_key_field`` (in ``[-2**63, markllm_key_high)``): checked before any work, in one
    line that never shows the key."""

    compat: str | None  # None reads as none
    markllm_key_field: str = "key"
    markllm_key_high: int = 2**64

    def check_key(self, key: str) -> None:
        super().check_key(key)
        check_key(self.spec, self.compat or "none", key, self.markllm_key_field, high=self.markllm_key_high)

    def markllm_key(self, key: str) -> int:
        """MarkLLM's integer config field from ``--key`` (compat mode; the same checks)."""
        WatermarkScheme.check_key(self, key)
        value = check_key(self.spec, MARKLLM, key, self.markllm_key_field, high=self.markllm_key_high)
        assert value is not None  # compat mode always gives the integer
        return value
