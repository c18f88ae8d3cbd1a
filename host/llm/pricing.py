"""The cost of one call, in USD: your config's prices first, then genai-prices' data.

Prices change and new models appear every few weeks, so moss keeps no price table of its
own: `genai-prices` (Pydantic's package, data shipped inside it, no network) knows current
Anthropic, OpenAI, Google, OpenRouter, Groq, ... models, including cache reads and writes
and long-context tiers. A model that neither your config nor genai-prices knows has no cost
(None): moss says "cost unknown" instead of guessing.

Override or add a model in the config (USD per million tokens):

    [llm.pricing."my-model"]
    input = 3.0
    output = 15.0
    cache_read = 0.3     # default: genai-prices' value for the model, else `input`
    cache_write = 3.75

genai-prices takes about 0.1-0.3 s to import; `preload()` starts that in a background thread
when an LLM is set up, once the SDK is imported and the first request is on its way, so the
first cost is ready by the time the first answer arrives.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping

FIELDS = ("input", "output", "cache_read", "cache_write")
TOKENS = {"input": "input_tokens", "output": "output_tokens", "cache_read": "cache_read_tokens",
          "cache_write": "cache_write_tokens"}

# moss provider names -> genai-prices provider ids (others: found from the model name).
GENAI_PROVIDER = {"anthropic": "anthropic", "openai": "openai", "openrouter": "openrouter", "groq": "groq",
                  "deepseek": "deepseek", "together": "together", "mistral": "mistral", "xai": "x-ai",
                  "gemini": "google"}

_preload_lock = threading.Lock()
_preload: threading.Thread | None = None


def preload() -> None:
    """Import genai-prices and load its data in a background thread (once), after any SDK
    import under way and, when the first call waits for its SDK, after that call's request
    is on its way (host/llm/warm.py `quiet`): the first request waits for its SDK, not for
    prices, so the two must not share the GIL."""
    global _preload
    with _preload_lock:
        if _preload is None:
            _preload = threading.Thread(target=_after_sdk, name="moss-pricing-preload", daemon=True)
            _preload.start()


def _after_sdk():
    from .warm import quiet

    quiet()
    _genai()


def load_data() -> None:
    """Import genai-prices and load its data now, in this thread (a zygote, before it forks)."""
    _genai()


def _genai():
    """The genai_prices module with its data loaded, or None when it is not installed."""
    try:
        import genai_prices
        from genai_prices import data_snapshot

        data_snapshot.get_snapshot()
        return genai_prices
    except ImportError:
        return None


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


def override_for(model: str, config: Mapping | None) -> Mapping | None:
    overrides = ((config or {}).get("llm") or {}).get("pricing") or {}
    if not isinstance(overrides, Mapping):
        return None
    lowered = {str(k).lower(): v for k, v in overrides.items() if isinstance(v, Mapping)}
    for name in _candidates(model):
        if name in lowered:
            return lowered[name]
    return None


# (model, provider) -> the (name, provider_id) genai-prices knows it by, or None when it
# does not: looking a model up tries several spellings and each miss raises, which cost
# about half a millisecond a call for a model it does not know.
_known: dict[tuple, tuple | None] = {}


def _genai_calc(usage: Mapping, model: str, provider: str | None):
    """genai-prices' PriceCalculation for this usage, or None when it does not know the model."""
    gp = _genai()
    if gp is None:
        return None
    fresh, read, write = (int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_tokens",
                                                             "cache_write_tokens"))
    # genai-prices counts cached and cache-written tokens inside input_tokens; moss apart.
    u = gp.Usage(input_tokens=fresh + read + write, cache_read_tokens=read, cache_write_tokens=write,
                 output_tokens=int(usage.get("output_tokens") or 0))
    key = (model, provider)
    if key in _known:
        found = _known[key]
        return None if found is None else gp.calc_price(u, found[0], provider_id=found[1])
    pid = GENAI_PROVIDER.get(provider or "")
    for name in dict.fromkeys(_candidates(model)):
        for provider_id in dict.fromkeys((pid, None)):
            try:
                calc = gp.calc_price(u, name, provider_id=provider_id)
            except LookupError:
                continue
            _known[key] = (name, provider_id)
            return calc
    _known[key] = None
    return None


def price_for(model: str | None, config: Mapping | None = None, provider: str | None = None) -> dict | None:
    """{"input", "output", "cache_read", "cache_write"} in USD per million tokens (the base
    tier), from the config's [llm.pricing] over genai-prices; None when neither knows it."""
    if not model:
        return None
    base = None
    if _genai_calc({"input_tokens": 1000}, model, provider) is not None:
        # Priced on 1000 tokens (the base tier; long prompts may cost more), per million.
        base = {}
        for field in FIELDS:
            one = _genai_calc({TOKENS[field]: 1000}, model, provider)
            base[field] = round(float(one.total_price) * 1000, 6) if one is not None else None
    override = override_for(model, config)
    if override is None:
        return base
    out = dict(base or dict.fromkeys(FIELDS))
    out.update({k: float(v) for k, v in override.items() if k in FIELDS})
    out["input"] = out["input"] or 0.0
    out["output"] = out["output"] or 0.0
    for k in ("cache_read", "cache_write"):
        if out[k] is None:
            out[k] = out["input"]
    return out


def cost_usd(usage: Mapping, price: Mapping | None) -> float | None:
    """The cost of `usage` at flat per-million `price` (an override), or None without one."""
    if price is None:
        return None
    total = sum(int(usage.get(TOKENS[f]) or 0) * float(price[f]) for f in FIELDS)
    return round(total / 1_000_000, 8)


def cost_of(usage: Mapping, model: str | None, config: Mapping | None = None,
            provider: str | None = None) -> float | None:
    """The cost of one call: the config's price for the model when it has one (flat), else
    genai-prices' (with its tiers), else None ("cost unknown")."""
    if not model:
        return None
    if override_for(model, config) is not None:
        return cost_usd(usage, price_for(model, config, provider))
    calc = _genai_calc(usage, model, provider)
    return None if calc is None else round(float(calc.total_price), 8)
