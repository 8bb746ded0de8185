"""The local OpenAI-compatible test server: protocol, concurrency, faults, lifecycle, CLI."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time

import openai
import pytest

from evalrun.testing import ChatServer, Fault, FaultPlan, FaultRule, echo_responder


def _client(server: ChatServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=5)


def _raw(server: ChatServer, data: bytes) -> bytes:
    """Send raw bytes, read until the server closes the connection."""
    assert server.port is not None
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_chat_completion_and_models_with_the_openai_client() -> None:
    with ChatServer(responder=lambda body: "one two three four") as server:
        client = _client(server)
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "a b"}], max_completion_tokens=3)
        assert reply.choices[0].message.content == "one two three"
        assert reply.choices[0].finish_reason == "length"
        assert reply.model == "m"
        assert reply.usage is not None
        assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (2, 3)
        assert [m.id for m in client.models.list()] == ["evalrun-echo"]
        assert server.requests_seen == 1


def test_validation_errors_are_openai_shaped() -> None:
    with ChatServer() as server:
        client = _client(server)
        with pytest.raises(openai.BadRequestError, match="temperature"):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x"}], temperature=3)
        with pytest.raises(openai.BadRequestError, match="messages"):
            client.chat.completions.create(model="m", messages=[])
        with pytest.raises(openai.NotFoundError):
            client.moderations.create(input="x")
        # completions are served (base models), with the prompt as the responder's text
        assert client.completions.create(model="m", prompt="x").choices[0].text == "echo: x"
        with pytest.raises(openai.BadRequestError, match="prompt must be a string"):
            client.completions.create(model="m", prompt=[1, 2])


def test_keep_alive_serves_several_requests_on_one_connection() -> None:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    one = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    last = one.replace(b"Host: x\r\n", b"Host: x\r\nConnection: close\r\n")
    with ChatServer() as server:
        data = _raw(server, one + one + last)
    assert data.count(b"HTTP/1.1 200 OK") == 3
    assert data.count(b'"content": "echo: hi"') == 3


def test_hundred_concurrent_requests_are_not_serialised() -> None:
    """Seen as requests in flight together on the server, not by timing the burst (a loaded
    machine makes wall-clock assertions flaky; the benchmarks measure speed)."""
    async def burst(server: ChatServer) -> None:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=120)
        await asyncio.gather(*[
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": str(i)}])
            for i in range(100)])
        await client.close()

    with ChatServer(latency_s=0.5) as server:
        asyncio.run(burst(server))
        assert server.max_in_flight >= 50
        assert server.requests_seen == 100


def test_fault_plan_first_k_limit_and_match() -> None:
    plan = FaultPlan([
        FaultRule(Fault.error(503), first=2, match="alpha"),
        FaultRule(Fault.error(429, retry_after="3"), limit=1),
    ])
    with ChatServer(faults=plan) as server:
        client = _client(server)
        for _ in range(2):
            with pytest.raises(openai.InternalServerError):
                client.chat.completions.create(model="m", messages=[{"role": "user", "content": "alpha"}])
        with pytest.raises(openai.RateLimitError) as info:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "alpha"}])
        assert info.value.response.headers["retry-after"] == "3"
        ok = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "alpha"}])
        assert ok.choices[0].message.content == "echo: alpha"
        assert [r.attempt for r in server.attempts("alpha")] == [1, 2, 3, 4]
        assert [r.status for r in server.records()] == [503, 503, 429, 200]


def test_fault_fraction_is_seeded_and_independent_of_order() -> None:
    def chosen(seed: int, order: list[int]) -> set[int]:
        plan = FaultPlan([FaultRule(Fault.error(500), fraction=0.3)], seed=seed)
        return {i for i in order if plan.decide({}, f"prompt {i}", 1) is not None}

    forward = chosen(5, list(range(1000)))
    assert forward == chosen(5, list(reversed(range(1000))))
    assert forward != chosen(6, list(range(1000)))
    assert 240 <= len(forward) <= 360


def test_fault_rule_validation_and_loopback_only() -> None:
    with pytest.raises(ValueError):
        FaultRule(Fault.error(500), first=1, fraction=0.5)
    with pytest.raises(ValueError):
        Fault.error(200)
    with pytest.raises(ValueError, match="loopback"):
        ChatServer(host="0.0.0.0")


def test_stop_ends_hanging_requests_and_releases_the_port() -> None:
    plan = FaultPlan([FaultRule(Fault.hang(hang_s=60))])
    server = ChatServer(faults=plan).start()
    port = server.port
    assert port is not None
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: "
                 + str(len(body)).encode() + b"\r\n\r\n" + body)
    deadline = time.monotonic() + 5
    while server.in_flight == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 3.0
    assert sock.recv(100) == b""  # closed without a response
    sock.close()
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))


def test_echo_responder_is_deterministic() -> None:
    body = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]}
    assert echo_responder(body) == echo_responder(dict(body)) == "echo: q"


def test_cli_serves_until_interrupted() -> None:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "evalrun.testing.chat_server", "--port", "0", "--latency-ms", "1",
         "--served-model", "cli-model"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, line
        base_url = line.split()[4]
        client = openai.OpenAI(base_url=base_url, api_key="local", max_retries=0, timeout=5)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
        assert reply.model == "cli-model"
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0
        assert "served 1 chat requests" in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
