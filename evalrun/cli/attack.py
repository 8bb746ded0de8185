"""``evalrun attack``: one text attack on one text, by the transform stage's own code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalrun._util.errors import EvalrunError
from evalrun.attacks import Attack, parse_attack


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attack", required=True, metavar="SPEC", help="text attack spec, e.g. swap:p=0.1")
    parser.add_argument("--seed", type=int, default=0, help="the attack's seed (default 0)")
    parser.add_argument("--text", metavar="FILE", help="the text (default: standard input)")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    attack = parse_attack(args.attack)
    if attack is None:
        raise EvalrunError("--attack none: name an attack (see docs/attacks.md for the list)")
    if not isinstance(attack, Attack):
        raise EvalrunError(f"--attack {args.attack}: a model attack runs in the transform stage of "
                           "`evalrun run`, which stores its calls; `evalrun attack` shows text attacks")
    if args.text:
        try:
            text = Path(args.text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise EvalrunError(f"--text {args.text}: cannot read ({exc})") from None
    else:
        text = sys.stdin.read()
    sys.stdout.write(attack.apply(text, args.seed))
    return 0
