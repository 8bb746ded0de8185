"""Write ``tests/watermark/schemes/data/waterfall_reference.json`` with the Waterfall reference code.

Run in a throwaway environment that has the reference package, never in evalrun's own::

    python3 -m venv /work/refvenv-waterfall && . /work/refvenv-waterfall/bin/activate
    pip install torch==2.13.0 && pip install waterfall==0.3.4
    python scripts/waterfall_reference_values.py            # from the repository root

The tests read the JSON only; they never import ``waterfall``. What is recorded:

* ``q_scores``: ``Watermarker.verify`` (the reference's verification, end to end from its
  tokenizer call on) on fixed token-id sequences, for several owner ids, ``k_p`` values, N
  (the tokenizer's ``vocab_size``) and ``n_gram``. A stand-in tokenizer maps a string of
  space-separated integers to those ids, so no real tokenizer is involved.
* ``perturbations``: ``PerturbationProcessor`` outputs (after ``reset``, a first call that
  records the prompt length, then the call that perturbs) on fixed random float32 scores
  (``evalrun.testing.portable_inputs.uniform_scores``: integer draws, the same bits on every
  CPU, unlike ``torch.randn``): the sha256 of the output's float32 bytes and a sample of
  entries.
* ``generation``: greedy decoding with the reference's ``PerturbationProcessor`` (set up by
  ``Watermarker``) and evalrun's embedded model (local files) from fixed prompts, through
  transformers' ``generate`` (``Watermarker.generate`` itself insists on group beam search
  under transformers >= 5.3): the generated token ids, compared with evalrun's hf provider.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import torch
import waterfall
from waterfall.WatermarkerBase import PerturbationProcessor, Watermarker
from waterfall.WatermarkingFnFourier import WatermarkingFnFourier

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # evalrun's source tree, for its portable test inputs only
from evalrun.testing.portable_inputs import uniform_scores  # noqa: E402

OUT = ROOT / "tests" / "watermark" / "schemes" / "data" / "waterfall_reference.json"
EMBEDDED = ROOT / "evalrun" / "assets" / "embedded" / "austen-5m"


class IdTokenizer:
    """Enough of a tokenizer for ``Watermarker``: ``encode`` parses space-separated ids."""

    eos_token = "<eos>"
    eos_token_id = 0

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.deprecation_warnings: dict = {}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [int(t) for t in text.split()]


def zipf_ids(seed: int, length: int, vocab: int, *, a: float = 1.3) -> list[int]:
    """Token ids with a heavy head (repeated bigrams occur), mapped through a fixed shuffle."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(a, length), vocab) - 1
    return rng.permutation(vocab)[ranks].astype(int).tolist()


def uniform_ids(seed: int, length: int, vocab: int) -> list[int]:
    return np.random.default_rng(seed).integers(0, vocab, length).astype(int).tolist()


def cases() -> list[dict]:
    out = []
    owners = [0, 7, 12345]
    for vocab in (8192, 50257):
        mf = vocab // 2 - 1 if vocab % 2 == 0 else vocab // 2
        for i, length in enumerate((50, 200, 500)):
            for kind, ids in (("zipf", zipf_ids(100 + i, length, vocab)),
                              ("uniform", uniform_ids(200 + i, length, vocab))):
                out.append({"name": f"{kind}-V{vocab}-n{length}", "N": vocab, "vocab_size": vocab,
                            "n_gram": 2, "owners": owners, "k_p": [1, 2, mf, mf + 3],
                            "token_ids": ids})
    # N below the ids' range (the tokenizer's vocab_size below the logit width): the first
    # token >= N stops the scan; a leading token >= N gives the identity permutation
    ids = uniform_ids(300, 300, 8192)
    ids[0] = 8100
    ids[150] = 8050
    out.append({"name": "stop-at-N", "N": 8000, "vocab_size": 8192, "n_gram": 2,
                "owners": owners, "k_p": [1, 3], "token_ids": ids})
    ids = zipf_ids(301, 120, 8000)
    ids[0] = 8191
    out.append({"name": "identity-context", "N": 8000, "vocab_size": 8192, "n_gram": 2,
                "owners": owners, "k_p": [1], "token_ids": ids})
    out.append({"name": "ngram3-V8192", "N": 8192, "vocab_size": 8192, "n_gram": 3,
                "owners": owners, "k_p": [1, 5000], "token_ids": zipf_ids(302, 250, 8192)})
    out.append({"name": "odd-N-101", "N": 101, "vocab_size": 101, "n_gram": 2,
                "owners": [0, 7, 4294967295], "k_p": [1, 50, 51, 100],
                "token_ids": zipf_ids(303, 200, 101)})
    out.append({"name": "too-short", "N": 8192, "vocab_size": 8192, "n_gram": 2,
                "owners": [7], "k_p": [1], "token_ids": [42]})
    return out


