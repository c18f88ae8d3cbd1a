"""The trust record: the user's yes, kept in their data directory ($XDG_DATA_HOME/moss/trust/,
outside every repository) and keyed by the project's path; writing it (grant), taking it back
(revoke), reading and listing them; the copies of the trusted scripts kept beside it, for the
diff a later change shows (diffs.py); and what it pins to tell the user's own edits from
what arrived by git (judge.py decides with it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from ..config import read_layers
from ..roots import user_data_dir
from ..tools.safefs import replace_file
from .manifest import HASH_ONLY, Item, Manifest, read_regular, scan, sha_file
from .text import visible

MAX_COPY = 256 * 1024       # bytes of one script kept as its trusted copy


def trust_dir(env=os.environ) -> Path:
    """Where every trust record is kept: the user's data directory, outside every repository."""
    return user_data_dir(env) / "trust"


def record_file(root: Path, env=os.environ) -> Path:
    """The record of the project at `root`, keyed by its real path."""
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:32]
    return trust_dir(env) / f"{key}.json"


def load_record(root: Path, env=os.environ) -> dict | None:
    """The project's record; None when there is none, or it is unreadable or for another path."""
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
    from .. import __version__

    root = Path(root).resolve()
    if manifest is None:
        user, project = read_layers(root, env)
        manifest = scan(root, project, env, user)
    p = record_file(root, env)
    p.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {
        "path": str(root), "hash": manifest.digest, "trusted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "moss": __version__, "items": [{"kind": i.kind, "key": i.key, "value": i.value} for i in manifest.items]}
    old = load_record(root, env)
    if repin and old and isinstance(old.get("trusted_at"), str):
        data["trusted_at"] = old["trusted_at"]
    data["local"] = pin(root, manifest, old, env)
    replace_file(p, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    keep(root, manifest, env)  # the trusted text, for the diff a later change shows
    return p


def revoke(root: Path, env=os.environ) -> bool:
    """Remove the project's record and its copies; whether there was a record."""
    forget(root, env)
    try:
        record_file(root, env).unlink()
        return True
    except FileNotFoundError:
        return False


def list_records(env=os.environ) -> list[dict]:
    """Every readable record, by project path (`moss trust --list`)."""
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


def items_of(record: dict) -> list[Item]:
    """The items a record says were trusted (kind, key and value only)."""
    out = []
    for r in record.get("items") or []:
        if isinstance(r, dict):
            out.append(Item(str(r.get("kind")), str(r.get("key")), str(r.get("value"))))
    return out


# -- the trusted copies ----------------------------------------------------------------------

def files_dir(root: Path, env=os.environ) -> Path:
    """Where the trusted copies of a project's scripts are kept: beside its record."""
    return record_file(root, env).with_suffix(".files")


def keep(root: Path, manifest: Manifest, env=os.environ) -> None:
    """Copies of the manifest's plain script files as trusted now (each read again and kept
    only if it still has the sha256 trusted); copies of no current script are removed. A
    failure to keep one only means its next change shows no diff."""
    root = Path(root)
    d = files_dir(root, env)
    wanted = {i.value: i.key for i in manifest.items if i.kind == "script" and HASH_ONLY.fullmatch(i.value)}
    try:
        d.mkdir(parents=True, exist_ok=True)
        for sha, rel in wanted.items():
            if (d / sha).is_file():
                continue
            data = read_regular(root / rel, MAX_COPY)
            if data is not None and hashlib.sha256(data).hexdigest() == sha:
                replace_file(d / sha, data)
        for old in d.iterdir():
            if old.name not in wanted:
                old.unlink()
    except OSError:
        pass


def forget(root: Path, env=os.environ) -> None:
    """Remove the trusted copies (`moss trust --revoke`)."""
    shutil.rmtree(files_dir(root, env), ignore_errors=True)


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


def _kept(rel: str) -> bool:
    return rel == CONFIG_REL or rel.startswith(SCRIPTS_REL)


def not_plain(root: Path, rel: str) -> str:
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


def _files_of(root: Path, manifest: Manifest) -> dict[str, str | None]:
    """The files behind a manifest's items, by path: .moss/config.toml (None: absent) and each
    script that is a plain file, with the sha256 it was trusted as."""
    files: dict[str, str | None] = {CONFIG_REL: sha_file(root / CONFIG_REL)}
    for i in manifest.items:
        if i.kind == "script" and HASH_ONLY.fullmatch(i.value) and not not_plain(root, i.key):
            files[i.key] = i.value
    return files


def local_of(record: dict | None) -> dict | None:
    """What a record pinned to tell local edits from arrivals (see pin); None when it has none
    usable (an older moss's record)."""
    local = record.get("local") if isinstance(record, dict) else None
    if not isinstance(local, dict) or not all(isinstance(local.get(k), dict) for k in ("head", "files", "known")):
        return None
    return local


def pin(root: Path, manifest: Manifest, old: dict | None = None, env=os.environ) -> dict:
    """What a trust record keeps to tell a local edit from an arrival later: whether the
    project was a git work tree, HEAD's entry ("MODE OID") for .moss/config.toml and each
    .moss/scripts/ file, the sha256 of each trusted file now, and per file the contents it
    had when trusted or edited here (the last MAX_KNOWN), kept from the old record."""
    from ..tools.gitread import GitView

    root = Path(root)
    files = _files_of(root, manifest)
    view = GitView.open(root)
    known: dict[str, list[str]] = {}
    prev = local_of(old)
    if prev is not None:
        for rel, shas in prev["known"].items():
            if isinstance(rel, str) and isinstance(shas, list):
                known[rel] = [h for h in shas if isinstance(h, str) and HASH_ONLY.fullmatch(h)]
    for rel, sha in files.items():
        if sha:
            known[rel] = ([h for h in known.get(rel, []) if h != sha] + [sha])[-MAX_KNOWN:]
    head = {r: e for r, e in view.head.items() if _kept(r)} if view is not None else {}
    return {"git": view is not None, "head": head, "files": files, "known": known}
