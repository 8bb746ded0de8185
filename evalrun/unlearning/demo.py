"""``evalrun unlearning demo``: WaterDrum end to end, offline, on the embedded model.

Steps, each resumable (a finished step's files are reused when the command is run again):

1. owners' data: the shipped public-domain passages (``assets/unlearning``), the first
   ``owners`` owners with ``points`` passages each; owner 0 is the forget set F (WaterDrum
   forgets one category);
2. ``watermark-data`` in ``continue`` mode (see :mod:`evalrun.unlearning.data` for why not a
   paraphrase): each passage's first 12 words followed by the embedded model's continuation
   under the owner's Waterfall key (``waterfall:kappa=2``);
3. fine-tune the embedded model (torch, CPU, seeded): the original model on all data, the
   retrained model on the retain set R, calibration models on R plus the first k points of F
   for k/|F| in {0.25, 0.5, 0.75} (WaterDrum App. E.5 partitions F sequentially);
4. unlearn the original with each of ``algorithms`` (default gradient difference and KL;
   ``ga``, ``tv`` and ``scrub`` too: WaterDrum Fig. 4, App. E.6);
5. run the ``waterdrum`` pack (this experiment's cases) on every model with ``evalrun run``;
6. write the report: the store's report plus the WaterDrum section (per-model aggregates
   scaled to the original, D1 AUROC, D2 R^2, Fig. 4 and the calibration plot), with every
   number in ``metrics.json``, and ``timings.json`` (per step, with the machine's load).

With ``similarity`` ``exact`` (``d4``) or ``semantic`` the retain set also holds a copy of every
forget passage -- word for word, or paraphrased offline (:mod:`evalrun.unlearning.similarity`)
-- watermarked under a retain owner's key (WaterDrum D4, App. E.4), and a second retrained
model gives ``waterdrum_d4_<setting>_duplicate_auroc``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from evalrun._util.errors import EvalrunError
from evalrun.metrics import auroc
from evalrun.model.embedded import embedded_model_path
from evalrun.model.providers import ModelSpec
from evalrun.pack.loading import shipped_packs_dir
from evalrun.store.database import Store
from evalrun.unlearning.aggregates import Role, point_scores, summarize
from evalrun.unlearning.data import FORGET, case_of, load_owners, shipped_owners_path, watermark_data
from evalrun.unlearning.finetune import ALGORITHMS, TrainConfig, train, unlearn
from evalrun.unlearning.similarity import mean_closeness, setting, similar_points

WATERMARK = "waterfall:kappa=2"
FRACTIONS = (0.25, 0.5, 0.75)
#: WaterDrum Fig. 4's gradient difference and KL (the demo's algorithms before ``--algorithms``)
DEFAULT_ALGORITHMS = ("gd", "kl")


@dataclass(frozen=True)
class DemoConfig:
    """The experiment's size; ``QUICK`` fits in 15 minutes on a 2-core CPU."""

    owners: int = 12
    points: int = 24
    forget_owners: tuple[int, ...] = (0,)
    continuation_tokens: int = 48
    #: WaterDrum App. E.1 fine-tunes 20 epochs at lr 1e-3 (LoRA, batch 128); a 5 M model
    #: trained in full memorises its data (loss 4.7 -> 0.03 nats/token) in 10 epochs of
    #: batches of 4 at lr 2e-3 (measured); batches of 16 for 10 epochs stopped at 0.9
    train: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=10, lr=2e-3, batch_size=4))
    #: WaterDrum App. E.6: KL runs 5 unlearning epochs
    unlearn: TrainConfig = field(default_factory=lambda: TrainConfig(epochs=5, lr=1e-4, batch_size=4))
    repetitions: int = 3
    seed: int = 0


FULL = DemoConfig()
QUICK = DemoConfig(owners=4, points=12, repetitions=2)


def _load() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:  # not Linux
        return []


