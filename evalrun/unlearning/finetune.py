"""Fine-tuning and unlearning of a small causal LM on CPU with torch (seeded).

Training sequences are exactly what the ``waterdrum`` pack later sends: the query rendered as
the HF provider renders a prompt (:func:`evalrun.model.tokenization.encode_prompt`,
no system prompt), then the data point's completion tokens and EOS. The loss covers the
completion only, so the model learns "after this query comes this watermarked text" -- the
influence WaterDrum verifies (P1: the model owner trains on watermarked data).

Unlearning algorithms applied to the original model (WaterDrum Fig. 4 and App. E.6), registered
in :data:`ALGORITHMS`:

* ``ga``: gradient ascent on the forget set (loss = - forget NLL; Jang et al., 2023);
* ``gd`` (also ``gradient_difference``): maximise the loss on the forget set while minimising
  it on the retain set (loss = retain NLL - forget NLL);
* ``kl``: KL minimisation (Maini et al., 2024): maximise the forget loss while keeping the
  model's next-token distributions on the retain set close to the original's
  (loss = KL(original || model) on retain - forget NLL);
* ``scrub`` (Kurmanji et al., 2023), in one step instead of SCRUB's alternating max and min
  steps: move away from the original (the teacher) on the forget set while staying close to
  it, and fitting the data, on the retain set (loss = KL on retain + retain NLL - KL on forget);
* ``tv``: task vector (Ilharco et al., 2023, as MUSE applies it): fine-tune the original on the
  forget set for the same epochs, then subtract the change: theta = theta_o - (theta_ft -
  theta_o).

Gradient ascent is unbounded, so all clip the gradient norm to 1 and run a fixed number of
epochs. Models are saved as ordinary HF directories (``save_pretrained`` plus the
tokenizer), usable as ``hf:<dir>`` by any pack.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from evalrun.model.generation import Prompt
from evalrun.model.tokenization import encode_prompt

DONE_FILE = "training.json"


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 20
    lr: float = 1e-3
    batch_size: int = 16
    seed: int = 0
    weight_decay: float = 0.0


def load(model_dir: str | Path) -> tuple[Any, Any]:
    """(model in float32, train mode; tokenizer) from local files only."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True,
                                                 dtype=torch.float32)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return model, tok


def sequences(tokenizer: Any, points: Sequence[Mapping[str, Any]]) -> list[tuple[list[int], int]]:
    """``(token ids, prompt length)`` per data point: rendered query + completion + EOS."""
    out = []
    for p in points:
        prompt = encode_prompt(tokenizer, Prompt(system=None, user=str(p["prompt"])))
        ids = p.get("completion_token_ids")
        if not ids:
            ids = tokenizer.encode(str(p["completion"]), add_special_tokens=False)
        out.append((prompt + [int(t) for t in ids] + [int(tokenizer.eos_token_id)], len(prompt)))
    return out


