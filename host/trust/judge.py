"""The decision for one run: whether the project's content is in use (nothing to trust, a
record of this exact content, --trust, a yes just answered, or changes judged to be the
user's own edits), the config it leads to, and the user's caps on a trusted project
([trust] max_access, [agent] auto_approve). Trust pins what arrives from elsewhere, not what
the user types: in a git work tree, a change git could not have brought is the user's own
edit (judge()), and moss's own writes keep a project trusted too (kept()).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import deep_merge, dotted_key, read_layers, user_config_file
from ..errors import ConfigError, MossError
from ..roots import display_path
from ..tools.sandbox import ACCESS_LEVELS as LEVELS  # weakest first
from .manifest import HASH_ONLY, Change, Manifest, diff, scan, scan_config, sha_file
from .record import CONFIG_REL, grant, items_of, load_record, local_of, not_plain
from .rules import APPROVAL, DEPENDENTS, value_at

if TYPE_CHECKING:
    from ..tools.gitread import GitView

DEFAULT_MAX_ACCESS = "edit"
LOCAL = "edited here"  # a changed file judged to be the user's own edit


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
    def changes(self) -> list[Change]:
        """What changed since the recorded trust."""
        if not self.record:
            return []
        return diff(items_of(self.record), self.manifest.items)


# -- your own edits ---------------------------------------------------------------------------

def local_edits_on(user: dict, env=os.environ) -> bool:
    """The user's [trust] local_edits (default true): false makes every change ask again."""
    t = user.get("trust")
    value = t.get("local_edits", True) if isinstance(t, dict) else True
    if not isinstance(value, bool):
        raise ConfigError(f"{display_path(user_config_file(env))}: [trust] local_edits must be true or false, "
                          f"got {value!r}")
    return value


def _same_config_items(data: bytes, record: dict, user: dict) -> bool:
    """Whether a config file's bytes (HEAD's copy) bring exactly the settings trusted before:
    a pulled change to comments or free keys brings nothing that needs trust."""
    try:
        items, _ = scan_config(tomllib.loads(data.decode("utf-8")), user)
    except (ValueError, UnicodeDecodeError, ConfigError):
        return False
    trusted = {(i.kind, i.key, i.value) for i in items_of(record) if i.kind != "script"}
    return {(i.kind, i.key, i.value) for i in items} == trusted


ARRIVED = "arrived by git: HEAD's copy changed since you trusted it (a pull, checkout, merge, reset or commit)"
IN_GIT = ("its content is an object git already has: it came out of the repository (another version checked "
          "out, a merge, a stash), or you ran `git add` before moss saw the edit")


def judge(root: Path, record: dict, manifest: Manifest, user: dict) -> dict[str, str]:
    """For each file behind a change since `record`: LOCAL when it is the user's own edit made
    in this working tree, else why moss cannot take it as one (it asks then)."""
    from ..tools.gitread import GitView

    root = Path(root)
    out, expect = _changed_files(record, manifest)
    local = local_of(record)
    view = GitView.open(root) if any(not v for v in out.values()) else None
    pending: list[str] = []
    for rel, why in out.items():
        if why:
            continue
        sha = sha_file(root / rel)
        known = set(local["known"].get(rel) or []) if local else set()
        why = _why_not_local(root, rel, sha, known, local, view, expect, record, user)
        if not why and sha is not None and sha not in known:
            pending.append(rel)
        out[rel] = why or LOCAL
    if pending and view is not None:
        _ask_git(view, pending, out)
    return out


def _changed_files(record: dict, manifest: Manifest) -> tuple[dict[str, str], dict[str, str | None]]:
    """Each file behind a change since `record` (a script, or the config), with why it cannot
    be the user's edit when that is already plain ("" when it has to be looked at); and each
    changed script's sha256 as scanned (None: removed)."""
    out: dict[str, str] = {}
    expect: dict[str, str | None] = {}
    for change in diff(items_of(record), manifest.items):
        item, old, new = change.item, change.old, change.new
        rel = item.key if item.kind == "script" else CONFIG_REL
        if item.kind == "script" and not all(HASH_ONLY.fullmatch(i.value) for i in (old, new) if i):
            out[rel] = "a link, or a file moss could not read: moss cannot tell where it came from"
            continue
        out.setdefault(rel, "")
        if item.kind == "script":
            expect[rel] = new.value if new else None
    return out, expect


def _why_not_local(root: Path, rel: str, sha: str | None, known: set[str], local: dict | None, view: GitView | None,
                   expect: dict[str, str | None], record: dict, user: dict) -> str:
    """Why the change to `rel` cannot be taken as the user's own edit ("" when it can, so far:
    git is asked about those next)."""
    why = not_plain(root, rel)
    if why:
        return why
    if local is None:
        return "trusted by an older moss, which kept nothing to tell edits from arrivals"
    if view is None:
        return "not a git work tree (or git would not read it): moss cannot tell who changed it"
    if view.busy:
        return f"git is in the middle of a merge, cherry-pick, revert or rebase ({view.busy})"
    if rel in expect and expect[rel] != sha:
        return "changed again while moss looked"
    if sha == local["files"].get(rel):
        return "the file did not change, but what it means did (your own config changed)"
    if view.head.get(rel) != local["head"].get(rel):
        data = view.blob(view.head.get(rel))
        mine = data is not None and (hashlib.sha256(data).hexdigest() in known or (
            rel == CONFIG_REL and _same_config_items(data, record, user)))
        if not mine:
            return ARRIVED
    return ""


def _ask_git(view: GitView, pending: list[str], out: dict[str, str]) -> None:
    """Of the edits that look like the user's, those git converts, or already holds as an
    object, cannot be told from git's own copy: `out` says so."""
    converted = view.converting(pending)
    for rel in pending:
        if converted.get(rel):
            out[rel] = (f"git converts it between its object and the file ({', '.join(converted[rel])}): "
                        "moss cannot tell an edit from git's copy")
    stored = view.in_store([r for r in pending if out[r] == LOCAL])
    for rel, found in stored.items():
        if found:
            out[rel] = IN_GIT


# -- the decision ----------------------------------------------------------------------------

def _remove(node: dict, path: tuple) -> bool:
    parent = value_at(node, path[:-1])
    if isinstance(parent, dict) and path and path[-1] in parent:
        del parent[path[-1]]
        return True
    return False


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
        approve = value_at(proj, ("agent", "auto_approve"))
        mine = value_at(user, ("agent", "auto_approve"))
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
