"""Train evalrun's embedded offline default model (``austen-5m``) from scratch.

Reproducible end to end: the corpus comes from Debian's ``r-cran-janeaustenr`` (extracted with
``Rscript``), the held-out split is a seeded hash rule, and training runs a fixed number of
steps under ``torch.manual_seed``. Output: ``evalrun/assets/embedded/austen-5m/`` holding fp16
safetensors, config.json, generation_config.json, tokenizer files and MODEL_CARD.md.

Usage (from the repository root)::

    python scripts/train_embedded_model.py            # full build (~25 min on 2 cores)
    python scripts/train_embedded_model.py --steps 20 --out /tmp/smoke   # quick smoke run
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_TUNABLES = "glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=4294967296"
if os.environ.get("GLIBC_TUNABLES") != _TUNABLES and __name__ == "__main__":
    # Large malloc thresholds speed CPU training ~1.6x; they must be set before start-up.
    os.environ["GLIBC_TUNABLES"] = _TUNABLES
    os.execv(sys.executable, [sys.executable, *sys.argv])

import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "evalrun" / "assets" / "embedded" / "austen-5m"
DEFAULT_STEPS = 1000
SEED = 20261121
VOCAB = 8192
SEQ_LEN = 256
BATCH = 16
LR = 3e-3
WARMUP = 100
SPECIALS = ["<|bos|>", "<|eos|>", "<|pad|>"]
HELDOUT_MOD = 20  # one paragraph in 20 is held out
PARAGRAPH_SEP = "\n\n"


def extract_corpus(work: Path) -> Path:
    """Write the six novels' text lines (one per line) with R's janeaustenr package."""
    dest = work / "austen.txt"
    script = f'library(janeaustenr); writeLines(as.character(austen_books()$text), "{dest}")'
    try:
        subprocess.run(["Rscript", "-e", script], check=True, capture_output=True, text=True)
    except FileNotFoundError as exc:
        raise SystemExit("Rscript not found: apt-get install --no-install-recommends "
                         "r-cran-janeaustenr") from exc
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"Rscript failed: {exc.stderr.strip()}") from exc
    return dest


def paragraphs(corpus: Path) -> list[str]:
    """Blank-line separated paragraphs, inner line breaks joined with a space."""
    out: list[str] = []
    cur: list[str] = []
    for line in corpus.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line:
            cur.append(line)
        elif cur:
            out.append(" ".join(cur))
            cur = []
    if cur:
        out.append(" ".join(cur))
    return out


def is_heldout(index: int, text: str) -> bool:
    """Seeded split rule: a paragraph is held out when its keyed hash is 0 mod HELDOUT_MOD."""
    digest = hashlib.sha256(f"{SEED}:{index}:{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % HELDOUT_MOD == 0


def train_tokenizer(train: list[str], out: Path):
    """Byte-level BPE (vocab 8192) that prepends BOS; saved for ``AutoTokenizer``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([t + PARAGRAPH_SEP for t in train], trainer=trainer)
    bos = tok.token_to_id(SPECIALS[0])
    tok.post_processor = processors.TemplateProcessing(
        single=f"{SPECIALS[0]} $A", pair=f"{SPECIALS[0]} $A $B", special_tokens=[(SPECIALS[0], bos)]
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=SPECIALS[0],
                                   eos_token=SPECIALS[1], pad_token=SPECIALS[2],
                                   model_max_length=1024, padding_side="left")
    fast.save_pretrained(out)
    return tok


def encode_stream(tok, texts: list[str]) -> torch.Tensor:
    """Paragraphs joined by blank lines into one running text, as one id stream (no specials).

    Training on running text (not one paragraph per sequence) teaches the model the blank
    line between paragraphs, which is how evalrun's plain prompt rendering ends, and lets it
    write several paragraphs instead of stopping at the end of the first one.
    """
    ids: list[int] = []
    for enc in tok.encode_batch([t + PARAGRAPH_SEP for t in texts], add_special_tokens=False):
        ids.extend(enc.ids)
    return torch.tensor(ids, dtype=torch.long)