def _batch(seqs: Sequence[tuple[list[int], int]], pad: int) -> tuple[Any, Any, Any]:
    import torch

    width = max(len(s) for s, _ in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    labels = torch.full((len(seqs), width), -100, dtype=torch.long)
    for i, (s, plen) in enumerate(seqs):
        ids[i, :len(s)] = torch.tensor(s)
        mask[i, :len(s)] = 1
        labels[i, plen:len(s)] = torch.tensor(s[plen:])
    return ids, mask, labels


def _batches(seqs: Sequence[tuple[list[int], int]], size: int, rng: Any) -> list[list[int]]:
    order = rng.permutation(len(seqs)).tolist()
    return [order[i:i + size] for i in range(0, len(order), size)]


def _nll(model: Any, batch: tuple[Any, Any, Any]) -> Any:
    ids, mask, labels = batch
    return model(input_ids=ids, attention_mask=mask, labels=labels).loss


def save(model: Any, tokenizer: Any, out_dir: Path, info: Mapping[str, Any]) -> Path:
    """An ordinary HF model directory; ``training.json`` (written last) marks it complete."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(str(out_dir))
    tokenizer.save_pretrained(str(out_dir))
    (out_dir / DONE_FILE).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n",
                                     encoding="utf-8")
    return out_dir


def is_done(out_dir: Path) -> bool:
    return (out_dir / DONE_FILE).is_file() and (out_dir / "config.json").is_file()


def _training_start(model_dir: str | Path, config: TrainConfig) -> tuple[Any, Any, Any]:
    """The model of ``model_dir`` in train mode, its tokenizer, and the generator of batch
    orders, torch's generator seeded first: a run is reproducible from ``config.seed``."""
    import numpy as np
    import torch

    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model, tok = load(model_dir)
    model.train()
    return model, tok, rng


def train(base_dir: str | Path, points: Sequence[Mapping[str, Any]], out_dir: str | Path,
          config: TrainConfig, log: Callable[[str], None] = lambda s: None) -> Path:
    """Fine-tune ``base_dir`` on ``points`` (all parameters, AdamW, cosine schedule) and save
    to ``out_dir``; an already complete ``out_dir`` is kept (resume)."""
    import torch

    out = Path(out_dir)
    if is_done(out):
        return out
    model, tok, rng = _training_start(base_dir, config)
    seqs = sequences(tok, points)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    steps = config.epochs * math.ceil(len(seqs) / config.batch_size)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, steps) / max(steps, 1))))
    t0, losses = time.perf_counter(), []
    for epoch in range(config.epochs):
        total = 0.0
        for idx in _batches(seqs, config.batch_size, rng):
            loss = _nll(model, _batch([seqs[i] for i in idx], int(tok.pad_token_id)))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            total += float(loss.detach()) * len(idx)
        losses.append(total / len(seqs))
        log(f"  epoch {epoch + 1}/{config.epochs}: loss {losses[-1]:.3f}")
    info = {"kind": "fine-tune", "base": str(base_dir), "points": len(seqs),
            "config": asdict(config), "epoch_losses": losses,
            "seconds": round(time.perf_counter() - t0, 1)}
    return save(model, tok, out, info)


def _kl_to(model: Any, reference: Any, batch: tuple[Any, Any, Any]) -> Any:
    """KL(reference || model) over the batch's completion positions."""
    import torch

    ids, mask, labels = batch
    logits = model(input_ids=ids, attention_mask=mask).logits
    with torch.no_grad():
        ref = reference(input_ids=ids, attention_mask=mask).logits
    sel = labels != -100  # the completion positions (shifted below)
    sel = torch.cat([sel[:, 1:], torch.zeros_like(sel[:, :1])], dim=1)
    logp = torch.log_softmax(logits[sel], -1)
    ref_logp = torch.log_softmax(ref[sel], -1)
    return torch.nn.functional.kl_div(logp, ref_logp, log_target=True, reduction="batchmean")


#: (model, original model or None, forget batch, retain batch) -> (loss, forget NLL, the
#: term kept low), the last two for the log
StepLoss = Callable[[Any, Any, Any, Any], tuple[Any, Any, Any]]


@dataclass(frozen=True)
class Algorithm:
    """An unlearning algorithm: a per-step loss (ascent on F in some form), or ``None`` for
    the task vector, which is not a loop of steps."""

    name: str
    description: str
    loss: StepLoss | None
    #: whether the loss reads the original model's distributions
    reference: bool = False


def _ga(model: Any, ref: Any, f: Any, r: Any) -> tuple[Any, Any, Any]:
    nll = _nll(model, f)
    return -nll, nll, nll * 0.0


def _gd(model: Any, ref: Any, f: Any, r: Any) -> tuple[Any, Any, Any]:
    nll = _nll(model, f)
    keep = _nll(model, r)
    return keep - nll, nll, keep


def _kl(model: Any, ref: Any, f: Any, r: Any) -> tuple[Any, Any, Any]:
    nll = _nll(model, f)
    keep = _kl_to(model, ref, r)
    return keep - nll, nll, keep


def _scrub(model: Any, ref: Any, f: Any, r: Any) -> tuple[Any, Any, Any]:
    import torch

    keep = _kl_to(model, ref, r) + _nll(model, r)
    with torch.no_grad():
        nll = _nll(model, f)
    return keep - _kl_to(model, ref, f), nll, keep


ALGORITHMS: dict[str, Algorithm] = {}


