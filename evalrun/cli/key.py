"""``evalrun key new``: a watermark key worth keeping secret.

Anyone holding watermarked text can test a guessed key by running detection (docs/pipeline.md,
"Watermark keys and the store"), so a key is as strong as it is hard to guess: 256 random bits
from the operating system's generator, printed as 64 hex digits.
"""

from __future__ import annotations

import argparse
import secrets

#: bytes of a new key: 256 bits
KEY_BYTES = 32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    action = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    action.add_parser("new", help=f"print a new random key ({8 * KEY_BYTES} bits, {2 * KEY_BYTES} hex digits)")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    print(secrets.token_hex(KEY_BYTES))
    return 0
