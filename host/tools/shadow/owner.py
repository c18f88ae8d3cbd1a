"""Whether a ``.moss/shadow.git`` is moss's own, and setting aside one that is not.

A store moss made holds its token (``moss-owner``); the token's sha256 and that of the
config git wrote are kept outside every repository, in ``$XDG_DATA_HOME/moss/shadow/``
(the *owner record*). A store without a matching record, or holding a link, fifo or device,
is moved (never deleted) to ``.moss/agent/quarantine/`` with one warning line.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import time
from pathlib import Path
from typing import Callable

from ...errors import MossError
from .. import safefs
from ..safefs import UnsafePath
from .model import _STORE, _dumps

_OWNER = "moss-owner"           # a random token; its sha256 is kept outside the project


def foreign(tree: safefs.Tree, root: Path) -> str | None:
    """Why the store at .moss/shadow.git is not one moss made for this project, or None.

    A store moss made holds its token (`moss-owner`, whose sha256 and the config's are
    kept outside the project, in the user's data folder), the config git wrote when moss
    made it, and nothing but folders and regular files. A repository can ship a
    `.moss/shadow.git` whose files are links out of the project, or whose config runs
    commands; moss never writes to or runs git against such a store. A folder holding
    only moss's lock is a store being made (by this process or another)."""
    names = [n for n in tree.listdir(_STORE) if n != "moss.lock"]
    if not names:
        return None
    odd = odd_entry(tree)
    if odd:
        return odd
    record = _owners.get(str(root)) or _read_owner_record(root)
    if record is None:
        return "there is no record that moss made it here"
    try:
        token = tree.read_bytes(f"{_STORE}/{_OWNER}", 256)
        config = tree.read_bytes(f"{_STORE}/config", 64 * 1024)
    except FileNotFoundError as e:
        return f"{os.path.basename(e.filename or _OWNER)} is missing"
    except OSError as e:
        return f"it cannot be read ({e.strerror or e})"
    if not hmac.compare_digest(hashlib.sha256(token).hexdigest(), record.get("token", "")):
        return "its owner token is not the one moss recorded"
    if not hmac.compare_digest(hashlib.sha256(config).hexdigest(), record.get("config", "")):
        return "its config is not the one git wrote when moss made it"
    return None


def odd_entry(tree: safefs.Tree) -> str | None:
    """The first link, fifo, socket or device anywhere in the store, named."""
    stack = [_STORE]
    while stack:
        rel = stack.pop()
        try:
            fd = tree.open_dir(rel)
        except (UnsafePath, OSError) as e:
            return getattr(e, "message", None) or f"{rel}: {e}"
        try:
            with os.scandir(fd) as it:
                found = [(e.name, e.stat(follow_symlinks=False).st_mode) for e in it]
        except OSError as e:
            return f"{rel} cannot be read ({e.strerror})"
        finally:
            os.close(fd)
        for name, mode in found:
            if stat.S_ISDIR(mode):
                stack.append(f"{rel}/{name}")
            elif stat.S_ISLNK(mode):
                return f"{rel}/{name} is a symlink"
            elif not stat.S_ISREG(mode):
                return f"{rel}/{name} is not a regular file"
    return None


def set_aside(tree: safefs.Tree, root: Path, why: str, store: tuple,
              notify: Callable[[str], None] | None) -> None:
    """Move the store moss did not make, `store` (device, inode), into
    .moss/agent/quarantine/ (never deleted), and say so in one warning line (to `notify`,
    else on the terminal)."""
    from ... import storage

    dest = (f".moss/agent/quarantine/{time.strftime('%Y%m%d-%H%M%S')}-"
            f"{secrets.token_hex(3)}-shadow.git")
    try:
        storage.ensure_dir(root / ".moss" / "agent" / "quarantine")
        now = tree.lstat(_STORE)
        if now is None or (now.st_dev, now.st_ino) != store:
            return       # another moss process moved it aside first, and said so
        tree.rename(_STORE, dest, create_dirs=False)
    except FileNotFoundError:
        if tree.lstat(_STORE) is None:
            return
        raise MossError(f"shadow: .moss/shadow.git was not made by moss for this project ({why}) "
                        "and could not be moved aside; remove it", kind="denied") from None
    except (MossError, OSError) as e:
        reason = e.message if isinstance(e, MossError) else (e.strerror or str(e))
        raise MossError(f"shadow: .moss/shadow.git was not made by moss for this project "
                        f"({why}) and could not be moved aside ({reason}); remove it",
                        kind="denied") from None
    message = (f"warning: .moss/shadow.git was not made by moss for this project ({why}); "
               f"moved it to {dest}/ and started a new snapshot store")
    if notify is not None:
        notify(message)
    else:
        from ... import ui

        ui.note(message, "yellow")


def own(tree: safefs.Tree, root: Path) -> None:
    """Mark a store this process just made as moss's: a fresh token inside it, its
    sha256 and the config's outside the project."""
    token = secrets.token_hex(32).encode()
    if not tree.create_exclusive(f"{_STORE}/{_OWNER}", token, 0o600, create_dirs=False):
        raise MossError("shadow: .moss/shadow.git/moss-owner appeared while moss made the "
                        "store; remove .moss/shadow.git", kind="denied")
    config = tree.read_bytes(f"{_STORE}/config", 64 * 1024)
    record = {"root": str(root), "token": hashlib.sha256(token).hexdigest(),
              "config": hashlib.sha256(config).hexdigest()}
    _owners[str(root)] = record
    _write_owner_record(root, record)


# Ownership records: which .moss/shadow.git moss made, kept where no repository can ship
# them ($XDG_DATA_HOME/moss/shadow/), and in this process for the stores it made.
_owners: dict[str, dict] = {}


def _owner_record_path(root: Path) -> Path:
    from ...roots import user_data_dir

    key = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:32]
    return user_data_dir() / "shadow" / f"{key}.json"


def _read_owner_record(root: Path) -> dict | None:
    try:
        with open(_owner_record_path(root), "rb") as f:
            rec = json.loads(f.read(64 * 1024))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("root") != str(root):
        return None
    return rec


def _write_owner_record(root: Path, record: dict) -> None:
    """Best effort: without a writable data folder the store is this process's only (the
    next moss process sets it aside and makes its own)."""
    path = _owner_record_path(root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        safefs.replace_file(path, _dumps(record) + "\n", 0o600)
    except OSError:
        pass


def forget(root: Path) -> None:
    """Drop the owner record of `root`'s store (a folder about to be deleted: an isolated
    child's copy, host/tools/worktree/)."""
    _owners.pop(str(root), None)
    try:
        os.unlink(_owner_record_path(root))
    except OSError:
        pass
