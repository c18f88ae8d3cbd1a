"""Prices in USD per million tokens, and the cost of one call.

Override or add a model in the config:

    [llm.pricing."my-model"]
    input = 3.0
    output = 15.0
    cache_read = 0.3
    cache_write = 3.75
"""

from __future__ import annotations

import re
from typing import Mapping

# (input, output, cache_read, cache_write), USD per million tokens, from the providers'
# published price lists (late 2026; check yours and override in the config). Anthropic
# cache_write is the 5-minute write; OpenAI bills cached input at cache_read, and only its
# GPT-6 models charge for cache writes. Long-prompt surcharges (Haiku 5.5 over 100K, GPT-6
# over 272K input tokens) are not modelled: the cost is then a lower bound.
PRICES: dict[str, tuple[float, float, float, float]] = {
    # Anthropic
    "claude-fable-5-1": (10.0, 50.0, 0.25, 12.50),
    "claude-mythos-5-1": (10.0, 50.0, 0.25, 12.50),
    "claude-fable-5": (10.0, 50.0, 1.00, 12.50),
    "claude-mythos-5": (10.0, 50.0, 1.00, 12.50),
    "claude-opus-5-5": (4.0, 20.0, 0.20, 5.00),
    "claude-opus-5": (5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-8": (5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-7": (5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-6": (5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-5": (5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-1": (15.0, 75.0, 1.50, 18.75),
    "claude-opus-4": (15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-5-5": (2.0, 10.0, 0.10, 2.50),
    "claude-sonnet-5": (2.0, 10.0, 0.20, 2.50),
    "claude-sonnet-4-6": (3.0, 15.0, 0.30, 3.75),
    "claude-sonnet-4-5": (3.0, 15.0, 0.30, 3.75),
    "claude-sonnet-4": (3.0, 15.0, 0.30, 3.75),
    "claude-3-7-sonnet": (3.0, 15.0, 0.30, 3.75),
    "claude-haiku-5-5": (0.10, 0.50, 0.01, 0.125),
    "claude-haiku-4-5": (1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": (0.80, 4.0, 0.08, 1.0),
    "claude-3-haiku": (0.25, 1.25, 0.03, 0.30),
    # OpenAI
    "gpt-6.2-astra": (8.0, 40.0, 0.40, 0.0),
    "gpt-6-astra": (10.0, 50.0, 1.00, 0.0),
    "gpt-6.2-sol": (2.0, 10.0, 0.10, 2.50),
    "gpt-6.1-sol": (2.0, 10.0, 0.10, 2.50),
    "gpt-6-sol": (2.0, 10.0, 0.20, 2.50),
    "gpt-6-luna": (0.10, 0.50, 0.01, 0.125),
    "gpt-5.6-sol": (4.0, 20.0, 0.40, 0.0),
    "gpt-5.6-terra": (2.0, 12.0, 0.20, 0.0),
    "gpt-5.6-luna": (0.20, 1.20, 0.02, 0.0),
    "gpt-5.5": (5.0, 30.0, 0.50, 0.0),
    "gpt-5.4": (2.50, 15.0, 0.25, 0.0),
    "gpt-5.2": (1.75, 14.0, 0.175, 0.0),
    "gpt-5.1": (1.25, 10.0, 0.125, 0.0),
    "gpt-5": (1.25, 10.0, 0.125, 0.0),
    "gpt-5-mini": (0.25, 2.0, 0.025, 0.0),
    "gpt-5-nano": (0.05, 0.40, 0.005, 0.0),
    "gpt-4.1": (2.0, 8.0, 0.50, 0.0),
    "gpt-4.1-mini": (0.40, 1.60, 0.10, 0.0),
    "gpt-4.1-nano": (0.10, 0.40, 0.025, 0.0),
    "gpt-4o": (2.50, 10.0, 1.25, 0.0),
    "gpt-4o-mini": (0.15, 0.60, 0.075, 0.0),
    "o3": (2.0, 8.0, 0.50, 0.0),
    "o4-mini": (1.10, 4.40, 0.275, 0.0),
}

FIELDS = ("input", "output", "cache_read", "cache_write")


def _candidates(model: str):
    """The model name, then without a vendor prefix and a date suffix ("-20250929")."""
    name = model.lower()
    yield name
    name = name.rsplit("/", 1)[-1]
    yield name
    name = re.sub(r"-(\d{8}|\d{4}-\d{2}-\d{2}|latest)$", "", name)
    yield name
    if name.startswith("claude"):
        yield name.replace(".", "-")  # OpenRouter spells claude-sonnet-5.5


def price_for(model: str | None, config: Mapping | None = None) -> dict | None:
    """{"input", "output", "cache_read", "cache_write"} in USD per million tokens, or None."""
    if not model:
        return None
    overrides = ((config or {}).get("llm") or {}).get("pricing") or {}
    for name in _candidates(model):
        for key, value in overrides.items():
            if key.lower() == name and isinstance(value, Mapping):
                base = dict(zip(FIELDS, PRICES.get(name, (0.0, 0.0, None, None))))
                out = {**base, **{k: float(v) for k, v in value.items() if k in FIELDS}}
                if out["cache_read"] is None:
                    out["cache_read"] = out["input"]
                if out["cache_write"] is None:
                    out["cache_write"] = out["input"]
                return out
        if name in PRICES:
            return dict(zip(FIELDS, PRICES[name]))
    return None


def cost_usd(usage: Mapping, price: Mapping | None) -> float | None:
    if price is None:
        return None
    total = (usage.get("input_tokens", 0) * price["input"] + usage.get("output_tokens", 0) * price["output"]
             + usage.get("cache_read_tokens", 0) * price["cache_read"]
             + usage.get("cache_write_tokens", 0) * price["cache_write"])
    return round(total / 1_000_000, 8)
