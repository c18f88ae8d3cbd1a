"""moss.llm through the real anthropic / openai SDKs against tests/fakeapi.py."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from fakeapi import FakeAPI, cut, error, last_user_text, slow, system_text
from moss.errors import MossError
from moss.llm import LLM

PROVIDERS = ["anthropic", "openai"]


@pytest.fixture
def api():
    with FakeAPI() as server:
        yield server


class Events(list):
    def __call__(self, name, fields):
        json.dumps(fields)  # every event must be loggable as JSON
        self.append((name, fields))

    def names(self):
        return [n for n, _ in self]

    def of(self, name):
        return [f for n, f in self if n == name]


def make(api, provider, config=None, stream=False, **options):
    events, deltas = Events(), []
    llm = LLM(config or {}, {"provider": provider, **options}, env=api.env(), on_event=events,
              stream=deltas.append if stream else None)
    return llm, events, deltas


def ask(text, system="You are terse."):
    return {"system": system, "messages": [{"role": "user", "content": text}], "max_tokens": 200}


def echo(body):
    return f"[{system_text(body)}] you said: {last_user_text(body)}"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_same_request_same_text_everywhere(api, provider, stream):
    api.push(echo)
    llm, events, deltas = make(api, provider, stream=stream)
    result = llm.chat(ask("What is the capital of France?"))
    assert result["text"] == "[You are terse.] you said: What is the capital of France?"
    assert result["stop_reason"] == "end_turn"
    assert result["provider"] == provider
    assert result["usage"]["output_tokens"] > 0 and result["usage"]["input_tokens"] > 0
    if stream:
        assert len(deltas) > 3 and "".join(deltas) == result["text"]
    else:
        assert deltas == []
    assert events.names() == ["llm_request", "llm_attempt", "llm_response"]
    body = api.requests[0].body
    assert bool(body.get("stream")) == stream
    assert body["model"] == result["model"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stop_reasons_normalised(api, provider):
    api.push("one two three four five six seven eight nine ten " * 10, "alpha beta STOP gamma")
    llm, _, _ = make(api, provider, model="gpt-4.1" if provider == "openai" else None)
    long = llm.chat({**ask("count"), "max_tokens": 5})
    assert long["stop_reason"] == "max_tokens" and len(long["text"]) <= 20
    stopped = llm.chat({**ask("greek"), "stop": ["STOP"]})
    assert stopped["text"] == "alpha beta "
    # The OpenAI API does not tell a stop sequence from a natural end (gpt-4.1 takes `stop`).
    assert stopped["stop_reason"] == ("stop_sequence" if provider == "anthropic" else "end_turn")


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_is_retried_after_the_server_delay(api, provider, stream):
    api.push(error(429, retry_after_ms=1), "fine now")
    llm, events, _ = make(api, provider, stream=stream)
    assert llm.chat(ask("hi"))["text"] == "fine now"
    assert events.names() == ["llm_request", "llm_attempt", "llm_retry", "llm_attempt", "llm_response"]
    retry = events.of("llm_retry")[0]
    assert retry["status"] == 429 and retry["delay"] == 0.001 and retry["attempt"] == 1
    assert events.of("llm_response")[0]["attempts"] == 2
    assert len(api.requests) == 2


def test_retry_after_seconds_header_is_honoured(api):
    api.push(error(503, retry_after=0.05), "ok")
    llm, events, _ = make(api, "anthropic")
    assert llm.chat(ask("hi"))["text"] == "ok"
    assert events.of("llm_retry")[0]["delay"] == 0.05


@pytest.mark.parametrize("provider", PROVIDERS)
def test_500_three_times_is_a_clear_error(api, provider):
    api.push(*[error(500, "database on fire", retry_after_ms=1)] * 3, "never reached")
    llm, events, _ = make(api, provider)
    with pytest.raises(MossError) as e:
        llm.chat(ask("hi"))
    assert e.value.kind == "llm"
    assert "server error (500)" in e.value.message and "3 attempts" in e.value.message
    assert "database on fire" in e.value.message
    assert [f["attempt"] for f in events.of("llm_attempt")] == [1, 2, 3]
    assert events.of("llm_error")[0]["status"] == 500
    assert len(api.requests) == 3


def test_max_retries_is_configurable(api):
    api.push(error(500, retry_after_ms=1), "ok")
    llm, events, _ = make(api, "openai", config={"llm": {"max_retries": 0}})
    with pytest.raises(MossError, match="1 attempt"):
        llm.chat(ask("hi"))
    assert len(api.requests) == 1


@pytest.mark.parametrize("provider,var", [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")])
def test_rejected_key_names_the_variable(provider, var):
    with FakeAPI(api_key="the-real-key") as server:  # env() carries "test-key"
        llm = LLM({}, {"provider": provider}, env=server.env())
        with pytest.raises(MossError) as e:
            llm.chat(ask("hi"))
        assert e.value.kind == "config"
        assert var in e.value.message and "401" in e.value.message
        assert len(server.requests) == 1  # not retried


def test_forbidden_names_the_variable(api):
    api.push(error(403, "not allowed to use this model"))
    llm, _, _ = make(api, "anthropic")
    with pytest.raises(MossError, match="ANTHROPIC_API_KEY") as e:
        llm.chat(ask("hi"))
    assert "403" in e.value.message and "not allowed to use this model" in e.value.message


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cut_stream_is_retried_as_a_whole(api, provider):
    full = "The quick brown fox jumps over the lazy dog."
    api.push(cut(full, after=3), full)
    llm, events, deltas = make(api, provider, stream=True)
    result = llm.chat(ask("fox?"))
    assert result["text"] == full
    retry = events.of("llm_retry")[0]
    assert retry["reason"] == "cut" and retry["streamed_chars"] == len("The quick brown ")
    assert "".join(deltas) == "The quick brown " + full  # the UI saw the discarded start, then the answer


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cut_stream_twice_is_a_clear_error(api, provider):
    api.push(cut("partial answer here", after=1), cut("partial answer here", after=2), "never reached")
    llm, events, _ = make(api, provider, stream=True)
    with pytest.raises(MossError) as e:
        llm.chat(ask("hi"))
    assert e.value.kind == "llm"
    assert "cut off before it finished" in e.value.message and "2 attempts" in e.value.message
    assert len(api.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_slow_answer_beyond_the_timeout(api, provider):
    api.push(slow("too late", delay=3))
    llm, events, _ = make(api, provider, config={"llm": {"timeout": 0.3, "max_retries": 0}})
    t0 = time.monotonic()
    with pytest.raises(MossError) as e:
        llm.chat(ask("hi"))
    assert time.monotonic() - t0 < 2
    assert e.value.kind == "timeout"
    assert "within 0.3 s" in e.value.message and "--timeout" in e.value.message


def test_a_stalled_stream_times_out_and_the_retry_succeeds(api):
    api.push(slow("a b c d e", chunk_delay=2), "recovered")
    llm, events, deltas = make(api, "openai", stream=True, timeout=0.3)
    assert llm.chat(ask("hi"))["text"] == "recovered"
    assert events.of("llm_retry")[0]["reason"] == "timeout"


def test_unreachable_server_says_so():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nobody listens there
    env = {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    llm = LLM({"llm": {"max_retries": 0}}, {}, env=env)
    with pytest.raises(MossError) as e:
        llm.chat(ask("hi"))
    assert f"cannot reach http://127.0.0.1:{port}/v1 : is the server running?" in e.value.message


def test_anthropic_prompt_cache_reports_reads_on_the_second_call(api):
    system = "You are a careful code reviewer. " * 40
    api.push("first", "second")
    llm, _, _ = make(api, "anthropic")
    first = llm.chat(ask("review a.py", system=system))
    second = llm.chat(ask("review b.py", system=system))
    assert api.requests[0].body["system"] == [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]
    assert first["usage"]["cache_write_tokens"] > 0 and first["usage"]["cache_read_tokens"] == 0
    assert second["usage"]["cache_read_tokens"] == first["usage"]["cache_write_tokens"]
    assert second["usage"]["input_tokens"] < first["usage"]["cache_write_tokens"]
    assert llm.usage["cache_read_tokens"] == second["usage"]["cache_read_tokens"]
    # Cached reads are cheaper than fresh input.
    assert second["usage"]["cost_usd"] < first["usage"]["cost_usd"]


def test_prompt_cache_can_be_turned_off(api):
    api.push("x")
    llm, _, _ = make(api, "anthropic", config={"llm": {"prompt_cache": False}})
    llm.chat(ask("hi"))
    assert "cache_control" not in json.dumps(api.requests[0].body)


def test_conversation_marks_its_first_user_turn_for_caching(api):
    api.push("x")
    llm, _, _ = make(api, "anthropic")
    llm.chat({"system": "s", "messages": [{"role": "user", "content": "task"},
                                          {"role": "assistant", "content": "ok"},
                                          {"role": "user", "content": "more"}]})
    msgs = api.requests[0].body["messages"]
    assert msgs[0]["content"] == [{"type": "text", "text": "task", "cache_control": {"type": "ephemeral"}}]
    assert msgs[2]["content"] == "more"


def test_openai_cached_tokens_are_reported(api):
    system = "Long stable instructions. " * 20
    api.push("a", "b")
    llm, _, _ = make(api, "openai")
    llm.chat(ask("one", system=system))
    second = llm.chat(ask("two", system=system))
    assert second["usage"]["cache_read_tokens"] > 0


def test_session_usage_and_cost(api):
    api.push("a" * 40, "b" * 80)
    llm, _, _ = make(api, "anthropic", model="claude-sonnet-4-6", config={"llm": {"prompt_cache": False}})
    r1, r2 = llm.chat(ask("x")), llm.chat(ask("y"))
    totals = llm.usage
    assert totals["calls"] == 2
    assert totals["output_tokens"] == r1["usage"]["output_tokens"] + r2["usage"]["output_tokens"] == 11 + 21
    u = r1["usage"]
    assert u["cost_usd"] == pytest.approx((u["input_tokens"] * 3 + u["output_tokens"] * 15) / 1e6)
    assert totals["cost_usd"] == pytest.approx(r1["usage"]["cost_usd"] + r2["usage"]["cost_usd"])
    assert totals["cost_known"] is True


def test_unknown_model_has_unknown_cost_and_pricing_override(api):
    api.push("x", "y")
    llm, events, _ = make(api, "openai", model="my-finetune", max_cost=1.0)
    r = llm.chat(ask("hi"))
    assert r["usage"]["cost_usd"] is None
    assert llm.usage["cost_known"] is False and llm.usage["unpriced_calls"] == 1
    assert '[llm.pricing."my-finetune"]' in events.of("llm_warning")[0]["message"]
    priced = LLM({"llm": {"pricing": {"my-finetune": {"input": 1_000_000, "output": 2_000_000}}}},
                 {"provider": "openai", "model": "my-finetune"}, env=api.env())
    u = priced.chat(ask("hi"))["usage"]
    # Cached input is charged at the input price when the override gives no cache_read price.
    assert u["cache_read_tokens"] > 0
    assert u["cost_usd"] == pytest.approx((u["input_tokens"] + u["cache_read_tokens"]) * 1.0 + u["output_tokens"] * 2.0)


def test_token_budget_stops_the_next_call_before_sending(api):
    api.push("a fairly long answer that uses up the whole budget", "never sent")
    llm, events, _ = make(api, "anthropic", max_tokens=20)
    first = llm.chat(ask("hi"))  # crosses the limit: still returned whole
    assert first["text"] == "a fairly long answer that uses up the whole budget"
    assert "token budget spent" in llm.budget_reason()
    with pytest.raises(MossError) as e:
        llm.chat(ask("again"))
    assert e.value.kind == "budget"
    used = sum(llm.usage[k] for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"))
    assert f"token budget spent: {used} of 20 tokens" in e.value.message
    assert len(api.requests) == 1
    assert events[-1][0] == "llm_error" and events[-1][1]["kind"] == "budget"


def test_cost_budget_from_config(api):
    api.push("x" * 400, "never sent")
    llm, _, _ = make(api, "openai", model="gpt-4o", config={"llm": {"max_cost_usd": 0.0001}})
    assert llm.budget_reason() is None
    llm.chat(ask("hi"))
    with pytest.raises(MossError, match=r"cost budget spent: \$0\.00\d+ of \$0\.0001") as e:
        llm.chat(ask("again"))
    assert e.value.kind == "budget"
    assert len(api.requests) == 1


@pytest.mark.parametrize("provider,model,sent", [("anthropic", "claude-sonnet-4-6", True),
                                                 ("anthropic", "claude-sonnet-5-5", False),
                                                 ("openai", "gpt-4.1", True), ("openai", "gpt-6.2-sol", False)])
def test_temperature_only_where_the_model_takes_it(api, provider, model, sent):
    api.push("x")
    llm, events, _ = make(api, provider, model=model)
    llm.chat({**ask("hi"), "temperature": 0.2})
    assert ("temperature" in api.requests[0].body) == sent
    assert bool(events.of("llm_warning")) == (not sent)


def test_stop_sequence_kept_when_the_model_refuses_stop(api):
    api.push("first line\nEND\nmore")
    llm, _, _ = make(api, "openai", model="gpt-6.2-sol")
    result = llm.chat({**ask("hi"), "stop": ["END"]})
    assert "stop" not in api.requests[0].body
    assert result["text"] == "first line\n" and result["stop_reason"] == "stop_sequence"


def test_per_call_provider_and_model(api):
    api.push("from openai", "from anthropic")
    llm, _, _ = make(api, "anthropic")
    r1 = llm.chat({**ask("hi"), "provider": "openai", "model": "gpt-4o-mini"})
    r2 = llm.chat(ask("hi"))
    assert (r1["provider"], r1["model"]) == ("openai", "gpt-4o-mini")
    assert (r2["provider"], r2["model"]) == ("anthropic", "claude-sonnet-5-5")
    assert [r.path for r in api.requests] == ["/v1/chat/completions", "/v1/messages"]


def test_preset_base_url_override_reaches_the_server():
    with FakeAPI(keyless=True) as server:
        server.push("hello from the local model")
        config = {"llm": {"provider": "ollama", "providers": {"ollama": {"base_url": server.openai_url}}}}
        llm = LLM(config, {}, env={})
        result = llm.chat(ask("hi"))
        assert result["text"] == "hello from the local model"
        assert result["provider"] == "ollama" and result["usage"]["cost_usd"] == 0.0
        assert server.requests[0].body["model"] == "llama3.2"
        assert server.requests[0].body["max_tokens"] == 200


def test_subprocess_uses_the_environment(api):
    api.push("answer from a child process")
    code = ("from moss.llm import LLM; import json; "
            "print(json.dumps(LLM({}, {}).chat({'messages': [{'role': 'user', 'content': 'hi'}]})))")
    env = {**{k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}, **api.env()}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["text"] == "answer from a child process" and result["provider"] == "anthropic"
    assert api.requests[0].headers["authorization"] == "Bearer test-key"
