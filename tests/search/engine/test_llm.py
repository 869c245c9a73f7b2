import time

import pytest

from search.config import LLMConfig
from search.config.sections import LLMModel
from search.engine.llm import LLMClient, LLMError, LLMPool, call_cost
from tests.search.fake_llm import FakeLLM


def config(url, **kw):
    base = dict(base_url=url, models=[LLMModel(name="m1", usd_per_mtok_in=1.0, usd_per_mtok_out=4.0)],
                timeout_s=5, max_retries=2)
    base.update(kw)
    return LLMConfig(**base)


MESSAGES = [{"role": "user", "content": "x" * 400}]


def test_completion_tokens_and_cost():
    with FakeLLM([("ok", "hello world!")]) as server:
        client = LLMClient(config(server.url), environ={"OPENAI_API_KEY": "sk-abc"})
        reply = client.complete(MESSAGES, client.config.models[0])
    assert reply.text == "hello world!" and reply.model == "m1"
    assert reply.prompt_tokens == 100 and reply.completion_tokens == 3
    assert reply.cost_usd == pytest.approx((100 * 1.0 + 3 * 4.0) / 1e6)
    assert server.requests[0]["auth"] == "Bearer sk-abc"
    assert server.requests[0]["body"]["model"] == "m1"


def test_api_key_comes_from_the_configured_variable():
    with FakeLLM([("ok", "a")]) as server:
        client = LLMClient(config(server.url, api_key_env="MY_KEY"), environ={"MY_KEY": "k2", "OPENAI_API_KEY": "no"})
        client.complete(MESSAGES, client.config.models[0])
    assert server.requests[0]["auth"] == "Bearer k2"


@pytest.mark.parametrize("failure", [("status", 429), ("status", 500), ("status", 503), ("close",)])
def test_retries_transient_failures(failure):
    with FakeLLM([failure, ("ok", "after retry")]) as server:
        client = LLMClient(config(server.url))
        reply = client.complete(MESSAGES, client.config.models[0])
    assert reply.text == "after retry" and len(server.requests) == 2


def test_gives_up_after_retries_with_a_clear_error():
    with FakeLLM(default=("status", 500)) as server:
        client = LLMClient(config(server.url, max_retries=1))
        with pytest.raises(LLMError, match="HTTP 500"):
            client.complete(MESSAGES, client.config.models[0])
    assert len(server.requests) == 2


def test_client_errors_are_not_retried():
    with FakeLLM(default=("status", 400)) as server:
        client = LLMClient(config(server.url))
        with pytest.raises(LLMError, match="HTTP 400"):
            client.complete(MESSAGES, client.config.models[0])
    assert len(server.requests) == 1


def test_timeout_is_reported():
    with FakeLLM(default=("sleep", 3, "late")) as server:
        client = LLMClient(config(server.url, timeout_s=0.5, max_retries=0))
        with pytest.raises(LLMError, match="timed out"):
            client.complete(MESSAGES, client.config.models[0])


def test_unreachable_endpoint():
    client = LLMClient(config("http://127.0.0.1:9/v1", max_retries=0, timeout_s=2))
    with pytest.raises(LLMError, match="cannot reach"):
        client.complete(MESSAGES, client.config.models[0])


def test_empty_completion_is_an_error():
    with FakeLLM([("ok", "   ")]) as server:
        client = LLMClient(config(server.url))
        with pytest.raises(LLMError, match="empty"):
            client.complete(MESSAGES, client.config.models[0])


def test_pool_limits_concurrency():
    with FakeLLM(default=("sleep", 0.3, "ok")) as server:
        pool = LLMPool(LLMClient(config(server.url, concurrency=2)))
        futures = [pool.submit(MESSAGES, pool.client.config.models[0]) for _ in range(4)]
        time.sleep(0.1)
        assert pool.inflight == 4  # submitted, two waiting for a worker thread
        began = time.monotonic()
        assert [f.result(timeout=10).text for f in futures] == ["ok"] * 4
        assert time.monotonic() - began >= 0.35  # two rounds of 0.3 s, not one
        assert pool.free_slots == 2
        pool.shutdown()


def test_cost_formula():
    assert call_cost(LLMModel(name="x", usd_per_mtok_in=2, usd_per_mtok_out=10), 1_000_000, 500_000) == 7.0
