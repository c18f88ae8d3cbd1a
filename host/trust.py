"""Workspace trust: a cloned repository must not own the person who runs moss in it.

A project's .moss/ can bring Lua that replaces the agent (links followed and hashed), commands
to run, LLM endpoints and key variables to send, and settings that widen what runs, what is
spent or what is kept (PROJECT_RULES below: the one list, each key with why). None of that
is used until the user said yes to that exact content; the yes is kept in the user's data
directory ($XDG_DATA_HOME/moss/trust/, outside every repository), keyed by the project's path
and a hash of what it brings, so a changed file, link or setting asks again, and the loader
runs no project script bytes but those hashed (Manifest.pins, ScriptRoots.read). Trust pins
what arrives from elsewhere, not what the user types: in a git work tree, a change git could
not have brought is the user's own edit and keeps the project trusted (judge(), below), and
moss's own writes (`moss config set`, `moss init`) keep it trusted too (kept()). A project
value that only narrows the user's own (a smaller budget, spawn = false) needs no trust, nor
does anything else in a project's config (custom fields).

Some settings never come from a project, trusted or not: [agent] allow_full and
unsandboxed_ok, and the [trust] and [sandbox] tables. A trusted project's [agent]
auto_approve is capped at the user's own (default "low").
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
import os
import re
import stat
import sys
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import deep_merge, dotted_key, read_layers
from .errors import ConfigError
from .roots import display_path, user_data_dir
from .tools.sandbox import ACCESS_LEVELS as LEVELS  # weakest first

APPROVAL = ("low", "medium", "high")
HEX64 = re.compile(r"^[0-9a-f]{64}")
DEFAULT_MAX_ACCESS = "edit"

# -- what a project may set ---------------------------------------------------------------
# The one list of project settings that widen what runs, what is spent or what is kept. For
# each key, a rule says which of a project's values only NARROW (less runs, less is spent,
# more is kept, compared with the user's own value or, without one, the built-in default):
# those apply untrusted. Any other value is listed by `moss trust` (and --status) and left
# out of the config until the user trusts that exact content. Keys are paths; "*" stands
# for any one name. Names that are commands, endpoints or key variables wherever they
# appear (COMMAND_KEYS, COMMAND_PARTS, _config_kind) need trust with any value.


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
        return float(v)

    def mine(self, mine: Any) -> str:
        """The value the project's is compared with, for people."""
        if self.test not in ("only", "ordered", "at-most", "at-least"):
            return ""
        if mine is not None and (self.test != "ordered" or mine in self.order):
            return f"yours: {_json(mine)}"
        default = self.safe
        return "default: " + ("no limit" if default is None else _json(default))


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
                                    order=("low", "medium", "high")),

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


KINDS = ("script", "command", "endpoint", "key variable", "setting", "limit")


@dataclass(frozen=True)
class Item:
    """One thing a project brings that needs trust: a script file (value = its sha256) or a
    config key (value = the value as JSON). `note` and `path` are for display and removal."""

    kind: str
    key: str
    value: str
    note: str = field(default="", compare=False)
    path: tuple = field(default=(), compare=False)

    def shown(self, width: int | None = None) -> str:
        """The value for people: a file's hash prefix, or the whole value (a trust question
        must not hide the end of a command) unless a width is asked for."""
        if self.kind == "script":
            if HEX64.match(self.value):  # a hash, maybe followed by the links it was read through
                return "sha256:" + self.value[:16] + self.value[64:]
            return self.value  # a link with nothing to hash: its target is the content
        return self.value if width is None or len(self.value) <= width else self.value[: width - 1] + "…"

    def line(self) -> str:
        """One line for messages: `.moss/scripts/agent.lua (overrides built-in)`, `agent.role = "x"`."""
        text = self.key if self.kind == "script" else f"{self.key} = {self.shown(80)}"
        return text + (f" ({self.note})" if self.note else "")


