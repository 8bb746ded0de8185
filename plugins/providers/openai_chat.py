"""``openai:<model>``: any OpenAI-compatible server over HTTP, chat or completions.

``openai:<model>`` sends the prompt as chat messages to ``/chat/completions``;
``openai:<model>?api=completions`` sends evalrun's own prompt text (system, blank line, user,
blank line: what a local model without a chat template is given) to ``/completions``, for
base models and servers without a chat template. A ``--watermark`` with this provider is
detected, not applied: the server is taken to watermark on its side.

Requests are sent concurrently from one asyncio event loop through the official ``openai``
client (its own retries switched off). The number of requests in flight follows an AIMD
rule: it starts at ``concurrency``, halves on a 429 (at most once per window of requests) and
grows by one after each window of successes. Rate limits (429), server errors (5xx),
timeouts and connection errors are retried with exponential backoff and full jitter drawn
from ``random.Random(request.sample_seed)``, honouring ``Retry-After``; other 4xx fail at
once. A request that finally fails is reported as ``Generation(text=None, error=...)`` and
the run goes on. The API key never appears in errors, logs or ``Generation.extra``.
"""

from __future__ import annotations

import asyncio
import email.utils
import ipaddress
import logging
import math
import os
import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from evalrun._util.errors import EvalrunError
from evalrun._util.provenance import redact_url
from evalrun._util.specs import is_none
from evalrun.model.generation import WATERMARKED_ELSEWHERE, Generation, GenerationRequest, ResultSink
from evalrun.model.providers import ModelSpec, PackFiles, ProviderKind, ProviderOption, RunSettings
from evalrun.model.tokenization import render_plain

if TYPE_CHECKING:
    import openai

__all__ = ["KIND", "OpenAIProvider", "AdaptiveLimiter", "parse_retry_after"]

log = logging.getLogger("evalrun.providers.openai")

#: the endpoints ``?api=`` chooses between
APIS = ("chat", "completions")

LOCAL_PLACEHOLDER_KEY = "evalrun-no-key"
"""Sent when a ``base_url`` is given but no key: local servers (vLLM, llama.cpp, the evalrun
test server) accept any key, and the OpenAI client refuses to run without one."""


