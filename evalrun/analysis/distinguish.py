"""Distinguishability (Singh & Zou, section 2.1 and appendix B): can a classifier
that knows nothing of the watermark tell watermarked from unwatermarked text by its embedding?

**Data.** For each model and watermark in the selection, the watermarked results (label 1)
and the unwatermarked results (label 0) of the same packs, model and attack (default: no
attack, the generated text itself; with ``--attack A`` the attacked texts of both sides),
each text embedded once (:mod:`evalrun.model.embeddings`). Results without an output are left out.

**Cross-validation.** Shuffled 5-fold cross-validation (scikit-learn's
``StratifiedGroupKFold``, ``shuffle=True``, seeded): folds keep the two classes' proportions,
and every text of a case (its watermarked and unwatermarked outputs, all repetitions) stays in
one fold, so a classifier cannot score by recognising a prompt it saw in training. Inputs are
standardised with the training fold's mean and standard deviation. Per fold: accuracy at 0.5,
ROC AUC, the false-watermarked rate (unwatermarked texts called watermarked) and the
false-unwatermarked rate; the result is their mean and spread (standard deviation and range)
over the folds.

**Classifiers.**

* ``logreg``: scikit-learn's ``LogisticRegression`` (L2, C = 1, lbfgs), the seed's ablation;
* ``mlp``: the seed's network (appendix B): hidden layers 512-256-128-64 with ReLU, one output
  through a sigmoid (trained on the logit with ``BCEWithLogitsLoss``, the same loss computed
  stably); Adam with beta1 = 0.5, beta2 = 0.999; ``ReduceLROnPlateau`` (factor 0.5, patience
  50 epochs) on the epoch's training loss; 150 epochs; torch, seeded, on the CPU. Its learning
  rate, weight decay and batch size are 2e-3, 2e-3 and 50 by default (from the seed's grid,
  Table 4); ``mlp_search`` picks them per training fold from the whole grid by an inner 3-fold
  cross-validation (nested, so the outer estimate stays honest; 27 configurations, slow).

Results go to the store's ``analyses`` table (kind ``distinguish``), keyed by the settings and
the results used, and from there into the report and ``metrics.json``.
"""

from __future__ import annotations

import itertools
import math
import sqlite3
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping, Sequence, TypedDict

import numpy as np

from evalrun._util.errors import EvalrunError
from evalrun._util.hashing import canonical_json, sha256_hex
from evalrun._util.provenance import collect
from evalrun._util.registry import Registry
from evalrun._util.specs import is_none
from evalrun.metrics.detection import auroc
from evalrun.model.embeddings import embed_texts, embedder_identity
from evalrun.model.providers import ModelSpec
from evalrun.store.database import Store, utc_now

#: what ``evalrun distinguish`` trains when no ``--classifier`` is given
DEFAULT_CLASSIFIERS = ("logreg", "mlp")
#: Singh & Zou, appendix B, Table 4
class _MLPGrid(TypedDict):
    lr: tuple[float, ...]
    weight_decay: tuple[float, ...]
    batch_size: tuple[int, ...]


MLP_GRID: _MLPGrid = {"lr": (2e-5, 2e-4, 2e-3), "weight_decay": (2e-4, 2e-3, 2e-2), "batch_size": (50, 75, 100)}
HIDDEN = (512, 256, 128, 64)


@dataclass(frozen=True)
class MLPSettings:
    lr: float = 2e-3
    weight_decay: float = 2e-3
    batch_size: int = 50
    epochs: int = 150
    beta1: float = 0.5
    beta2: float = 0.999
    plateau_factor: float = 0.5
    plateau_patience: int = 50


@dataclass(frozen=True)
class CVSettings:
    folds: int = 5
    seed: int = 0
    classifiers: tuple[str, ...] = DEFAULT_CLASSIFIERS
    mlp: MLPSettings = field(default_factory=MLPSettings)
    mlp_search: bool = False

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["classifiers"] = list(self.classifiers)
        return out


