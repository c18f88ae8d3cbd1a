"""What a project brings, as a Manifest of Items: each .moss/scripts/ file hashed (links
followed, as the loader would read it) and each key of its config that needs trust (by
rules.py); and the hashing of one file that never follows a link nor blocks on a fifo.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..config import dotted_key, read_toml, user_config_file
from ..roots import ScriptRoots
from .rules import USER_ONLY_RULE, name_kind, rule_for, value_at
from .text import visible, visible_json

HEX64 = re.compile(r"^[0-9a-f]{64}")
HASH_ONLY = re.compile(r"[0-9a-f]{64}")  # a script's value when it is a plain file: its sha256 alone

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
            user_only.append(Item("setting", shown, visible_json(value), rule.why, key))
            continue
        kind = name_kind(name)
        if kind is None and rule is not None:
            mine = value_at(user, key)
            if rule.narrows(value, mine):
                continue  # only narrows what the user's own config (or the default) allows
            kind = "limit" if rule.test in ("at-most", "at-least") else "setting"
            note = "; ".join(x for x in (rule.why, rule.mine(mine)) if x)
            out.append(Item(kind, shown, visible_json(value), visible(note), key))
            continue
        if kind is None and isinstance(value, list):
            kind = _list_kind(value, key)
        if kind:
            out.append(Item(kind, shown, visible_json(value), path=key))
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
        from ..llm.providers import ALIASES, PRESETS

        if ALIASES.get(name.lower(), name.lower()) not in PRESETS:
            items.append(Item("setting", "llm.provider", visible_json(name), "not a built-in provider",
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
    root = Path(root)
    base = root / ".moss" / "scripts"
    items, dangling = _linked_folders(root, base)
    if dangling or not base.is_dir():
        return items, {}
    walk = _ScriptWalk(base, env)
    walk.folder(str(base), (), ())
    items += walk.items
    if walk.budget < 0:
        items.append(Item("script", ".moss/scripts", f"more than {MAX_SCRIPT_ENTRIES} entries",
                          "not all hashed: moss refuses to load what it did not hash"))
    return items, walk.pins


def _linked_folders(root: Path, base: Path) -> tuple[list[Item], bool]:
    """(an item for each of .moss and .moss/scripts that is a link, whether one dangles)."""
    items: list[Item] = []
    for p in (root / ".moss", base):  # the folders on the way may be links themselves
        if p.is_symlink():
            target = os.readlink(p)
            shown = visible(p.relative_to(root).as_posix())
            if not p.exists():
                items.append(Item("script", shown, visible(f"dangling link to {target}"),
                                  "a link to nothing yet: whatever appears there would run"))
                return items, True
            items.append(Item("script", shown, visible(f"link to {target}"),
                              visible(f"the scripts are read from {os.path.realpath(p)}")))
    return items, False


class _ScriptWalk:
    """One walk of .moss/scripts/, links followed: its items and pins, and what is left of its
    budget of MAX_SCRIPT_ENTRIES entries (below 0: it stopped early)."""

    def __init__(self, base: Path, env) -> None:
        self.others = [r for r in ScriptRoots(None, env).roots]
        self.real_base = os.path.realpath(base)
        self.seen: set[str] = set()
        self.budget = MAX_SCRIPT_ENTRIES
        self.items: list[Item] = []
        self.pins: dict[str, str] = {}

    def script(self, path: str, rel: str, via: tuple) -> None:
        try:
            with open(path, "rb") as f:
                data = f.read()
            digest = hashlib.sha256(data).hexdigest()
            self.pins[os.path.realpath(path)] = digest
        except OSError as e:
            digest = f"unreadable ({e.strerror})"
        value = digest + (" via " + "; ".join(via) if via else "")
        over = [r.name for r in self.others if (r.path / rel).is_file()]
        note = f"overrides {over[0]} {rel}" if over else ""
        real = os.path.realpath(path)
        if via and not (real == self.real_base or real.startswith(self.real_base + os.sep)):
            note = "; ".join(x for x in (note, "outside .moss/scripts: the loader refuses it") if x)
        self.items.append(Item("script", visible(f".moss/scripts/{rel}"), visible(value), visible(note)))

    def folder(self, folder: str, rel: tuple, via: tuple) -> None:
        real = os.path.realpath(folder)
        if real in self.seen:
            return  # a folder met again through a link (or a loop of links)
        self.seen.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            self.budget -= 1
            if self.budget < 0:
                return
            r = rel + (e.name,)
            name = "/".join(r)
            if e.is_symlink():
                target = os.readlink(e.path)
                link = via + (f"{name} -> {target}",)
                if not os.path.exists(e.path):
                    self.items.append(Item("script", visible(f".moss/scripts/{name}"),
                                           visible(f"dangling link to {target}"),
                                           "a link to nothing yet: whatever appears there would run"))
                elif os.path.isdir(e.path):
                    self.folder(e.path, r, link)
                elif e.name.endswith(".lua"):
                    self.script(e.path, name, link)
            elif e.is_dir(follow_symlinks=False):
                self.folder(e.path, r, via)
            elif e.name.endswith(".lua"):
                self.script(e.path, name, via)


def scan(root: Path, project: dict, env=os.environ, user: dict | None = None) -> Manifest:
    """What the project brings. `user` is the user's own config (read from `env` when not
    given): a project value that only narrows it needs no trust."""
    if user is None:
        user = read_toml(user_config_file(env))
    items, user_only = scan_config(project, user)
    scripts, pins = scan_scripts(root, env)
    return Manifest(scripts + items, user_only, pins)


class Change(NamedTuple):
    """One difference between trusted items and current ones (unpacks as (what, old, new))."""

    what: str  # added (old is None) | removed (new is None) | changed
    old: Item | None
    new: Item | None

    @property
    def item(self) -> Item:
        """The item as it is now, or as it was before it was removed."""
        item = self.new or self.old
        if item is None:
            raise ValueError("a change has an item before it or after it")
        return item


def diff(old: list[Item], new: list[Item]) -> list[Change]:
    """What changed from `old` items to `new`."""
    before = {(i.kind, i.key): i for i in old}
    after = {(i.kind, i.key): i for i in new}
    out = []
    for k, i in after.items():
        if k not in before:
            out.append(Change("added", None, i))
        elif before[k].value != i.value:
            out.append(Change("changed", before[k], i))
    for k, i in before.items():
        if k not in after:
            out.append(Change("removed", i, None))
    return out


def sha_file(path: Path) -> str | None:
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


def read_regular(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes, never through a link nor blocking on a fifo; None if it is not
    one or is larger than `limit`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
        return data if len(data) <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)
