"""The ``openai:`` provider: the real ``openai`` client over real HTTP against ChatServer."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
from email.utils import formatdate

import pytest

from evalrun._util.errors import EvalrunError, SpecError
from evalrun.model.generation import Generation, GenerationRequest, GenParams, Prompt
from evalrun.model.providers import check_model, make_provider, parse_model
from evalrun.plugins.providers.openai_chat import (
    AdaptiveLimiter,
    OpenAIProvider,
    parse_retry_after,
)
from evalrun.testing import ChatServer, Fault, FaultPlan, FaultRule

CANARY = "sk-test-canary-key-123"


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY",
                 "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


def make_request(i: int, *, watermark: str = "none", system: str | None = None,
                 max_tokens: int = 64, temperature: float = 0.0) -> GenerationRequest:
    return GenerationRequest(
        gen_key=f"g{i}", pack="unit", case={"id": f"case-{i}"},
        prompt=Prompt(system, f"question #{i}. please answer"),
        params=GenParams(temperature=temperature, max_tokens=max_tokens, seed=7),
        repetition=0, watermark=watermark)


def tag(i: int) -> str:
    """A substring matching exactly request ``i``'s prompt."""
    return f"#{i}."


class Collector:
    """A sink that records results and the thread each arrived on."""

    def __init__(self) -> None:
        self.results: dict[str, Generation] = {}
        self.threads: set[int] = set()
        self.order: list[str] = []

    def __call__(self, request: GenerationRequest, generation: Generation) -> None:
        assert request.gen_key not in self.results, "sink called twice for one request"
        self.results[request.gen_key] = generation
        self.order.append(request.gen_key)
        self.threads.add(threading.get_ident())


def provider_for(server: ChatServer, **kw: object) -> OpenAIProvider:
    settings: dict[str, object] = {"backoff_base_s": 0.01, "backoff_max_s": 0.05,
                                   "timeout_s": 5.0}
    settings.update(kw)
    return OpenAIProvider("gpt-test", spec="openai:gpt-test", base_url=server.base_url,
                          **settings)  # type: ignore[arg-type]


def run(provider: OpenAIProvider, requests: list[GenerationRequest]) -> Collector:
    sink = Collector()
    provider.generate(requests, sink)
    assert set(sink.results) == {r.gen_key for r in requests}
    return sink


# --------------------------------------------------------------------------- success path


def test_success_path_text_usage_model_latency() -> None:
    requests = [make_request(i, system="be brief") for i in range(3)]
    with ChatServer(latency_s=0.05, served_model="gpt-test-2024-07-18") as server:
        sink = run(provider_for(server), requests)
        bodies = {r.prompt: r.body for r in server.records()}
    for request in requests:
        g = sink.results[request.gen_key]
        assert g.error is None
        assert g.text == f"echo: {request.prompt.user}"
        assert g.tokens_in == len("be brief".split()) + len(request.prompt.user.split())
        assert g.tokens_out == len(g.text.split())
        assert g.served_model == "gpt-test-2024-07-18"
        assert g.retries == 0
        assert 50.0 <= g.latency_ms < 5000.0
        assert g.extra["latency_total_ms"] >= g.latency_ms
        assert g.extra["finish_reason"] == "stop"
        body = bodies[request.prompt.user]
        assert body["model"] == "gpt-test"
        assert body["messages"] == request.prompt.messages()
        assert body["max_tokens"] == 64 and body["temperature"] == 0.0
        assert body["seed"] == request.sample_seed
    assert threading.get_ident() in sink.threads  # asyncio.run on the caller's thread


def test_max_tokens_truncates_and_reports_length() -> None:
    request = make_request(0, max_tokens=2)
    with ChatServer() as server:
        g = run(provider_for(server), [request]).results["g0"]
    assert g.text == "echo: question"
    assert g.tokens_out == 2 and g.extra["finish_reason"] == "length"


def test_requests_overlap_up_to_the_concurrency_limit() -> None:
    """Concurrency is seen on the server (requests in flight together), not timed: wall-clock
    speed is the benchmarks' business (benchmarks/bench_api_concurrency.py)."""
    n, latency = 40, 0.2
    with ChatServer(latency_s=latency) as server:
        sink = run(provider_for(server, concurrency=16), [make_request(i) for i in range(n)])
        assert 8 <= server.max_in_flight <= 16
    assert all(g.error is None for g in sink.results.values())