# -- the classifiers ------------------------------------------------------------------------
def _standardise(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = train.mean(axis=0)
    std = train.std(axis=0)
    std[std == 0] = 1.0
    return (train - mean) / std, (test - mean) / std


def logreg_scores(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *, seed: int) -> np.ndarray:
    """P(watermarked) of the test rows from an L2 logistic regression."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1.0, max_iter=2000, random_state=seed)
    model.fit(x_train, y_train)
    return model.predict_proba(x_test)[:, 1]


def mlp_scores(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *, seed: int,
               settings: MLPSettings = MLPSettings()) -> np.ndarray:
    """P(watermarked) of the test rows from the seed's MLP (module docstring). Seeded: the
    global torch RNG is left as it was."""
    import torch

    threads = torch.get_num_threads()
    # a network this small gains nothing from threads; on a busy machine they cost 20x
    torch.set_num_threads(1)
    try:
        return _train_mlp(x_train, y_train, x_test, seed=seed, settings=settings)
    finally:
        torch.set_num_threads(threads)


def _train_mlp(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, *, seed: int,
               settings: MLPSettings) -> np.ndarray:
    import torch
    from torch import nn

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        layers: list[nn.Module] = []
        width = x_train.shape[1]
        for h in HIDDEN:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        net = nn.Sequential(*layers)
        opt = torch.optim.Adam(net.parameters(), lr=settings.lr, betas=(settings.beta1, settings.beta2),
                               weight_decay=settings.weight_decay)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=settings.plateau_factor,
                                                           patience=settings.plateau_patience)
        loss_fn = nn.BCEWithLogitsLoss()
        xt = torch.as_tensor(x_train, dtype=torch.float32)
        yt = torch.as_tensor(y_train, dtype=torch.float32)
        order = torch.Generator().manual_seed(seed)
        n = xt.shape[0]
        net.train()
        for _ in range(settings.epochs):
            perm = torch.randperm(n, generator=order)
            total = 0.0
            for start in range(0, n, settings.batch_size):
                idx = perm[start:start + settings.batch_size]
                opt.zero_grad()
                loss = loss_fn(net(xt[idx]).squeeze(-1), yt[idx])
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
            sched.step(total / n)
        net.eval()
        with torch.no_grad():
            return torch.sigmoid(net(torch.as_tensor(x_test, dtype=torch.float32)).squeeze(-1)).double().numpy()


def _roc_auc(y: np.ndarray, scores: np.ndarray) -> float:
    """ROC AUC of ``scores`` for labels ``y`` (1 = watermarked): the one AUROC,
    :func:`evalrun.metrics.detection.auroc` (ties count half, as scikit-learn's
    ``roc_auc_score``, which it equals up to float rounding)."""
    return auroc(scores[y == 1], scores[y == 0])


def _search_mlp(x: np.ndarray, y: np.ndarray, *, seed: int, base: MLPSettings) -> MLPSettings:
    """The grid point of :data:`MLP_GRID` with the best mean inner 3-fold ROC AUC."""
    from sklearn.model_selection import StratifiedKFold

    best, best_auc = base, -math.inf
    inner = list(StratifiedKFold(n_splits=3, shuffle=True, random_state=seed).split(x, y))
    for lr, wd, bs in itertools.product(MLP_GRID["lr"], MLP_GRID["weight_decay"], MLP_GRID["batch_size"]):
        settings = MLPSettings(lr=lr, weight_decay=wd, batch_size=bs, epochs=base.epochs)
        aucs = []
        for tr, te in inner:
            a, b = _standardise(x[tr], x[te])
            aucs.append(_roc_auc(y[te], mlp_scores(a, y[tr], b, seed=seed, settings=settings)))
        if np.mean(aucs) > best_auc:
            best, best_auc = settings, float(np.mean(aucs))
    return best


@dataclass(frozen=True)
class Fitted:
    """A classifier's P(watermarked) for the test rows, and the settings it chose (if it
    searched any), stored with the fold."""

    scores: np.ndarray
    chosen: dict[str, Any] | None = None


#: ``(x_train, y_train, x_test, seed, settings) -> Fitted``; third-party classifiers register
#: through the ``evalrun.classifiers`` entry-point group
Classifier = Callable[[np.ndarray, np.ndarray, np.ndarray, int, CVSettings], Fitted]
CLASSIFIERS: Registry[Classifier] = Registry("classifier", "evalrun.classifiers", option="--classifier")


@CLASSIFIERS.register("logreg")
def _logreg(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, seed: int, settings: CVSettings) -> Fitted:
    return Fitted(logreg_scores(x_train, y_train, x_test, seed=seed))


@CLASSIFIERS.register("mlp")
def _mlp(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, seed: int, settings: CVSettings) -> Fitted:
    mlp = _search_mlp(x_train, y_train, seed=seed, base=settings.mlp) if settings.mlp_search else settings.mlp
    return Fitted(mlp_scores(x_train, y_train, x_test, seed=seed, settings=mlp), asdict(mlp))


def _summary(values: Sequence[float]) -> dict[str, Any]:
    v = np.asarray(values, dtype=float)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0,
            "min": float(v.min()), "max": float(v.max()), "folds": [float(x) for x in v]}


def cross_validate(x: np.ndarray, y: np.ndarray, groups: Sequence[Any] | None = None, *,
                   settings: CVSettings = CVSettings()) -> dict[str, Any]:
    """Shuffled k-fold cross-validation of each classifier on embeddings ``x`` with labels
    ``y`` (1 = watermarked); ``groups`` keeps each group's rows in one fold. Returns, per
    classifier, ``accuracy``, ``roc_auc``, ``false_watermarked_rate`` and
    ``false_unwatermarked_rate`` as ``{mean, std, min, max, folds}``."""
    from sklearn.metrics import accuracy_score
    from sklearn.model_selection import StratifiedGroupKFold, StratifiedKFold

    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=int)
    if x.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"need one embedding row per label, got {x.shape} and {y.shape}")
    unknown = sorted(set(settings.classifiers) - set(CLASSIFIERS.names()))
    if unknown:
        raise EvalrunError(f"--classifier {unknown[0]}: unknown; known: {', '.join(CLASSIFIERS.names())}")
    counts = np.bincount(y, minlength=2)
    if counts.min() < settings.folds:
        raise EvalrunError(f"{settings.folds}-fold cross-validation needs at least {settings.folds} texts of each "
                           f"class; got {counts[1]} watermarked and {counts[0]} unwatermarked")
    if groups is not None and len(set(map(repr, groups))) >= settings.folds:
        codes = {g: i for i, g in enumerate(dict.fromkeys(map(repr, groups)))}
        g = np.asarray([codes[repr(k)] for k in groups])
        splits = list(StratifiedGroupKFold(n_splits=settings.folds, shuffle=True,
                                           random_state=settings.seed).split(x, y, g))
    else:
        splits = list(StratifiedKFold(n_splits=settings.folds, shuffle=True, random_state=settings.seed).split(x, y))
    out: dict[str, Any] = {}
    for name in settings.classifiers:
        acc, auc, fw, fu, chosen = [], [], [], [], []
        for k, (tr, te) in enumerate(splits):
            if len(set(y[tr])) < 2 or len(set(y[te])) < 2:
                raise EvalrunError("a fold holds one class only: too few cases for "
                                   f"{settings.folds}-fold cross-validation")
            a, b = _standardise(x[tr], x[te])
            seed = settings.seed * 1000 + k
            fitted = CLASSIFIERS.get(name)(a, y[tr], b, seed, settings)
            if fitted.chosen is not None:
                chosen.append(fitted.chosen)
            p = fitted.scores
            pred = (p >= 0.5).astype(int)
            acc.append(accuracy_score(y[te], pred))
            auc.append(_roc_auc(y[te], p))
            fw.append(float(np.mean(pred[y[te] == 0] == 1)))
            fu.append(float(np.mean(pred[y[te] == 1] == 0)))
        out[name] = {"accuracy": _summary(acc), "roc_auc": _summary(auc), "false_watermarked_rate": _summary(fw),
                     "false_unwatermarked_rate": _summary(fu), "fold_sizes": [int(len(te)) for _, te in splits]}
        if chosen:
            out[name]["mlp_settings"] = chosen
    return out


# -- from the store ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Dataset:
    """The texts of one comparison: a model's watermarked vs unwatermarked outputs."""

    model: str
    watermark: str
    attack: str
    packs: tuple[str, ...]
    texts: tuple[str, ...]
    labels: tuple[int, ...]
    groups: tuple[tuple[str, str], ...]
    item_keys: tuple[str, ...]