def q_scores(case: dict) -> list[list[float]]:
    """[owner x k_p] q-scores from the reference's ``verify``."""
    wm = Watermarker(tokenizer=IdTokenizer(case["N"]), model=None, id=case["owners"][0],
                     k_p=1, n_gram=case["n_gram"], kappa=2.0)
    text = " ".join(map(str, case["token_ids"]))
    q = wm.verify([text], id=list(case["owners"]), k_p=list(case["k_p"]))  # [text, id, k_p]
    return np.asarray(q[0], dtype=np.float64).tolist()


def perturbation_cases() -> list[dict]:
    out = []
    for n, owner, k_p, kappa, n_gram in ((8192, 7, 1, 2.0, 2), (50257, 12345, 25131, 6.0, 2),
                                         (8192, 0, 3, 4.0, 3), (300, 4294967295, 160, 2.5, 2)):
        gen = torch.Generator().manual_seed(n + owner % 1000)
        width = n + 64 if n == 8192 and n_gram == 2 else n  # columns past N stay untouched
        prompt = torch.randint(0, n, (3, 5), generator=gen)
        first = torch.randint(0, n, (3, n_gram - 1), generator=gen)
        if width > n:
            first[2, -1] = n + 10  # a previous token >= N: the identity permutation
        scores0 = uniform_scores((3, width), gen)
        scores = uniform_scores((3, width), gen)
        fn = WatermarkingFnFourier(id=owner, k_p=k_p, N=n, kappa=kappa)  # as compute_phi
        proc = PerturbationProcessor(N=n, id=owner)
        proc.set_phi(fn.phi)
        proc.reset(n_gram)
        untouched = proc(prompt, scores0.clone())
        assert torch.equal(untouched, scores0)
        ids = torch.cat([prompt, first], dim=1)
        got = proc(ids, scores.clone())
        rows = []
        for b in range(3):
            row = got[b].numpy().astype(np.float32)
            rows.append({"sha256": hashlib.sha256(row.tobytes()).hexdigest(),
                         "head": row[:8].astype(float).tolist(),
                         "at": {str(j): float(row[j]) for j in (0, 1, n // 3, n - 1, width - 1)}})
        out.append({"N": n, "width": width, "owner": owner, "k_p": k_p, "kappa": kappa,
                    "n_gram": n_gram, "torch_seed": n + owner % 1000,
                    "prompt": prompt.tolist(), "generated": first.tolist(), "rows": rows})
    return out


def generation_cases() -> list[dict]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(EMBEDDED), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(EMBEDDED), local_files_only=True,
                                                 dtype=torch.float32)
    model.eval()
    out = []
    prompts = ["It is a truth universally acknowledged, that",
               "Elizabeth walked into the room and"]
    for owner, kappa in ((7, 4.0), (12345, 4.0)):
        wm = Watermarker(tokenizer=tok, model=model, id=owner, kappa=kappa, k_p=1)
        for prompt in prompts:
            ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
            # Watermarker.generate forces its group-beam-search ``custom_generate`` under
            # transformers >= 5.3, which rejects greedy decoding; so its processor is run the
            # way generate runs it (reset, then in the logits_processor list) with
            # transformers' own greedy decoding
            wm.logits_processor.reset(wm.n_gram)
            res = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 num_beams=1, max_new_tokens=40, min_new_tokens=40,
                                 logits_processor=[wm.logits_processor],
                                 pad_token_id=tok.eos_token_id)
            toks = res[0, ids.shape[1]:].tolist()
            out.append({"owner": owner, "kappa": kappa, "k_p": 1, "N": tok.vocab_size,
                        "prompt": prompt, "prompt_ids": ids[0].tolist(), "token_ids": toks})
    return out


def main() -> int:
    data = {
        "reference": f"waterfall {getattr(waterfall, '__version__', '0.3.4')} (PyPI), "
                     f"numpy {np.__version__}, torch {torch.__version__}",
        "script": "scripts/waterfall_reference_values.py",
        "q_scores": [],
        "perturbations": perturbation_cases(),
    }
    for case in cases():
        case["q"] = q_scores(case)
        data["q_scores"].append(case)
    if EMBEDDED.is_dir():
        data["generation"] = generation_cases()
    OUT.write_text(json.dumps(data, indent=None, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
