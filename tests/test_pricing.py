"""Costs that stay true: genai-prices' data, the config's [llm.pricing] over it, and no guess
for a model that neither knows."""

from __future__ import annotations

import subprocess
import sys

import pytest

from moss.llm import LLM, cost_of, price_for

M = 1_000_000
K = 100_000  # below every long-context tier


def usage(input=0, output=0, cache_read=0, cache_write=0):
    return {"input_tokens": input, "output_tokens": output, "cache_read_tokens": cache_read,
            "cache_write_tokens": cache_write}


def test_known_models_are_priced_by_genai_prices():
    # Published list prices (USD per million tokens): Claude Sonnet 4.5 $3 in / $15 out,
    # cache reads $0.30, 5-minute cache writes $3.75; GPT-4o $2.50 / $10, cached input $1.25.
    assert cost_of(usage(input=K), "claude-sonnet-4-5") == pytest.approx(0.3)
    assert cost_of(usage(output=M), "claude-sonnet-4-5-20250929", provider="anthropic") == pytest.approx(15.0)
    assert cost_of(usage(cache_read=K), "claude-sonnet-4-5") == pytest.approx(0.030)
    assert cost_of(usage(cache_write=K), "claude-sonnet-4-5") == pytest.approx(0.375)
    assert cost_of(usage(input=M, cache_read=M), "gpt-4o", provider="openai") == pytest.approx(2.5 + 1.25)
    assert price_for("claude-sonnet-4-5") == {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}
    # A vendor-prefixed name through OpenRouter.
    assert cost_of(usage(input=K), "anthropic/claude-sonnet-4.5", provider="openrouter") == pytest.approx(0.3)


def test_long_prompt_tier():
    """Sonnet 4.5 bills a prompt over 200K tokens at the long-context rate ($6 per million
    input): the cost is of the whole call, not a flat per-token guess."""
    short = cost_of(usage(input=100_000), "claude-sonnet-4-5")
    long = cost_of(usage(input=300_000), "claude-sonnet-4-5")
    assert short == pytest.approx(0.3)
    assert long > 3 * short


def test_an_override_wins_and_fills_in_from_genai_prices():
    config = {"llm": {"pricing": {"gpt-4o": {"output": 99}}}}
    p = price_for("gpt-4o", config)
    assert p["output"] == 99.0 and p["input"] == pytest.approx(2.5) and p["cache_read"] == pytest.approx(1.25)
    assert cost_of(usage(output=M), "gpt-4o", config) == pytest.approx(99.0)
    mine = {"llm": {"pricing": {"My-Finetune": {"input": 1, "output": 2}}}}
    assert price_for("my-finetune", mine) == {"input": 1.0, "output": 2.0, "cache_read": 1.0, "cache_write": 1.0}
    assert cost_of(usage(input=M, output=M, cache_read=M), "my-finetune", mine) == pytest.approx(4.0)


def test_unknown_model_is_cost_unknown_not_a_guess():
    assert price_for("my-finetune") is None
    assert cost_of(usage(input=M, output=M), "my-finetune") is None
    assert cost_of(usage(input=M), "totally-new-model-9000", provider="openai") is None


def test_session_totals_say_cost_unknown(tmp_path):
    script = tmp_path / "s.json"
    script.write_text('[{"text": "hi", "model": "my-finetune"}]')
    llm = LLM({}, {"script": str(script)}, env={})
    result = llm.chat({"prompt": "hello"})
    assert result["usage"]["cost_usd"] is None
    assert llm.usage["cost_known"] is False and llm.usage["unpriced_calls"] == 1


def test_local_servers_cost_nothing_even_for_a_model_a_cloud_sells(api):
    """gpt-4o served by a local server is your own hardware: no cloud price."""
    api.push("x")
    llm = LLM({"llm": {"providers": {"ollama": {"base_url": api.openai_url}}}},
              {"provider": "ollama", "model": "gpt-4o"}, env={})
    assert llm.chat({"prompt": "hi"})["usage"]["cost_usd"] == 0.0


def test_genai_prices_stays_off_the_start_up_path():
    """Importing moss.llm (which every LLM script does) must not import genai-prices: it is
    loaded in a background thread once an LLM is set up."""
    code = "import sys, moss.llm; print('genai_prices' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
