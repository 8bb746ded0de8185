"""``hf:<path-or-id>`` and ``embedded``: local transformers models, batched, with watermarks.

Generation runs its own decoding loop over a KV cache so that every request samples from its
own ``torch.Generator`` seeded with ``request.sample_seed``: a request's output does not depend
on which other requests share its batch, and watermark logits processors see exactly the
scores the sampler uses. Nothing is ever downloaded (``local_files_only=True``).
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from evalrun.errors import EvalrunError, SpecError
from evalrun.generation import Generation, GenerationRequest, Prompt, ResultSink
from evalrun.hashing import canonical_json

#: options the factories accept (everything else is a clear error)
_OPTIONS = ("batch_size", "device", "dtype")


def render_plain(prompt: Prompt) -> str:
    """Prompt text for tokenizers without a chat template: system, blank line, user, blank line."""
    parts = [prompt.system] if prompt.system else []
    parts.append(prompt.user)
    return "\n\n".join(parts) + "\n\n"


class HFProvider:
    """A transformers causal LM behind the :class:`evalrun.generation.Provider` protocol."""

    supports_watermark = True

    def __init__(self, model_path: str, *, batch_size: int = 16, device: str = "cpu",
                 spec: str, dtype: str | None = None, served_model: str | None = None) -> None:
        if batch_size < 1:
            raise EvalrunError(f"--model {spec}: batch_size must be >= 1, got {batch_size}")
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise EvalrunError(
                f"--model {spec}: needs torch and transformers; install evalrun[hf] ({exc})"
            ) from exc
        self.spec = spec
        self.batch_size = batch_size
        self.device = device
        self.model_path = model_path
        source = self._resolve(model_path)
        torch_dtype: Any = (getattr(torch, dtype) if dtype and dtype != "auto" else dtype) or (
            torch.float32 if device == "cpu" else "auto")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
            self.model = AutoModelForCausalLM.from_pretrained(
                source, local_files_only=True, dtype=torch_dtype)
        except Exception as exc:  # OSError, ValueError, ... from transformers
            raise EvalrunError(
                f"--model {spec}: cannot load {model_path!r} from local files "
                f"(evalrun never downloads): {exc}"
            ) from exc
        self.model.to(device)
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self.eos_ids = self._eos_ids()
        self.served_model = served_model or Path(model_path.rstrip("/")).name or model_path
        self.tokenizer_hash = self._tokenizer_hash(source)
        self._schemes: dict[str, Any] = {}

    # ------------------------------------------------------------------ loading helpers
    @staticmethod
    def _resolve(model_path: str) -> str:
        path = Path(model_path).expanduser()
        if path.exists():
            if not path.is_dir():
                raise EvalrunError(f"hf: model path {model_path!r} is not a directory")
            return str(path)
        if model_path.startswith(("/", ".", "~")) or model_path.count("/") > 1:
            raise EvalrunError(f"hf: model path {model_path!r} does not exist")
        return model_path  # a hub id: only its local cache is consulted

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        gc = getattr(self.model, "generation_config", None)
        for value in (getattr(gc, "eos_token_id", None), self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(int(v) for v in value)
        return ids

    def _tokenizer_hash(self, source: str) -> str:
        tj = Path(source) / "tokenizer.json"
        if tj.is_file():
            return hashlib.sha256(tj.read_bytes()).hexdigest()
        return hashlib.sha256(canonical_json(self.tokenizer.get_vocab()).encode()).hexdigest()

    # ------------------------------------------------------------------ prompts
    def prompt_text(self, prompt: Prompt) -> str:
        """The exact text fed to the model (chat template when the tokenizer has one)."""
        if getattr(self.tokenizer, "chat_template", None):
            return self.tokenizer.apply_chat_template(
                prompt.messages(), tokenize=False, add_generation_prompt=True)
        return render_plain(prompt)

    def _encode(self, prompt: Prompt) -> list[int]:
        templated = bool(getattr(self.tokenizer, "chat_template", None))
        ids = self.tokenizer(self.prompt_text(prompt), add_special_tokens=not templated)["input_ids"]
        return list(ids)

    def _processor(self, request: GenerationRequest) -> Callable | None:
        if request.watermark is None or request.watermark.strip().lower() in ("", "none"):
            return None
        if not request.key:
            raise EvalrunError(f"--watermark {request.watermark}: no watermark key given")
        scheme = self._schemes.get(request.watermark)
        if scheme is None:
            from evalrun.watermark import parse_watermark

            scheme = self._schemes[request.watermark] = parse_watermark(request.watermark)
        return scheme.logits_processor(request.key, self.vocab_size,
                                       temperature=request.params.temperature,
                                       seed=request.sample_seed)

    # ------------------------------------------------------------------ generation
    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None:
        """Generate in batches of ``batch_size``; ``sink`` is called per request after its
        batch. A failing batch stores its error on each of its requests and the run goes on."""
        for start in range(0, len(requests), self.batch_size):
            batch = list(requests[start:start + self.batch_size])
            t0 = time.perf_counter()
            try:
                results = self._generate_batch(batch)
            except Exception as exc:
                message = f"{type(exc).__name__}: {exc}"
                for req in batch:
                    if req.key:
                        message = message.replace(req.key, "<key>")
                results = [Generation(text=None, error=message, served_model=self.served_model,
                                      tokenizer_hash=self.tokenizer_hash) for _ in batch]
            latency = (time.perf_counter() - t0) * 1000.0
            for req, gen in zip(batch, results):
                gen.latency_ms = latency
                sink(req, gen)

    def _generate_batch(self, batch: list[GenerationRequest]) -> list[Generation]:
        import torch

        processors = [self._processor(r) for r in batch]
        prompts = [self._encode(r.prompt) for r in batch]
        device = self.device
        pad = int(self.tokenizer.pad_token_id)
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, ids in enumerate(prompts):
            input_ids[i, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            mask[i, width - len(ids):] = 1
        input_ids, mask = input_ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        generators = []
        for r in batch:
            g = torch.Generator(device=device)
            g.manual_seed(r.sample_seed)
            generators.append(g)
        limits = [max(0, int(r.params.max_tokens)) for r in batch]
        outputs: list[list[int]] = [[] for _ in batch]
        finish = ["length"] * len(batch)
        done = [lim == 0 for lim in limits]
        past = None
        step_ids, step_pos = input_ids, positions
        with torch.inference_mode():
            while not all(done):
                out = self.model(input_ids=step_ids, attention_mask=mask, position_ids=step_pos,
                                 past_key_values=past, use_cache=True, logits_to_keep=1)
                past = out.past_key_values
                logits = out.logits[:, -1, :].float()
                chosen = torch.full((len(batch),), pad, dtype=torch.long)
                for i, req in enumerate(batch):
                    if done[i]:
                        continue
                    tok = self._pick(logits[i:i + 1], req.params.temperature, processors[i],
                                     prompts[i], outputs[i], generators[i])
                    if tok in self.eos_ids:
                        done[i], finish[i] = True, "stop"
                        continue
                    outputs[i].append(tok)
                    chosen[i] = tok
                    if len(outputs[i]) >= limits[i]:
                        done[i] = True
                step_ids = chosen.to(device).unsqueeze(-1)
                step_pos = step_pos[:, -1:] + 1
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
        results = []
        for i, ids in enumerate(outputs):
            results.append(Generation(
                text=self.tokenizer.decode(ids, skip_special_tokens=True),
                token_ids=ids, tokens_in=len(prompts[i]), tokens_out=len(ids),
                served_model=self.served_model, tokenizer_hash=self.tokenizer_hash,
                extra={"vocab_size": self.vocab_size, "finish_reason": finish[i]},
            ))
        return results

    def _pick(self, logits, temperature: float, processor, prompt: list[int],
              generated: list[int], generator) -> int:
        """Next token for one row: watermark processor (if any), then argmax or sampling."""
        import torch

        if processor is not None:
            context = torch.tensor([prompt + generated], dtype=torch.long, device=logits.device)
            scores = processor(context, logits).float()
            if temperature == 0:
                return int(scores.argmax(-1).item())
            probs = torch.softmax(scores, dim=-1)
        else:
            if temperature == 0:
                return int(logits.argmax(-1).item())
            probs = torch.softmax(logits / float(temperature), dim=-1)
        return int(torch.multinomial(probs, 1, generator=generator).item())

    def close(self) -> None:
        """Drop the model so its memory can be reclaimed."""
        self.model = None  # type: ignore[assignment]
        self._schemes.clear()


def _options(spec_text: str, options: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise SpecError(f"--model {spec_text}: unknown option(s) {', '.join(unknown)}; "
                        f"known: {', '.join(_OPTIONS)}")
    return {k: v for k, v in options.items() if v is not None}


def make_hf_provider(spec: Any, **options: Any) -> HFProvider:
    """``hf:<path-or-id>`` -> :class:`HFProvider`; options: batch_size, device, dtype."""
    if not spec.arg:
        raise SpecError(f"--model {spec}: expected hf:<path-or-model-id>")
    return HFProvider(spec.arg, spec=spec.canonical(), **_options(spec.canonical(), options))


def make_embedded_provider(spec: Any, **options: Any) -> HFProvider:
    """``embedded`` or ``embedded:austen-5m`` -> the model shipped inside evalrun."""
    from evalrun.embedded import EMBEDDED_NAME, embedded_model_path

    if spec.params or (spec.arg is not None and spec.arg != EMBEDDED_NAME):
        raise SpecError(f"--model {spec}: the embedded model is {EMBEDDED_NAME!r} "
                        f"(use `embedded` or `embedded:{EMBEDDED_NAME}`)")
    return HFProvider(str(embedded_model_path()), spec=spec.canonical(),
                      served_model=EMBEDDED_NAME, **_options(spec.canonical(), options))