def test_generate_works_inside_a_running_event_loop() -> None:
    with ChatServer() as server:
        provider = provider_for(server)
        sink = Collector()

        async def main() -> None:
            provider.generate([make_request(1), make_request(2)], sink)

        asyncio.run(main())
    assert sorted(sink.results) == ["g1", "g2"]
    assert all(g.error is None for g in sink.results.values())


def test_empty_request_list_sends_nothing() -> None:
    with ChatServer() as server:
        run(provider_for(server), [])
        assert server.requests_seen == 0


def test_sink_exception_propagates() -> None:
    def bad_sink(request: GenerationRequest, generation: Generation) -> None:
        raise RuntimeError("store is full")

    with ChatServer() as server:
        with pytest.raises(RuntimeError, match="store is full"):
            provider_for(server).generate([make_request(i) for i in range(4)], bad_sink)


# --------------------------------------------------------------------------- retries


def test_429_retry_after_is_honoured() -> None:
    plan = FaultPlan([FaultRule(Fault.error(429, retry_after="1"), first=1, match=tag(3))])
    requests = [make_request(i) for i in range(5)]
    with ChatServer(faults=plan) as server:
        sink = run(provider_for(server, backoff_base_s=0.001, backoff_max_s=5.0), requests)
        first, second = server.attempts(tag(3))
    g = sink.results["g3"]
    assert g.error is None and g.text == "echo: question #3. please answer"
    assert g.retries == 1
    assert first.status == 429 and second.status == 200
    assert second.started - first.finished >= 0.95
    assert g.extra["latency_total_ms"] >= 950.0 > g.latency_ms
    assert all(sink.results[f"g{i}"].retries == 0 for i in (0, 1, 2, 4))


def test_retry_after_is_capped_by_backoff_max() -> None:
    plan = FaultPlan([FaultRule(Fault.error(429, retry_after="100"), first=1)])
    with ChatServer(faults=plan) as server:
        t0 = time.monotonic()
        g = run(provider_for(server, backoff_max_s=0.2), [make_request(0)]).results["g0"]
    assert g.error is None and g.retries == 1
    assert time.monotonic() - t0 < 5.0


