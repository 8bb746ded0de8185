"""Fine-tuning and unlearning of a small causal LM on CPU with torch (seeded).

Training sequences are exactly what the ``waterdrum`` pack later sends: the query rendered as
the HF provider renders a prompt (:func:`evalrun.model.tokenization.encode_prompt`,
no system prompt), then the data point's completion tokens and EOS. The loss covers the
completion only, so the model learns "after this query comes this watermarked text" -- the
influence WaterDrum verifies (P1: the model owner trains on watermarked data).

Unlearning algorithms applied to the original model (WaterDrum Fig. 4 and App. E.6):

* ``gradient_difference``: maximise the loss on the forget set while minimising it on the
  retain set (loss = retain NLL - forget NLL), the "GD"-family baseline;
* ``kl``: KL minimisation (Maini et al., 2024): maximise the forget loss while keeping the
  model's next-token distributions on the retain set close to the original's
  (loss = KL(original || model) on retain - forget NLL).

Gradient ascent is unbounded, so both clip the gradient norm to 1 and run a fixed number of
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

UNLEARNING = ("gradient_difference", "kl")
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


def unlearn(original_dir: str | Path, forget: Sequence[Mapping[str, Any]],
            retain: Sequence[Mapping[str, Any]], method: str, out_dir: str | Path,
            config: TrainConfig, log: Callable[[str], None] = lambda s: None) -> Path:
    """Apply ``method`` (:data:`UNLEARNING`) to the original model for ``config.epochs``
    passes over the forget set, each forget batch paired with a random retain batch."""
    import torch

    if method not in UNLEARNING:
        raise ValueError(f"unknown unlearning method {method!r}; known: {', '.join(UNLEARNING)}")
    out = Path(out_dir)
    if is_done(out):
        return out
    model, tok, rng = _training_start(original_dir, config)
    reference = None
    if method == "kl":
        reference, _ = load(original_dir)
        reference.eval()
    pad = int(tok.pad_token_id)
    f_seqs, r_seqs = sequences(tok, forget), sequences(tok, retain)
    opt = torch.optim.AdamW(model.parameters(), lr=config.lr)
    t0, history = time.perf_counter(), []
    for epoch in range(config.epochs):
        for idx in _batches(f_seqs, config.batch_size, rng):
            f_batch = _batch([f_seqs[i] for i in idx], pad)
            r_idx = rng.choice(len(r_seqs), size=min(config.batch_size, len(r_seqs)), replace=False)
            r_batch = _batch([r_seqs[i] for i in r_idx], pad)
            forget_nll = _nll(model, f_batch)
            if method == "gradient_difference":
                keep = _nll(model, r_batch)
            else:
                assert reference is not None  # method is "kl" here (checked against UNLEARNING)
                ids, mask, labels = r_batch
                logits = model(input_ids=ids, attention_mask=mask).logits
                with torch.no_grad():
                    ref = reference(input_ids=ids, attention_mask=mask).logits
                sel = labels != -100  # the completion positions (shifted below)
                sel = torch.cat([sel[:, 1:], torch.zeros_like(sel[:, :1])], dim=1)
                logp = torch.log_softmax(logits[sel], -1)
                ref_logp = torch.log_softmax(ref[sel], -1)
                keep = torch.nn.functional.kl_div(logp, ref_logp, log_target=True,
                                                  reduction="batchmean")
            loss = keep - forget_nll
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
