"""The embedded offline model shipped in the package: present, small, loadable with no
network, English-looking output and enough next-token entropy for watermarking."""

from __future__ import annotations

import json
import re

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from evalrun._util.errors import EvalrunError  # noqa: E402
from evalrun.model.embedded import EMBEDDED_NAME, embedded_model_path  # noqa: E402

# Written for this test (not from the novels), in the model's register.
HELD_OUT = [
    "Mrs. Norris was quite certain that the young lady would soon regret so hasty an engagement.",
    "He said nothing for some minutes, and then, with a look of great seriousness, asked whether "
    "she had heard from her sister.",
    "The weather was so fine that the whole party agreed to walk to the village after breakfast.",
]
COMMON = {"the", "and", "of", "to", "a", "her", "was", "in", "i", "it", "she", "he", "that",
          "not", "be", "his", "as", "you", "had", "with", "for", "but", "is", "my", "have"}


@pytest.fixture(scope="module")
def loaded():
    path = embedded_model_path()
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, dtype=torch.float32)
    model.eval()
    return tok, model


def test_shipped_files_and_size():
    path = embedded_model_path()
    assert path.name == EMBEDDED_NAME
    names = {p.name for p in path.iterdir()}
    assert {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
            "tokenizer_config.json", "MODEL_CARD.md"} <= names
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    assert total <= 15 * 1024 * 1024
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == "llama" and config["vocab_size"] == 8192
    card = (path / "MODEL_CARD.md").read_text()
    for needed in ("public domain", "MIT", "perplexity", "entropy", "train_embedded_model.py"):
        assert needed in card


def test_loads_offline_without_network(monkeypatch, loaded):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tok, model = loaded
    assert tok.bos_token_id is not None and tok.eos_token_id is not None
    assert tok.pad_token_id is not None and len(tok) == 8192
    n_params = sum(p.numel() for p in model.parameters())
    assert 4_000_000 < n_params < 7_000_000


def test_generates_english_looking_text(loaded):
    tok, model = loaded
    ids = tok("It was a fine morning, and Elizabeth", return_tensors="pt")["input_ids"]
    # generate samples from torch's global generator: seed it without leaking the state
    with torch.random.fork_rng(), torch.no_grad():
        torch.manual_seed(0)
        out = model.generate(ids, max_new_tokens=60, min_new_tokens=60, do_sample=True,
                             temperature=0.7, pad_token_id=tok.pad_token_id)
    text = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
    words = re.findall(r"[A-Za-z']+", text)
    assert len(words) >= 25
    letters = sum(c.isascii() and (c.isalpha() or c in " ,.;'\"!?-\n") for c in text)
    assert letters / len(text) > 0.95
    assert sum(w.lower() in COMMON for w in words) / len(words) > 0.2


def test_next_token_entropy_is_high_enough_for_watermarks(loaded):
    tok, model = loaded
    entropies = []
    with torch.no_grad():
        for sentence in HELD_OUT:
            ids = tok(sentence, return_tensors="pt")["input_ids"]
            logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
            entropies.append(-(logp.exp() * logp).sum(-1))
    mean = torch.cat(entropies).mean().item()
    assert mean >= 3.0, mean


def test_missing_weights_raise_a_clear_error(monkeypatch, tmp_path):
    import evalrun.model.embedded as embedded

    class FakeFiles:
        def __truediv__(self, other):
            return tmp_path / other

    monkeypatch.setattr(embedded.resources, "files", lambda pkg: FakeFiles())
    with pytest.raises(EvalrunError, match="train_embedded_model.py"):
        embedded.embedded_model_path()
