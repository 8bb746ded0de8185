"""A local OpenAI-compatible server for tests, benchmarks and CI.

It speaks just enough HTTP/1.1 (keep-alive, ``Content-Length`` bodies) over asyncio streams to
serve ``POST /v1/chat/completions``, ``POST /v1/completions`` (a ``prompt`` string; the
responder sees it as the body's ``prompt``), ``POST /v1/embeddings`` (a scripted ``embedder``,
by default :func:`hash_embedding`) and ``GET /v1/models`` to the official ``openai`` client,
with a scripted reply, a fixed latency and a seeded fault plan::

    plan = FaultPlan([FaultRule(Fault.status(429, retry_after="1"), first=1, match="case-3")])
    with ChatServer(latency_s=0.1, faults=plan) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="local")
        ...
    server.requests_seen, server.max_in_flight, server.records()

The server runs its own event loop in a background thread, binds loopback addresses only, and
handles hundreds of concurrent connections (requests sleep on the event loop, they do not hold
a thread). A "token" here is a whitespace-separated word: ``usage`` counts words and
``max_tokens`` truncates the reply to that many words (``finish_reason="length"``).

Run it by hand with ``python -m evalrun.testing.chat_server --port 8000 --latency-ms 100``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Callable, Literal, Mapping, Sequence
from urllib.parse import urlsplit

__all__ = [
    "ChatServer",
    "Fault",
    "FaultPlan",
    "FaultRule",
    "RequestRecord",
    "Responder",
    "echo_responder",
    "hash_embedding",
    "main",
]

Responder = Callable[[Mapping[str, Any]], str]
"""Maps the request's JSON body to the assistant's reply text."""

Embedder = Callable[[str], Sequence[float]]
"""Maps one input text of ``/v1/embeddings`` to its vector."""


def hash_embedding(text: str, dim: int = 32) -> list[float]:
    """Default embedding: a deterministic, L2-normalised bag of hashed lower-cased words."""
    vec = [0.0] * dim
    for word in text.lower().split():
        vec[int.from_bytes(hashlib.sha256(word.encode("utf-8")).digest()[:4], "big") % dim] += 1.0
    norm = sum(v * v for v in vec) ** 0.5
    return [v / norm for v in vec] if norm else vec

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
_MAX_BODY = 32 * 1024 * 1024


#: what vLLM's server answers (HTTP 400) to a chat request for a model whose tokenizer has no
#: chat template; ``ChatServer(chat_template=False)`` answers the same
NO_CHAT_TEMPLATE = ("As of transformers v4.44, default chat template is no longer allowed, so you must "
                    "provide a chat template if the tokenizer does not define one.")


def _last_user_message(body: Mapping[str, Any]) -> str:
    if isinstance(body.get("prompt"), str):  # a /completions request
        return str(body["prompt"])
    for message in reversed(body.get("messages") or []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts: keep the text ones
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def echo_responder(body: Mapping[str, Any]) -> str:
    """Default reply: a deterministic function of the last user message (``"echo: <it>"``)."""
    return f"echo: {_last_user_message(body)}"


def _count_tokens(text: str) -> int:
    return len(text.split())


def _prompt_key(body: Mapping[str, Any]) -> str:
    """Identity of a logical request: its messages (or prompt) and seed (repetitions differ by
    seed)."""
    return json.dumps(
        {"messages": body.get("messages"), "prompt": body.get("prompt"), "seed": body.get("seed")},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


# --------------------------------------------------------------------------- fault plan


@dataclass(frozen=True)
class Fault:
    """What the server does instead of answering normally.

    ``kind``: ``"status"`` (an OpenAI-style JSON error with ``status``, optional
    ``Retry-After`` header and ``message``; ``{authorization}`` in the message is replaced by
    the request's Authorization header, as some real servers echo bad keys), ``"hang"`` (send
    nothing until the client gives up, ``hang_s`` passes or the server stops, then close), or
    ``"drop"`` (read the request and close the connection without a response).
    ``delay_s`` is waited before the fault is delivered.
    """

    kind: Literal["status", "hang", "drop"]
    status: int = 500
    retry_after: str | None = None
    message: str | None = None
    hang_s: float = 30.0
    delay_s: float = 0.0

    @classmethod
    def error(
        cls, status: int, *, retry_after: str | float | None = None, message: str | None = None,
        delay_s: float = 0.0,
    ) -> Fault:
        """An HTTP error response; ``retry_after`` is sent verbatim as ``Retry-After``."""
        if not 400 <= status <= 599:
            raise ValueError(f"fault status must be 4xx or 5xx, got {status}")
        ra = None if retry_after is None else str(retry_after)
        return cls("status", status=status, retry_after=ra, message=message, delay_s=delay_s)

    @classmethod
    def hang(cls, hang_s: float = 30.0) -> Fault:
        """Never answer (until the client disconnects, ``hang_s`` passes or the server stops)."""
        return cls("hang", hang_s=hang_s)

    @classmethod
    def drop(cls, delay_s: float = 0.0) -> Fault:
        """Close the connection without sending a response."""
        return cls("drop", delay_s=delay_s)


@dataclass
class FaultRule:
    """When to apply a :class:`Fault`.

    ``match`` selects requests: a substring of the last user message, a predicate on the
    request JSON, or ``None`` for all. Of the matching attempts, ``first=k`` faults the first
    ``k`` attempts of each logical request (same messages and seed); ``fraction=p`` faults each
    attempt with probability ``p``, decided by a hash of (plan seed, rule, request, attempt
    number) so the choice does not depend on arrival order; neither faults every attempt.
    ``limit`` caps how many times the rule fires in total.
    """

    fault: Fault
    first: int | None = None
    fraction: float | None = None
    match: str | Callable[[Mapping[str, Any]], bool] | None = None
    limit: int | None = None
    fired: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.first is not None and self.fraction is not None:
            raise ValueError("FaultRule: give first= or fraction=, not both")
        if self.first is not None and self.first < 0:
            raise ValueError("FaultRule: first must be >= 0")
        if self.fraction is not None and not 0.0 <= self.fraction <= 1.0:
            raise ValueError("FaultRule: fraction must be in [0, 1]")
        if self.limit is not None and self.limit < 0:
            raise ValueError("FaultRule: limit must be >= 0")

    def matches(self, body: Mapping[str, Any]) -> bool:
        if self.match is None:
            return True
        if isinstance(self.match, str):
            return self.match in _last_user_message(body)
        return bool(self.match(body))


class FaultPlan:
    """An ordered list of :class:`FaultRule`; the first rule that fires decides the attempt."""

    def __init__(self, rules: Sequence[FaultRule] = (), *, seed: int = 0) -> None:
        self.rules = list(rules)
        self.seed = seed

    def _uniform(self, rule_index: int, key: str, attempt: int) -> float:
        digest = hashlib.sha256(f"{self.seed}|{rule_index}|{attempt}|{key}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2.0**64

    def decide(self, body: Mapping[str, Any], key: str, attempt: int) -> Fault | None:
        """The fault for this attempt (1-based per logical request), or ``None`` to answer."""
        for index, rule in enumerate(self.rules):
            if rule.limit is not None and rule.fired >= rule.limit:
                continue
            if not rule.matches(body):
                continue
            if rule.first is not None:
                hit = attempt <= rule.first
            elif rule.fraction is not None:
                hit = self._uniform(index, key, attempt) < rule.fraction
            else:
                hit = True
            if hit:
                rule.fired += 1
                return rule.fault
        return None


# --------------------------------------------------------------------------- server


@dataclass(frozen=True)
class RequestRecord:
    """One chat-completion attempt as the server saw it (times are ``time.monotonic()``)."""

    seq: int
    prompt: str
    attempt: int
    started: float
    finished: float
    status: int | None  # None: hung or dropped without a response
    fault: str | None
    in_flight: int  # requests in flight when this one arrived, itself included
    body: Mapping[str, Any]
    had_authorization: bool


@dataclass
class _Response:
    status: int
    payload: Any
    headers: dict[str, str] = field(default_factory=dict)


_DROP = object()


def _error_payload(message: str, type_: str, code: str | None = None,
                   param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_exceeded",
}


class ChatServer:
    """A scripted OpenAI-compatible server on a loopback address, in a background thread.

    Use as a context manager (or :meth:`start`/:meth:`stop`). ``responder`` maps the request
    JSON to reply text (default :func:`echo_responder`); ``latency_s`` is slept per successful
    request; ``faults`` injects errors; ``served_model`` overrides the ``model`` field of
    responses (default: echo the requested model). ``port=0`` picks an ephemeral port.
    ``chat_template=False`` serves a base model as vLLM does: chat requests get HTTP 400
    (:data:`NO_CHAT_TEMPLATE`), completions work.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency_s: float = 0.0,
        faults: FaultPlan | None = None,
        served_model: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        embedder: Embedder | None = None,
        chat_template: bool = True,
    ) -> None:
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"ChatServer binds loopback addresses only {LOOPBACK_HOSTS}, not {host!r}")
        if latency_s < 0:
            raise ValueError("latency_s must be >= 0")
        self.responder: Responder = responder or echo_responder
        self.embedder: Embedder = embedder or hash_embedding
        #: texts embedded so far (``/v1/embeddings``), over all requests
        self.texts_embedded = 0
        self.latency_s = latency_s
        self.chat_template = chat_template
        self.faults = faults
        self.served_model = served_model
        self.host = host
        self._requested_port = port
        self.port: int | None = None
        self.requests_seen = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._records: list[RequestRecord] = []
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._conn_tasks: set[asyncio.Task[Any]] = set()
        self._seq = 0

    # ---- lifecycle

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``, the value for ``OPENAI_BASE_URL``."""
        if self.port is None:
            raise RuntimeError("ChatServer is not running")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> ChatServer:
        if self._thread is not None:
            raise RuntimeError("ChatServer already started")
        self._thread = threading.Thread(target=self._thread_main, name="evalrun-chat-server",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=10):
            raise RuntimeError("ChatServer did not start within 10 s")
        if self._start_error is not None:
            self._thread.join(timeout=5)
            self._thread = None
            raise self._start_error
        return self

    def stop(self) -> None:
        """Stop serving, abort open connections and join the thread (idempotent)."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None:
            return
        if loop is not None and stopping is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stopping.set)
            except RuntimeError:  # loop already closed
                pass
        thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- observations

    def records(self) -> list[RequestRecord]:
        """Every chat-completion attempt so far, in arrival order."""
        with self._lock:
            return sorted(self._records, key=lambda r: r.seq)

    def attempts(self, prompt_substring: str) -> list[RequestRecord]:
        """The attempts whose last user message contains ``prompt_substring``."""
        return [r for r in self.records() if prompt_substring in r.prompt]

    def reset_counters(self) -> None:
        """Forget records, attempt counts and the in-flight maximum (not the fault plan)."""
        with self._lock:
            self._records.clear()
            self._attempts.clear()
            self.requests_seen = 0
            self.max_in_flight = self.in_flight

    # ---- event loop side

    def _thread_main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced by start()
            if not self._ready.is_set():
                self._start_error = exc
        finally:
            self._ready.set()
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(
            self._on_connection, self.host, self._requested_port, backlog=1024,
            limit=1024 * 1024,
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            tasks = list(self._conn_tasks)
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()

    async def _on_connection(self, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conn_tasks.add(task)
        try:
            await self._connection_loop(reader, writer)
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._conn_tasks.discard(task)
            writer.close()

    async def _connection_loop(self, reader: asyncio.StreamReader,
                               writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            try:
                request_line, *header_lines = head.decode("latin-1").split("\r\n")
                method, target, version = request_line.split(" ", 2)
                headers: dict[str, str] = {}
                for line in header_lines:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length", "0"))
                if length < 0:
                    raise ValueError("negative Content-Length")
            except ValueError:
                await self._write(writer, _Response(400, _error_payload(
                    "malformed HTTP request", "invalid_request_error")), keep_alive=False)
                return
            if "chunked" in headers.get("transfer-encoding", "").lower() or length > _MAX_BODY:
                await self._write(writer, _Response(411, _error_payload(
                    "send a Content-Length body (at most 32 MiB)", "invalid_request_error")),
                    keep_alive=False)
                return
            body = await reader.readexactly(length) if length else b""
            keep_alive = (version.strip().upper() == "HTTP/1.1"
                          and headers.get("connection", "").lower() != "close")
            result = await self._dispatch(method.upper(), urlsplit(target).path, headers, body,
                                          reader)
            if result is _DROP:
                writer.transport.abort()
                return
            assert isinstance(result, _Response)
            await self._write(writer, result, keep_alive=keep_alive)
            if not keep_alive:
                return

    async def _write(self, writer: asyncio.StreamWriter, response: _Response, *,
                     keep_alive: bool) -> None:
        data = json.dumps(response.payload, ensure_ascii=False).encode("utf-8")
        try:
            phrase = HTTPStatus(response.status).phrase
        except ValueError:
            phrase = "Unknown"
        lines = [
            f"HTTP/1.1 {response.status} {phrase}",
            "Content-Type: application/json",
            f"Content-Length: {len(data)}",
            f"Connection: {'keep-alive' if keep_alive else 'close'}",
            "Server: evalrun-chat-server",
        ]
        lines += [f"{k}: {v}" for k, v in response.headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
        await writer.drain()

    async def _dispatch(self, method: str, path: str, headers: Mapping[str, str], body: bytes,
                        reader: asyncio.StreamReader) -> _Response | object:
        path = path.rstrip("/")
        if path in ("/v1/chat/completions", "/chat/completions"):
            if method != "POST":
                return _Response(405, _error_payload(f"{method} not allowed; use POST",
                                                     "invalid_request_error"))
            return await self._chat(headers, body, reader)
        if path in ("/v1/completions", "/completions"):
            if method != "POST":
                return _Response(405, _error_payload(f"{method} not allowed; use POST",
                                                     "invalid_request_error"))
            return await self._chat(headers, body, reader, endpoint="completions")
        if path in ("/v1/embeddings", "/embeddings"):
            if method != "POST":
                return _Response(405, _error_payload(f"{method} not allowed; use POST",
                                                     "invalid_request_error"))
            return self._embeddings(body)
        if path in ("/v1/models", "/models") and method == "GET":
            model = self.served_model or "evalrun-echo"
            return _Response(200, {"object": "list", "data": [
                {"id": model, "object": "model", "created": 0, "owned_by": "evalrun"}]})
        return _Response(404, _error_payload(f"no route for {method} {path}",
                                             "invalid_request_error", code="unknown_url"))

    def _embeddings(self, raw: bytes) -> _Response:
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return _Response(400, _error_payload(f"invalid JSON body: {exc}", "invalid_request_error"))
        texts = body.get("input") if isinstance(body, dict) else None
        if isinstance(texts, str):
            texts = [texts]
        if (not isinstance(body, dict) or not isinstance(body.get("model"), str) or not isinstance(texts, list)
                or not texts or not all(isinstance(t, str) and t for t in texts)):
            return _Response(400, _error_payload("need a model and input: a non-empty string or list of them",
                                                 "invalid_request_error"))
        try:
            vectors = [[float(x) for x in self.embedder(t)] for t in texts]
        except Exception as exc:  # a broken embedder is the test's bug: report it
            return _Response(500, _error_payload(f"embedder raised {type(exc).__name__}: {exc}", "server_error"))
        with self._lock:
            self.texts_embedded += len(texts)
        import base64
        import struct

        def encoded(v: list[float]) -> Any:
            if body.get("encoding_format") == "base64":
                return base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode("ascii")
            return v

        tokens = sum(_count_tokens(t) for t in texts)
        return _Response(200, {
            "object": "list", "model": self.served_model or body["model"],
            "data": [{"object": "embedding", "index": i, "embedding": encoded(v)} for i, v in enumerate(vectors)],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _validate(self, body: Any, endpoint: str) -> str | None:
        if not isinstance(body, dict):
            return "request body must be a JSON object"
        if not isinstance(body.get("model"), str) or not body["model"]:
            return "you must provide a model parameter"
        if endpoint == "completions":
            if not isinstance(body.get("prompt"), str):
                return "prompt must be a string"
        else:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                return "messages must be a non-empty array"
            for i, m in enumerate(messages):
                if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant",
                                                                    "developer", "tool"):
                    return f"messages[{i}] must be an object with a valid role"
            if not self.chat_template:
                return NO_CHAT_TEMPLATE
        if body.get("stream"):
            return "stream=true is not supported by the evalrun test server"
        temperature = body.get("temperature")
        if temperature is not None and (not isinstance(temperature, (int, float))
                                        or not 0 <= temperature <= 2):
            return f"temperature must be a number in [0, 2], got {temperature!r}"
        for name in ("max_tokens", "max_completion_tokens"):
            value = body.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 1):
                return f"{name} must be a positive integer, got {value!r}"
        return None

    async def _chat(self, headers: Mapping[str, str], raw: bytes,
                    reader: asyncio.StreamReader, endpoint: str = "chat") -> _Response | object:
        started = time.monotonic()
        with self._lock:
            self.requests_seen += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            in_flight = self.in_flight
            self._seq += 1
            seq = self._seq
        status: int | None = None
        fault_kind: str | None = None
        body: Any = {}
        attempt = 0
        try:
            try:
                body = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                status = 400
                return _Response(400, _error_payload(f"invalid JSON body: {exc}",
                                                     "invalid_request_error"))
            problem = self._validate(body, endpoint)
            if problem is not None:
                status = 400
                return _Response(400, _error_payload(problem, "invalid_request_error"))
            key = _prompt_key(body)
            with self._lock:
                attempt = self._attempts.get(key, 0) + 1
                self._attempts[key] = attempt
            fault = self.faults.decide(body, key, attempt) if self.faults else None
            if fault is not None:
                fault_kind = fault.kind
                if fault.delay_s:
                    await asyncio.sleep(fault.delay_s)
                if fault.kind == "drop":
                    return _DROP
                if fault.kind == "hang":
                    await self._hang(reader, fault.hang_s)
                    return _DROP
                status = fault.status
                message = fault.message or f"injected fault: HTTP {fault.status}"
                message = message.replace("{authorization}", headers.get("authorization", ""))
                extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
                return _Response(fault.status, _error_payload(
                    message, _ERROR_TYPES.get(fault.status, "server_error"),
                    code=str(fault.status)), extra)
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            try:
                text = self.responder(body)
            except Exception as exc:  # a broken responder is the test's bug: report it
                status = 500
                return _Response(500, _error_payload(
                    f"responder raised {type(exc).__name__}: {exc}", "server_error"))
            status = 200
            return _Response(200, self._completion(body, text, seq, endpoint))
        finally:
            with self._lock:
                self.in_flight -= 1
                self._records.append(RequestRecord(
                    seq=seq, prompt=_last_user_message(body) if isinstance(body, dict) else "",
                    attempt=attempt, started=started, finished=time.monotonic(),
                    status=status, fault=fault_kind, in_flight=in_flight,
                    body=body if isinstance(body, dict) else {},
                    had_authorization="authorization" in headers))

    async def _hang(self, reader: asyncio.StreamReader, hang_s: float) -> None:
        """Wait until the client closes the connection or ``hang_s`` passes."""
        try:
            await asyncio.wait_for(reader.read(), timeout=hang_s)
        except (asyncio.TimeoutError, ConnectionError):
            pass

    def _completion(self, body: Mapping[str, Any], text: str, seq: int, endpoint: str) -> dict[str, Any]:
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        words = text.split()
        finish = "stop"
        if limit is not None and len(words) > limit:
            text = " ".join(words[:limit])
            finish = "length"
        prompt_tokens = 0
        for message in body.get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                prompt_tokens += _count_tokens(content)
        if endpoint == "completions":
            prompt_tokens = _count_tokens(body["prompt"])
            choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                      "logprobs": None, "finish_reason": finish}
        completion_tokens = _count_tokens(text)
        return {
            "id": f"{'cmpl' if endpoint == 'completions' else 'chatcmpl'}-evalrun-{seq}",
            "object": "text_completion" if endpoint == "completions" else "chat.completion",
            "created": int(time.time()),
            "model": self.served_model or body["model"],
            "system_fingerprint": "fp_evalrun_test",
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m evalrun.testing.chat_server``: serve the echo responder until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m evalrun.testing.chat_server",
        description="Local OpenAI-compatible test server (echo replies, loopback only).")
    parser.add_argument("--host", default="127.0.0.1", choices=LOOPBACK_HOSTS)
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="delay added to every successful response")
    parser.add_argument("--served-model", default=None,
                        help="model name to report in responses (default: the requested one)")
    parser.add_argument("--fail-fraction", type=float, default=0.0,
                        help="fraction of attempts answered with HTTP 500 (seeded)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault choice")
    args = parser.parse_args(argv)
    faults = None
    if args.fail_fraction:
        faults = FaultPlan([FaultRule(Fault.error(500), fraction=args.fail_fraction)],
                           seed=args.seed)
    server = ChatServer(latency_s=args.latency_ms / 1000.0, faults=faults,
                        served_model=args.served_model, host=args.host, port=args.port)
    with server:
        print(f"evalrun chat server on {server.base_url} (Ctrl-C stops)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    print(f"served {server.requests_seen} chat requests, max in flight {server.max_in_flight}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