@dataclass
class Manifest:
    """What a project brings: items that need trust, and user-only keys it tried to set."""

    items: list[Item]
    user_only: list[Item]
    # real path -> sha256 of every project script hashed: the loader runs no other bytes
    pins: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def needed(self) -> bool:
        return bool(self.items)

    @property
    def digest(self) -> str:
        rows = sorted([i.kind, i.key, i.value] for i in self.items)
        return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()


@dataclass
class Trust:
    """The trust decision for one run, and the configuration it leads to."""

    root: Path
    manifest: Manifest
    trusted: bool  # the project's trust-needing content is in use (also when there is none)
    how: str  # "nothing to trust" | "recorded" | "--trust" | "answered yes" | "" (untrusted)
    config: dict  # the effective config: the user's, with what the project may set over it
    user_config: dict
    project_keys: list[str]  # dotted keys in `config` whose value came from the project file
    ignored: list[str]  # one line each: what the project set that is not in use
    max_access: str  # the user's [trust] max_access
    record: dict | None = None  # the stored trust record, if any (maybe for older content)
    # since the record, each changed file: LOCAL (the user's own edit) or why it asks again
    origins: dict[str, str] = field(default_factory=dict)

    def lua_value(self) -> dict:
        """moss.trust, as Lua sees it."""
        return {"trusted": self.trusted, "needed": self.manifest.needed, "how": self.how,
                "max_access": self.max_access, "project_keys": list(self.project_keys),
                "ignored": list(self.ignored)}

    @property
    def changes(self) -> list[tuple[str, Item | None, Item | None]]:
        """What changed since the recorded trust: (added | removed | changed, old, new)."""
        if not self.record:
            return []
        return diff(_items_of(self.record), self.manifest.items)


# -- scanning ----------------------------------------------------------------------------

def visible(text: str) -> str:
    """Text with control, format (bidi overrides, zero-width) and line-separator characters
    written as escapes, so what a person is asked to trust reads as what it is."""
    return "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c
                   for c in text)


def _json(value: Any) -> str:
    return visible(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str))


def _config_kind(path: tuple, name: str) -> str | None:
    if name in COMMAND_KEYS or name in COMMAND_PARTS:
        return "command"
    if name in ("base_url", "url", "endpoint", "address", "headers") or name.endswith(("_url", "_address")):
        return "endpoint"  # e.g. [agent.wild] ray_address: where the project's code is sent to run
    if name == "api_key_env" or name.endswith("_key_env"):
        return "key variable"
    if name in ("access", "executor"):
        return "setting"
    return None


def _list_kind(values: list, path: tuple) -> str | None:
    """The kind of the first trust-needing key inside a list of tables, if any."""
    for v in values:
        found: list[Item] = []
        if isinstance(v, dict):
            _walk(v, path, found, [], {})
        elif isinstance(v, list):
            kind = _list_kind(v, path)
            if kind:
                return kind
        if found:
            return found[0].kind
    return None


def _walk(node: dict, path: tuple, out: list[Item], user_only: list[Item], user: dict) -> None:
    for name, value in node.items():
        key = path + (name,)
        rule = rule_for(key)
        shown = visible(dotted_key(key))
        if rule is not None and rule.test == USER_ONLY_RULE:
            user_only.append(Item("setting", shown, _json(value), rule.why, key))
            continue
        kind = _config_kind(key, name)
        if kind is None and rule is not None:
            mine = _get(user, key)
            if rule.narrows(value, mine):
                continue  # only narrows what the user's own config (or the default) allows
            kind = "limit" if rule.test in ("at-most", "at-least") else "setting"
            note = "; ".join(x for x in (rule.why, rule.mine(mine)) if x)
            out.append(Item(kind, shown, _json(value), visible(note), key))
            continue
        if kind is None and isinstance(value, list):
            kind = _list_kind(value, key)
        if kind:
            out.append(Item(kind, shown, _json(value), path=key))
        elif isinstance(value, dict):
            _walk(value, key, out, user_only, user)