# --------------------------------------------------------------------------- helpers


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or an HTTP date).

    Returns ``None`` for a missing or unparsable value; never a negative number.
    """
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when is None:
            return None
        if when.tzinfo is None:  # an HTTP date is always GMT
            import datetime as _dt

            when = when.replace(tzinfo=_dt.timezone.utc)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if math.isnan(seconds):
        return None
    return max(0.0, seconds)


def _is_local(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _redact_url(url: str) -> str:
    """``url`` without user:password, for params_json and messages."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class AdaptiveLimiter:
    """An AIMD concurrency limit for one event loop.

    ``acquire`` waits until fewer than ``limit`` requests are in flight and returns the
    current epoch. ``on_throttle(epoch)`` halves the limit (minimum 1) unless the limit was
    already cut after that request started, so one burst of 429s counts once.
    ``on_success`` adds one to the limit (up to ``maximum``) after ``limit`` successes in a
    row, i.e. once per window.
    """

    def __init__(self, maximum: int) -> None:
        if maximum < 1:
            raise ValueError("concurrency must be >= 1")
        self.maximum = maximum
        self.limit = maximum
        self.min_limit = maximum
        self.in_flight = 0
        self.max_in_flight = 0
        self.epoch = 0
        self.throttles = 0
        self._successes = 0
        self._cond = asyncio.Condition()

    async def acquire(self) -> int:
        async with self._cond:
            await self._cond.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.epoch

    async def release(self) -> None:
        async with self._cond:
            self.in_flight -= 1
            self._cond.notify(max(0, self.limit - self.in_flight))

    def on_throttle(self, epoch: int) -> None:
        self.throttles += 1
        self._successes = 0
        if epoch != self.epoch:
            return
        self.limit = max(1, self.limit // 2)
        self.min_limit = min(self.min_limit, self.limit)
        self.epoch += 1
        log.info("rate limited: concurrency limit now %d", self.limit)

    def on_success(self) -> None:
        self._successes += 1
        if self._successes >= self.limit and self.limit < self.maximum:
            self._successes = 0
            self.limit += 1

    def stats(self) -> dict[str, int]:
        return {"limit": self.limit, "min_limit": self.min_limit, "maximum": self.maximum,
                "max_in_flight": self.max_in_flight, "throttles": self.throttles}


@dataclass
class _Outcome:
    """What one attempt produced: a response, or an error and whether to retry it."""

    response: Any = None
    error: BaseException | None = None
    retryable: bool = False
    retry_after: float | None = None
    latency_s: float = 0.0


# --------------------------------------------------------------------------- provider


class OpenAIProvider:
    """Chat completions or completions from an OpenAI-compatible endpoint (see the module
    docstring)."""

    supports_watermark = False

    def __init__(
        self,
        model: str,
        *,
        spec: str,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 16,
        max_retries: int = 6,
        timeout_s: float = 60.0,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        api: str = "chat",
    ) -> None:
        if api not in APIS:
            raise EvalrunError(f"{spec}: api={api!r} is not one of {', '.join(APIS)}")
        if not model:
            raise EvalrunError(f"{spec}: no model name (use openai:<model>, e.g. openai:gpt-4o-mini)")
        if concurrency < 1:
            raise EvalrunError(f"{spec}: concurrency must be >= 1, got {concurrency}")
        if max_retries < 0:
            raise EvalrunError(f"{spec}: max_retries must be >= 0, got {max_retries}")
        if timeout_s <= 0:
            raise EvalrunError(f"{spec}: timeout must be > 0 seconds, got {timeout_s}")
        if backoff_base_s < 0 or backoff_max_s < 0:
            raise EvalrunError(f"{spec}: backoff times must be >= 0")
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if base_url is not None:
            parts = urlsplit(base_url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise EvalrunError(
                    f"{spec}: --base-url/OPENAI_BASE_URL {_redact_url(base_url)!r} is not an "
                    "http(s) URL such as http://127.0.0.1:8000/v1")
        if api_key is None:
            if base_url is None:
                raise EvalrunError(
                    f"{spec}: no API key: set OPENAI_API_KEY, or point --base-url/"
                    "OPENAI_BASE_URL at an OpenAI-compatible server")
            api_key = LOCAL_PLACEHOLDER_KEY
            if not _is_local(base_url):
                log.warning("%s: no OPENAI_API_KEY set; sending a placeholder key to %s",
                            spec, _redact_url(base_url))
        self.spec = spec
        self.model = model
        self.api = api
        self.base_url = base_url
        self._api_key = api_key
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.timeout_s = timeout_s
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.last_stats: dict[str, int] = {}
        """Limiter figures of the last ``generate`` call (limit, min_limit, throttles, ...)."""

    def __repr__(self) -> str:
        where = _redact_url(self.base_url) if self.base_url else "api.openai.com"
        return f"OpenAIProvider({self.spec!r}, base_url={where!r}, concurrency={self.concurrency})"

    def settings(self) -> dict[str, Any]:
        """Settings that identify where outputs came from, for params_json (no secrets).

        Only the endpoint: concurrency, retries and timeouts change how fast results arrive,
        not what they are, so they stay out of the cache key.
        """
        return {"base_url": _redact_url(self.base_url) if self.base_url else None}

    def close(self) -> None:
        """Nothing to release: each ``generate`` call opens and closes its own client."""

    # ---- public entry point

    def generate(self, requests: Sequence[GenerationRequest], sink: ResultSink) -> None:
        """Send every request, calling ``sink`` on the event-loop thread as each finishes.
        A request's watermark is not applied (the server's own, if any, is detected later)."""
        if not requests:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self._run(list(requests), sink))
            return
        # Called from inside a running loop (a notebook, an async test): use a private thread.
        failure: list[BaseException] = []

        def runner() -> None:
            try:
                asyncio.run(self._run(list(requests), sink))
            except BaseException as exc:  # re-raised in the caller's thread
                failure.append(exc)

        thread = threading.Thread(target=runner, name="evalrun-openai", daemon=True)
        thread.start()
        thread.join()
        if failure:
            raise failure[0]

    # ---- embeddings

    def embed(self, texts: Sequence[str], *, batch_size: int = 64) -> Any:
        """Embeddings of ``texts`` from the endpoint's ``/embeddings`` (this spec's model), as a
        float32 numpy array ``[n, dim]``, in requests of ``batch_size`` texts; the client
        retries failed requests ``max_retries`` times. The embedder of ``evalrun distinguish
        --embedder openai:<name>``."""
        import numpy as np
        import openai

        client = openai.OpenAI(api_key=self._api_key, base_url=self.base_url, max_retries=self.max_retries,
                               timeout=self.timeout_s)
        rows: list[list[float]] = []
        try:
            for start in range(0, len(texts), batch_size):
                chunk = [t if t else " " for t in texts[start:start + batch_size]]  # the API refuses ""
                try:
                    response = client.embeddings.create(model=self.model, input=chunk, encoding_format="float")
                except Exception as exc:  # one line, key scrubbed
                    raise EvalrunError(f"{self.spec}: embeddings request failed: {self._describe(exc)}") from None
                data = sorted(response.data, key=lambda d: d.index)
                if len(data) != len(chunk):
                    raise EvalrunError(f"{self.spec}: asked {len(chunk)} embeddings, got {len(data)}")
                rows.extend(list(map(float, d.embedding)) for d in data)
        finally:
            client.close()
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)

    # ---- event loop side

    def _client(self) -> openai.AsyncOpenAI:
        import openai

        try:  # openai 3.x builds on httpx2; 1.x and 2.x on httpx
            import httpx2 as http
        except ImportError:
            # no-redef only where httpx2 is installed (else mypy sees its import as Any)
            import httpx as http  # type: ignore[no-redef,unused-ignore]

        limits = http.Limits(max_connections=max(self.concurrency, 1),
                               max_keepalive_connections=max(self.concurrency, 1))
        http_client = openai.DefaultAsyncHttpxClient(limits=limits)
        return openai.AsyncOpenAI(
            api_key=self._api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self.timeout_s,
            http_client=http_client,
        )

    async def _run(self, requests: list[GenerationRequest], sink: ResultSink) -> None:
        limiter = AdaptiveLimiter(self.concurrency)
        client = self._client()
        pending_requests = iter(requests)

        async def worker() -> None:
            # The shared iterator hands each request to exactly one worker (no await between
            # next() calls). Twice as many workers as slots, so that requests sleeping in
            # backoff do not stop new ones from using free slots.
            for request in pending_requests:
                generation = await self._with_retries(client, limiter, request)
                sink(request, generation)

        n_workers = min(len(requests), 2 * self.concurrency)
        tasks = [asyncio.create_task(worker()) for _ in range(n_workers)]
        try:
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            for task in done:  # only a sink (or a bug) can raise out of a worker
                exc = None if task.cancelled() else task.exception()
                if exc is not None:
                    raise exc
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            self.last_stats = limiter.stats()
            await client.close()

    async def _with_retries(self, client: openai.AsyncOpenAI, limiter: AdaptiveLimiter,
                            request: GenerationRequest) -> Generation:
        rng = random.Random(request.sample_seed)
        started = time.monotonic()
        retries = 0
        while True:
            epoch = await limiter.acquire()
            try:
                outcome = await self._attempt(client, request)
            finally:
                await limiter.release()
            if outcome.error is None:
                limiter.on_success()
                return self._success(request, outcome, retries, started)
            if _status_of(outcome.error) == 429:
                limiter.on_throttle(epoch)
            message = self._describe(outcome.error)
            if not outcome.retryable or retries >= self.max_retries:
                # said once per distinct message, with a count, at the end of the run
                log.info("%s %s failed: %s after %d retries", self.spec, request.case_id,
                            message, retries)
                return Generation(
                    text=None, retries=retries, error=f"{message} after {retries} retries",
                    extra={"latency_total_ms": (time.monotonic() - started) * 1000.0})
            delay = self._backoff(rng, retries, outcome.retry_after)
            retries += 1
            log.info("%s %s: %s; retry %d/%d in %.2f s", self.spec, request.case_id, message,
                     retries, self.max_retries, delay)
            await asyncio.sleep(delay)

    async def _attempt(self, client: openai.AsyncOpenAI, request: GenerationRequest) -> _Outcome:
        import openai

        t0 = time.monotonic()
        sampling = {"temperature": request.params.temperature, "max_tokens": request.params.max_tokens,
                    "seed": request.sample_seed}
        try:
            if self.api == "completions":
                response = await client.completions.create(
                    model=self.model, prompt=render_plain(request.prompt), **sampling)  # type: ignore[call-overload]
            else:
                response = await client.chat.completions.create(
                    model=self.model, messages=request.prompt.messages(), **sampling)  # type: ignore[call-overload]
        except openai.APIStatusError as exc:
            status = exc.status_code
            retryable = status == 429 or status == 408 or status >= 500
            retry_after = None
            if retryable:
                headers = exc.response.headers
                ms = headers.get("retry-after-ms")
                retry_after = parse_retry_after(headers.get("retry-after"))
                if ms is not None:
                    try:
                        retry_after = max(0.0, float(ms) / 1000.0)
                    except ValueError:
                        pass
            return _Outcome(error=exc, retryable=retryable, retry_after=retry_after)
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            return _Outcome(error=exc, retryable=True)
        except Exception as exc:  # e.g. a response that does not validate: fail this one only
            return _Outcome(error=exc, retryable=False)
        if not getattr(response, "choices", None):
            return _Outcome(error=ValueError("response has no choices"), retryable=False)
        return _Outcome(response=response, latency_s=time.monotonic() - t0)

    def _backoff(self, rng: random.Random, retries: int, retry_after: float | None) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**retries)]; Retry-After wins, capped."""
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * (2.0 ** min(retries, 60)))
        return rng.uniform(0.0, ceiling)

    def _success(self, request: GenerationRequest, outcome: _Outcome, retries: int,
                 started: float) -> Generation:
        response = outcome.response
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        extra: dict[str, Any] = {
            "latency_kind": "request",
            "latency_total_ms": (time.monotonic() - started) * 1000.0,
            "finish_reason": choice.finish_reason,
        }
        fingerprint = getattr(response, "system_fingerprint", None)
        if fingerprint:
            extra["system_fingerprint"] = fingerprint
        if not is_none(request.watermark):
            extra.update(WATERMARKED_ELSEWHERE)
        text = choice.text if self.api == "completions" else choice.message.content
        return Generation(
            text=text or "",
            latency_ms=outcome.latency_s * 1000.0,
            tokens_in=getattr(usage, "prompt_tokens", None),
            tokens_out=getattr(usage, "completion_tokens", None),
            served_model=getattr(response, "model", None),
            retries=retries,
            extra=extra,
        )

    def _describe(self, exc: BaseException) -> str:
        """``<ExceptionClass>: <message>`` with the server's own message and no API key."""
        text = str(exc)
        body = getattr(exc, "body", None)
        status = _status_of(exc)
        if isinstance(body, Mapping):
            inner = body.get("error", body)
            server_message = inner.get("message") if isinstance(inner, Mapping) else None
            if isinstance(server_message, str) and server_message:
                text = f"HTTP {status}: {server_message}" if status else server_message
        elif status is not None and not text.startswith("Error code"):
            text = f"HTTP {status}: {text}"
        cause = exc.__cause__
        if status is None and cause is not None and str(cause) and str(cause) not in text:
            text = f"{text} ({type(cause).__name__}: {cause})"
        if status == 401:
            text += " (check OPENAI_API_KEY)"
        if status == 400 and self.api == "chat" and "chat template" in text.lower():
            text += (f" (the server has no chat template for {self.model}: use --model "
                     f"'openai:{self.model}?api=completions' to send the prompt as plain text)")
        return f"{type(exc).__name__}: {self._scrub(text)}"

    def _scrub(self, text: str) -> str:
        key = self._api_key
        if key and key != LOCAL_PLACEHOLDER_KEY:
            text = text.replace(key, "***")
            if len(key) > 8:  # servers often echo a masked key: hide any long fragment too
                for i in range(0, len(key) - 7):
                    text = text.replace(key[i:i + 8], "***")
        return text


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


