"""Provider selection, presets, request checking and pricing lookups (no network)."""

import pytest

from moss.errors import MossError
from moss.llm import LLM, PRESETS, price_for, resolve_provider
from moss.llm.models import rejects_temperature
from moss.llm.request import normalise_request


def test_nothing_configured_shows_the_three_ways():
    with pytest.raises(MossError) as e:
        resolve_provider({}, {}, {})
    assert e.value.kind == "config"
    msg = e.value.message
    assert "--provider" in msg  # 1. the flag
    assert "[llm]" in msg and 'provider = "anthropic"' in msg  # 2. the config file
    assert "export ANTHROPIC_API_KEY" in msg and "OPENAI_API_KEY" in msg  # 3. the environment


def test_llm_object_reports_missing_configuration_lazily_and_on_check():
    llm = LLM({"llm": {"detect": False}}, {}, env={})  # constructing never fails: a script may not use the LLM at all
    with pytest.raises(MossError, match="No LLM provider is configured") as e:
        llm.check()
    assert e.value.kind == "config"
    with pytest.raises(MossError, match="No LLM provider is configured"):
        llm.chat({"prompt": "hi"})


@pytest.mark.parametrize("env,expected", [
    ({"ANTHROPIC_API_KEY": "k"}, "anthropic"),
    ({"OPENAI_API_KEY": "k"}, "openai"),
    ({"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, "anthropic"),
    ({"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, "openai"),
    ({"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "anthropic"),
    ({"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": "k"}, "openai"),  # empty counts as unset
])
def test_environment_fallback(env, expected):
    assert resolve_provider({}, {}, env).name == expected


def test_base_url_variables_are_honoured_and_a_local_server_needs_no_key():
    p = resolve_provider({}, {}, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert (p.name, p.base_url, p.api_key) == ("openai", "http://127.0.0.1:9/v1", "no-key")
    p = resolve_provider({}, {}, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "ANTHROPIC_API_KEY": "sk"})
    assert (p.base_url, p.api_key) == ("http://127.0.0.1:9", "sk")


def test_flag_beats_config_beats_environment():
    env = {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}
    config = {"llm": {"provider": "openai", "model": "gpt-4.1"}}
    assert (resolve_provider(config, {}, env).name, resolve_provider(config, {}, env).model) == ("openai", "gpt-4.1")
    p = resolve_provider(config, {"provider": "anthropic"}, env)
    # The config's model belongs to the config's provider: not carried over to another one.
    assert (p.name, p.model) == ("anthropic", PRESETS["anthropic"]["model"])
    p = resolve_provider(config, {"model": "gpt-4o"}, env)
    assert (p.name, p.model) == ("openai", "gpt-4o")
    p = resolve_provider(config, {"provider": "anthropic", "model": "claude-haiku-4-5"}, env)
    assert (p.name, p.model) == ("anthropic", "claude-haiku-4-5")
    # A config model without a provider applies to whatever provider is picked.
    assert resolve_provider({"llm": {"model": "x-model"}}, {}, env).model == "x-model"


def test_preset_with_missing_key_names_the_variable():
    with pytest.raises(MossError) as e:
        resolve_provider({}, {"provider": "groq"}, {})
    assert e.value.kind == "config" and "GROQ_API_KEY is not set" in e.value.message
    p = resolve_provider({}, {"provider": "groq"}, {"GROQ_API_KEY": "g"})
    assert (p.base_url, p.api_key, p.key_env) == ("https://api.groq.com/openai/v1", "g", "GROQ_API_KEY")


def test_anthropic_without_key_or_base_url_names_the_variable():
    with pytest.raises(MossError, match="ANTHROPIC_API_KEY is not set"):
        resolve_provider({"llm": {"provider": "anthropic"}}, {}, {})


@pytest.mark.parametrize("name,url", [("ollama", "http://localhost:11434/v1"), ("llamacpp", "http://localhost:8080/v1")])
def test_local_presets_need_no_key(name, url):
    p = resolve_provider({}, {"provider": name}, {})
    assert (p.base_url, p.api_key, p.local) == (url, "no-key", True)


def test_gemini_uses_its_openai_compatible_endpoint():
    p = resolve_provider({}, {"provider": "google"}, {"GEMINI_API_KEY": "g"})
    assert p.name == "gemini" and p.api == "openai"
    assert p.base_url == "https://generativelanguage.googleapis.com/v1beta/openai/"


def test_config_overrides_a_preset():
    config = {"llm": {"provider": "ollama", "providers": {"ollama": {
        "base_url": "http://gpu-box:11434/v1", "model": "qwen3-coder"}}}}
    p = resolve_provider(config, {}, {})
    assert (p.base_url, p.model) == ("http://gpu-box:11434/v1", "qwen3-coder")
    config = {"llm": {"providers": {"openrouter": {"api_key_env": "MY_ROUTER_KEY"}}}}
    with pytest.raises(MossError, match="MY_ROUTER_KEY is not set"):
        resolve_provider(config, {"provider": "openrouter"}, {})
    assert resolve_provider(config, {"provider": "openrouter"}, {"MY_ROUTER_KEY": "r"}).api_key == "r"


def test_a_provider_defined_only_in_config():
    config = {"llm": {"provider": "work", "providers": {"work": {
        "base_url": "https://llm.example.com/v1", "api_key_env": "WORK_KEY", "model": "big"}}}}
    p = resolve_provider(config, {}, {"WORK_KEY": "w"})
    assert (p.name, p.api, p.base_url, p.model, p.api_key) == ("work", "openai", "https://llm.example.com/v1", "big", "w")
    proxy = {"llm": {"providers": {"proxy": {"api": "anthropic", "base_url": "http://127.0.0.1:9", "model": "m"}}}}
    assert resolve_provider(proxy, {"provider": "proxy"}, {}).api == "anthropic"


def test_unknown_provider_and_missing_model_are_explained():
    with pytest.raises(MossError, match="unknown LLM provider 'nope'.*ollama") as e:
        resolve_provider({}, {"provider": "nope"}, {})
    assert "[llm.providers.nope]" in e.value.message
    with pytest.raises(MossError, match="vllm.*has no default model.*--model"):
        resolve_provider({}, {"provider": "vllm"}, {})
    assert resolve_provider({}, {"provider": "vllm", "model": "Qwen/Qwen3-8B"}, {}).model == "Qwen/Qwen3-8B"


def test_replay_and_script_are_selected_by_their_file_options():
    assert resolve_provider({}, {"replay": "c.jsonl"}, {}).api == "replay"
    assert resolve_provider({}, {"script": "s.json"}, {}).api == "script"
    assert resolve_provider({}, {"provider": "script"}, {}).name == "script"


def test_every_preset_resolves_with_its_key():
    for name, preset in PRESETS.items():
        env = {preset["key_env"]: "k"} if preset.get("key_env") else {}
        options = {"provider": name, "model": "m"}
        p = resolve_provider({}, options, env)
        assert p.name == name and p.model == "m"


def test_request_checking():
    req = normalise_request({"system": "s", "messages": {1: {"role": "user", "content": "a"},
                                                         2: {"role": "assistant", "content": "b"},
                                                         3: {"role": "system", "content": "extra"},
                                                         4: {"role": "user", "content": "c"}},
                             "stop": "END", "max_tokens": 100.0}, 50)
    assert req["system"] == "s\n\nextra"  # system turns are lifted into the system prompt
    assert [m["role"] for m in req["messages"]] == ["user", "assistant", "user"]
    assert req["stop"] == ["END"] and req["max_tokens"] == 100
    assert normalise_request({"prompt": "hi"}, 50)["messages"] == [{"role": "user", "content": "hi"}]
    for bad, words in [({"messages": [{"role": "bot", "content": "x"}]}, "messages[0].role"),
                       ({"mesages": []}, "unknown field(s) mesages"),
                       ({"messages": []}, "at least one user message"),
                       ({"prompt": "x", "max_tokens": -1}, "max_tokens must be a positive integer"),
                       ({"prompt": "x", "quiet": "yes"}, "quiet must be true or false"),
                       ("hello", "expects a table")]:
        with pytest.raises(MossError, match=r".*") as e:
            normalise_request(bad, 50)
        assert e.value.kind == "usage" and words in e.value.message


def test_model_quirks():
    for model in ["claude-sonnet-5-5", "claude-opus-4-7", "claude-haiku-5-5", "claude-fable-5",
                  "anthropic/claude-sonnet-5.5", "gpt-6.2-sol", "o3", "gpt-5-mini"]:
        assert rejects_temperature(model), model
    for model in ["claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5", "claude-sonnet-4-5-20250929",
                  "claude-3-5-haiku-latest", "gpt-4.1", "llama3.2", "gpt-oss-120b", None]:
        assert not rejects_temperature(model), model


def test_price_lookup():
    assert price_for("claude-sonnet-4-5-20250929") == price_for("claude-sonnet-4-5")
    assert price_for("anthropic/claude-sonnet-5.5") == price_for("claude-sonnet-5-5")
    assert price_for("my-model") is None
    override = {"llm": {"pricing": {"my-model": {"input": 1, "output": 2}}}}
    assert price_for("my-model", override) == {"input": 1.0, "output": 2.0, "cache_read": 1.0, "cache_write": 1.0}
    changed = {"llm": {"pricing": {"gpt-4o": {"output": 99}}}}
    assert price_for("gpt-4o", changed)["output"] == 99.0 and price_for("gpt-4o", changed)["input"] == 2.5