def scan_config(project: dict, user: dict | None = None) -> tuple[list[Item], list[Item]]:
    """(items that need trust, user-only items) in a project's config; `user` (the user's
    own config) is what a project's value may narrow without trust (see PROJECT_RULES)."""
    items: list[Item] = []
    user_only: list[Item] = []
    _walk(project, (), items, user_only, user or {})
    llm = project.get("llm")
    name = llm.get("provider") if isinstance(llm, dict) else None
    if isinstance(name, str) and name:
        from .llm.providers import ALIASES, PRESETS

        if ALIASES.get(name.lower(), name.lower()) not in PRESETS:
            items.append(Item("setting", "llm.provider", _json(name), "not a built-in provider",
                              ("llm", "provider")))
    return items, user_only


MAX_SCRIPT_ENTRIES = 20_000  # files and folders looked at under .moss/scripts, links followed


def scan_scripts(root: Path, env=os.environ) -> tuple[list[Item], dict[str, str]]:
    """(items, pins): every .lua file under .moss/scripts/ with the sha256 of the bytes it
    leads to, and the real path -> sha256 of each for the loader (ScriptRoots.read).

    Links are followed wherever they point, so what is hashed is what the loader would read,
    and a link is part of the content: a linked file's value names its links, and a dangling
    link (any name: it may become a folder of scripts) is an item whose value is its target.
    A walk that meets more than MAX_SCRIPT_ENTRIES entries stops there and says so: what it
    did not hash is not pinned, so the loader refuses it."""
    from .roots import ScriptRoots

    root = Path(root)
    base = root / ".moss" / "scripts"
    items: list[Item] = []
    pins: dict[str, str] = {}
    for p in (root / ".moss", base):  # the folders on the way may be links themselves
        if p.is_symlink():
            target = os.readlink(p)
            shown = visible(p.relative_to(root).as_posix())
            if not p.exists():
                items.append(Item("script", shown, visible(f"dangling link to {target}"),
                                  "a link to nothing yet: whatever appears there would run"))
                return items, pins
            items.append(Item("script", shown, visible(f"link to {target}"),
                              visible(f"the scripts are read from {os.path.realpath(p)}")))
    if not base.is_dir():
        return items, pins
    others = [r for r in ScriptRoots(None, env).roots]
    real_base = os.path.realpath(base)
    seen: set[str] = set()
    budget = [MAX_SCRIPT_ENTRIES]

    def script(path: str, rel: str, via: tuple) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read()
            digest = hashlib.sha256(data).hexdigest()
            pins[os.path.realpath(path)] = digest
        except OSError as e:
            digest = f"unreadable ({e.strerror})"
        value = digest + (" via " + "; ".join(via) if via else "")
        over = [r.name for r in others if (r.path / rel).is_file()]
        note = f"overrides {over[0]} {rel}" if over else ""
        real = os.path.realpath(path)
        if via and not (real == real_base or real.startswith(real_base + os.sep)):
            note = "; ".join(x for x in (note, "outside .moss/scripts: the loader refuses it") if x)
        items.append(Item("script", visible(f".moss/scripts/{rel}"), visible(value), visible(note)))

    def walk(folder: str, rel: tuple, via: tuple) -> None:
        real = os.path.realpath(folder)
        if real in seen:
            return  # a folder met again through a link (or a loop of links)
        seen.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            budget[0] -= 1
            if budget[0] < 0:
                return
            r = rel + (e.name,)
            name = "/".join(r)
            if e.is_symlink():
                target = os.readlink(e.path)
                link = via + (f"{name} -> {target}",)
                if not os.path.exists(e.path):
                    items.append(Item("script", visible(f".moss/scripts/{name}"),
                                      visible(f"dangling link to {target}"),
                                      "a link to nothing yet: whatever appears there would run"))
                elif os.path.isdir(e.path):
                    walk(e.path, r, link)
                elif e.name.endswith(".lua"):
                    script(e.path, name, link)
            elif e.is_dir(follow_symlinks=False):
                walk(e.path, r, via)
            elif e.name.endswith(".lua"):
                script(e.path, name, via)

    walk(str(base), (), ())
    if budget[0] < 0:
        items.append(Item("script", ".moss/scripts", f"more than {MAX_SCRIPT_ENTRIES} entries",
                          "not all hashed: moss refuses to load what it did not hash"))
    return items, pins


