"""API keys go only where the user sends them: a project's endpoints and key variables need trust.

Every key here is fake, and every server is a fake on 127.0.0.1 (tests/fakeapi.py): `api` is
the legitimate endpoint the user chose with ANTHROPIC_BASE_URL, `attacker` one a project names.
"""

from __future__ import annotations

import pytest
from fakeapi import FakeAPI

from moss.llm import resolve_provider

SECRET = "sk-test-SECRET"
TOKEN = "ghp-test-TOKEN"
ASK = 'print(moss.llm.chat{prompt = "hi"}.text)\nprint(moss.llm.chat{prompt = "again"}.text)\n'


@pytest.fixture
def attacker():
    with FakeAPI(keyless=True) as server:
        yield server


def user_env(api) -> dict:
    return {"ANTHROPIC_API_KEY": SECRET, "ANTHROPIC_BASE_URL": api.anthropic_url, "GH_TOKEN": TOKEN}


def key_of(request) -> str | None:
    """The key a request carried (the SDK sends x-api-key or a bearer token)."""
    h = request.headers
    return h.get("x-api-key") or (h.get("authorization") or "").removeprefix("Bearer ") or None


def sent_anywhere(servers, needle: str) -> bool:
    return any(needle in str(r.headers) or needle in str(r.body) for s in servers for r in s.requests)


@pytest.fixture
def asker(project):
    """A user script (it runs whatever the project's trust) that makes two LLM calls."""
    project.user_file("scripts/ask.lua", ASK)
    return project


def test_key_never_reaches_an_untrusted_project_endpoint(asker, api, attacker):
    asker.trusted = False
    asker.write(".moss/config.toml", f'[llm.providers.anthropic]\nbase_url = "{attacker.anthropic_url}"\n')
    api.push("hello", "hello again")
    r = asker.moss("@ask", env=user_env(api), input="")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "hello\nhello again\n"
    assert attacker.requests == []
    assert [key_of(q) for q in api.requests] == [SECRET, SECRET]
    assert attacker.anthropic_url in r.stderr and "moss trust" in r.stderr  # said what it ignored


def test_trusted_project_endpoint_is_used_and_announced_once(asker, api, attacker):
    asker.write(".moss/config.toml", f'[llm.providers.anthropic]\nbase_url = "{attacker.anthropic_url}"\n')
    attacker.push("from the project's server", "twice")
    r = asker.moss("@ask", env=user_env(api))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "from the project's server\ntwice\n"
    assert api.requests == [] and len(attacker.requests) == 2
    announced = [ln for ln in r.stderr.splitlines() if attacker.anthropic_url in ln]
    assert len(announced) == 1 and "ANTHROPIC_API_KEY" in announced[0]


@pytest.mark.parametrize("config", [
    # a provider of the project's own that reads any variable it names
    '[llm]\nprovider = "evil"\nmodel = "m"\n[llm.providers.evil]\napi = "anthropic"\n'
    'base_url = "{url}"\napi_key_env = "GH_TOKEN"\n',
    # the official provider, told to send another variable as its key
    '[llm.providers.anthropic]\napi_key_env = "GH_TOKEN"\n',
])
def test_project_key_variable_is_never_read_untrusted(asker, api, attacker, config):
    asker.trusted = False
    asker.write(".moss/config.toml", config.format(url=attacker.anthropic_url))
    api.push("hello", "hello again")
    r = asker.moss("@ask", env=user_env(api), input="")
    assert r.returncode == 0, r.stderr
    assert attacker.requests == []
    assert not sent_anywhere([api, attacker], TOKEN)
    assert [key_of(q) for q in api.requests] == [SECRET, SECRET]
    assert "GH_TOKEN" in r.stderr  # listed among what was ignored


def test_users_own_endpoints_are_announced(asker, api):
    api.push("one", "two")
    r = asker.moss("@ask", env=user_env(api))
    assert r.returncode == 0, r.stderr
    assert [ln for ln in r.stderr.splitlines() if api.anthropic_url in ln][0].count("ANTHROPIC_BASE_URL") == 1
    with FakeAPI() as other:
        other.push("three", "four")
        r = asker.moss("@ask", "--base-url", other.anthropic_url, env=user_env(api))
        assert r.returncode == 0 and r.stdout == "three\nfour\n", r.stderr
        assert other.anthropic_url in r.stderr and len(other.requests) == 2


def test_resolve_provider_refuses_untrusted_project_endpoints_itself():
    """The provenance check holds for any caller, not only for the filtered config of a run."""
    config = {"llm": {"providers": {"anthropic": {"base_url": "http://attacker.invalid", "api_key_env": "GH_TOKEN"}}}}
    keys = {"llm.providers.anthropic.base_url", "llm.providers.anthropic.api_key_env"}
    env = {"ANTHROPIC_API_KEY": SECRET, "GH_TOKEN": TOKEN}
    p = resolve_provider(config, {"provider": "anthropic"}, env, project_keys=keys, project_trusted=False)
    assert p.base_url == "https://api.anthropic.com" and p.api_key == SECRET and p.base_url_source is None
    p = resolve_provider(config, {"provider": "anthropic"}, env, project_keys=keys, project_trusted=True)
    assert p.base_url == "http://attacker.invalid" and p.api_key == TOKEN
    assert p.base_url_source == "the project's .moss/config.toml"
    p = resolve_provider(config, {"provider": "anthropic"}, env)  # no provenance: the caller's own config
    assert p.base_url_source == "your config"
