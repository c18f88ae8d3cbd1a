"""Workspace trust: a cloned repository must not own the person who runs moss in it.

A project's .moss/ can bring Lua that replaces the agent, commands to run, LLM endpoints and
key variables to send, and settings that widen access or approval. None of that is used
until the user said yes to that exact content; the yes is kept in the user's data directory
($XDG_DATA_HOME/moss/trust/, outside every repository), keyed by the project's path and a
hash of what it brings, so a changed file or setting asks again. Everything else in a
project's config (max_turns, custom fields) needs no trust.

Some settings never come from a project, trusted or not: [agent] allow_full and
unsandboxed_ok, and the [trust] table. A trusted project's [agent] auto_approve is capped
at the user's own (default "low").
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
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
DEFAULT_MAX_ACCESS = "edit"

# [agent] settings that choose what runs or widen access or approval.
WIDENING = {("agent", "role"), ("agent", "pipeline"), ("agent", "dispatch"), ("agent", "auto_approve"),
            ("agent", "machine")}
# Never taken from a project: only the user's own config (or a flag) grants these.
USER_ONLY = {("agent", "allow_full"), ("agent", "unsandboxed_ok"), ("trust",)}
# A key with one of these names is a command; in a table that has one, these siblings
# are part of the command ([mcp.servers.x] command = ..., args = [...], env = {...}).
COMMAND_KEYS = {"run", "cmd", "command", "commands", "validate_commands"}
COMMAND_SIBLINGS = {"args", "argv", "env", "cwd", "workdir"}
# Dropping an ignored key drops these project keys too (they only make sense with it).
DEPENDENTS = {("agent", "validate_commands"): [("agent", "validate")], ("llm", "provider"): [("llm", "model")]}

KINDS = ("script", "command", "endpoint", "key variable", "setting")


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
            return "sha256:" + self.value[:16]
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


def _config_kind(path: tuple, name: str, command_table: bool) -> str | None:
    if name in COMMAND_KEYS or (command_table and name in COMMAND_SIBLINGS):
        return "command"
    if name in ("base_url", "url", "endpoint", "address") or name.endswith(("_url", "_address")):
        return "endpoint"  # e.g. [agent.wild] ray_address: where the project's code is sent to run
    if name == "api_key_env" or name.endswith("_key_env"):
        return "key variable"
    if path in WIDENING or name in ("access", "executor"):
        return "setting"
    return None


def _list_kind(values: list, path: tuple) -> str | None:
    """The kind of the first trust-needing key inside a list of tables, if any."""
    for v in values:
        found: list[Item] = []
        if isinstance(v, dict):
            _walk(v, path, found, [])
        elif isinstance(v, list):
            kind = _list_kind(v, path)
            if kind:
                return kind
        if found:
            return found[0].kind
    return None


def _walk(node: dict, path: tuple, out: list[Item], user_only: list[Item]) -> None:
    command_table = any(k in COMMAND_KEYS for k in node)
    for name, value in node.items():
        key = path + (name,)
        if key in USER_ONLY:
            user_only.append(Item("setting", visible(dotted_key(key)), _json(value), "only your user config can set it",
                                  key))
            continue
        kind = _config_kind(key, name, command_table)
        if kind is None and isinstance(value, list):
            kind = _list_kind(value, key)
        if kind:
            out.append(Item(kind, visible(dotted_key(key)), _json(value), path=key))
        elif isinstance(value, dict):
            _walk(value, key, out, user_only)


def scan_config(project: dict) -> tuple[list[Item], list[Item]]:
    """(items that need trust, user-only items) in a project's config."""
    items: list[Item] = []
    user_only: list[Item] = []
    _walk(project, (), items, user_only)
    llm = project.get("llm")
    name = llm.get("provider") if isinstance(llm, dict) else None
    if isinstance(name, str) and name:
        from .llm.providers import ALIASES, PRESETS

        if ALIASES.get(name.lower(), name.lower()) not in PRESETS:
            items.append(Item("setting", "llm.provider", _json(name), "not a built-in provider",
                              ("llm", "provider")))
    return items, user_only


def scan_scripts(root: Path, env=os.environ) -> list[Item]:
    """Every .lua file under .moss/scripts/, with its sha256 (symlinked folders not followed:
    the loader refuses what leads outside its root)."""
    from .roots import ScriptRoots

    base = Path(root) / ".moss" / "scripts"
    if not base.is_dir():
        return []
    others = [r for r in ScriptRoots(None, env).roots]
    items = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames.sort()
        for fname in sorted(filenames):
            if not fname.endswith(".lua"):
                continue
            p = Path(dirpath) / fname
            try:
                digest = hashlib.sha256(p.read_bytes()).hexdigest()
            except OSError as e:
                digest = f"unreadable ({e.strerror})"
            rel = p.relative_to(base)
            over = [r.name for r in others if (r.path / rel).is_file()]
            note = f"overrides {over[0]} {rel.as_posix()}" if over else ""
            items.append(Item("script", visible((Path(".moss") / "scripts" / rel).as_posix()), digest, visible(note)))
    return items


def scan(root: Path, project: dict, env=os.environ) -> Manifest:
    items, user_only = scan_config(project)
    return Manifest(scan_scripts(root, env) + items, user_only)


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


def grant(root: Path, env=os.environ, manifest: Manifest | None = None) -> Path:
    """Record that the user trusts the project's current content."""
    from . import __version__
    from .tools.atomic import write_atomic

    root = Path(root).resolve()
    if manifest is None:
        manifest = scan(root, read_layers(root, env)[1], env)
    p = record_file(root, env)
    p.parent.mkdir(parents=True, exist_ok=True)
    data = {"path": str(root), "hash": manifest.digest, "trusted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "moss": __version__,
            "items": [{"kind": i.kind, "key": i.key, "value": i.value} for i in manifest.items]}
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
    manifest = scan(root, project, env)
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
    config, keys, ignored = effective(user, project, manifest, trusted)
    return Trust(root=root, manifest=manifest, trusted=trusted, how=how, config=config, user_config=user,
                 project_keys=keys, ignored=ignored, max_access=limit, record=record)


# -- showing and asking ----------------------------------------------------------------------

def where(root: Path) -> str:
    """The project's path for messages: absolute, ~-contracted (never a bare ".")."""
    s = str(Path(root).resolve())
    home = os.path.expanduser("~")
    return "~" + s[len(home):] if home not in ("", "/") and s.startswith(home + os.sep) else s


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


def stdin_interactive(env=os.environ) -> bool:
    """A person can answer: stdin is a terminal (MOSS_ASSUME_TTY=1 stands in for one in tests,
    as for every other question moss asks)."""
    if env.get("MOSS_ASSUME_TTY") == "1":
        return True
    return bool(sys.stdin) and sys.stdin.isatty()


def ask(console, question: str) -> bool:
    """A y/N question on the console; anything but y/yes (or end of input) is no."""
    console.print(f"[bold]{question}[/] [y/N] ", end="")
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
    if not state.trusted:
        console.print("[dim]review and trust it: moss trust   (or pass --trust to trust it for one run, "
                      "e.g. in CI for a checkout you vouch for)[/]")