def scan(root: Path, project: dict, env=os.environ, user: dict | None = None) -> Manifest:
    """What the project brings. `user` is the user's own config (read from `env` when not
    given): a project value that only narrows it needs no trust."""
    if user is None:
        from .config import read_toml, user_config_file

        user = read_toml(user_config_file(env))
    items, user_only = scan_config(project, user)
    scripts, pins = scan_scripts(root, env)
    return Manifest(scripts + items, user_only, pins)


# -- records -------------------------------------------------------------------------------

def trust_dir(env=os.environ) -> Path:
    return user_data_dir(env) / "trust"


def record_file(root: Path, env=os.environ) -> Path:
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:32]
    return trust_dir(env) / f"{key}.json"


def load_record(root: Path, env=os.environ) -> dict | None:
    p = record_file(root, env)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("path") != str(Path(root).resolve()):
        return None
    return data


def grant(root: Path, env=os.environ, manifest: Manifest | None = None, *, repin: bool = False) -> Path:
    """Record that the user trusts the project's current content (`repin`: the content is the
    user's own edit of trusted content, or moss's own write; the first trust's time is kept)."""
    from . import __version__
    from .tools.safefs import replace_file as write_atomic

    root = Path(root).resolve()
    if manifest is None:
        user, project = read_layers(root, env)
        manifest = scan(root, project, env, user)
    p = record_file(root, env)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = {"path": str(root), "hash": manifest.digest, "trusted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "moss": __version__,
            "items": [{"kind": i.kind, "key": i.key, "value": i.value} for i in manifest.items]}
    old = load_record(root, env)
    if repin and old and isinstance(old.get("trusted_at"), str):
        data["trusted_at"] = old["trusted_at"]
    data["local"] = pin(root, manifest, old, env)
    write_atomic(p, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return p


def revoke(root: Path, env=os.environ) -> bool:
    try:
        record_file(root, env).unlink()
        return True
    except FileNotFoundError:
        return False


def list_records(env=os.environ) -> list[dict]:
    out = []
    d = trust_dir(env)
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("path"), str):
            out.append(data)
    return sorted(out, key=lambda d: d["path"])


def _items_of(record: dict) -> list[Item]:
    out = []
    for r in record.get("items") or []:
        if isinstance(r, dict):
            out.append(Item(str(r.get("kind")), str(r.get("key")), str(r.get("value"))))
    return out


def diff(old: list[Item], new: list[Item]) -> list[tuple[str, Item | None, Item | None]]:
    before = {(i.kind, i.key): i for i in old}
    after = {(i.kind, i.key): i for i in new}
    out = []
    for k, i in after.items():
        if k not in before:
            out.append(("added", None, i))
        elif before[k].value != i.value:
            out.append(("changed", before[k], i))
    for k, i in before.items():
        if k not in after:
            out.append(("removed", i, None))
    return out


# -- your own edits ---------------------------------------------------------------------------
# Trust pins what arrived from elsewhere, not what the user typed. The record keeps, for
# .moss/config.toml and each .moss/scripts/ file, git HEAD's entry when trusted and the
# contents the user trusted or edited there. A later change is the user's own edit, and needs
# no question, when git could not have brought it: HEAD's entry for the file is the pinned one
# (or holds content the user already had there), no merge or rebase is under way, and the new
# bytes are no object git already has. docs/security.md (Trust) has the threats and tests.

CONFIG_REL = ".moss/config.toml"
SCRIPTS_REL = ".moss/scripts/"
MAX_KNOWN = 32  # contents remembered per file as trusted or edited here
HASH_ONLY = re.compile(r"[0-9a-f]{64}")
LOCAL = "edited here"


def _kept(rel: str) -> bool:
    return rel == CONFIG_REL or rel.startswith(SCRIPTS_REL)


