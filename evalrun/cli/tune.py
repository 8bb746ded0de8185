"""``evalrun tune``: search a scheme's strength grid for the configuration that reaches a
target true-positive rate (WaterBench's comparison at equal strength)."""

from __future__ import annotations

import argparse
import sys

from evalrun._util.errors import EvalrunError
from evalrun.analysis.tune import Trial, plan_search, tune
from evalrun.cli.common import TUNE_RUN_OPTIONS, add_some_run_options, write_json
from evalrun.model.providers import check_model, check_watermark_support
from evalrun.pack.loading import load_pack, resolve_pack
from evalrun.run.options import BY_NAME, resolve, run_options
from evalrun.store.database import Store, check_store_path
from evalrun.watermark.key_strength import warn_if_weak


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pack", required=True, metavar="PACK", help="a detection pack (name or directory)")
    parser.add_argument("--scheme", required=True, metavar="SPEC",
                        help="the scheme, with any fixed parameters (e.g. kgw or kgw:context=2); the search sets "
                             "the rest")
    parser.add_argument("--target-tpr", required=True, type=float, metavar="T", help="the strength to reach, e.g. 0.7")
    parser.add_argument("--z", type=float, metavar="Z",
                        help="z-score threshold of detection (default: the pack's z_threshold, else 4 as in "
                             "WaterBench)")
    parser.add_argument("--grid", action="append", default=[], metavar="PARAM=VALUES",
                        help="override the grid, repeatable: gamma=0.25,0.5 (values tried) or delta=0:8 (bisected "
                             "range)")
    parser.add_argument("--steps", type=int, default=6, help="bisection steps per outer value (default 6)")
    parser.add_argument("--tolerance", type=float, default=0.02,
                        help="stop bisecting once a TPR is this close to the target (default 0.02)")
    parser.add_argument("--no-refine", dest="refine", action="store_false",
                        help="choose the measured configuration closest to the target (WaterBench's rule) instead "
                             "of the point where a logistic fit over all measurements reaches it")
    parser.add_argument("--json", metavar="FILE",
                        help="write {\"watermark\": spec, \"tpr\": ..., \"tried\": [...]} to FILE")
    add_some_run_options(parser, TUNE_RUN_OPTIONS)


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    values = resolve({name: getattr(args, name, None) for name in BY_NAME if name in TUNE_RUN_OPTIONS}, {})
    if len(values["models"] or ()) > 1:
        raise EvalrunError(f"--model: tune searches one model at a time, got {len(values['models'])}")
    options = run_options(values, default_models=("embedded",))
    model = options.models[0]
    check_model(model)
    check_watermark_support(model, [args.scheme])
    if not options.resolved_key():
        raise EvalrunError("tune needs the watermark key: --key or $EVALRUN_WATERMARK_KEY")
    warn_if_weak(options.resolved_key(), from_option=options.key is not None)
    pack = load_pack(resolve_pack(args.pack, values["packs_dirs"] or []))
    z = args.z if args.z is not None else float(pack.meta.get("z_threshold", 4.0))
    plan_search(args.scheme, args.grid, target=args.target_tpr, z_threshold=z, steps=args.steps,
                tolerance=args.tolerance)
    check_store_path(values["db"], what="--out", write=True)

    def show(t: Trial) -> None:
        print(f"tune: {t.watermark}: TPR {t.tpr:.3f} ({t.detected}/{t.n}; 95% {t.ci_low:.2f}-{t.ci_high:.2f}), "
              f"{t.generated} generated, {t.cached} cached, {t.seconds:.1f} s", file=sys.stderr)

    with Store(values["db"], what="--out") as store:
        result = tune(store, pack, options, scheme=args.scheme, target=args.target_tpr, z_threshold=z,
                      grid_overrides=args.grid, steps=args.steps, tolerance=args.tolerance, refine=args.refine,
                      argv=user_argv,
                      progress=show)
    print(f"tune: chose {result['watermark']}: TPR {result['tpr']:.3f} at z >= {z:g} (target {args.target_tpr:g}; "
          f"{len(result['tried'])} configurations tried in {result['seconds']:.1f} s) -> {values['db']}")
    write_json(args.json, result)
    return 0