def _text(store: Store, row: Mapping[str, Any] | sqlite3.Row) -> str | None:
    if row["raw_output"] is None or (row["error"] and row["label"] not in ("GRADER_ERROR",)):
        return None
    if is_none(row["attack"]):
        return row["raw_output"]
    if row["attacked_output"] is not None:
        return row["attacked_output"]
    if row["transform_key"]:
        t = store.transforms([row["transform_key"]]).get(row["transform_key"])
        if t is not None and t["error"] is None:
            return t["text"]
    return None


def datasets(store: Store, rows: Sequence[Mapping[str, Any] | sqlite3.Row], *, attack: str = "none",
             watermarks: Sequence[str] = (), packs: Sequence[str] = (), models: Sequence[str] = ()) -> list[Dataset]:
    """One :class:`Dataset` per (model, watermark) in ``rows`` (restricted to the given
    packs, models and watermarks when any are named), all packs pooled."""
    chosen = [r for r in rows if r["attack"] == attack and (not packs or r["pack"] in packs)
              and (not models or r["model"] in models)]
    base = [r for r in chosen if r["watermark"] == "none"]
    out = []
    for model in sorted({r["model"] for r in chosen}):
        neg = [(r, t) for r in base if r["model"] == model for t in [_text(store, r)] if t is not None]
        marks = sorted({r["watermark"] for r in chosen if r["model"] == model and r["watermark"] != "none"})
        for wm in marks:
            if watermarks and wm not in watermarks:
                continue
            pos = [(r, t) for r in chosen if r["model"] == model and r["watermark"] == wm
                   for t in [_text(store, r)] if t is not None]
            if not pos or not neg:
                continue
            both = pos + neg
            out.append(Dataset(model=model, watermark=wm, attack=attack,
                               packs=tuple(sorted({r["pack"] for r, _ in both})),
                               texts=tuple(t for _, t in both), labels=tuple([1] * len(pos) + [0] * len(neg)),
                               groups=tuple((r["pack"], r["case_id"]) for r, _ in both),
                               item_keys=tuple(r["item_key"] for r, _ in both)))
    return out