def _not_plain(root: Path, rel: str) -> str:
    """Why a change to `rel` cannot be judged a local edit; "" when it is a regular file (or
    nothing: removed) reached from the root through real folders, none of them another git
    repository (whose pulls the project's HEAD would not show)."""
    parts = rel.split("/")
    if visible(rel) != rel or any(p in ("", ".", "..") for p in parts):
        return "an unusual file name: moss cannot tell where it came from"
    here = str(root)
    for i, part in enumerate(parts):
        here = os.path.join(here, part)
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return ""
        except OSError as e:
            return f"cannot look at it ({e.strerror})"
        if stat.S_ISLNK(st.st_mode):
            return "reached through a link: moss cannot tell where its content came from"
        if i < len(parts) - 1:
            if not stat.S_ISDIR(st.st_mode):
                return "not a file"
            if os.path.lexists(os.path.join(here, ".git")):
                return f"inside another git repository ({'/'.join(parts[:i + 1])}): its pulls do not show here"
        elif not stat.S_ISREG(st.st_mode):
            return "not a regular file"
    return ""


def _sha_file(path: Path) -> str | None:
    """sha256 of a regular file's bytes, never through a link nor blocking on a fifo; None if
    there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def _files_of(root: Path, manifest: Manifest) -> dict[str, str | None]:
    """The files behind a manifest's items, by path: .moss/config.toml (None: absent) and each
    script that is a plain file, with the sha256 it was trusted as."""
    files: dict[str, str | None] = {CONFIG_REL: _sha_file(root / CONFIG_REL)}
    for i in manifest.items:
        if i.kind == "script" and HASH_ONLY.fullmatch(i.value) and not _not_plain(root, i.key):
            files[i.key] = i.value
    return files


def _local(record: dict | None) -> dict | None:
    local = record.get("local") if isinstance(record, dict) else None
    if not isinstance(local, dict) or not all(isinstance(local.get(k), dict) for k in ("head", "files", "known")):
        return None
    return local


def pin(root: Path, manifest: Manifest, old: dict | None = None, env=os.environ) -> dict:
    """What a trust record keeps to tell a local edit from an arrival later: whether the
    project was a git work tree, HEAD's entry ("MODE OID") for .moss/config.toml and each
    .moss/scripts/ file, the sha256 of each trusted file now, and per file the contents it
    had when trusted or edited here (the last MAX_KNOWN), kept from the old record."""
    from .tools.gitread import GitView

    root = Path(root)
    files = _files_of(root, manifest)
    view = GitView.open(root)
    known: dict[str, list[str]] = {}
    prev = _local(old)
    if prev is not None:
        for rel, shas in prev["known"].items():
            if isinstance(rel, str) and isinstance(shas, list):
                known[rel] = [h for h in shas if isinstance(h, str) and HASH_ONLY.fullmatch(h)]
    for rel, sha in files.items():
        if sha:
            known[rel] = ([h for h in known.get(rel, []) if h != sha] + [sha])[-MAX_KNOWN:]
    head = {r: e for r, e in view.head.items() if _kept(r)} if view is not None else {}
    return {"git": view is not None, "head": head, "files": files, "known": known}


def local_edits_on(user: dict, env=os.environ) -> bool:
    """The user's [trust] local_edits (default true): false makes every change ask again."""
    from .config import user_config_file

    t = user.get("trust")
    value = t.get("local_edits", True) if isinstance(t, dict) else True
    if not isinstance(value, bool):
        raise ConfigError(f"{display_path(user_config_file(env))}: [trust] local_edits must be true or false, "
                          f"got {value!r}")
    return value


def _same_config_items(data: bytes, record: dict, user: dict) -> bool:
    """Whether a config file's bytes (HEAD's copy) bring exactly the settings trusted before:
    a pulled change to comments or free keys brings nothing that needs trust."""
    import tomllib

    try:
        items, _ = scan_config(tomllib.loads(data.decode("utf-8")), user)
    except (ValueError, UnicodeDecodeError, ConfigError):
        return False
    trusted = {(i.kind, i.key, i.value) for i in _items_of(record) if i.kind != "script"}
    return {(i.kind, i.key, i.value) for i in items} == trusted


ARRIVED = "arrived by git: HEAD's copy changed since you trusted it (a pull, checkout, merge, reset or commit)"
IN_GIT = ("its content is an object git already has: it came out of the repository (another version checked "
          "out, a merge, a stash), or you ran `git add` before moss saw the edit")


