"""Reference scores from MarkLLM for DiPmark, Unbiased, PF, SWEET, EWD, EXPGumbel and MorphMark.

Writes ``tests/watermark/schemes/data/markllm_reference.json``: for a small random GPT-2 at V=1000 and
V=50257, token ids (4 unwatermarked + 1 repeated block, 4 watermarked by MarkLLM's own generation code per scheme)
and the ``score`` / ``is_watermarked`` that MarkLLM's ``detect_watermark`` returns for them, with
intermediate values (green counts, scored-token counts, entropies, per-token scores).

MarkLLM is THU-BPM/MarkLLM at commit 112fa7419b115efc82f229a59a86fb14c5528c80 (2025-10-14), run
from a scratch copy, never from this repository's venv (it needs its own torch/transformers)::

    git --git-dir=<MarkLLM mirror> archive 112fa74 watermark utils config visualize exceptions \\
        | tar -x -C /work/scratch/markllm      # (watermark/steal & xsir data blobs not needed)
    sed -i 's/^        score = float(score)$/        score = float(np.asarray(score).reshape(-1)[0])/' \\
        /work/scratch/markllm/watermark/pf/pf.py
    python3.11 -m venv /work/scratch/mllm-venv
    /work/scratch/mllm-venv/bin/pip install torch==2.13.0 transformers==5.24.0 numpy scipy sympy matplotlib pillow
    OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 MARKLLM_DIR=/work/scratch/markllm \\
        /work/scratch/mllm-venv/bin/python scripts/markllm_reference.py

Patches and shims applied to MarkLLM (all recorded in the JSON under ``markllm``):

* PF (source patch, the ``sed`` above): ``PF.detect_watermark`` did ``float(score)`` on the shape-(1,)
  array that ``get_scores`` sums; NumPy >= 2 raises TypeError. Nothing else in MarkLLM is edited.
* DIP (runtime shim): ``DIPConfig`` lost its key expansion in commit 26d976e, so ``hash_key`` is
  missing (AttributeError). The script sets ``config.hash_key = expand_key(key)``, i.e. the removed
  code: ``random.seed(key); random.getrandbits(1024).to_bytes(128, "big")``.
* Unbiased (runtime shim): ``UnbiasedConfig`` draws ``random.getrandbits(1024)`` from the unseeded
  global ``random`` (a new key every process). The script calls ``random.seed(key)`` just before
  building the config, which yields the same ``expand_key(key)``, and asserts it.
* EXPGumbel at V=50257: ``EXPGumbelUtils.__init__`` would allocate 2*V*V float32 twice (40 GB). It is
  bypassed; ``uniform``/``gumbel`` become row-on-demand views of the same ``torch.rand`` stream
  (generator state checkpointed every 256 rows). At V=1000 the real table is used, and the views
  are checked equal to it bit for bit.

``build_model`` / ``build_tokenizer`` need only torch and transformers (not MarkLLM), so evalrun
tests can import this file and rebuild the exact model: weights come from
``numpy.random.default_rng(seed)`` in sorted parameter-name order, independent of transformers'
initialisers; the JSON stores each model's weight sha256. Reference run: CPU torch 2.13.0,
transformers 5.24.0, numpy 2.4.6, scipy 1.17.1, Python 3.11, one thread, on an Intel Xeon with
AVX-512 (Sapphire Rapids).

Each sequence also carries ``logits_sha256``, the digest of the float32 logits the model gives
for it (:func:`logits_sha256`). The numbers of the schemes that read the model (SWEET, EWD,
Unbiased) are float32 arithmetic on those logits, and another CPU moves logits in their last
bits, so the tests compare them bit for bit only where the test machine reproduces the digest
and within a float32 bound elsewhere (docs/reproducibility.md). The digests of the stored run
were added on 2026-11-28 by ``python scripts/markllm_reference.py --add-logits-digests`` on the
reference machine type, where evalrun reproduces all of MarkLLM's stored numbers bit for bit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

MARKLLM_REPO = "THU-BPM/MarkLLM"
MARKLLM_COMMIT = "112fa7419b115efc82f229a59a86fb14c5528c80"
OUT = Path(__file__).resolve().parent.parent / "tests" / "watermark" / "schemes" / "data" / "markllm_reference.json"

VOCAB_SIZES = (1000, 50257)
MODEL_SEED = 20251014
MODEL_SPEC: dict[str, Any] = {
    "n_positions": 128,
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_inner": 256,
    "emb_std": 1.0,
    "body_std": 0.1,
    "head_std": 1.0,
}
PROMPT_LEN = 10
NEW_TOKENS = 50
GEN_KWARGS: dict[str, Any] = {"max_new_tokens": NEW_TOKENS, "do_sample": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0}
ALGORITHMS = ("DIP", "Unbiased", "PF", "SWEET", "EWD", "EXPGumbel", "MorphMark")
SCORE_KIND = {
    "DIP": "z", "Unbiased": "p", "PF": "sum", "SWEET": "z", "EWD": "z", "EXPGumbel": "p", "MorphMark": "z",
}
# config overrides: EXPGumbel's sequence_length is only its generation length (default 200)
CONFIG_OVERRIDES: dict[str, dict[str, Any]] = {"EXPGumbel": {"sequence_length": NEW_TOKENS}}
PF_FPR_TRIALS = 20
PF_FPR_LARGE_TRIALS = 2000


def set_threads() -> None:
    import torch

    torch.set_num_threads(1)


def expand_key(key: int) -> bytes:
    """The 128-byte DiP/Unbiased hash key: ``random.seed(key)``, 1024 random bits, big-endian."""
    state = random.getstate()
    random.seed(key)
    out = random.getrandbits(1024).to_bytes(128, "big")
    random.setstate(state)
    return out


def _weights(names_shapes: list[tuple[str, tuple[int, ...]]], seed: int, spec: dict[str, Any]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, shape in sorted(names_shapes):
        if ".ln_" in name or "ln_f." in name:
            arr = np.ones(shape, np.float32) if name.endswith("weight") else np.zeros(shape, np.float32)
        elif name.endswith("bias"):
            arr = np.zeros(shape, np.float32)
        else:
            if name == "lm_head.weight":
                std = spec["head_std"]
            elif name.endswith(("wte.weight", "wpe.weight")):
                std = spec["emb_std"]
            else:
                std = spec["body_std"]
            arr = (rng.standard_normal(shape) * std).astype(np.float32)
        out[name] = arr
    return out


def build_model(vocab_size: int, seed: int = MODEL_SEED, spec: dict[str, Any] | None = None):
    """A 2-layer GPT-2 (GPT2LMHeadModel, eval mode, float32, untied lm_head) with peaky outputs.

    Every parameter is drawn from ``np.random.default_rng(seed)`` in sorted-name order: layer-norm
    weights 1, all biases 0, wte/wpe N(0, emb_std), attention/MLP matrices N(0, body_std),
    lm_head N(0, head_std); ``standard_normal`` in float64, scaled, then cast to float32.
    """
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    spec = dict(MODEL_SPEC if spec is None else spec)
    config = GPT2Config(
        vocab_size=vocab_size,
        n_positions=spec["n_positions"],
        n_embd=spec["n_embd"],
        n_layer=spec["n_layer"],
        n_head=spec["n_head"],
        n_inner=spec["n_inner"],
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        pad_token_id=None,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(config)
    model.generation_config.bos_token_id = None
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    arrays = _weights([(n, tuple(p.shape)) for n, p in model.named_parameters()], seed, spec)
    model.load_state_dict({n: torch.from_numpy(a) for n, a in arrays.items()}, strict=True)
    return model.eval()


def weights_sha256(model) -> str:
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def next_token_logits(model, ids: list[int]) -> np.ndarray:
    """The float32 next-token logits of ``ids[:-1]``, one text per forward pass without a cache:
    the rows SWEET, EWD and Unbiased score (evalrun's tests feed these same rows)."""
    import torch

    x = torch.as_tensor(np.asarray(ids[:-1], dtype=np.int64))[None]
    with torch.no_grad():
        return model(x, use_cache=False).logits[0].float().numpy()


def logits_sha256(model, ids: list[int]) -> str:
    """Digest of :func:`next_token_logits`: a machine whose forward pass gives these bytes gives
    MarkLLM's float32 numbers bit for bit; another CPU moves them in their last bits."""
    return hashlib.sha256(next_token_logits(model, ids).tobytes()).hexdigest()


def build_tokenizer(vocab_size: int):
    """Word-level tokenizer: token ``i`` is the word ``t{i}``; id ``vocab_size`` is ``<eos>`` (pad/eos).

    The model never emits ``<eos>`` (its logits have ``vocab_size`` entries), so text round-trips
    ids exactly; ``token_type_ids`` are not returned (GPT-2 would embed them).
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(vocab_size)}
    vocab["<eos>"] = vocab_size
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<eos>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<eos>", pad_token="<eos>", model_input_names=["input_ids", "attention_mask"]
    )


def ids_to_text(ids: list[int]) -> str:
    return " ".join(f"t{i}" for i in ids)


# ----------------------------------------------------------------------------------- MarkLLM side


def _markllm_dir() -> Path:
    d = Path(os.environ.get("MARKLLM_DIR", "/work/scratch/markllm")).resolve()
    pf_src = (d / "watermark" / "pf" / "pf.py").read_text()
    if "score = float(score)\n" in pf_src:
        sys.exit(f"{d}/watermark/pf/pf.py is unpatched: apply the sed line of this script's docstring")
    return d


def _fl(x: Any) -> float:
    return float(np.asarray(x, dtype=np.float64).reshape(-1)[0])


class _LazyExpTable:
    """Rows of EXPGumbel's ``uniform`` (or ``gumbel``) table drawn on demand from the same stream.

    MarkLLM: ``uniform = clamp(torch.rand((V * prefix_length, V), generator=Generator().manual_seed(seed)),
    min=eps)``; ``gumbel = -log(clamp(-log(uniform), min=eps))``. CPU ``torch.rand`` float32 consumes the
    generator serially, so row r is the (r+1)-th block of V draws.
    """

    CHUNK = 256

    def __init__(self, vocab_size: int, rows: int, seed: int, eps: float, kind: str, shared: dict | None = None) -> None:
        import torch

        self.V, self.rows, self.eps, self.kind = vocab_size, rows, eps, kind
        if shared is None:
            gen = torch.Generator().manual_seed(seed)
            states = []
            for start in range(0, rows, self.CHUNK):
                states.append(gen.get_state())
                torch.rand((min(self.CHUNK, rows - start), vocab_size), generator=gen, dtype=torch.float32)
            shared = {"states": states, "cache": {}}
        self.shared = shared

    def sibling(self, kind: str) -> _LazyExpTable:
        return _LazyExpTable(self.V, self.rows, 0, self.eps, kind, shared=self.shared)

    def uniform_row(self, r: int):
        import torch

        cache = self.shared["cache"]
        if r not in cache:
            gen = torch.Generator()
            gen.set_state(self.shared["states"][r // self.CHUNK])
            block = torch.rand((r % self.CHUNK + 1, self.V), generator=gen, dtype=torch.float32)
            cache[r] = torch.clamp(block[-1].clone(), min=self.eps)
        return cache[r]

    def row(self, r: int):
        import torch

        u = self.uniform_row(r)
        return u if self.kind == "uniform" else -torch.log(torch.clamp(-torch.log(u), min=self.eps))

    def __getitem__(self, idx):
        import torch

        if isinstance(idx, tuple):
            r, c = idx
            return self.row(int(r))[int(c)]
        rows = torch.as_tensor(idx).reshape(-1).tolist()
        return torch.stack([self.row(int(r)) for r in rows])


class Runner:
    def __init__(self, vocab_size: int) -> None:
        import torch

        self.torch = torch
        self.V = vocab_size
        self.dir = _markllm_dir()
        if str(self.dir) not in sys.path:
            sys.path.insert(0, str(self.dir))
        from utils.transformers_config import TransformersConfig

        self.model = build_model(vocab_size)
        self.tokenizer = build_tokenizer(vocab_size)
        self.tc = TransformersConfig(
            model=self.model, tokenizer=self.tokenizer, vocab_size=vocab_size, device="cpu", **GEN_KWARGS
        )

    def config_path(self, name: str) -> str:
        return str(self.dir / "config" / f"{name}.json")

    def config_dict(self, name: str) -> dict[str, Any]:
        d = json.loads(Path(self.config_path(name)).read_text())
        d.update(CONFIG_OVERRIDES.get(name, {}))
        return d

    # ---- construction, with the shims of the module docstring
    def make(self, name: str):
        over = CONFIG_OVERRIDES.get(name, {})
        path = self.config_path(name)
        if name == "DIP":
            from watermark.dip.dip import DIP, DIPConfig

            cfg = DIPConfig(path, self.tc, **over)
            cfg.hash_key = expand_key(cfg.config_dict["key"])  # shim: the expansion removed in 26d976e
            return DIP(cfg)
        if name == "Unbiased":
            from watermark.unbiased.unbiased import UnbiasedConfig, UnbiasedWatermark

            key = json.loads(Path(path).read_text())["key"]
            random.seed(key)  # shim: UnbiasedConfig never seeds `random` before getrandbits(1024)
            cfg = UnbiasedConfig(path, self.tc, **over)
            assert cfg.hash_key == expand_key(key)
            return UnbiasedWatermark(cfg)
        if name == "PF":
            from watermark.pf.pf import PF, PFConfig

            return PF(PFConfig(path, self.tc, **over))
        if name == "SWEET":
            from watermark.sweet.sweet import SWEET, SWEETConfig

            return SWEET(SWEETConfig(path, self.tc, **over))
        if name == "EWD":
            from watermark.ewd.ewd import EWD, EWDConfig

            return EWD(EWDConfig(path, self.tc, **over))
        if name == "MorphMark":
            from watermark.morphmark.morphmark import MorphMark, MorphMarkConfig

            return MorphMark(MorphMarkConfig(path, self.tc, **over))
        if name == "EXPGumbel":
            from watermark.exp_gumbel.exp_gumbel import (
                EXPGumbel,
                EXPGumbelConfig,
                EXPGumbelLogitsProcessor,
                EXPGumbelUtils,
            )

            cfg = EXPGumbelConfig(path, self.tc, **over)
            if self.V <= 5000:
                return EXPGumbel(cfg)
            utils = EXPGumbelUtils.__new__(EXPGumbelUtils)
            utils.config = cfg
            utils.generator = None
            lazy = _LazyExpTable(self.V, self.V * cfg.prefix_length, cfg.seed, cfg.eps, "uniform")
            utils.uniform, utils.gumbel = lazy, lazy.sibling("gumbel")
            wm = EXPGumbel.__new__(EXPGumbel)
            wm.config, wm.utils = cfg, utils
            wm.logits_processor = EXPGumbelLogitsProcessor(cfg, utils)
            return wm
        raise KeyError(name)

    # ---- sequences
    def unwatermarked(self) -> list[dict[str, Any]]:
        torch = self.torch
        rng = np.random.default_rng(1000 + self.V)
        out = []
        for _ in range(2):
            ids = rng.integers(0, self.V, PROMPT_LEN + NEW_TOKENS).tolist()
            out.append({"kind": "uniform-random", "prompt_length": 0, "ids": ids, "gen_seed": None})
        for i in range(2):
            prompt = rng.integers(0, self.V, PROMPT_LEN).tolist()
            torch.manual_seed(2000 + i)
            with torch.no_grad():
                gen = self.model.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, PROMPT_LEN, dtype=torch.long), **GEN_KWARGS)
            out.append({"kind": "model-sampled", "prompt_length": PROMPT_LEN, "ids": gen[0].tolist(), "gen_seed": 2000 + i})
        # a 20-token block three times: repeated contexts (DIP's ignore_history_detection path)
        block = rng.integers(0, self.V, (PROMPT_LEN + NEW_TOKENS) // 3).tolist()
        out.append({"kind": "repeated-block", "prompt_length": 0, "ids": block * 3, "gen_seed": None})
        return out

    def watermarked(self, name: str, wm) -> list[dict[str, Any]]:
        torch = self.torch
        rng = np.random.default_rng(3000 + self.V + ALGORITHMS.index(name))
        out = []
        for i in range(4):
            prompt = rng.integers(0, self.V, PROMPT_LEN).tolist()
            torch.manual_seed(4000 + i)
            with torch.no_grad():
                text = wm.generate_watermarked_text(ids_to_text(prompt))
            ids = self.tokenizer.encode(text, add_special_tokens=False)
            assert ids[:PROMPT_LEN] == prompt, (name, ids[:PROMPT_LEN], prompt)
            out.append({"kind": "watermarked", "prompt_length": PROMPT_LEN, "ids": ids, "gen_seed": 4000 + i})
        return out

    # ---- detection with intermediates
    def detect(self, name: str, wm, ids: list[int]) -> dict[str, Any]:
        torch = self.torch
        text = ids_to_text(ids)
        assert self.tokenizer.encode(text, add_special_tokens=False) == ids
        detail: dict[str, Any] = {}
        if name == "Unbiased":
            captured: dict[str, Any] = {}
            orig = wm.utils._score_llr

            def spy(p_logits, q_logits, batch_query):
                res = orig(p_logits, q_logits, batch_query)
                captured["res"] = res
                return res

            wm.utils._score_llr = spy
            try:
                res = wm.detect_watermark(text)
            finally:
                del wm.utils._score_llr
            llr, max_llr, min_llr = captured["res"]
            labels = torch.tensor([ids])[..., wm.config.prefix_length:]
            unclipped = torch.gather(llr, -1, labels.unsqueeze(-1)).squeeze(-1)
            scores = np.array(torch.clamp(unclipped.unsqueeze(-1), min_llr, max_llr)[0])
            sums = np.sum(scores, axis=0)
            best = int(np.argmax(sums))
            assert float(wm.config.n_grid * np.exp(-sums[best])) == _fl(res["score"])
            detail = {
                "n_scored": int(scores.shape[0]),
                "grid_sums": [float(x) for x in sums],
                "best_index": best,
                "final_score": float(sums[best]),
                "per_token_best": [float(x) for x in scores[:, best]],
                "last_token_llr": float(unclipped[0, -1]),
            }
        elif name == "DIP":
            wm.utils.state_indicator = 1
            wm.utils.cc_history.clear()
            q = wm.utils._get_dip_score(torch.tensor(ids), self.V)
            wm.utils.cc_history.clear()
            ignored = int((q == -1).sum())
            green = int((q >= wm.config.gamma).sum())
            detail = {"quantiles": [float(x) for x in q], "green": green, "ignored": ignored, "n": len(ids) - ignored}
            res = wm.detect_watermark(text)
        elif name == "PF":
            per_tok = wm.utils.get_scores_by_t(text)
            n = int(len(per_tok))
            thr = wm.utils.get_threshold(n, wm.config.gen_kwargs.get("alpha", 0.01))
            import scipy.stats

            detail = {
                "n_scored": n,
                "per_token": [float(x) for x in per_tok.reshape(-1)],
                "threshold_markllm": float(thr),
                "threshold_gamma_shape_n": float(scipy.stats.gamma.ppf(0.99, a=n, scale=1)) if n > 0 else None,
            }
            res = wm.detect_watermark(text)
        elif name in ("SWEET", "EWD"):
            t = torch.tensor(ids)
            ent = wm.utils.calculate_entropy(self.model, t)
            out = wm.utils.score_sequence(t, ent)
            flags, weights = out[1], out[2]
            pl = wm.config.prefix_length
            detail = {"entropy": [float(x) for x in ent], "green_flags": list(flags), "weights": [float(w) for w in weights]}
            if name == "SWEET":
                detail["n_scored"] = sum(1 for w in weights[pl:] if w == 1)
                detail["green"] = sum(1 for f, w in zip(flags, weights) if f == 1 and w == 1)
            else:
                detail["green_weight"] = float(sum(weights[i] for i in range(len(flags)) if flags[i] == 1))
            res = wm.detect_watermark(text)
        elif name == "MorphMark":
            z, flags = wm.utils.score_sequence(torch.tensor(ids))
            detail = {"green_flags": list(flags), "green": sum(1 for f in flags if f == 1), "n_scored": len(ids) - wm.config.prefix_length}
            res = wm.detect_watermark(text)
        elif name == "EXPGumbel":
            pl = wm.config.prefix_length
            us = []
            for i in range(pl, len(ids)):
                us.append(float(wm.utils.uniform[sum(ids[i - pl:i]), ids[i]]))
            detail = {"u": us, "sum_log": float(sum(math.log(1 / (1 - u)) for u in us)), "n_scored": len(us)}
            res = wm.detect_watermark(text)
        else:
            raise KeyError(name)
        return {"score": _fl(res["score"]), "is_watermarked": bool(res["is_watermarked"]), "detail": detail}


# ----------------------------------------------------------------------------------- bug checks


def bug_checks(runner: Runner) -> dict[str, Any]:
    import scipy.stats
    import torch

    out: dict[str, Any] = {}
    from watermark.dip.dip import DIP, DIPConfig

    dip = DIP(DIPConfig(runner.config_path("DIP"), runner.tc))
    try:
        dip.detect_watermark(ids_to_text(list(range(12))))
        out["dip_hash_key"] = "no error"
    except AttributeError as e:
        out["dip_hash_key"] = f"AttributeError: {e}"

    from watermark.unbiased.unbiased import UnbiasedConfig

    k1 = UnbiasedConfig(runner.config_path("Unbiased"), runner.tc).hash_key
    k2 = UnbiasedConfig(runner.config_path("Unbiased"), runner.tc).hash_key
    out["unbiased_unseeded_keys_differ"] = k1 != k2

    pf = runner.make("PF")
    per_tok = pf.utils.get_scores_by_t(ids_to_text(list(range(30))))
    try:
        float(pf.utils.get_scores(per_tok))
        out["pf_float_numpy2"] = "no error"
    except TypeError as e:
        out["pf_float_numpy2"] = f"TypeError: {e} (numpy {np.__version__}); shape {np.shape(pf.utils.get_scores(per_tok))}"

    # PF's Gamma shape: get_scores_by_t scores L - (ngram + 1) tokens, get_threshold(n) then uses k = n - ngram
    fpr: dict[str, Any] = {}
    L = PROMPT_LEN + NEW_TOKENS
    n = L - (pf.config.ngram + 1)
    fpr["sequence_length"] = L
    fpr["n_scored"] = n
    fpr["gamma_shape_used"] = n - pf.config.ngram
    fpr["analytic_fpr_markllm"] = float(scipy.stats.gamma.sf(scipy.stats.gamma.ppf(0.99, a=n - pf.config.ngram), a=n))
    fpr["analytic_fpr_shape_n"] = 0.01
    rng = np.random.default_rng(7000 + runner.V)
    flagged = 0
    flagged_fixed = 0
    for trial in range(PF_FPR_LARGE_TRIALS):
        ids = rng.integers(0, runner.V, L).tolist()
        res = pf.detect_watermark(ids_to_text(ids))
        flagged += bool(res["is_watermarked"])
        flagged_fixed += bool(res["score"] > scipy.stats.gamma.ppf(0.99, a=n))
        if trial + 1 == PF_FPR_TRIALS:
            fpr[f"flagged_of_first_{PF_FPR_TRIALS}"] = flagged
            fpr[f"flagged_shape_n_of_first_{PF_FPR_TRIALS}"] = flagged_fixed
    fpr[f"flagged_of_{PF_FPR_LARGE_TRIALS}"] = flagged
    fpr[f"flagged_shape_n_of_{PF_FPR_LARGE_TRIALS}"] = flagged_fixed
    out["pf_false_positives_uniform_random"] = fpr

    cfg = runner.config_dict("EXPGumbel")
    V = runner.V
    out["expgumbel_table"] = {
        "shape": [V * cfg["prefix_length"], V],
        "bytes_uniform_plus_gumbel_float32": 2 * (V * cfg["prefix_length"] * V) * 4,
    }
    mm = runner.make("MorphMark")
    seeds = {(mm.config.hash_key * int(mm.utils.prf[x])) % V for x in range(V)}
    out["morphmark_seed_mod_v"] = {
        "seed_formula": "(hash_key * prf[prod(last prefix_length ids) % V]) % V",
        "distinct_seeds": len(seeds),
        "max_seed": max(seeds),
    }
    if V <= 5000:
        ex = runner.make("EXPGumbel")
        lazy = _LazyExpTable(V, V * cfg["prefix_length"], cfg["seed"], cfg["eps"], "uniform")
        rows = list(range(0, V * cfg["prefix_length"], 97)) + [V * cfg["prefix_length"] - 1]
        ok_u = all(torch.equal(lazy[r][0], ex.utils.uniform[r]) for r in rows)
        ok_g = all(torch.equal(lazy.sibling("gumbel")[r][0], ex.utils.gumbel[r]) for r in rows)
        out["expgumbel_lazy_rows_equal_full_table"] = {"uniform": ok_u, "gumbel": ok_g, "rows_checked": len(rows)}
    return out


# ----------------------------------------------------------------------------------- main


def run_vocab(V: int, algorithms: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    runner = Runner(V)
    model_info = {"seed": MODEL_SEED, "weights_sha256": weights_sha256(runner.model)}
    unwm = runner.unwatermarked()
    per_alg: dict[str, Any] = {}
    for name in algorithms:
        wm = runner.make(name)
        seqs = [dict(s) for s in unwm] + runner.watermarked(name, wm)
        for s in seqs:
            s.update(runner.detect(name, wm, s["ids"]))
            s["logits_sha256"] = logits_sha256(runner.model, s["ids"])
        per_alg[name] = seqs
        print(f"V={V} {name}: " + ", ".join(f"{s['score']:.4g}{'*' if s['is_watermarked'] else ''}" for s in seqs), flush=True)
    bugs = bug_checks(runner)
    return {"model": model_info, "algorithms": per_alg, "bugs": bugs}, {n: runner.config_dict(n) for n in algorithms}


def add_logits_digests(path: Path) -> None:
    """Add ``logits_sha256`` to every stored sequence of ``path`` (a file this script wrote)."""
    doc = json.loads(path.read_text())
    for V, block in doc["vocab"].items():
        model = build_model(int(V))
        assert weights_sha256(model) == block["model"]["weights_sha256"], f"V={V}: the rebuilt model differs"
        for seqs in block["algorithms"].values():
            for s in seqs:
                s["logits_sha256"] = logits_sha256(model, s["ids"])
    path.write_text(json.dumps(doc, indent=1) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--vocab", type=int, nargs="*", default=list(VOCAB_SIZES))
    ap.add_argument("--algorithms", nargs="*", default=list(ALGORITHMS))
    ap.add_argument("--add-logits-digests", action="store_true",
                    help="only add each stored sequence's logits_sha256 to --out (needs no MarkLLM)")
    args = ap.parse_args(argv)
    set_threads()
    if args.add_logits_digests:
        add_logits_digests(args.out)
        return
    import scipy
    import torch
    import transformers

    per_vocab: dict[str, Any] = {}
    configs: dict[str, Any] = {}
    for V in args.vocab:
        per_vocab[str(V)], configs = run_vocab(V, tuple(args.algorithms))
    doc = {
        "description": "MarkLLM detect_watermark scores for token ids on a small random GPT-2 (see scripts/markllm_reference.py)",
        "markllm": {
            "repo": MARKLLM_REPO,
            "commit": MARKLLM_COMMIT,
            "source_patches": [
                "watermark/pf/pf.py PF.detect_watermark: `score = float(score)` -> "
                "`score = float(np.asarray(score).reshape(-1)[0])` (NumPy 2 TypeError on a shape-(1,) array)"
            ],
            "runtime_shims": [
                "DIP: config.hash_key = expand_key(config 'key') (random.seed(key); getrandbits(1024).to_bytes(128,'big')), "
                "the expansion removed from DIPConfig in 26d976e",
                "Unbiased: random.seed(config 'key') immediately before UnbiasedConfig(...), so its unseeded "
                "random.getrandbits(1024) gives expand_key(key)",
                "EXPGumbel at V > 5000: EXPGumbelUtils tables replaced by row-on-demand views of the same torch.rand stream",
                f"EXPGumbel: sequence_length overridden to {NEW_TOKENS} (generation length only)",
            ],
            "entry_points": {
                "detection": "<Scheme>.detect_watermark(text) with text = ' '.join(f't{id}') and the word-level tokenizer",
                "generation": "<Scheme>.generate_watermarked_text(prompt text) after torch.manual_seed(gen_seed)",
            },
        },
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "torch_threads": torch.get_num_threads(),
        },
        "model": {
            "builder": "scripts/markllm_reference.py:build_model(vocab_size, seed)",
            "spec": MODEL_SPEC,
            "seed": MODEL_SEED,
            "tokenizer": "word-level: id i <-> 't{i}', id V = '<eos>' (never generated)",
        },
        "generation": {"gen_kwargs": GEN_KWARGS, "prompt_length": PROMPT_LEN, "new_tokens": NEW_TOKENS},
        "keys": {"dip_unbiased_key_expansion": "random.seed(key); random.getrandbits(1024).to_bytes(128, 'big')"},
        "score_kind": SCORE_KIND,
        "configs": configs,
        "vocab": per_vocab,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
