"""``evalrun distinguish``: how well classifiers tell watermarked from unwatermarked outputs
by their embeddings (Singh & Zou's binary classifier: cross-validated accuracy and ROC AUC)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tabulate import tabulate

from evalrun._util.errors import EvalrunError
from evalrun.analysis.distinguish import CLASSIFIERS, DEFAULT_CLASSIFIERS, CVSettings, MLPSettings, run_distinguish
from evalrun.cli.common import write_json
from evalrun.model.providers import check_model, model_argument
from evalrun.store.database import Store


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True)
    parser.add_argument("--embedder", default="embedded", metavar="SPEC", type=model_argument,
                        help="embedded (default: the embedded model's mean-pooled hidden states), hf:<path> "
                             "(a local transformers model) or openai:<name> (an embeddings endpoint)")
    parser.add_argument("--base-url",
                        help="OpenAI-compatible server of an openai: embedder (default: $OPENAI_BASE_URL)")
    parser.add_argument("--run", help="only the results this run covered")
    parser.add_argument("--pack", action="append", default=[], metavar="PACK", help="only these packs (repeatable)")
    parser.add_argument("--model", action="append", default=[], metavar="SPEC",
                        help="only these models (repeatable)")
    parser.add_argument("--watermark", action="append", default=[], metavar="SPEC",
                        help="only these watermarks (repeatable; default every one in the selection)")
    parser.add_argument("--attack", default="none", metavar="SPEC",
                        help="classify the texts after this attack (default none: the generated texts)")
    parser.add_argument("--classifier", action="append", choices=CLASSIFIERS.names(), metavar="NAME",
                        help=f"repeatable, one of {', '.join(CLASSIFIERS.names())} "
                             f"(default {' and '.join(DEFAULT_CLASSIFIERS)})")
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the folds and the MLP (default 0)")
    parser.add_argument("--epochs", type=int, default=150, help="MLP epochs (default 150, as in Singh & Zou)")
    parser.add_argument("--lr", type=float, default=2e-3, help="MLP learning rate (default 2e-3)")
    parser.add_argument("--weight-decay", type=float, default=2e-3, help="MLP Adam weight decay (default 2e-3)")
    parser.add_argument("--batch-size", type=int, default=50, help="MLP batch size (default 50)")
    parser.add_argument("--mlp-search", action="store_true",
                        help="pick the MLP's learning rate, weight decay and batch size per fold from Singh & Zou's "
                             "grid by an inner 3-fold cross-validation (slow)")
    parser.add_argument("--json", metavar="FILE", help="also write the results to FILE")


def run(args: argparse.Namespace, user_argv: list[str]) -> int:
    check_model(args.embedder)
    if args.folds < 2:
        raise EvalrunError(f"--folds {args.folds}: must be at least 2")
    for name, value in (("--epochs", args.epochs), ("--batch-size", args.batch_size)):
        if value < 1:
            raise EvalrunError(f"{name} {value}: must be at least 1")
    if not Path(args.db).exists():
        raise EvalrunError(f"--db {args.db}: no such database")
    settings = CVSettings(folds=args.folds, seed=args.seed, classifiers=tuple(args.classifier or DEFAULT_CLASSIFIERS),
                          mlp=MLPSettings(lr=args.lr, weight_decay=args.weight_decay, batch_size=args.batch_size,
                                          epochs=args.epochs), mlp_search=args.mlp_search)
    table = []
    with Store(args.db, what="--db") as store:
        if args.run is not None and args.run not in store.run_ids():
            raise EvalrunError(f"--run {args.run}: not in {args.db}; runs: {', '.join(store.run_ids())}")
        results = run_distinguish(store, store.results(run_id=args.run), embedder=args.embedder, settings=settings,
                                  base_url=args.base_url, attack=args.attack, watermarks=args.watermark,
                                  packs=args.pack, models=args.model, run_id=args.run)
    for r in results:
        for name, m in r["classifiers"].items():
            table.append([r["model"], r["watermark"], r["attack"], f"{r['n_watermarked']}+{r['n_unwatermarked']}",
                          name, f"{m['accuracy']['mean']:.3f} ± {m['accuracy']['std']:.3f}",
                          f"{m['roc_auc']['mean']:.3f} ± {m['roc_auc']['std']:.3f}",
                          f"{m['roc_auc']['min']:.3f}-{m['roc_auc']['max']:.3f}"])
    print(tabulate(table, headers=["model", "watermark", "attack", "texts (wm+unwm)", "classifier",
                                   f"accuracy ({args.folds}-fold mean ± sd)", "ROC AUC (mean ± sd)", "AUC range"]))
    seconds = sum(r["embed_seconds"] + r["cv_seconds"] for r in results)
    print(f"distinguish: {len(results)} comparison(s), embedder {args.embedder} "
          f"({sum(r['newly_embedded'] for r in results)} texts newly embedded), {seconds:.1f} s; stored in {args.db}")
    write_json(args.json, results)
    return 0
