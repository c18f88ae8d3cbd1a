"""What a project may set: the one list of project settings that widen what runs, what is
spent or what is kept, and for each the rule that says which of a project's values only
narrow (those apply untrusted). Facts only: this module reads no config; host/config.py
reads `limit_keys` from it to check every limit as it reads a file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .text import visible_json

APPROVAL = ("low", "medium", "high")  # [agent] auto_approve, weakest first

# The one list of project settings that widen what runs, what is spent or what is kept. For
# each key, a rule says which of a project's values only NARROW (less runs, less is spent,
# more is kept, compared with the user's own value or, without one, the built-in default):
# those apply untrusted. Any other value is listed by `moss trust` (and --status) and left
# out of the config until the user trusts that exact content. Keys are paths; "*" stands
# for any one name. Names that are commands, endpoints or key variables wherever they
# appear (COMMAND_KEYS, COMMAND_PARTS, name_kind) need trust with any value.


@dataclass(frozen=True)
class Rule:
    """How a project's value of one key is judged; `why` is shown next to it in `moss trust`."""

    why: str
    test: str = "always"  # always | free | user-only | only | at-most | at-least | ordered
    safe: Any = None  # only: the one value that narrows; at-most/at-least: the built-in default
    unlimited: tuple = ()  # at-most: values that mean "no limit" (None always does)
    order: tuple = ()  # ordered: weakest first

    def narrows(self, value: Any, mine: Any) -> bool:
        """Whether the project's `value` only narrows the user's own `mine` (None: unset)."""
        if self.test == "free":
            return True
        if self.test == "only":
            return type(value) is type(self.safe) and value == self.safe
        if self.test == "ordered":
            base = mine if mine in self.order else self.safe
            return value in self.order and self.order.index(value) <= self.order.index(base)
        if self.test in ("at-most", "at-least"):
            p = self._number(value)
            u = self._number(mine) if mine is not None else None
            if u is None:  # the user set none (or nothing usable): the built-in default
                u = self._number(self.safe)
            if p is None or u is None:
                return False  # not a number: what it would do cannot be told, so it waits for trust
            return p <= u if self.test == "at-most" else p >= u
        return False

    def _number(self, v: Any) -> float | None:
        if v is None or (not isinstance(v, (bool, dict, list)) and v in self.unlimited):
            return math.inf if self.test == "at-most" else None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
            return None
        if self.test == "at-most" and 0 in self.unlimited and v <= 0:
            return math.inf  # the consumers read 0 as "no limit", and below 0 as no limit or worse
        return float(v)

    def mine(self, mine: Any) -> str:
        """The value the project's is compared with, for people."""
        if self.test not in ("only", "ordered", "at-most", "at-least"):
            return ""
        if mine is not None and (self.test != "ordered" or mine in self.order):
            return f"yours: {visible_json(mine)}"
        default = self.safe
        return "default: " + ("no limit" if default is None else visible_json(default))


def _always(why: str) -> Rule:
    return Rule(why)


def _only(safe: Any, why: str) -> Rule:
    return Rule(why, "only", safe)


def _at_most(default: Any, why: str, unlimited: tuple = (0,)) -> Rule:
    return Rule(why, "at-most", default, unlimited)


def _at_least(default: Any, why: str) -> Rule:
    return Rule(why, "at-least", default)