def register(algorithm: Algorithm, *aliases: str) -> Algorithm:
    for name in (algorithm.name, *aliases):
        if name in ALGORITHMS:
            raise ValueError(f"unlearning algorithm {name!r} is registered twice")
        ALGORITHMS[name] = algorithm
    return algorithm


register(Algorithm("ga", "gradient ascent on the forget set", _ga))
register(Algorithm("gd", "gradient difference: ascent on forget, descent on retain", _gd),
         "gradient_difference")
register(Algorithm("kl", "KL minimisation: ascent on forget, retain kept close to the original", _kl,
                   reference=True))
register(Algorithm("scrub", "SCRUB: away from the original on forget, close to it on retain", _scrub,
                   reference=True))
register(Algorithm("tv", "task vector: the original minus its fine-tuning on the forget set", None))
#: the registered names (aliases included), for error messages and ``--algorithms``
UNLEARNING = tuple(ALGORITHMS)
#: each registered algorithm once, under its own name (aliases left out): Fig. 4's points
DISTINCT = tuple(n for n, a in ALGORITHMS.items() if a.name == n)


def _task_vector(model: Any, f_seqs: Sequence[tuple[list[int], int]], pad: int, config: TrainConfig,
                 rng: Any) -> list[dict[str, float]]:
    """Fine-tune ``model`` on the forget set, then set it to original - (fine-tuned - original)."""
    import torch

    original = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr)
    history = []
    for _ in range(config.epochs):
        for idx in _batches(f_seqs, config.batch_size, rng):
            loss = _nll(model, _batch([f_seqs[i] for i in idx], pad))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            history.append({"forget_nll": round(float(loss.detach()), 4), "keep": 0.0})
    tuned = model.state_dict()
    with torch.no_grad():
        model.load_state_dict({k: 2 * original[k] - tuned[k] if original[k].is_floating_point() else original[k]
                               for k in original})
    return history


def unlearn(original_dir: str | Path, forget: Sequence[Mapping[str, Any]],
            retain: Sequence[Mapping[str, Any]], method: str, out_dir: str | Path,
            config: TrainConfig, log: Callable[[str], None] = lambda s: None) -> Path:
    """Apply ``method`` (:data:`UNLEARNING`) to the original model for ``config.epochs``
    passes over the forget set, each forget batch paired with a random retain batch."""
    import torch

    algorithm = ALGORITHMS.get(method)
    if algorithm is None:
        raise ValueError(f"unknown unlearning method {method!r}; known: {', '.join(UNLEARNING)}")
    out = Path(out_dir)
    if is_done(out):
        return out
    model, tok, rng = _training_start(original_dir, config)
    reference = None
    if algorithm.reference:
        reference, _ = load(original_dir)
        reference.eval()
    pad = int(tok.pad_token_id)
    f_seqs, r_seqs = sequences(tok, forget), sequences(tok, retain)
    t0 = time.perf_counter()
    if algorithm.loss is None:
        history = _task_vector(model, f_seqs, pad, config, rng)
        log(f"  {method}: forget NLL while fine-tuning {history[0]['forget_nll']:.3f} -> "
            f"{history[-1]['forget_nll']:.3f}, then subtracted")
    else:
        history = []
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr)
        for epoch in range(config.epochs):
            for idx in _batches(f_seqs, config.batch_size, rng):
                f_batch = _batch([f_seqs[i] for i in idx], pad)
                r_idx = rng.choice(len(r_seqs), size=min(config.batch_size, len(r_seqs)), replace=False)
                r_batch = _batch([r_seqs[i] for i in r_idx], pad)
                loss, forget_nll, keep = algorithm.loss(model, reference, f_batch, r_batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad()
                history.append({"forget_nll": round(float(forget_nll.detach()), 4),
                                "keep": round(float(keep.detach()), 4)})
            log(f"  {method} epoch {epoch + 1}/{config.epochs}: forget NLL {history[-1]['forget_nll']:.3f}, "
                f"retain term {history[-1]['keep']:.3f}")
    info = {"kind": f"unlearning:{method}", "base": str(original_dir), "forget": len(f_seqs),
            "retain": len(r_seqs), "config": asdict(config), "history": history,
            "seconds": round(time.perf_counter() - t0, 1)}
    return save(model, tok, out, info)