class OpenAIKind(ProviderKind):
    """Any OpenAI-compatible server; the endpoint is part of what decides outputs."""

    name = "openai"
    example = "openai:gpt-4o-mini"
    detects_only = True
    run_options = frozenset({"base_url", "concurrency"})
    options = {
        "max_retries": ProviderOption(int, "retries of a failed call (default 6)"),
        "timeout_s": ProviderOption(float, "seconds before a call times out (default 60)"),
        "api": ProviderOption(str, "chat (default: /chat/completions with messages) or completions "
                              "(/completions with evalrun's plain prompt text, for base models)",
                              affects_output=True),
    }

    def check(self, spec: ModelSpec) -> None:
        api = spec.typed_options().get("api", "chat")
        if api not in APIS:
            raise EvalrunError(f"--model {spec.full()}: api={api!r} is not one of {', '.join(APIS)}")

    def revision(self, spec: ModelSpec, pack: PackFiles | None, options: RunSettings) -> str:
        return redact_url(options.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1")

    def make(self, spec: ModelSpec, *, base_url: str | None = None, concurrency: int = 16,
             **_: Any) -> OpenAIProvider:
        return OpenAIProvider(str(spec.arg), spec=spec.identity(), base_url=base_url, concurrency=concurrency,
                              **spec.typed_options())


KIND = OpenAIKind()
