"""``hf:<path-or-id>`` and ``embedded``: local transformers models, batched, with watermarks.

Generation runs its own decoding loop over a KV cache so that every request samples from its
own ``torch.Generator`` seeded with ``request.sample_seed``: a request's output does not depend
on which other requests share its batch, and watermark logits processors see exactly the
scores the sampler uses. Nothing is ever downloaded (``local_files_only=True``).

Each step calls one watermark processor for all rows with the same watermark, key and
temperature where that is exact (:func:`shared_context`), else one per row, then samples all
rows at once (:func:`sample_rows`: inverse CDF of one uniform per row from its generator).
Rows whose scheme picks the token itself (exp, its, binary, through the processor's
``choose``) are not sampled again and do not draw from their generator.
Earlier versions sampled each row with ``torch.multinomial``: for the same seeds, sampled
(temperature > 0) outputs differ from theirs; greedy ones are unchanged.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, cast

from evalrun._util.errors import EvalrunError, SpecError, first_line
from evalrun._util.specs import is_none
from evalrun.model.allocator import tune_allocator
from evalrun.model.embedded import EMBEDDED_NAME, embedded_model_path
from evalrun.model.generation import Generation, GenerationRequest, Prompt, ResultSink
from evalrun.model.providers import (
    ModelSpec,
    PackFiles,
    ProviderKind,
    ProviderOption,
    RunSettings,
    local_model_digest,
)
from evalrun.plugins.providers.local_model import (
    encode_prompt,
    generate_in_batches,
    prompt_text,
    resolve_model_path,
    tokenizer_fingerprint,
)
from evalrun.watermark import parse_watermark


@dataclass
class _Group:
    """Rows of a batch whose scores come from one call per step: ``processor`` None means
    no watermark; ``shared`` False means a single row given its unpadded history."""

    rows: list[int]
    processor: Callable | None
    temperature: float
    shared: bool


def shared_context(scheme: Any) -> int | None:
    """How far back a scheme's processor reads when one processor may serve several rows
    (:attr:`evalrun.watermark.WatermarkScheme.shared_context`); None: one per row."""
    return scheme.shared_context


def sample_rows(scores: Any, generators: Sequence[Any]) -> Any:
    """One token per row of ``scores [R, V]`` from ``softmax(scores)``, row ``r`` driven by
    ``generators[r]`` alone: a float64 uniform ``u`` per row, then the first token whose
    cumulative probability exceeds ``u`` times the row total (inverse CDF, batched)."""
    import torch

    probs = torch.softmax(scores.float(), dim=-1)
    cdf = probs.cumsum(dim=-1, dtype=torch.float64)
    total = cdf[:, -1]
    if not bool((torch.isfinite(total) & (total > 0)).all()):
        raise RuntimeError("sampling: probability rows contain inf or nan or sum to zero")
    u = torch.cat([torch.rand(1, generator=g, dtype=torch.float64, device=scores.device)
                   for g in generators])
    tokens = torch.searchsorted(cdf, (u * total).unsqueeze(-1), right=True).squeeze(-1)
    tokens = tokens.clamp(max=scores.shape[-1] - 1)
    # rounding can put u * total at the row total: take the last token with positive mass
    zero = probs.gather(1, tokens.unsqueeze(-1)).squeeze(-1) <= 0
    if bool(zero.any()):
        positions = torch.arange(scores.shape[-1], device=scores.device)
        last = torch.where(probs > 0, positions, -1).amax(dim=-1)
        tokens = torch.where(zero, last, tokens)
    return tokens


def mean_pooled(model: Any, tokenizer: Any, texts: Sequence[str], *, batch_size: int, device: str) -> Any:
    """Embeddings of ``texts`` as a float32 numpy array ``[n, hidden]``: the mean over its
    tokens of the base model's last hidden state (``model.base_model``: the decoder stack of a
    causal LM after its final norm, or an encoder's output), texts tokenized as the tokenizer
    does by default (its special tokens included), right-padded, truncated to the model's
    ``max_position_embeddings``. Deterministic: eval mode, no dropout, no sampling; a text
    with no tokens gets the zero vector."""
    import numpy as np
    import torch

    base = getattr(model, "base_model", model)
    hidden = int(getattr(model.config, "hidden_size", 0) or 0)
    limit = int(getattr(model.config, "max_position_embeddings", 0) or 0) or 512
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out: list[Any] = []
    for start in range(0, len(texts), batch_size):
        chunk = texts[start:start + batch_size]
        ids = [list(tokenizer(t, truncation=True, max_length=limit)["input_ids"])[:limit] for t in chunk]
        width = max(1, max(len(x) for x in ids))
        input_ids = torch.full((len(ids), width), int(pad), dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for i, row in enumerate(ids):
            if row:
                input_ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
                mask[i, :len(row)] = 1
        with torch.inference_mode():
            states = base(input_ids=input_ids.to(device), attention_mask=mask.to(device)).last_hidden_state.float()
        weights = mask.to(device).unsqueeze(-1).float()
        summed = (states * weights).sum(dim=1, dtype=torch.float64)
        counts = weights.sum(dim=1, dtype=torch.float64).clamp(min=1.0)
        out.append((summed / counts).float().cpu().numpy())
        hidden = out[-1].shape[1]
    return np.concatenate(out, axis=0) if out else np.zeros((0, hidden), dtype=np.float32)


class HFEncoder:
    """A local transformers model loaded for embeddings only (``AutoModel``: encoders such as
    BERT, or a causal LM's decoder stack), behind ``embed(texts)``. Built by
    ``make_provider("hf:<path>", task="embed")``; nothing is downloaded."""

    supports_watermark = False

    def __init__(self, model_path: str, *, spec: str, batch_size: int = 16, device: str = "cpu",
                 dtype: str | None = None) -> None:
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise EvalrunError(f"--embedder {spec}: needs torch and transformers; install evalrun[hf] ({exc})") from exc
        self.spec = spec
        self.batch_size = batch_size
        self.device = device
        source = resolve_model_path(model_path, provider="hf")
        torch_dtype: Any = (getattr(torch, dtype) if dtype and dtype != "auto" else dtype) or torch.float32
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
            self.model = AutoModel.from_pretrained(source, local_files_only=True, dtype=torch_dtype)
        except Exception as exc:  # OSError, ValueError, ... from transformers
            raise EvalrunError(f"--embedder {spec}: cannot load {model_path!r} from local files "
                               f"(evalrun never downloads): {first_line(exc)}") from exc
        self.model.to(device)
        self.model.eval()

    def embed(self, texts: Sequence[str]) -> Any:
        """Mean-pooled last hidden states (:func:`mean_pooled`), ``[len(texts), hidden]``."""
        return mean_pooled(self.model, self.tokenizer, list(texts), batch_size=self.batch_size, device=self.device)

    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None:
        raise EvalrunError(f"{self.spec}: loaded for embeddings only")

    def close(self) -> None:
        self.model = None


class HFProvider:
    """A transformers causal LM behind the :class:`evalrun.model.generation.Provider` protocol."""

    supports_watermark = True
    #: let watermarked rows of a batch share one processor call per step where exact
    #: (:func:`shared_context`); False calls one processor per row (for equivalence tests)
    share_processors: bool = True

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
        tune_allocator()  # freed step buffers stay in the heap (see evalrun.model.allocator)
        source = resolve_model_path(model_path, provider="hf")
        torch_dtype: Any = (getattr(torch, dtype) if dtype and dtype != "auto" else dtype) or (
            torch.float32 if device == "cpu" else "auto")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
            self.model = AutoModelForCausalLM.from_pretrained(
                source, local_files_only=True, dtype=torch_dtype)
        except Exception as exc:  # OSError, ValueError, ... from transformers
            raise EvalrunError(
                f"--model {spec}: cannot load {model_path!r} from local files "
                f"(evalrun never downloads): {first_line(exc)}"
            ) from exc
        # transformers wraps PreTrainedModel.to with functools.wraps; mypy types the result as
        # functools._Wrapped, whose __call__ does not bind self, so it takes device for self
        self.model.to(device)  # type: ignore[arg-type]
        self.model.eval()
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.vocab_size = int(self.model.get_output_embeddings().weight.shape[0])
        self.eos_ids = self._eos_ids()
        self.served_model = served_model or Path(model_path.rstrip("/")).name or model_path
        self.tokenizer_hash = tokenizer_fingerprint(self.tokenizer, source)
        self._schemes: dict[str, Any] = {}
        # the key-value cache's argument (and output field): transformers renamed
        # past_key_values to cache and warns on the old name; older releases know only it
        self._cache_arg = "cache" if "cache" in inspect.signature(self.model.forward).parameters else "past_key_values"

    # ------------------------------------------------------------------ loading helpers
    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        gc = getattr(self.model, "generation_config", None)
        for value in (getattr(gc, "eos_token_id", None), self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif value:
                ids.update(int(v) for v in value)
        return ids

    # ------------------------------------------------------------------ prompts
    def prompt_text(self, prompt: Prompt) -> str:
        """The exact text fed to the model (chat template when the tokenizer has one)."""
        return prompt_text(self.tokenizer, prompt)

    def _encode(self, prompt: Prompt) -> list[int]:
        return encode_prompt(self.tokenizer, prompt)

    def _scheme(self, request: GenerationRequest) -> Any:
        """The watermark scheme of ``request`` (built once per spec text), or None."""
        if is_none(request.watermark):
            return None
        if not request.key:
            raise EvalrunError(f"--watermark {request.watermark}: no watermark key given")
        scheme = self._schemes.get(request.watermark)
        if scheme is None:

            scheme = self._schemes[request.watermark] = parse_watermark(request.watermark)
        return scheme

    def _processor(self, request: GenerationRequest) -> Callable | None:
        scheme = self._scheme(request)
        if scheme is None:
            return None
        return scheme.logits_processor(request.key, self.vocab_size,
                                       temperature=request.params.temperature,
                                       seed=request.sample_seed)

    def _groups(self, batch: list[GenerationRequest], prompts: list[list[int]]) -> list[_Group]:
        """Partition the rows of ``batch`` into groups that one processor call serves per step.

        Rows without a watermark group by temperature. Watermarked rows with the same spec,
        key and temperature share one processor when :func:`shared_context` allows it for the
        scheme and their prompts hold at least that many tokens (a shorter prompt would let
        the processor read left padding); every other watermarked row gets its own."""
        keyed: dict[tuple[str | None, str | None, float], list[int]] = {}
        for i, req in enumerate(batch):
            wm = None if self._scheme(req) is None else req.watermark
            keyed.setdefault((wm, req.key if wm else None, float(req.params.temperature)),
                             []).append(i)
        groups: list[_Group] = []
        for (wm, _key, temperature), rows in keyed.items():
            if wm is None:
                groups.append(_Group(rows, None, temperature, shared=True))
                continue
            width = shared_context(self._scheme(batch[rows[0]])) if self.share_processors else None
            share = [i for i in rows if width is not None and len(prompts[i]) >= width]
            if len(share) > 1:
                # shared_context vouches that the processor ignores ``seed``: any row's will do
                processor = self._processor(batch[share[0]])
                groups.append(_Group(share, processor, temperature, shared=True))
            else:
                share = []
            groups.extend(_Group([i], self._processor(batch[i]), temperature, shared=False)
                          for i in rows if i not in share)
        return groups

    # ------------------------------------------------------------------ generation
    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None:
        """Generate in batches of ``batch_size``; ``sink`` is called per request after its
        batch. A failing batch stores its error on each of its requests and the run goes on."""
        generate_in_batches(requests, self.batch_size, self._generate_batch, sink,
                            served_model=self.served_model, tokenizer_hash=self.tokenizer_hash)

    def _generate_batch(self, batch: list[GenerationRequest]) -> list[Generation]:
        import torch

        prompts = [self._encode(r.prompt) for r in batch]
        groups = self._groups(batch, prompts)
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
        # every row's tokens so far, left padded: the active rows have all generated the same
        # number of tokens, so their real histories are right-aligned in it
        history = input_ids
        step_ids, step_pos = input_ids, positions
        with torch.inference_mode():
            while not all(done):
                out = self.model(input_ids=step_ids, attention_mask=mask, position_ids=step_pos,
                                 use_cache=True, logits_to_keep=1, **{self._cache_arg: past})
                past = getattr(out, self._cache_arg)
                logits = out.logits[:, -1, :].float()
                picked = self._pick(logits, groups, done, history, prompts, outputs, generators)
                chosen = torch.full((len(batch),), pad, dtype=torch.long)
                for i, tok in picked.items():
                    if tok in self.eos_ids:
                        done[i], finish[i] = True, "stop"
                        continue
                    outputs[i].append(tok)
                    chosen[i] = tok
                    if len(outputs[i]) >= limits[i]:
                        done[i] = True
                step_ids = chosen.to(device).unsqueeze(-1)
                history = torch.cat([history, step_ids], dim=-1)
                step_pos = step_pos[:, -1:] + 1
                mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=-1)
        results = []
        for i, ids in enumerate(outputs):
            results.append(Generation(
                text=cast(str, self.tokenizer.decode(ids, skip_special_tokens=True)),  # one sequence: a str
                token_ids=ids, tokens_in=len(prompts[i]), tokens_out=len(ids),
                served_model=self.served_model, tokenizer_hash=self.tokenizer_hash,
                extra={"vocab_size": self.vocab_size, "finish_reason": finish[i]},
            ))
        return results

    # ------------------------------------------------------------------ scoring
    def perplexities(self, items: Sequence[tuple[Prompt, str]]) -> list[tuple[float, int]]:
        """``(mean negative log-likelihood per token, tokens)`` of each text given its prompt
        (the prompt rendered as for generation, the text's tokens after it), in batches: the
        model as a scorer, for the offline quality proxy. Deterministic: no sampling."""
        import torch

        out: list[tuple[float, int]] = []
        for start in range(0, len(items), self.batch_size):
            chunk = items[start:start + self.batch_size]
            seqs = []
            for prompt, text in chunk:
                ids = self.tokenizer.encode(text, add_special_tokens=False)
                seqs.append((self._encode(prompt), ids))
            width = max(len(p) + len(t) for p, t in seqs)
            pad = int(self.tokenizer.pad_token_id)
            input_ids = torch.full((len(seqs), width), pad, dtype=torch.long)
            mask = torch.zeros((len(seqs), width), dtype=torch.long)
            for i, (p, t) in enumerate(seqs):
                row = p + t
                input_ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
                mask[i, width - len(row):] = 1
            positions = (mask.cumsum(-1) - 1).clamp(min=0)
            with torch.inference_mode():
                logits = self.model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                                    position_ids=positions.to(self.device)).logits.float()
            logp = torch.log_softmax(logits[:, :-1], dim=-1)
            nll = -logp.gather(-1, input_ids[:, 1:].to(self.device).unsqueeze(-1)).squeeze(-1)
            for i, (_p, t) in enumerate(seqs):
                if not t:
                    out.append((float("nan"), 0))
                    continue
                # the text's tokens are the last len(t) columns; their predictions sit one left
                part = nll[i, width - 1 - len(t):width - 1]
                out.append((float(part.double().mean()), len(t)))
        return out

    def next_token_logits(self, texts: Sequence[Any]) -> list[Any]:
        """Per text of ``n >= 1`` token ids, the float32 ``[n - 1, V]`` numpy logits the model
        gives on the text alone (row t predicts ids[t + 1]): what the detectors of SWEET, EWD
        and Unbiased read (:class:`evalrun.watermark.base.TokenLogits`). One text per forward
        pass, so a row never depends on the batch it came in."""
        import numpy as np
        import torch

        out = []
        for ids in texts:
            arr = np.asarray(ids, dtype=np.int64).reshape(-1)
            if len(arr) < 2:
                out.append(np.zeros((0, self.vocab_size), dtype=np.float32))
                continue
            x = torch.as_tensor(arr[:-1])[None].to(self.device)
            with torch.inference_mode():
                logits = self.model(input_ids=x, use_cache=False).logits[0].float()
            out.append(logits.cpu().numpy())
        return out

    def embed(self, texts: Sequence[str]) -> Any:
        """Text embeddings from this model: the mean over each text's tokens of the last hidden
        state of its decoder stack (:func:`mean_pooled`), in batches of ``batch_size``;
        deterministic. The offline embedder of ``evalrun distinguish``."""
        return mean_pooled(self.model, self.tokenizer, list(texts), batch_size=self.batch_size, device=self.device)

    def _pick(self, logits: Any, groups: list[_Group], done: list[bool], history: Any,
              prompts: list[list[int]], outputs: list[list[int]],
              generators: list[Any]) -> dict[int, int]:
        """Next token of every row not ``done``: each group's processor (one call for the
        group's active rows), then argmax (temperature 0) or seeded sampling, both batched.
        Rows whose scheme picks the token itself (``choose``) skip the sampler."""
        import torch

        dev = logits.device
        scores = torch.empty_like(logits)
        greedy: list[int] = []
        sampled: list[int] = []
        picked: dict[int, int] = {}
        ready = self._rows_together(logits, groups, done, prompts, outputs)
        for k, group in enumerate(groups):
            rows = [i for i in group.rows if not done[i]]
            if not rows:
                continue
            idx = torch.tensor(rows, dtype=torch.long, device=dev)
            tokens = None
            if group.processor is None:
                part = logits[idx]
                if group.temperature != 0:
                    part = part / float(group.temperature)
            elif k in ready:
                part = ready[k]
            else:
                if group.shared:
                    context, step_logits = history[idx], logits[idx]
                else:
                    (i,) = rows
                    context = torch.tensor([prompts[i] + outputs[i]], dtype=torch.long,
                                           device=dev)
                    step_logits = logits[i:i + 1]
                choose = getattr(group.processor, "choose", None)
                if choose is not None:
                    part, tokens = choose(context, step_logits, reuse=True)
                else:
                    part = group.processor(context, step_logits)
            if tokens is not None:
                chosen = tokens >= 0
                picked.update(zip((r for r, c in zip(rows, chosen) if c),
                                  tokens[chosen].tolist()))
                rows = [r for r, c in zip(rows, chosen) if not c]
                if not rows:
                    continue
                part = part[torch.from_numpy(~chosen).to(dev)]
                idx = torch.tensor(rows, dtype=torch.long, device=dev)
            scores[idx] = part.float()
            (greedy if group.temperature == 0 else sampled).extend(rows)
        if greedy:
            idx = torch.tensor(greedy, dtype=torch.long, device=dev)
            picked.update(zip(greedy, scores[idx].argmax(-1).tolist()))
        if sampled:
            idx = torch.tensor(sampled, dtype=torch.long, device=dev)
            tokens = sample_rows(scores[idx], [generators[i] for i in sampled])
            picked.update(zip(sampled, tokens.tolist()))
        return picked

    @staticmethod
    def _rows_together(logits: Any, groups: list[_Group], done: list[bool],
                       prompts: list[list[int]], outputs: list[list[int]]) -> dict[int, Any]:
        """The scores of the one-row groups whose processors' class processes several
        generations' rows in one call (``call_rows(processors, contexts, scores)``, the same
        bits as one call each: SynthID's and DiPmark's), by group index; the others are left to
        :meth:`_pick`'s loop."""
        import torch

        together: dict[Any, list[int]] = {}
        for k, group in enumerate(groups):
            if group.processor is None or group.shared or done[group.rows[0]]:
                continue
            call_rows = getattr(type(group.processor), "call_rows", None)
            if call_rows is not None and getattr(group.processor, "choose", None) is None:
                together.setdefault(call_rows, []).append(k)
        ready: dict[int, Any] = {}
        for call_rows, members in together.items():
            if len(members) < 2:
                continue
            rows = [groups[k].rows[0] for k in members]
            contexts = [torch.tensor([prompts[i] + outputs[i]], dtype=torch.long, device=logits.device)
                        for i in rows]
            part = call_rows([groups[k].processor for k in members], contexts,
                             logits[torch.tensor(rows, dtype=torch.long, device=logits.device)])
            ready.update((k, part[j:j + 1]) for j, k in enumerate(members))
        return ready

    def close(self) -> None:
        """Drop the model so its memory can be reclaimed."""
        self.model = None  # type: ignore[assignment]
        self._schemes.clear()


_OPTIONS = {
    "batch_size": ProviderOption(int, "rows generated together (default 16)"),
    "device": ProviderOption(str, "torch device (default cpu)", affects_output=True),
    "dtype": ProviderOption(str, "weights' dtype, e.g. bfloat16 (default float32 on CPU)", affects_output=True),
}


class HFKind(ProviderKind):
    """A transformers model from local files (never downloaded)."""

    name = "hf"
    example = "hf:/path/to/model"
    logits = True
    scores_texts = True
    options = _OPTIONS
    #: ``task="embed"`` builds an :class:`HFEncoder` (``evalrun distinguish --embedder``)
    run_options = frozenset({"task"})

    def _path(self, spec: ModelSpec) -> str:
        return resolve_model_path(str(spec.arg), provider=spec.name)

    def check(self, spec: ModelSpec) -> None:
        self._path(spec)

    def revision(self, spec: ModelSpec, pack: PackFiles | None, options: RunSettings) -> str:
        path = Path(self._path(spec))
        return local_model_digest(path) if path.is_dir() else ""

    def tokenizer_dir(self, spec: ModelSpec) -> str | None:
        return self._path(spec)

    def make(self, spec: ModelSpec, *, task: str | None = None, **_: Any) -> Any:
        if task == "embed":
            return HFEncoder(self._path(spec), spec=spec.identity(), **spec.typed_options())
        return HFProvider(self._path(spec), spec=spec.identity(), **spec.typed_options())


class EmbeddedKind(HFKind):
    """The model shipped inside evalrun (``embedded`` or ``embedded:austen-5m``)."""

    name = "embedded"
    needs_arg = False

    def _path(self, spec: ModelSpec) -> str:
        if spec.arg is not None and spec.arg != EMBEDDED_NAME:
            raise SpecError(f"--model {spec}: the embedded model is {EMBEDDED_NAME!r} "
                            f"(use `embedded` or `embedded:{EMBEDDED_NAME}`)")
        return str(embedded_model_path())

    def make(self, spec: ModelSpec, *, task: str | None = None, **_: Any) -> Any:
        if task == "embed":
            return HFEncoder(self._path(spec), spec=spec.identity(), **spec.typed_options())
        return HFProvider(self._path(spec), spec=spec.identity(), served_model=EMBEDDED_NAME,
                          **spec.typed_options())


HF_KIND = HFKind()
EMBEDDED_KIND = EmbeddedKind()
