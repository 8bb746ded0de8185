"""``evalrun sweep``: MarkMyWords' aggregate metric: the smallest watermark size within
quality and tamper bounds, re-measured with other keys."""

from __future__ import annotations

import argparse
import math
import sys

from evalrun._util.errors import EvalrunError
from evalrun.analysis.sweep import _finite, grid_points, sweep
from evalrun.cli.common import TUNE_RUN_OPTIONS, add_some_run_options, write_json
from evalrun.model.providers import check_model, check_watermark_support
from evalrun.pack.loading import load_pack, resolve_pack
from evalrun.run.options import BY_NAME, resolve, run_options
from evalrun.store.database import Store, check_store_path
from evalrun.watermark.key_strength import warn_if_weak

#: the run options `evalrun sweep` shares with `evalrun run`: tune's, and the attacks and judges
SWEEP_RUN_OPTIONS = (*TUNE_RUN_OPTIONS, "attacks", "attack_suite", "judges")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pack", required=True, metavar="PACK", help="a detection pack (name or directory)")
    parser.add_argument("--scheme", required=True, metavar="SPEC", help="the scheme, with any fixed parameters")
    parser.add_argument("--grid", action="append", default=[], metavar="PARAM=V1,V2",
                        help="values to try, repeatable (default: the scheme's gamma values x delta 1,2,4)")
    parser.add_argument("--max-degradation", type=float, default=0.01, metavar="D",
                        help="quality degradation bound (default 0.01; MarkMyWords also uses 0.1)")
    parser.add_argument("--min-tamper", type=float, default=0.2, metavar="R",
                        help="tamper resistance must exceed this (default 0.2; MarkMyWords also uses 0)")
    parser.add_argument("--remeasure", type=int, default=2, metavar="K",
                        help="other keys and seeds the chosen configuration is measured again with (default 2)")
    parser.add_argument("--json", metavar="FILE", help="write the sweep's result to FILE")
    add_some_run_options(parser, SWEEP_RUN_OPTIONS)


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    values = resolve({name: getattr(args, name, None) for name in BY_NAME if name in SWEEP_RUN_OPTIONS}, {})
    if len(values["models"] or ()) > 1:
        raise EvalrunError(f"--model: sweep measures one model at a time, got {len(values['models'])}")
    if not values["judges"]:
        values["judges"] = ("perplexity:embedded",)
    options = run_options(values, default_models=("embedded",))
    check_model(options.models[0])
    check_watermark_support(options.models[0], [args.scheme])
    grid_points(args.scheme, args.grid)
    if not options.resolved_key():
        raise EvalrunError("sweep needs the watermark key: --key or $EVALRUN_WATERMARK_KEY")
    warn_if_weak(options.resolved_key(), from_option=options.key is not None)
    for name, value in (("--max-degradation", args.max_degradation), ("--min-tamper", args.min_tamper)):
        if not math.isfinite(value):
            raise EvalrunError(f"{name} {value}: must be a finite number")
    pack = load_pack(resolve_pack(args.pack, values["packs_dirs"] or []))
    check_store_path(values["db"], what="--out", write=True)

    def show(kind: str, entry: dict) -> None:
        if kind == "config":
            print(f"sweep: {entry['watermark']}: size {entry['size']}, quality degradation "
                  f"{entry['quality_degradation']:.4f}, tamper resistance {entry['tamper_resistance']}, "
                  f"{entry['generated']} generated, {entry['seconds']:.1f} s", file=sys.stderr)
        else:
            print(f"sweep: re-measured with key #{entry['index'] + 1}: size {entry['size']} over {entry['n']} texts, "
                  f"{entry['seconds']:.1f} s", file=sys.stderr)

    with Store(values["db"], what="--out") as store:
        result = sweep(store, pack, options, scheme=args.scheme, grid_overrides=args.grid,
                       max_degradation=args.max_degradation, min_tamper=args.min_tamper, remeasure=args.remeasure,
                       argv=user_argv, progress=show)
    if result["watermark"] is None:
        print(f"sweep: no configuration has quality degradation <= {args.max_degradation:g} and tamper resistance > "
              f"{args.min_tamper:g} ({len(result['configs'])} tried)")
    else:
        low, high = result["aggregate_size_ci"]
        print(f"sweep: chose {result['watermark']}: aggregate size {result['aggregate_size']} tokens (95% {low}-{high}; "
              f"{result['aggregate_n']} texts under {args.remeasure} other keys), {result['seconds']:.1f} s")
    if args.json:
        write_json(args.json, _finite(result))
    return 0