class Clock:
    """Wall time per step with the 1-minute load average at its end."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self.steps: list[dict[str, Any]] = []
        self.log = log
        self.t0 = time.perf_counter()

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        self.log(f"evalrun unlearning: {name} ...")
        t = time.perf_counter()
        value = fn()
        dt = time.perf_counter() - t
        self.steps.append({"step": name, "seconds": round(dt, 1), "load_avg": _load()})
        self.log(f"evalrun unlearning: {name}: {dt:.1f} s (load {_load()[:1]})")
        return value

    def total(self) -> float:
        return time.perf_counter() - self.t0


def select_points(config: DemoConfig, owners_file: Path | None = None) -> list[dict[str, Any]]:
    """The first ``config.owners`` owners, ``config.points`` passages each (evenly spread
    over the owner's passages)."""
    records = load_owners(owners_file or shipped_owners_path())
    out = []
    for owner in range(config.owners):
        mine = [r for r in records if r["owner"] == owner]
        if len(mine) < config.points:
            raise EvalrunError(f"owner {owner} has {len(mine)} passages, fewer than {config.points}")
        step = len(mine) / config.points
        out += [mine[int(i * step)] for i in range(config.points)]
    return out


def duplicates(points: list[dict[str, Any]], config: DemoConfig,
               similarity: str = "exact") -> list[dict[str, Any]]:
    """WaterDrum D4's D_s under setting ``similarity`` (:mod:`evalrun.unlearning.similarity`):
    a copy of each forget passage, owned by a retain owner (round robin)."""
    return similar_points(similarity, points, config.forget_owners, range(config.owners), config.seed)


def write_pack(out: Path, cases: list[dict[str, Any]], owner_watermark: str | None = None) -> Path:
    """The shipped ``waterdrum`` pack with this experiment's cases (same grader and settings;
    ``owner_watermark``: the spec it verifies instead of Waterfall, a top-level pack.toml key)."""
    shipped = shipped_packs_dir() / "waterdrum"
    out.mkdir(parents=True, exist_ok=True)
    for name in ("pack.toml", "case.schema.json", "grader.py"):
        text = (shipped / name).read_text(encoding="utf-8")
        if name == "pack.toml" and owner_watermark:
            lines = text.splitlines(keepends=True)
            at = next((i for i, line in enumerate(lines) if line.startswith("[")), len(lines))
            lines.insert(at, f"owner_watermark = {json.dumps(owner_watermark)}\n")
            text = "".join(lines)
        (out / name).write_text(text, encoding="utf-8")
    (out / "cases").mkdir(exist_ok=True)
    with (out / "cases" / "cases.jsonl").open("w", encoding="utf-8") as fh:
        for c in cases:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    return out


def run_pack(pack: Path, models: list[Path], db: Path, config: DemoConfig,
             secret: str | None, threads: int) -> None:
    """``evalrun run`` of the pack on every model, in a child process (its own pytest)."""
    cmd = [sys.executable, "-m", "evalrun.cli", "run", "--pack", str(pack), "--out", str(db),
           "--n", str(config.repetitions), "--seed", str(config.seed),
           "--max-tokens", str(config.continuation_tokens), "--no-progress"]
    for m in models:
        cmd += ["--model", f"hf:{m}"]
    env = dict(os.environ)
    env.pop("EVALRUN_WATERMARK_KEY", None)
    env["OMP_NUM_THREADS"] = str(threads)
    if secret:
        env["EVALRUN_WATERMARK_KEY"] = secret
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode not in (0, 1):
        raise EvalrunError(f"evalrun run of the waterdrum pack failed ({res.returncode}):\n"
                           f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}")


def store_scores(db: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Per model identity, :func:`point_scores` of its waterdrum results."""
    with Store(str(db), readonly=True, what="--db") as store:
        cur = store.conn.execute("SELECT * FROM results WHERE pack = 'waterdrum'")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    return {m: point_scores(rs) for m, rs in by_model.items()}


def choose_threads(threads: int | None) -> int:
    """torch threads: ``threads`` when given, else 1. The 5 M-parameter model's steps are too
    small to gain from a second thread on a 2-core machine that anything else uses: measured
    there, a training step took 15 s with 2 threads and 3.6 s with 1 at load 9, and a quick
    demo's first fine-tune 105 s with 2 threads (one other process busy) against 48 s with 1
    at load 8. ``--threads`` sets more on an idle or larger machine."""
    return threads if threads else 1


def check_algorithms(algorithms: Sequence[str]) -> None:
    """An error naming ``--algorithms`` unless every name is a registered algorithm."""
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown or not algorithms:
        raise EvalrunError(f"--algorithms {','.join(algorithms)}: unknown {', '.join(unknown) or '(none given)'}; "
                           f"known: {', '.join(ALGORITHMS)}")


def unlearn_all(clock: Clock, original: Path, forget: list[dict[str, Any]], retain: list[dict[str, Any]],
                algorithms: Sequence[str], config: DemoConfig, log: Callable[[str], None]) -> dict[Path, Role]:
    """Each of ``algorithms`` applied to the ``original`` model, into ``unlearned-<name>``
    beside it (resumable like every step); their roles, Fig. 4's points."""
    roles: dict[Path, Role] = {}
    for method in dict.fromkeys(algorithms):
        path = original.parent / f"unlearned-{method}"
        clock.step(f"unlearn {method}", lambda: unlearn(original, forget, retain, method, path,
                                                        config.unlearn, log))
        roles[path] = Role("unlearned", None, method)
    return roles


def run_demo(out: Path, *, quick: bool = False, secret: str | None = None, d4: bool = False,
             similarity: str = "none", algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
             seed: int = 0, threads: int | None = None,
             config: DemoConfig | None = None, log: Callable[[str], None] = print,
             write_report: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The whole experiment into ``out``; returns the headline numbers. ``similarity`` names
    the data-similarity setting whose D_s trains a second retrained model (``d4``: the
    ``exact`` one, as before ``--similarity``); ``algorithms`` the unlearning algorithms
    applied to the original (:data:`evalrun.unlearning.finetune.ALGORITHMS`). ``config`` replaces the quick/full setting
    (tests use a tiny one). ``write_report`` is
    :func:`evalrun.report.unlearning.write_report`, handed in by the caller: the core does not
    import the report package (the CLI renders reports)."""
    import torch

    if d4 and similarity not in ("none", "exact"):
        raise EvalrunError(f"--d4 is --similarity exact; it cannot be combined with --similarity {similarity}")
    similarity = "exact" if d4 else setting(similarity).name
    check_algorithms(algorithms)
    d4 = similarity != "none"
    n_threads = choose_threads(threads)
    torch.set_num_threads(n_threads)
    log(f"evalrun unlearning: {n_threads} torch thread(s), load average {_load()}")
    config = replace(config or (QUICK if quick else FULL), seed=seed)
    config = replace(config, train=replace(config.train, seed=seed),
                     unlearn=replace(config.unlearn, seed=seed))
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock(log)
    load_start = _load()
    base = embedded_model_path()
    points = select_points(config)
    if d4:
        points += duplicates(points, config, similarity)

    def mark() -> list[dict[str, Any]]:
        def progress(done: int, total: int) -> None:
            if done == total or done % 32 == 0:
                log(f"  watermarked {done}/{total}")
        return watermark_data(points, model=ModelSpec("embedded"), watermark=WATERMARK,
                              out=out / "data" / "watermarked.jsonl", secret=secret,
                              mode="continue", max_tokens=config.continuation_tokens,
                              temperature=1.0, seed=config.seed, progress=progress)

    data = clock.step("watermark-data (continue mode, embedded model)", mark)
    is_dup = [bool(p.get("duplicate_of")) for p in data]
    forget = [p for p, dup in zip(data, is_dup) if p["owner"] in config.forget_owners and not dup]
    retain = [p for p, dup in zip(data, is_dup) if p["owner"] not in config.forget_owners and not dup]
    dups = [p for p, dup in zip(data, is_dup) if dup]
    models = out / "models"
    roles: dict[Path, Role] = {}
    plan: list[tuple[str, Path, list[dict[str, Any]], Role]] = [
        ("original", models / "original", retain + forget, Role("original", 1.0, "original")),
        ("retrained", models / "retrained", retain, Role("retrained", 0.0, "retrained")),
    ]
    for frac in FRACTIONS:
        k = round(frac * len(forget))
        plan.append((f"calibration k/|F|={frac}", models / f"calibration-{frac:g}",
                     retain + forget[:k], Role("calibration", k / len(forget), f"R + {k}/{len(forget)} of F")))
    for name, path, train_points, role in plan:
        clock.step(f"fine-tune {name} ({len(train_points)} points)",
                   lambda: train(base, train_points, path, config.train, log))
        roles[path] = role
    roles.update(unlearn_all(clock, models / "original", forget, retain, algorithms, config, log))
    d4_path = models / f"retrained-{setting(similarity).model_tag}"
    if d4:
        clock.step(f"fine-tune retrained with {similarity} duplicates ({len(retain) + len(dups)} points)",
                   lambda: train(base, retain + dups, d4_path, config.train, log))
    cases = [case_of(p, config.forget_owners) for p in data]
    pack = write_pack(out / "pack" / "waterdrum", cases)
    db = out / "results.sqlite"
    all_models = list(roles) + ([d4_path] if d4 else [])
    clock.step(f"run the waterdrum pack on {len(all_models)} models",
               lambda: run_pack(pack, all_models, db, config, secret, n_threads))
    scores = store_scores(db)
    dup_ids = {p["id"] for p in dups}
    ident = {p: ModelSpec("hf", str(p)).identity() for p in all_models}
    main_scores = {ident[p]: {s: {c: v for c, v in pts.items() if c not in dup_ids}
                              for s, pts in scores[ident[p]].items()} for p in roles}
    summary = summarize(main_scores, {ident[p]: r for p, r in roles.items()})
    d4_auroc = None
    if d4:
        s = scores[ident[d4_path]]
        d4_auroc = auroc(list(s["retain"].values()), list(s[FORGET].values()))
    timings = {"steps": clock.steps, "total_seconds": round(clock.total(), 1),
               "load_avg_start": load_start, "load_avg_end": _load(),
               "cpu_count": os.cpu_count(), "torch_threads": n_threads, "quick": quick}
    headline = write_report(db, out / "report", summary, ident[models / "retrained"],
                            config=config, timings=timings, d4_auroc=d4_auroc,
                            similarity={"setting": similarity, **mean_closeness(dups)},
                            data=data, secret=bool(secret))
    timings["total_seconds"] = round(clock.total(), 1)
    (out / "timings.json").write_text(json.dumps(timings, indent=1) + "\n", encoding="utf-8")
    return headline