def judge(root: Path, record: dict, manifest: Manifest, user: dict) -> dict[str, str]:
    """For each file behind a change since `record`: LOCAL when it is the user's own edit made
    in this working tree, else why moss cannot take it as one (it asks then)."""
    from .tools.gitread import GitView

    root = Path(root)
    out: dict[str, str] = {}
    expect: dict[str, str | None] = {}  # a script's sha256 as scanned (None: removed)
    for _change, old, new in diff(_items_of(record), manifest.items):
        item = new or old
        rel = item.key if item.kind == "script" else CONFIG_REL
        if item.kind == "script" and not all(HASH_ONLY.fullmatch(i.value) for i in (old, new) if i):
            out[rel] = "a link, or a file moss could not read: moss cannot tell where it came from"
            continue
        out.setdefault(rel, "")
        if item.kind == "script":
            expect[rel] = new.value if new else None
    local = _local(record)
    view = GitView.open(root) if any(not v for v in out.values()) else None
    pending: list[str] = []
    for rel, why in out.items():
        if why:
            continue
        sha = _sha_file(root / rel)
        known = set(local["known"].get(rel) or []) if local else set()
        if (why := _not_plain(root, rel)):
            pass
        elif local is None:
            why = "trusted by an older moss, which kept nothing to tell edits from arrivals"
        elif view is None:
            why = "not a git work tree (or git would not read it): moss cannot tell who changed it"
        elif view.busy:
            why = f"git is in the middle of a merge, cherry-pick, revert or rebase ({view.busy})"
        elif rel in expect and expect[rel] != sha:
            why = "changed again while moss looked"
        elif sha == local["files"].get(rel):
            why = "the file did not change, but what it means did (your own config changed)"
        elif view.head.get(rel) != local["head"].get(rel):
            data = view.blob(view.head.get(rel))
            mine = data is not None and (hashlib.sha256(data).hexdigest() in known or (
                rel == CONFIG_REL and _same_config_items(data, record, user)))
            if not mine:
                why = ARRIVED
        if not why and sha is not None and sha not in known:
            pending.append(rel)
        out[rel] = why or LOCAL
    if pending and view is not None:
        converted = view.converting(pending)
        for rel in pending:
            if converted.get(rel):
                out[rel] = (f"git converts it between its object and the file ({', '.join(converted[rel])}): "
                            "moss cannot tell an edit from git's copy")
        stored = view.in_store([r for r in pending if out[r] == LOCAL])
        for rel, found in stored.items():
            if found:
                out[rel] = IN_GIT
    return out


# -- the decision ----------------------------------------------------------------------------

def _remove(node: dict, path: tuple) -> bool:
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return False
    if isinstance(node, dict) and path and path[-1] in node:
        del node[path[-1]]
        return True
    return False


def _get(node: Any, path: tuple) -> Any:
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _leaves(node: dict, path: tuple = ()) -> list[str]:
    out = []
    for k, v in node.items():
        if isinstance(v, dict) and v:
            out += _leaves(v, path + (k,))
        else:
            out.append(dotted_key(path + (k,)))
    return out


def max_access(user: dict, env=os.environ) -> str:
    """The user's [trust] max_access: the most a project-chosen role may get (for Lua)."""
    from .config import user_config_file

    t = user.get("trust")
    value = t.get("max_access", DEFAULT_MAX_ACCESS) if isinstance(t, dict) else DEFAULT_MAX_ACCESS
    if value not in LEVELS:
        raise ConfigError(f"{display_path(user_config_file(env))}: [trust] max_access must be one of "
                          f"{', '.join(LEVELS)}, got {value!r}")
    return value


