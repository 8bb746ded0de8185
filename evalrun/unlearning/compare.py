"""``evalrun unlearning compare``: WaterDrum's Tables 2 and 3 offline -- D1 and D2 of WaterDrum
and of the baseline metrics (:mod:`evalrun.unlearning.baselines`) under each data-similarity
setting (:mod:`evalrun.unlearning.similarity`); its Table 4 -- WaterDrum with the other
watermarks adapted to many owners (:mod:`evalrun.unlearning.owner_watermarks`: KGW, SynthID,
EXP-edit) beside Waterfall, with verification seconds per text measured here; and its Fig. 4
-- the unlearning algorithms (:data:`evalrun.unlearning.finetune.ALGORITHMS`) applied to the
no-duplicate original, placed beside retraining.

Per setting s, as WaterDrum section 5: the retain set is R ∪ D_s; the original model is
trained on R ∪ D_s ∪ F, the retrained one on R ∪ D_s, calibration models on R ∪ D_s plus the
first k points of F. D1 is the AUROC of retain vs forget per-point values on the retrained
model; D2 the R² through the origin of the forget aggregate, scaled to the original model,
against k/|F|. Every metric goes through the one :func:`evalrun.unlearning.aggregates.summarize`.
The ``waterdrum`` pack runs once over all models on the forget and retain cases (not D_s);
the MIA scores read each model's logits on the data points and on a holdout of watermarked
points no model saw (the forget owner's passages the experiment did not select; the next
owner's when there are none). Steps are resumable like the demo's.

Table 4 runs in the no-duplicate setting, as the paper's (its Waterfall row is Tables 2 and 3's
no-duplicate figures): each other method watermarks the same owners' passages with the same
operator (``watermark-data``, continue mode, the owner's key of that scheme), trains its own
original, retrained and calibration models, and runs the pack with ``owner_watermark`` set
to its spec; the Waterfall row is the no-duplicate setting's models. Verification seconds
per text are the mean wall time of the grader's verification of every stored answer of the
method's models (one warm-up call left out), on this machine.
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
    check_algorithms,
    choose_threads,
    run_pack,
    select_points,
    store_scores,
    unlearn_all,
    write_pack,
)
from evalrun.unlearning.finetune import DISTINCT, load, sequences, train
from evalrun.unlearning.grading import verifier
from evalrun.unlearning.owner_watermarks import WatermarkMethod, methods, owner_watermark
from evalrun.unlearning.similarity import SETTINGS, mean_closeness, similar_points

WATERDRUM = "waterdrum"
#: calibration fractions k/|F| (WaterDrum App. E.5; the demo's). With fewer, D2's bootstrap
#: over the calibration points has too few points to give an interval
FRACTIONS = (0.25, 0.5, 0.75)
#: each compared method's set aggregate (WaterDrum's own: the uniform mean of q-scores)
AGGREGATES: dict[str, SetAggregate] = {WATERDRUM: uniform_mean,
                                       **{name: b.aggregate for name, b in BASELINES.items()}}


#: the setting Table 4 and Fig. 4 run in (the paper's: no duplicates)
TABLE4_SETTING = "none"


@dataclass(frozen=True)
class Result:
    """D1 and D2 of one metric in one setting; ``watermark``: the watermark method whose
    owner keys WaterDrum verified (None for the baselines, which read no watermark)."""

    method: str
    similarity: str
    summary: Summary
    watermark: str | None = None


@dataclass(frozen=True)
class Table4Row:
    """WaterDrum with one watermark method: D1/D2 and verification cost measured here."""

    method: WatermarkMethod
    summary: Summary
    #: mean wall seconds of one verification, over ``n_timed`` stored answers
    seconds_per_text: float
    n_timed: int
    #: whether verification reads a model (a GPU in practice)
    needs_model: bool
    #: the k/|F| of the calibration models (besides 0 and 1)
    fractions: tuple[float, ...]
    #: the :class:`Result` holding its D1/D2 records (Tables 2 and 3's no-duplicate one for
    #: the main experiment's watermark)
    result: Result


#: the full-size comparison: the demo's full size less one owner, whose 24 passages are the MIA
#: holdout (the shipped data has 12 owners x 24 passages, and the demo's full size uses them all)
COMPARE_FULL = replace(FULL, owners=FULL.owners - 1)


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


def _same_scheme(a: str, b: str) -> bool:
    return owner_watermark(a).scheme.spec.canonical() == owner_watermark(b).scheme.spec.canonical()


def verification_seconds(db: Path, models: Sequence[str], pack: Path,
                         secret: str | None) -> tuple[float, int]:
    """Mean wall seconds of the ``pack``'s verification (:func:`evalrun.unlearning.grading.verifier`
    of its pack.toml, as the grader calls it) of every stored answer of ``models``; the first
    call (a warm-up: imports, tables) is left out. Returns (seconds, texts timed)."""
    import tomllib

    marked = verifier(tomllib.loads((pack / "pack.toml").read_text(encoding="utf-8")))
    marks = ",".join("?" * len(models))
    with Store(str(db), readonly=True, what="--db") as store:
        rows = store.conn.execute(
            f"SELECT output_tokens_json, case_json, extra_json FROM results WHERE pack = 'waterdrum' "
            f"AND error IS NULL AND model IN ({marks}) ORDER BY result_id", list(models)).fetchall()
    texts = [(json.loads(t), int(json.loads(c)["owner"]), int(json.loads(e)["vocab_size"]))
             for t, c, e in rows if t]
    if len(texts) < 2:
        return float("nan"), 0
    marked.verify(*texts[0][:2], secret, texts[0][2])
    start = time.perf_counter()
    for ids, owner, vocab in texts[1:]:
        marked.verify(ids, owner, secret, vocab)
    return (time.perf_counter() - start) / (len(texts) - 1), len(texts) - 1


def _fine_tune_plan(clock: Clock, models: Path, retain: list[dict[str, Any]], forget: list[dict[str, Any]],
                    fractions: Sequence[float], config: DemoConfig, tag: str,
                    log: Callable[[str], None]) -> dict[Path, Role]:
    """The original (R ∪ F), retrained (R) and calibration (R plus the first k of F) models
    under ``models``; their roles."""
    base = embedded_model_path()
    plan = [(models / "original", retain + forget, Role("original", 1.0, "original")),
            (models / "retrained", retain, Role("retrained", 0.0, "retrained"))]
    for frac in fractions:
        k = round(frac * len(forget))
        plan.append((models / f"calibration-{frac:g}", retain + forget[:k],
                     Role("calibration", k / len(forget), f"R + {k}/{len(forget)} of F")))
    roles: dict[Path, Role] = {}
    for path, pts, role in plan:
        clock.step(f"fine-tune {tag}/{path.name} ({len(pts)} points)",
                   lambda: train(base, pts, path, config.train, log))
        roles[path] = role
    return roles


def run_compare(out: Path, *, quick: bool = False, secret: str | None = None, seed: int = 0,
                threads: int | None = None, config: DemoConfig | None = None,
                fractions: Sequence[float] | None = None,
                watermarks: Sequence[str] | None = None, table4_fractions: Sequence[float] | None = None,
                algorithms: Sequence[str] = DISTINCT, log: Callable[[str], None] = print,
                write_report: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """The comparison into ``out``; returns the headline (D1/D2 per method and setting, Table 4,
    Fig. 4's points). ``watermarks``: Table 4's methods (registered names; all by default);
    ``table4_fractions``: their calibration k/|F| (``fractions`` by default); ``algorithms``:
    Fig. 4's. ``write_report`` is :func:`evalrun.report.unlearning.write_compare_report`."""
    import torch

    check_algorithms(algorithms)
    table4 = methods(watermarks)
    n_threads = choose_threads(threads)
    torch.set_num_threads(n_threads)
    config = replace(config or (QUICK if quick else COMPARE_FULL), seed=seed)
    config = replace(config, train=replace(config.train, seed=seed),
                     unlearn=replace(config.unlearn, seed=seed))
    fractions = tuple(fractions if fractions is not None else FRACTIONS)
    t4_fractions = tuple(table4_fractions if table4_fractions is not None else fractions)
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock(log)
    load_start = _load()
    chosen = select_points(config)
    copies = {name: similar_points(name, chosen, config.forget_owners, range(config.owners), seed)
              for name in SETTINGS}
    holdout = holdout_points(config, chosen)
    everything = chosen + [c for cs in copies.values() for c in cs] + holdout

    def mark(spec: str, points: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
        return watermark_data(points, model=ModelSpec("embedded"), watermark=spec, out=path,
                              secret=secret, mode="continue", max_tokens=config.continuation_tokens,
                              temperature=1.0, seed=config.seed)

    data = clock.step("watermark-data (continue mode, embedded model)",
                      lambda: mark(WATERMARK, everything, out / "data" / "watermarked.jsonl"))
    by_id = {p["id"]: p for p in data}
    forget = [by_id[p["id"]] for p in chosen if p["owner"] in config.forget_owners]
    retain = [by_id[p["id"]] for p in chosen if p["owner"] not in config.forget_owners]
    held = [by_id[p["id"]] for p in holdout]
    plans: dict[str, dict[Path, Role]] = {}
    for name, cs in copies.items():
        ds = [by_id[c["id"]] for c in cs]
        plans[name] = _fine_tune_plan(clock, out / "models" / name, retain + ds, forget, fractions,
                                      config, name, log)
    all_models = [p for made in plans.values() for p in made]
    # Fig. 4: the algorithms unlearn the no-duplicate original
    fig4_dir = out / "models" / TABLE4_SETTING
    unlearned = unlearn_all(clock, fig4_dir / "original", forget, retain, algorithms, config, log)
    pack = write_pack(out / "pack" / "waterdrum", [case_of(p, config.forget_owners) for p in forget + retain])
    db = out / "results.sqlite"
    pack_models = all_models + list(unlearned)
    clock.step(f"run the waterdrum pack on {len(pack_models)} models",
               lambda: run_pack(pack, pack_models, db, config, secret, n_threads))
    # Table 4: the other watermark methods, each with its own data, models and pack run
    t4_models: dict[str, dict[Path, Role]] = {}
    t4_packs: dict[str, Path] = {}
    for m in table4:
        if _same_scheme(m.spec, WATERMARK):
            t4_models[m.name] = plans[TABLE4_SETTING]
            t4_packs[m.name] = pack
            continue
        marked = clock.step(f"watermark-data with {m.name} ({m.spec})",
                            lambda: mark(m.spec, chosen, out / "data" / f"watermarked-{m.name}.jsonl"))
        ids = {p["id"]: p for p in marked}
        m_forget = [ids[p["id"]] for p in forget]
        m_retain = [ids[p["id"]] for p in retain]
        made = _fine_tune_plan(clock, out / "models" / f"table4-{m.name}", m_retain, m_forget,
                               t4_fractions, config, f"table4-{m.name}", log)
        m_pack = write_pack(out / "pack" / f"waterdrum-{m.name}",
                            [case_of(p, config.forget_owners) for p in m_forget + m_retain], owner_watermark=m.spec)
        clock.step(f"run the waterdrum pack ({m.name}) on {len(made)} models",
                   lambda: run_pack(m_pack, list(made), db, config, secret, n_threads))
        t4_models[m.name], t4_packs[m.name] = made, m_pack
    every = pack_models + [p for name, made in t4_models.items() for p in made if made is not plans[TABLE4_SETTING]]
    ident = {p: ModelSpec("hf", str(p)).identity() for p in every}
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
    #: the registered method the main experiment's watermark is (Waterfall)
    main = next((m.name for m in methods() if _same_scheme(m.spec, WATERMARK)), None)
    results: list[Result] = []
    for name, made in plans.items():
        roles = {ident[p]: r for p, r in made.items()}
        for method in AGGREGATES:
            scores = {ident[p]: per_model[p][method] for p in made}
            summary = summarize(scores, roles, aggregate=AGGREGATES[method])
            results.append(Result(method, name, summary, main if method == WATERDRUM else None))
    shared = {r.similarity: r for r in results if r.method == WATERDRUM}
    rows: list[Table4Row] = []
    for m in table4:
        made = t4_models[m.name]
        if made is plans[TABLE4_SETTING]:
            result = shared[TABLE4_SETTING]
        else:
            result = Result(WATERDRUM, TABLE4_SETTING, summarize(
                {ident[p]: wd[ident[p]] for p in made}, {ident[p]: r for p, r in made.items()}), m.name)
        seconds, n = clock.step(f"time {m.name} verification",
                                lambda: verification_seconds(db, [ident[p] for p in made], t4_packs[m.name], secret))
        used = tuple(r.fraction for r in made.values() if r.kind == "calibration" and r.fraction is not None)
        rows.append(Table4Row(m, result.summary, seconds, n, owner_watermark(m.spec).scheme.needs_model,
                              used, result))
    fig4_models = {**plans[TABLE4_SETTING], **unlearned}
    fig4 = summarize({ident[p]: wd[ident[p]] for p in fig4_models}, {ident[p]: r for p, r in fig4_models.items()})
    timings = {"steps": clock.steps, "total_seconds": round(clock.total(), 1),
               "load_avg_start": load_start, "load_avg_end": _load(), "cpu_count": os.cpu_count(),
               "torch_threads": n_threads, "quick": quick, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    closeness = {name: mean_closeness(cs) for name, cs in copies.items()}
    headline = write_report(db, out / "report", results, config=config, fractions=fractions,
                            timings=timings, closeness=closeness, seed=seed, table4=rows, fig4=fig4)
    timings["total_seconds"] = round(clock.total(), 1)
    (out / "timings.json").write_text(json.dumps(timings, indent=1) + "\n", encoding="utf-8")
    return headline
