"""``evalrun unlearning compare``: WaterDrum's Tables 2 and 3 offline -- D1 and D2 of WaterDrum
and of the baseline metrics (:mod:`evalrun.unlearning.baselines`) under each data-similarity
setting (:mod:`evalrun.unlearning.similarity`).

Per setting s, as WaterDrum section 5: the retain set is R ∪ D_s; the original model is
trained on R ∪ D_s ∪ F, the retrained one on R ∪ D_s, calibration models on R ∪ D_s plus the
first k points of F. D1 is the AUROC of retain vs forget per-point values on the retrained
model; D2 the R² through the origin of the forget aggregate, scaled to the original model,
against k/|F|. Every metric goes through the one :func:`evalrun.unlearning.aggregates.summarize`.
The ``waterdrum`` pack runs once over all models on the forget and retain cases (not D_s);
the MIA scores read each model's logits on the data points and on a holdout of watermarked
points no model saw (the forget owner's passages the experiment did not select; the next
owner's when there are none). Steps are resumable like the demo's.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from evalrun._util.errors import EvalrunError
from evalrun.model.embedded import embedded_model_path
from evalrun.model.providers import ModelSpec
from evalrun.store.database import Store
from evalrun.unlearning.aggregates import Role, SetAggregate, Summary, summarize, uniform_mean
from evalrun.unlearning.baselines import BASELINES, HOLDOUT, Evidence, point_scores
from evalrun.unlearning.data import FORGET, RETAIN, case_of, load_owners, shipped_owners_path, watermark_data
from evalrun.unlearning.demo import (
    FULL,
    QUICK,
    WATERMARK,
    Clock,
    DemoConfig,
    _load,
    choose_threads,
    run_pack,
    select_points,
    store_scores,
    write_pack,
)
from evalrun.unlearning.finetune import load, sequences, train
from evalrun.unlearning.similarity import SETTINGS, mean_closeness, similar_points

WATERDRUM = "waterdrum"
#: calibration fractions k/|F| (WaterDrum App. E.5; the demo's). With fewer, D2's bootstrap
#: over the calibration points has too few points to give an interval
FRACTIONS = (0.25, 0.5, 0.75)
#: each compared method's set aggregate (WaterDrum's own: the uniform mean of q-scores)
AGGREGATES: dict[str, SetAggregate] = {WATERDRUM: uniform_mean,
                                       **{name: b.aggregate for name, b in BASELINES.items()}}


@dataclass(frozen=True)
class Result:
    """D1 and D2 of one metric in one setting."""

    method: str
    similarity: str
    summary: Summary


def holdout_points(config: DemoConfig, chosen: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Up to ``config.points`` passages no model trains on: the forget owner's unselected ones,
    else the first owner beyond the experiment's."""
    records = load_owners(shipped_owners_path())
    taken = {p["id"] for p in chosen}
    forget_owner = config.forget_owners[0]
    spare = [r for r in records if r["owner"] == forget_owner and r["id"] not in taken]
    if not spare:
        spare = [r for r in records if r["owner"] == config.owners]
    if not spare:
        raise EvalrunError("no passages are left over for the MIA holdout set")
    return [{**r, "holdout": True} for r in spare[:config.points]]


def _outputs(db: Path) -> dict[str, dict[str, list[str]]]:
    """Per model identity, per case id, the stored answers of the waterdrum pack."""
    with Store(str(db), readonly=True, what="--db") as store:
        rows = store.conn.execute("SELECT model, case_id, raw_output FROM results "
                                  "WHERE pack = 'waterdrum' AND error IS NULL ORDER BY repetition").fetchall()
    out: dict[str, dict[str, list[str]]] = {}
    for model, case_id, text in rows:
        out.setdefault(model, {}).setdefault(str(case_id), []).append(text or "")
    return out


def _logit_evidence(model_dir: Path, points: Sequence[Mapping[str, Any]]) -> list[Evidence]:
    """Each point's training sequence (query, completion; the EOS dropped) with the model's
    next-token logits on it: what the MIA scores read."""
    import torch

    model, tok = load(model_dir)
    model.eval()
    out = []
    for (ids, n_prompt), p in zip(sequences(tok, points), points):
        ids = ids[:-1]
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float().numpy()
        out.append(Evidence(reference=str(p["completion"]), ids=ids, logits=np.asarray(logits),
                            query_tokens=n_prompt))
    return out


