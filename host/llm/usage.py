"""Session totals of tokens and cost, and the budgets checked before each call."""

from __future__ import annotations

import threading
from collections.abc import Mapping

from ..errors import MossError

TOKEN_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def empty_usage() -> dict:
    return {**{k: 0 for k in TOKEN_KEYS}, "cost_usd": None}


def total_tokens(usage: Mapping) -> int:
    return sum(int(usage.get(k) or 0) for k in TOKEN_KEYS)


class Budgets:
    """max_cost_usd / max_total_tokens from options (CLI) over config [llm]."""

    def __init__(self, config: Mapping, options: Mapping):
        llm_cfg = (config or {}).get("llm") or {}

        def pick(opts: tuple, cfg: str):
            value = next((options[o] for o in opts if options.get(o) is not None), None)
            value = llm_cfg.get(cfg) if value is None else value
            return None if value in (None, "", 0) else value

        # options["max_tokens"] is the CLI's session budget (not a per-reply limit).
        self.max_cost = pick(("max_cost", "max_cost_usd"), "max_cost_usd")
        self.max_tokens = pick(("max_tokens", "max_total_tokens"), "max_total_tokens")
        self.max_cost = float(self.max_cost) if self.max_cost is not None else None
        self.max_tokens = int(self.max_tokens) if self.max_tokens is not None else None


class Session:
    """Thread-safe totals over every call of one LLM object (child agents may share it)."""

    def __init__(self, budgets: Budgets, parent: "Session | None" = None):
        self.budgets = budgets
        self.parent = parent  # a child agent's totals also count in its parent's (one budget per tree)
        self._lock = threading.Lock()
        self.totals = {**{k: 0 for k in TOKEN_KEYS}, "cost_usd": 0.0, "cost_known": True,
                       "unpriced_calls": 0, "calls": 0}

    def add(self, usage: Mapping) -> None:
        with self._lock:
            t = self.totals
            for k in TOKEN_KEYS:
                t[k] += int(usage.get(k) or 0)
            t["calls"] += 1
            if usage.get("cost_usd") is None:
                t["cost_known"] = False
                t["unpriced_calls"] += 1
            else:
                t["cost_usd"] = round(t["cost_usd"] + usage["cost_usd"], 8)
        if self.parent is not None:
            self.parent.add(usage)

    def snapshot(self) -> dict:
        with self._lock:
            return dict(self.totals)

    def budget_reason(self) -> str | None:
        if self.parent is not None:  # the budget bounds the whole tree: ask its root
            return self.parent.budget_reason()
        t, b = self.snapshot(), self.budgets
        if b.max_cost is not None and t["cost_usd"] >= b.max_cost:
            extra = "" if t["cost_known"] else f" (not counting {t['unpriced_calls']} call(s) of unpriced models)"
            return (f"cost budget spent: ${t['cost_usd']:.4f} of ${b.max_cost:.4f}{extra} "
                    f"(--max-cost or [llm] max_cost_usd)")
        used = total_tokens(t)
        if b.max_tokens is not None and used >= b.max_tokens:
            return (f"token budget spent: {used} of {b.max_tokens} tokens "
                    f"(--max-tokens or [llm] max_total_tokens)")
        return None

    def check(self) -> None:
        reason = self.budget_reason()
        if reason:
            root = self
            while root.parent is not None:
                root = root.parent
            raise MossError(f"LLM budget exhausted before the call: {reason}", kind="budget",
                            usage=root.snapshot())