def run_distinguish(store: Store, rows: Sequence[Mapping[str, Any] | sqlite3.Row], *, embedder: ModelSpec, settings: CVSettings,
                    base_url: str | None = None, attack: str = "none", watermarks: Sequence[str] = (),
                    packs: Sequence[str] = (), models: Sequence[str] = (), run_id: str | None = None,
                    progress: Any = None) -> list[dict[str, Any]]:
    """Embed (cached), cross-validate and store one analysis per dataset; returns their
    results (what ``analyses.result_json`` holds)."""
    import json
    import time


    found = datasets(store, rows, attack=attack, watermarks=watermarks, packs=packs, models=models)
    if not found:
        raise EvalrunError("nothing to classify: the selection needs watermarked results and unwatermarked ones "
                           f"(--watermark none) of the same model with attack {attack!r}")
    identity = embedder_identity(embedder, base_url=base_url)
    provenance = collect(["evalrun", "distinguish"])
    out = []
    for ds in found:
        start = time.perf_counter()
        x, fresh = embed_texts(store, embedder, ds.texts, base_url=base_url)
        embedded_s = time.perf_counter() - start
        scores = cross_validate(x, np.asarray(ds.labels), ds.groups, settings=settings)
        result = {"model": ds.model, "watermark": ds.watermark, "attack": ds.attack, "packs": list(ds.packs),
                  "embedder": str(embedder), "embedder_identity": identity, "dim": int(x.shape[1]), "n": len(ds.labels),
                  "n_watermarked": int(sum(ds.labels)), "n_unwatermarked": len(ds.labels) - int(sum(ds.labels)),
                  "newly_embedded": fresh, "embed_seconds": round(embedded_s, 3),
                  "cv_seconds": round(time.perf_counter() - start - embedded_s, 3),
                  "settings": settings.as_json(), "classifiers": scores}
        key = sha256_hex("distinguish", identity, canonical_json(settings.as_json()), ds.model, ds.watermark,
                         ds.attack, canonical_json(sorted(ds.item_keys)))
        store.store_analysis({
            "analysis_key": key, "kind": "distinguish",
            "config_json": canonical_json({"embedder": str(embedder), "model": ds.model, "watermark": ds.watermark,
                                           "attack": ds.attack, "packs": list(ds.packs), **settings.as_json()}),
            "result_json": json.dumps(result, sort_keys=True), "error": None,
            "seconds": round(time.perf_counter() - start, 3),
            "run_ids_json": json.dumps([run_id] if run_id else []), "git_sha": provenance.get("git_sha"),
            "evalrun_version": provenance.get("evalrun_version"), "created_at": utc_now()})
        out.append(result)
        if progress:
            progress(ds, result)
    return out