def effective(user: dict, project: dict, manifest: Manifest, trusted: bool) -> tuple[dict, list[str], list[str]]:
    """(merged config, project keys in it, ignored lines) for a trusted or untrusted project."""
    proj = copy.deepcopy(project)
    ignored: list[str] = []
    if not trusted:
        for item in manifest.items:
            ignored.append(item.line())
            if item.path:
                _remove(proj, item.path)
                for dep in DEPENDENTS.get(item.path, []):
                    _remove(proj, dep)
    else:
        approve = _get(proj, ("agent", "auto_approve"))
        mine = _get(user, ("agent", "auto_approve"))
        mine = mine if mine in APPROVAL else "low"
        if approve in APPROVAL and APPROVAL.index(approve) > APPROVAL.index(mine):
            proj["agent"]["auto_approve"] = mine
            ignored.append(f'agent.auto_approve = "{approve}" (capped at "{mine}", your [agent] auto_approve)')
    for item in manifest.user_only:
        _remove(proj, item.path)
        ignored.append(item.line())
    return deep_merge(user, proj), _leaves(proj), ignored


def evaluate(root: Path, env=os.environ, *, vouched: bool = False, answered: bool = False) -> Trust:
    """Decide whether the project's content is trusted for this run (no questions asked).

    vouched: the --trust flag (this run only); answered: the user just said yes."""
    root = Path(root)
    user, project = read_layers(root, env)
    limit = max_access(user, env)
    manifest = scan(root, project, env, user)
    record = load_record(root, env)
    if not manifest.needed:
        trusted, how = True, "nothing to trust"
    elif answered:
        trusted, how = True, "answered yes"
    elif vouched:
        trusted, how = True, "--trust"
    elif record and record.get("hash") == manifest.digest:
        trusted, how = True, "recorded"
    else:
        trusted, how = False, ""
    origins: dict[str, str] = {}
    if not trusted and record and local_edits_on(user, env):
        origins = judge(root, record, manifest, user)
        if origins and all(why == LOCAL for why in origins.values()):
            trusted, how = True, "your own edits"
            from .errors import MossError

            try:
                grant(root, env, manifest, repin=True)  # remembered as yours: a later commit of them is too
            except (OSError, MossError):
                pass  # still the user's own edits for this run; the next one judges them again
    config, keys, ignored = effective(user, project, manifest, trusted)
    return Trust(root=root, manifest=manifest, trusted=trusted, how=how, config=config, user_config=user,
                 project_keys=keys, ignored=ignored, max_access=limit, record=record, origins=origins)


@contextlib.contextmanager
def kept(root: Path, env=os.environ):
    """Around moss's own write to the project's config (`moss config set`, `moss init`): when
    the project's content was in use before (trusted, or nothing to trust) and the write
    changed only the config, the new content is recorded as trusted: what the user typed
    into moss is theirs. A write to the user's own config is not wrapped: a project value
    it turns into a widening one (a project max_turns above the user's new one) asks."""
    from .errors import MossError

    root = Path(root)
    try:
        before = evaluate(root, env)
    except MossError:
        before = None
    yield
    if before is None or not before.trusted or before.how not in ("nothing to trust", "recorded", "your own edits"):
        return
    try:
        after = evaluate(root, env)
    except MossError:
        return
    scripts = [sorted((i.key, i.value) for i in s.manifest.items if i.kind == "script") for s in (before, after)]
    if not after.trusted and scripts[0] == scripts[1]:
        grant(root, env, after.manifest, repin=True)


# -- showing and asking ----------------------------------------------------------------------

def where(root: Path) -> str:
    """The project's path for messages: absolute, ~-contracted (never a bare ".")."""
    s = str(Path(root).resolve())
    home = os.path.expanduser("~")
    return "~" + s[len(home):] if home not in ("", "/") and s.startswith(home + os.sep) else s


def origin_lines(state: Trust) -> list[str]:
    """Untrusted after a change: one line per changed file, how it changed (edited here, or
    why moss takes it as arrived from elsewhere)."""
    if state.trusted:
        return []
    return [f"{rel}: {why}" for rel, why in sorted(state.origins.items())]