def run_compare(out: Path, *, quick: bool = False, secret: str | None = None, seed: int = 0,
                threads: int | None = None, config: DemoConfig | None = None,
                fractions: Sequence[float] | None = None, log: Callable[[str], None] = print,
                write_report: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The comparison into ``out``; returns the headline (D1/D2 per method and setting).
    ``write_report`` is :func:`evalrun.report.unlearning.write_compare_report`."""
    import torch

    n_threads = choose_threads(threads)
    torch.set_num_threads(n_threads)
    config = replace(config or (QUICK if quick else FULL), seed=seed)
    config = replace(config, train=replace(config.train, seed=seed))
    fractions = tuple(fractions if fractions is not None else FRACTIONS)
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock(log)
    load_start = _load()
    chosen = select_points(config)
    copies = {name: similar_points(name, chosen, config.forget_owners, range(config.owners), seed)
              for name in SETTINGS}
    holdout = holdout_points(config, chosen)
    everything = chosen + [c for cs in copies.values() for c in cs] + holdout

    def mark() -> list[dict[str, Any]]:
        return watermark_data(everything, model=ModelSpec("embedded"), watermark=WATERMARK,
                              out=out / "data" / "watermarked.jsonl", secret=secret, mode="continue",
                              max_tokens=config.continuation_tokens, temperature=1.0, seed=config.seed)

    data = clock.step("watermark-data (continue mode, embedded model)", mark)
    by_id = {p["id"]: p for p in data}
    forget = [by_id[p["id"]] for p in chosen if p["owner"] in config.forget_owners]
    retain = [by_id[p["id"]] for p in chosen if p["owner"] not in config.forget_owners]
    held = [by_id[p["id"]] for p in holdout]
    base = embedded_model_path()
    plans: dict[str, dict[Path, Role]] = {}
    for name, cs in copies.items():
        ds = [by_id[c["id"]] for c in cs]
        models = out / "models" / name
        plan = [(models / "original", retain + ds + forget, Role("original", 1.0, "original")),
                (models / "retrained", retain + ds, Role("retrained", 0.0, "retrained"))]
        for frac in fractions:
            k = round(frac * len(forget))
            plan.append((models / f"calibration-{frac:g}", retain + ds + forget[:k],
                         Role("calibration", k / len(forget), f"R + {k}/{len(forget)} of F")))
        plans[name] = {}
        for path, pts, role in plan:
            clock.step(f"fine-tune {name}/{path.name} ({len(pts)} points)",
                       lambda: train(base, pts, path, config.train, log))
            plans[name][path] = role
    all_models = [p for made in plans.values() for p in made]
    pack = write_pack(out / "pack" / "waterdrum", [case_of(p, config.forget_owners) for p in forget + retain])
    db = out / "results.sqlite"
    clock.step(f"run the waterdrum pack on {len(all_models)} models",
               lambda: run_pack(pack, all_models, db, config, secret, n_threads))
    ident = {p: ModelSpec("hf", str(p)).identity() for p in all_models}
    wd = store_scores(db)
    answers = _outputs(db)
    sets = {FORGET: forget, RETAIN: retain}

    def scores_of(path: Path) -> dict[str, dict[str, dict[str, float]]]:
        per: dict[str, dict[str, dict[str, float]]] = {WATERDRUM: wd[ident[path]]}
        text_ev = {part: {p["id"]: [Evidence(str(p["completion"]), o) for o in answers.get(ident[path], {}).get(p["id"], [])]
                          for p in pts} for part, pts in sets.items()}
        logit_ev: dict[str, dict[str, list[Evidence]]] = {}
        if any(b.needs_logits for b in BASELINES.values()):
            pts = forget + retain + held
            ev = _logit_evidence(path, pts)
            parts = [FORGET] * len(forget) + [RETAIN] * len(retain) + [HOLDOUT] * len(held)
            for part, p, e in zip(parts, pts, ev):
                logit_ev.setdefault(part, {})[p["id"]] = [e]
        for name, b in BASELINES.items():
            per[name] = point_scores(name, logit_ev if b.needs_logits else text_ev)
        return per

    per_model = clock.step("baseline scores (ROUGE-L on the answers, MIA on the logits)",
                           lambda: {p: scores_of(p) for p in all_models})
    results: list[Result] = []
    for name, made in plans.items():
        roles = {ident[p]: r for p, r in made.items()}
        for method in AGGREGATES:
            scores = {ident[p]: per_model[p][method] for p in made}
            summary = summarize(scores, roles, aggregate=AGGREGATES[method])
            results.append(Result(method, name, summary))
    timings = {"steps": clock.steps, "total_seconds": round(clock.total(), 1),
               "load_avg_start": load_start, "load_avg_end": _load(), "cpu_count": os.cpu_count(),
               "torch_threads": n_threads, "quick": quick, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    closeness = {name: mean_closeness(cs) for name, cs in copies.items()}
    headline = write_report(db, out / "report", results, config=config, fractions=fractions,
                            timings=timings, closeness=closeness, seed=seed)
    timings["total_seconds"] = round(clock.total(), 1)
    (out / "timings.json").write_text(json.dumps(timings, indent=1) + "\n", encoding="utf-8")
    return headline