def test_retry_after_http_date_and_seconds() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("0.25") == 0.25
    assert parse_retry_after(formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30, abs=1)
    assert parse_retry_after(formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after("-5") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


@pytest.mark.parametrize("status", [500, 503])
def test_5xx_then_success(status: int) -> None:
    plan = FaultPlan([FaultRule(Fault.error(status), first=2, match=tag(1))])
    with ChatServer(faults=plan) as server:
        sink = run(provider_for(server), [make_request(0), make_request(1)])
        statuses = [r.status for r in server.attempts(tag(1))]
    assert statuses == [status, status, 200]
    assert sink.results["g1"].error is None and sink.results["g1"].retries == 2
    assert sink.results["g0"].retries == 0


def test_timeout_then_success() -> None:
    plan = FaultPlan([FaultRule(Fault.hang(), first=1)])
    with ChatServer(faults=plan) as server:
        g = run(provider_for(server, timeout_s=0.5), [make_request(0)]).results["g0"]
        attempts = server.attempts(tag(0))
    assert g.error is None and g.retries == 1
    assert [a.fault for a in attempts] == ["hang", None]


def test_dropped_connection_then_success() -> None:
    plan = FaultPlan([FaultRule(Fault.drop(), first=1)])
    with ChatServer(faults=plan) as server:
        g = run(provider_for(server), [make_request(0)]).results["g0"]
        assert len(server.attempts(tag(0))) == 2
    assert g.error is None and g.retries == 1


def test_permanent_500_is_stored_and_run_continues() -> None:
    plan = FaultPlan([FaultRule(Fault.error(500, message="kaput"), match=tag(2))])
    requests = [make_request(i) for i in range(6)]
    with ChatServer(faults=plan) as server:
        sink = run(provider_for(server, max_retries=2), requests)
        assert len(server.attempts(tag(2))) == 3
    failed = sink.results["g2"]
    assert failed.text is None and failed.retries == 2
    assert failed.error == "InternalServerError: HTTP 500: kaput after 2 retries"
    for i in (0, 1, 3, 4, 5):
        assert sink.results[f"g{i}"].error is None


@pytest.mark.parametrize("status,cls", [(400, "BadRequestError"), (401, "AuthenticationError"),
                                        (404, "NotFoundError")])
def test_other_4xx_fail_fast_with_server_message(status: int, cls: str) -> None:
    plan = FaultPlan([FaultRule(Fault.error(status, message="no such thing"))])
    with ChatServer(faults=plan) as server:
        g = run(provider_for(server), [make_request(0)]).results["g0"]
        assert server.requests_seen == 1
    assert g.text is None and g.retries == 0
    assert g.error is not None
    assert g.error.startswith(f"{cls}: HTTP {status}: no such thing")
    assert g.error.endswith("after 0 retries")


def test_retries_exhausted_on_timeouts() -> None:
    plan = FaultPlan([FaultRule(Fault.hang())])
    with ChatServer(faults=plan) as server:
        g = run(provider_for(server, timeout_s=0.3, max_retries=1), [make_request(0)]).results["g0"]
        assert len(server.attempts(tag(0))) == 2
    assert g.text is None and g.error is not None
    assert g.error.startswith("APITimeoutError: ") and g.error.endswith("after 1 retries")


def test_backoff_is_full_jitter_and_seeded() -> None:
    provider = OpenAIProvider("m", spec="openai:m", base_url="http://127.0.0.1:9/v1",
                              backoff_base_s=0.5, backoff_max_s=4.0)
    a = [provider._backoff(random.Random(11), k, None) for k in range(8)]
    b = [provider._backoff(random.Random(11), k, None) for k in range(8)]
    assert a == b
    for k, delay in enumerate(a):
        assert 0.0 <= delay <= min(4.0, 0.5 * 2**k)
    assert provider._backoff(random.Random(1), 0, 2.5) == 2.5
    assert provider._backoff(random.Random(1), 0, 99.0) == 4.0


# --------------------------------------------------------------------------- AIMD


def test_aimd_halves_the_limit_on_a_429_burst() -> None:
    requests = [make_request(i) for i in range(16)]
    with ChatServer(latency_s=0.05) as server:
        provider = provider_for(server, concurrency=8)
        run(provider, requests)
        assert server.max_in_flight == 8  # control: without 429s the limit is reached
        assert provider.last_stats["min_limit"] == 8
    # the 429s come back only after 0.3 s, so all eight first requests have reached the server
    # before any retry can (else a loaded machine lets a retry take one of the eight faults and
    # count as a second, later burst); retries are never faulted (first=1)
    plan = FaultPlan([FaultRule(Fault.error(429, retry_after="0.05", delay_s=0.3), first=1, limit=8)])
    with ChatServer(latency_s=0.05, faults=plan) as server:
        provider = provider_for(server, concurrency=8)
        sink = run(provider, requests)
        records = server.records()
    assert [r.status for r in records[:8]] == [429] * 8
    assert all(r.status == 200 for r in records[8:])
    assert max(r.in_flight for r in records[8:]) <= 7  # never back to 8 during this run
    assert max(r.in_flight for r in records[8:12]) <= 4  # right after the burst: halved
    stats = provider.last_stats
    assert stats["throttles"] == 8
    assert stats["min_limit"] == 4  # one burst halves once, not eight times
    assert 4 < stats["limit"] < 8  # additive increase after successes
    assert all(g.error is None for g in sink.results.values())


def test_adaptive_limiter_rules() -> None:
    async def scenario() -> None:
        limiter = AdaptiveLimiter(4)
        epoch = await limiter.acquire()
        limiter.on_throttle(epoch)
        limiter.on_throttle(epoch)  # same window: ignored
        assert limiter.limit == 2
        limiter.on_throttle(limiter.epoch)
        limiter.on_throttle(limiter.epoch)
        assert limiter.limit == 1 and limiter.min_limit == 1
        limiter.on_success()
        assert limiter.limit == 2
        limiter.on_success()
        limiter.on_success()
        assert limiter.limit == 3
        await limiter.release()

    asyncio.run(scenario())


# --------------------------------------------------------------------------- secrets, config


def test_api_key_never_leaks(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    plan = FaultPlan([
        FaultRule(Fault.error(401, message="Incorrect API key provided: {authorization}"),
                  match=tag(0)),
        FaultRule(Fault.error(500, message="upstream saw {authorization}"), match=tag(1)),
        FaultRule(Fault.drop(), match=tag(2)),
    ])
    with ChatServer(faults=plan) as server:
        provider = OpenAIProvider("gpt-test", spec="openai:gpt-test", base_url=server.base_url,
                                  api_key=CANARY, max_retries=1, backoff_base_s=0.01,
                                  backoff_max_s=0.02)
        sink = run(provider, [make_request(i) for i in range(4)])
        assert all(r.had_authorization for r in server.records())
    errors = [sink.results[f"g{i}"].error for i in range(3)]
    assert all(errors)
    assert errors[0] is not None and "Incorrect API key provided: Bearer ***" in errors[0]
    assert "OPENAI_API_KEY" in errors[0]
    assert sink.results["g3"].error is None
    haystack = " ".join([repr(sink.results), caplog.text, repr(provider),
                         repr(provider.settings()), repr(provider.last_stats)])
    assert CANARY not in haystack
    assert "canary-key" not in haystack


def test_api_key_from_environment_and_missing_key_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EvalrunError, match="OPENAI_API_KEY"):
        OpenAIProvider("gpt-test", spec="openai:gpt-test")
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    provider = OpenAIProvider("gpt-test", spec="openai:gpt-test")
    assert CANARY not in repr(provider)


def test_base_url_from_environment_with_placeholder_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with ChatServer() as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        provider = OpenAIProvider("gpt-test", spec="openai:gpt-test")
        g = run(provider, [make_request(0)]).results["g0"]
        assert server.records()[0].had_authorization
    assert g.error is None and provider.settings()["base_url"] == server.base_url


def test_bad_base_url_is_rejected() -> None:
    with pytest.raises(EvalrunError, match="not an http"):
        OpenAIProvider("m", spec="openai:m", base_url="127.0.0.1:8000")


def test_a_watermarked_request_is_sent_as_is_and_marked_as_watermarked_elsewhere() -> None:
    """The server is taken to watermark on its side: evalrun applies nothing, and says so."""
    with ChatServer() as server:
        sink = run(provider_for(server), [make_request(0), make_request(1, watermark="kgw:delta=2,gamma=0.5")])
        bodies = [r.body for r in server.records()]
    assert len(bodies) == 2 and all(set(b) >= {"model", "messages"} and "logit_bias" not in b for b in bodies)
    assert sink.results["g1"].extra["watermark_origin"] == "outside evalrun"
    assert "watermark_origin" not in sink.results["g0"].extra
    assert OpenAIProvider.supports_watermark is False


def test_completions_mode_sends_evalruns_plain_prompt_text() -> None:
    with ChatServer(chat_template=False) as server:
        provider = provider_for(server, api="completions")
        sink = run(provider, [make_request(0, system="Be brief.")])
        (record,) = server.records()
    assert record.body["prompt"] == "Be brief.\n\nquestion #0. please answer\n\n"
    request = make_request(0)
    assert "messages" not in record.body and record.body["seed"] == request.sample_seed
    assert record.body["max_tokens"] == 64
    generation = sink.results["g0"]
    assert generation.error is None and generation.text == "echo: " + record.body["prompt"]
    assert generation.extra["finish_reason"] == "stop"


def test_a_server_without_chat_template_fails_with_the_fix_in_one_line() -> None:
    with ChatServer(chat_template=False) as server:
        sink = run(provider_for(server), [make_request(0)])
        assert server.requests_seen == 1  # a 400 is not retried
    error = sink.results["g0"].error
    assert error is not None and "\n" not in error
    assert "chat template" in error and "--model 'openai:gpt-test?api=completions'" in error


def test_an_unknown_api_is_refused_by_name() -> None:
    with pytest.raises(EvalrunError, match="api='legacy' is not one of chat, completions"):
        check_model(parse_model("openai:m?api=legacy"))


def test_kind_reads_the_model_and_its_options_from_the_spec() -> None:
    provider = make_provider(parse_model("openai:gpt-4o-mini?max_retries=2"), base_url="http://127.0.0.1:9/v1",
                             concurrency=3, unrelated_option=True)
    assert provider.model == "gpt-4o-mini" and provider.spec == "openai:gpt-4o-mini"
    assert provider.concurrency == 3 and provider.base_url == "http://127.0.0.1:9/v1"
    assert provider.max_retries == 2
    with pytest.raises(SpecError, match="openai needs an argument"):
        make_provider(parse_model("openai"), base_url="http://127.0.0.1:9/v1")
