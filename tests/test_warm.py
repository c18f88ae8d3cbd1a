"""The SDK client made ahead of the first call (host/llm/warm.py) is handed over only for
exactly the provider, endpoint, key and timeout the call uses, and only once."""

from __future__ import annotations

from moss.llm import LLM, warm
from moss.llm.providers import resolve_provider


def _provider(key="k-1", url="http://127.0.0.1:9"):
    return resolve_provider({}, {"provider": "anthropic"}, {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": url})


def test_prepared_client_only_for_the_same_key_and_endpoint():
    p = _provider()
    warm.start(p, 300.0)
    assert warm.take(_provider(key="k-2"), 300.0) is None  # another key: never this client
    assert warm.take(_provider(url="http://127.0.0.1:10"), 300.0) is None
    assert warm.take(p, 120.0) is None  # another timeout
    client = warm.take(p, 300.0)
    assert client is not None and client.api_key == "k-1"
    assert warm.take(p, 300.0) is None  # handed over once
    assert warm.settled.is_set()


def test_offline_providers_prepare_nothing():
    script = resolve_provider({}, {"provider": "script"}, {})
    warm.start(script, 300.0)
    assert warm.settled.is_set() and warm.take(script, 300.0) is None


def test_llm_uses_the_client_prepared_for_its_provider():
    env = {"ANTHROPIC_API_KEY": "k-3", "ANTHROPIC_BASE_URL": "http://127.0.0.1:11"}
    llm = LLM({}, {"provider": "anthropic", "timeout": 42}, env=env)
    p = llm.provider()
    llm.prepare(p)
    warm.settled.wait(30)
    client = llm._client(p)
    assert client.api_key == "k-3" and str(client.base_url).startswith("http://127.0.0.1:11")
    assert llm._client(p) is client
    assert not warm._jobs  # the prepared one was taken, none is left over
    llm.prepare(p)  # it exists: nothing more is made
    assert not warm._jobs and warm.settled.is_set()