def render(state: Trust, console) -> None:
    """What the project adds, as a table; with a previous record, what changed since."""
    from .tables import table
    from .ui import escape

    here = where(state.root)
    changes = state.changes if not state.trusted else []
    if not state.manifest.needed:
        console.print(f"{escape(here)}: its .moss/ holds nothing that needs trust")
    elif changes:
        console.print(f"[bold]{escape(here)}[/]: changed since you trusted it "
                      f"({escape(str(state.record.get('trusted_at', '?')))}):")
        console.print(table(("change", "kind", "item", "was", "now"),
                            [(change, (new or old).kind, (new or old).key, old.shown() if old else "",
                              new.shown() if new else "") for change, old, new in changes],
                            row_styles=[{"added": "green", "removed": "red"}.get(c, "yellow")
                                        for c, _, _ in changes], fold=True))
    else:
        console.print(f"[bold]{escape(here)}[/] brings code to run and settings that route or widen:")
        console.print(table(("kind", "item", "value", "note"),
                            [(i.kind, i.key, i.shown(), i.note) for i in state.manifest.items], fold=True))
    for line in origin_lines(state):
        console.print(f"  {escape(line)}")
    for item in state.manifest.user_only:
        console.print(f"[dim]never used from a project: {escape(item.line())}[/]")
    if state.manifest.needed:
        status = f"trusted ({state.how})" if state.trusted else (
            "not trusted (changed since)" if state.record else "not trusted")
        console.print(f"status: {status}")


def status_line(state: Trust) -> str:
    here = where(state.root)
    if not state.manifest.needed:
        return f"{here}: nothing to trust"
    if state.trusted:
        return f"{here}: trusted ({len(state.manifest.items)} items, {state.how})"
    if state.record:
        return f"{here}: not trusted: changed since you trusted it ({len(state.changes)} changes)"
    return f"{here}: not trusted ({len(state.manifest.items)} items)"


def status_lines(state: Trust) -> list[str]:
    """`moss trust --status`: the status line; untrusted, one line for each thing that waits
    for trust (or, after a change, each change), and what a project may never set."""
    def row(i: Item, was: Item | None = None) -> str:
        text = f"{i.kind}: {i.key} = {i.shown()}" + (f" (was {was.shown()})" if was else "")  # whole values
        return text + (f" ({i.note})" if i.note else "")

    out = [status_line(state)]
    if not state.trusted:
        if state.changes:
            out += [f"  {change}: {row(new or old, old if change == 'changed' else None)}"
                    for change, old, new in state.changes]
        else:
            out += [f"  needs trust: {row(i)}" for i in state.manifest.items]
        out += [f"  {line}" for line in origin_lines(state)]
    out += [f"  never used from a project: {i.line()}" for i in state.manifest.user_only]
    return out


def stdin_interactive(env=os.environ) -> bool:
    """A person can answer: stdin is a terminal (MOSS_ASSUME_TTY=1 stands in for one in tests,
    as for every other question moss asks)."""
    if env.get("MOSS_ASSUME_TTY") == "1":
        return True
    return bool(sys.stdin) and sys.stdin.isatty()


def ask(console, question: str) -> bool:
    """A y/N question on the console; anything but y/yes (or end of input) is no."""
    console.print(f"[bold]{question}[/] \\[y/N] ", end="")  # escaped: the choices, not a rich tag
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        answer = ""
    if not answer:
        console.print()
    return answer.strip().lower() in ("y", "yes")


def notice(state: Trust, console) -> None:
    """Say on stderr what the project set that this run ignores, and how to trust it."""
    from .ui import escape

    if not state.ignored:
        return
    if not state.trusted:
        console.print(f"[yellow]untrusted project {escape(where(state.root))}:[/] "
                      f"running with built-in scripts and your own config; ignoring:")
    else:
        console.print("[yellow]ignored from the project's config:[/]")
    for line in state.ignored:
        console.print(f"  {escape(line)}", markup=True)
    if state.origins and not state.trusted:
        console.print("[yellow]changed since you trusted it:[/]")
        for line in origin_lines(state):
            console.print(f"  {escape(line)}")
    if not state.trusted:
        console.print("[dim]review and trust it: moss trust   (or pass --trust to trust it for one run, "
                      "e.g. in CI for a checkout you vouch for)[/]")