USER_ONLY_RULE = "user-only"
PROJECT_RULES: dict[tuple, Rule] = {
    # Never taken from a project, trusted or not: only the user's own config (or a flag).
    ("agent", "allow_full"): Rule("only your user config can set it", USER_ONLY_RULE),
    ("agent", "unsandboxed_ok"): Rule("only your user config can set it", USER_ONLY_RULE),
    ("trust",): Rule("only your user config can set it", USER_ONLY_RULE),
    # the variables commands get and the host paths they see (host/tools/sandbox.py reads yours only)
    ("sandbox",): Rule("only your user config can set it", USER_ONLY_RULE),

    # What runs: which agent, which steps, which approvals.
    ("agent", "role"): _always("chooses the role, and with it the access, the agent runs with"),
    ("agent", "pipeline"): _always("chooses the roles that run one after another"),
    ("agent", "dispatch"): _always("chooses how a task picks its role"),
    ("agent", "machine"): _always("chooses the machine (the agent's loop) that runs"),
    ("agent", "child_machine"): _always("chooses the machine child agents run"),
    ("agent", "auto_approve"): Rule("what the agent may change without asking", "ordered", "low",
                                    order=APPROVAL),

    # Child agents: each one is another agent working and spending at once.
    ("agent", "spawn"): _only(False, "lets the model start child agents"),
    ("agent", "max_children"): _at_most(8, "how many children one agent may have at once"),
    ("agent", "child_max_turns"): _at_most(8, "the turns each child agent may take"),
    ("agent", "scout"): _only(False, "starts an explorer child before a refactor"),
    ("agent", "fan_out"): Rule("starts one auditor child per directory", "only", 0),
    ("agent", "isolate_writers"): _only(True, "false lets children that write work in your tree itself, "
                                              "not in copies of it"),

    # What is spent: turns, commands, budgets, and what a call is counted as costing.
    ("agent", "max_turns"): _at_most(15, "the turns a session may take (default: the v1 machine's)"),
    ("agent", "max_commands_per_reply"): _at_most(50, "the commands one reply may run"),
    ("llm", "max_cost_usd"): _at_most(None, "the session's cost budget", (0, "")),
    ("llm", "max_total_tokens"): _at_most(None, "the session's token budget", (0, "")),
    ("llm", "pricing"): _always("what a call is counted as costing against the budget"),
    ("llm", "providers", "*", "local"): _only(False, "counts the provider's calls as free (your own hardware)"),
    ("runs", "max_parallel"): _at_most(None, "how many background runs go at once"),
    ("agent", "wild", "max_runs"): _at_most(10, "how many runs one sweep starts"),
    ("agent", "wild", "max_time_s"): _at_most(None, "how long the Wild Loop may go"),
    ("agent", "wild", "run_timeout_s"): _at_most(None, "how long one run may go"),
    ("agent", "wild", "judge"): _only(False, "an LLM judge that reads running logs (more model calls)"),

    # What is kept: what moss keeps to undo with, and what outlives moss or leaves the project.
    ("shadow", "max_total_mb"): _at_least(200, "how much moss captures for rollback (less: changes cannot be undone)"),
    ("shadow", "max_file_mb"): _at_least(50, "the largest file moss captures for rollback"),
    ("agent", "wild", "detach"): _only(False, "runs that outlive moss"),
    ("agent", "wild", "results"): _always("where runs write their results (MOSS_RESULTS_DIR), maybe outside "
                                          "the project"),
    ("agent", "wild", "alerts"): _always("the alert rules that watch every run (they replace the defaults)"),
    ("agent", "wild", "spike_factor"): _always("how large a jump the default spike alert lets pass"),

    # An MCP server entry is what runs outside the sandbox (command, args, env, cwd) or where
    # moss connects (url, headers); a project's keys merge into the user's server of the same
    # name, so any of them changes what the user's server runs. Only its description is free.
    ("mcp", "servers", "*", "*"): _always("part of an MCP server, which runs as you outside the sandbox"),
    ("mcp", "servers", "*", "description"): Rule("", "free"),
}
# Wherever they appear, these names are commands, and these are parts of a command (what a
# command runs with), whether or not a command sits next to them: `[mcp.servers.x] env`
# alone changes what the user's own server x runs.
COMMAND_KEYS = {"run", "cmd", "command", "commands", "validate_commands"}
COMMAND_PARTS = {"args", "argv", "env", "cwd", "workdir"}
# Dropping an ignored key drops these project keys too (they only make sense with it).
DEPENDENTS = {("agent", "validate_commands"): [("agent", "validate")], ("llm", "provider"): [("llm", "model")]}


def limit_keys() -> list[tuple[tuple, Rule]]:
    """The keys that are limits (at most / at least a number): each must be a number of 0 or
    more in any config (host/config.py checks it as it reads a file)."""
    return [(path, rule) for path, rule in PROJECT_RULES.items()
            if rule.test in ("at-most", "at-least") and "*" not in path]


def rule_for(path: tuple) -> Rule | None:
    """The rule for one key path: an exact entry, else the one whose "*" parts match."""
    rule = PROJECT_RULES.get(path)
    if rule is not None:
        return rule
    best = None
    for pattern, r in PROJECT_RULES.items():
        if len(pattern) == len(path) and all(p in ("*", k) for p, k in zip(pattern, path)):
            stars = pattern.count("*")
            if best is None or stars < best[0]:
                best = (stars, r)
    return best[1] if best else None


def name_kind(name: str) -> str | None:
    """The kind of trust a key needs by its name alone, wherever it sits (None: its rule decides)."""
    if name in COMMAND_KEYS or name in COMMAND_PARTS:
        return "command"
    if name in ("base_url", "url", "endpoint", "address", "headers") or name.endswith(("_url", "_address")):
        return "endpoint"  # e.g. [agent.wild] ray_address: where the project's code is sent to run
    if name == "api_key_env" or name.endswith("_key_env"):
        return "key variable"
    if name in ("access", "executor"):
        return "setting"
    return None


def value_at(node: Any, path: tuple) -> Any:
    """The value at a key path in a config (None: not there)."""
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node
