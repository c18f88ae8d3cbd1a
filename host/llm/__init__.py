"""moss.llm: the LLM primitive behind `moss.llm.chat{...}` (mechanism only, no prompts).

    llm = LLM(config, options, env=os.environ, on_event=log, stream=ui.write)
    llm.chat({"messages": [{"role": "user", "content": "hi"}], "system": "..."})
    llm.usage, llm.budget_reason()

Module map: providers (presets, selection), wire (wire APIs by name: what one provides, the
registry), anthropic_client / openai_client (the two wire APIs moss ships: one attempt through
each SDK), warm (a client made ahead), retry (failures, backoff, messages), usage (totals,
budgets), pricing, cassette (record / replay / script), request (checking a script's request).
The SDKs are imported on the first real call, not here.
"""

from .chat import LLM
from .pricing import cost_of, price_for
from .providers import PRESETS, Provider, resolve_provider

__all__ = ["LLM", "PRESETS", "Provider", "cost_of", "price_for", "resolve_provider"]