def windows(stream: torch.Tensor, starts, bos: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``[BOS] + stream[s : s+SEQ_LEN-1]`` and targets ``stream[s : s+SEQ_LEN]``.

    Every window begins with BOS, as every prompt does at inference time."""
    body = torch.stack([stream[int(s):int(s) + SEQ_LEN] for s in starts])
    head = torch.full((body.shape[0], 1), bos, dtype=torch.long)
    return torch.cat([head, body[:, :-1]], dim=1), body


def build_model(tok):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB, hidden_size=256, intermediate_size=672, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
        rms_norm_eps=1e-5, tie_word_embeddings=True, rope_theta=10000.0,
        bos_token_id=tok.token_to_id(SPECIALS[0]), eos_token_id=tok.token_to_id(SPECIALS[1]),
        pad_token_id=tok.token_to_id(SPECIALS[2]),
    )
    return LlamaForCausalLM(config)


def lr_at(step: int, total: int) -> float:
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = (step - WARMUP) / max(1, total - WARMUP)
    return LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def evaluate(model, stream: torch.Tensor, bos: int,
             max_windows: int = 200) -> tuple[float, float, int]:
    """Held-out (loss in nats, mean next-token entropy in nats at T=1, tokens scored) over
    consecutive non-overlapping windows of the held-out running text."""
    model.eval()
    n = min(max_windows, len(stream) // SEQ_LEN)
    loss_sum = ent_sum = 0.0
    count = 0
    for i in range(0, n, BATCH):
        x, y = windows(stream, [r * SEQ_LEN for r in range(i, min(n, i + BATCH))], bos)
        logits = model(input_ids=x).logits.float()
        logp = torch.log_softmax(logits, dim=-1)
        loss_sum += -logp.gather(-1, y.unsqueeze(-1)).sum().item()
        ent_sum += -(logp.exp() * logp).sum().item()
        count += y.numel()
    model.train()
    return loss_sum / count, ent_sum / count, count


def write_card(out: Path, facts: dict) -> None:
    size_mb = sum(p.stat().st_size for p in out.iterdir() if p.is_file()) / 1e6
    card = f"""# austen-5m — evalrun's embedded offline model

A 5.2 M-parameter Llama-architecture causal language model trained from scratch on Jane
Austen's six novels. It ships inside the evalrun wheel so that `--model embedded` runs
watermark evaluations fully offline, with no download and no GPU.

## Corpus and licence
- Text: the six completed novels (Sense and Sensibility, Pride and Prejudice, Mansfield Park,
  Emma, Northanger Abbey, Persuasion) as packaged by Debian's `r-cran-janeaustenr`
  (`austen_books()`), extracted with `Rscript`. The novels are in the public domain; the
  Debian/CRAN package is MIT-licensed. These weights are derived only from that text.
- {facts['paragraphs']} paragraphs; {facts['heldout_paragraphs']} held out by a seeded hash rule
  (sha256 of seed, index and text; 1 in {HELDOUT_MOD}). Each side is one running text with a
  blank line between paragraphs: {facts['train_tokens']:,} training tokens,
  {facts['heldout_tokens']:,} held-out tokens.

## Model
- Tokenizer: byte-level BPE, vocabulary {VOCAB} including `<|bos|>`, `<|eos|>`, `<|pad|>`;
  BOS is prepended on encoding; no chat template. Prompts end with a blank line (evalrun's
  plain rendering), after which the model writes new paragraphs. EOS never occurs in the
  training text, so generation runs to the token limit.
- Architecture: `LlamaForCausalLM`, 4 layers, hidden 256, 4 heads, MLP 672, RoPE, tied
  input/output embeddings, context 1024 positions (trained on 256-token windows).
- Parameters: {facts['params']:,}. Stored as fp16 safetensors; directory size {size_mb:.1f} MB.

## Training
- AdamW (lr {LR}, betas 0.9/0.95, weight decay 0.1), {WARMUP} warm-up steps then cosine decay
  to 10 %, gradient clipping 1.0, batch {BATCH}×{SEQ_LEN} random windows of the running text (each
  starting with BOS), bf16 autocast on CPU,
  seed {SEED}.
- {facts['steps']} steps ({facts['tokens_seen']:,} tokens seen) in {facts['minutes']:.1f} minutes
  on {facts['threads']} CPU threads of a shared, busy machine (`torch {facts['torch']}`, `transformers {facts['transformers']}`).

## Evaluation (held-out running text in BOS-led 256-token windows, fp16 weights reloaded, fp32)
- Loss {facts['loss']:.3f} nats/token, perplexity **{math.exp(facts['loss']):.1f}**.
- Mean next-token entropy at temperature 1: **{facts['entropy']:.2f} nats**.

## Rebuild
```
{facts['command']}
```
Needs `r-cran-janeaustenr` (Debian) and the Python packages above. Results are reproducible
up to floating-point differences between CPUs and library versions.

## Intended use
The default offline model of evalrun: tests, examples, CI and measuring watermark detection,
robustness and overhead where no larger model is available. Its next-token distributions have
plenty of entropy, which is what watermark schemes need.

## Limitations
- Produces locally grammatical, Austen-flavoured prose with little global meaning; at
  temperature 1 some non-words appear. It cannot follow instructions, answer questions or
  solve tasks, so task-quality scores with it are near zero by design.
- English only, 19th-century vocabulary; it knows nothing after 1817.
- Not for any use where the content of the text matters.
"""
    (out / "MODEL_CARD.md").write_text(card, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--work-dir", type=Path, default=None,
                    help="scratch directory for the corpus (default: a temporary one)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)

    import transformers

    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="evalrun-embedded-"))
    work.mkdir(parents=True, exist_ok=True)
    stage = work / "model"
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir()

    paras = paragraphs(extract_corpus(work))
    held = [p for i, p in enumerate(paras) if is_heldout(i, p)]
    train = [p for i, p in enumerate(paras) if not is_heldout(i, p)]
    print(f"paragraphs: {len(paras)} train {len(train)} held-out {len(held)}", flush=True)

    tok = train_tokenizer(train, stage)
    train_ids = encode_stream(tok, train)
    held_ids = encode_stream(tok, held)
    print(f"tokens: train {len(train_ids)} held-out {len(held_ids)}", flush=True)

    model = build_model(tok)
    bos = tok.token_to_id(SPECIALS[0])
    n_params = sum(p.numel() for p in model.parameters())
    print(f"parameters: {n_params}", flush=True)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95))
    gen = torch.Generator().manual_seed(SEED)
    model.train()
    t0 = time.time()
    for step in range(args.steps):
        starts = torch.randint(0, len(train_ids) - SEQ_LEN, (BATCH,), generator=gen)
        x, y = windows(train_ids, starts.tolist(), bos)
        for group in opt.param_groups:
            group["lr"] = lr_at(step, args.steps)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=x).logits
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, VOCAB), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == args.steps - 1:
            el = time.time() - t0
            print(f"step {step} loss {loss.item():.3f} lr {lr_at(step, args.steps):.2e} "
                  f"{el:.0f}s ({el / (step + 1):.2f}s/step)", flush=True)
    minutes = (time.time() - t0) / 60

    model.config.dtype = torch.float16
    model.to(torch.float16).save_pretrained(stage, safe_serialization=True)
    gc = transformers.GenerationConfig(
        bos_token_id=model.config.bos_token_id, eos_token_id=model.config.eos_token_id,
        pad_token_id=model.config.pad_token_id, do_sample=True, temperature=1.0,
        max_new_tokens=256)
    gc.save_pretrained(stage)

    reloaded = transformers.AutoModelForCausalLM.from_pretrained(
        stage, dtype=torch.float32, local_files_only=True)
    loss, entropy, scored = evaluate(reloaded, held_ids, bos)
    print(f"held-out loss {loss:.4f} ppl {math.exp(loss):.2f} entropy {entropy:.3f} "
          f"({scored} tokens)", flush=True)

    cmd = "python scripts/train_embedded_model.py"
    if args.steps != DEFAULT_STEPS:
        cmd += f" --steps {args.steps}"
    if args.threads != 2:
        cmd += f" --threads {args.threads}"
    facts = dict(paragraphs=len(paras), heldout_paragraphs=len(held), train_tokens=len(train_ids),
                 heldout_tokens=len(held_ids), params=n_params, steps=args.steps,
                 tokens_seen=args.steps * BATCH * SEQ_LEN, minutes=minutes, threads=args.threads,
                 torch=torch.__version__, transformers=transformers.__version__, loss=loss,
                 entropy=entropy, command=cmd)
    write_card(stage, facts)
    (work / "metrics.json").write_text(json.dumps(facts, indent=2))
    if args.out.exists():
        shutil.rmtree(args.out)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(stage, args.out)
    total = sum(p.stat().st_size for p in args.out.iterdir())
    print(f"saved {args.out} ({total / 1e6:.1f} MB)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
