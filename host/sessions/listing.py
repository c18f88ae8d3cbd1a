"""The saved sessions of a project: their ids, a listing of their checkpoints as the
`moss.session.list` primitive gives it to the agent script, one loaded whole, a new id."""

from __future__ import annotations

import secrets
import stat
from pathlib import Path

from .. import storage
from ..errors import MossError
from ..storage import agent_dir, check_id, scalars
from .checkpoint import CorruptCheckpoint, checkpoint_path, json_kind, read_checkpoint
from .running import running

ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no look-alikes (0/o, 1/l/i)


def saved_ids(root: Path, *, refuse_link: bool = False) -> list[str]:
    """The ids of the project's checkpoints (session-ID.json), none of them read. A folder
    that is a link lists nothing, with a one-line warning (`refuse_link`: UnsafePath)."""
    names = (storage.listdir if refuse_link else storage.listed)(agent_dir(root))
    return [name[len("session-"):-len(".json")] for name in names
            if name.startswith("session-") and name.endswith(".json")]


def has_checkpoint(root: Path, sid: str) -> bool:
    """Whether session `sid` has a checkpoint (a file; what it holds is not read)."""
    st = storage.lstat(checkpoint_path(root, sid))
    return st is not None and stat.S_ISREG(st.st_mode)


def list_checkpoints(root: Path) -> list[dict]:
    """Every checkpoint, oldest first: its scalar fields as saved (the host reads none of
    them: the agent script's `sessions` entry makes the declared row of them) and `running`,
    whether a live moss process runs it now (its running marker, running.py; stale markers are
    removed on the way). One that cannot be read is listed all the same, with state and reason
    "corrupt" and `error` saying why and what to do. What a session that is not running and
    did not end counts as is its script's to say."""
    out: list[dict] = []
    live = None  # ids of the sessions a live process runs, asked once
    for sid in saved_ids(root):
        p = checkpoint_path(root, sid)
        st = storage.lstat(p)
        if st is None:
            continue  # deleted while we listed
        mtime = st.st_mtime
        jst = storage.lstat(p.with_suffix(".journal"))
        if jst is not None:
            mtime = max(mtime, jst.st_mtime)  # saved since the base
        if live is None:
            live = {r["id"] for r in running(root)}
        row = {"id": sid, "mtime": mtime, "running": sid in live}
        try:
            data = read_checkpoint(p)
        except FileNotFoundError:
            continue
        except CorruptCheckpoint as e:
            row.update(state="corrupt", reason="corrupt", error=e.message)
        else:
            row.update({k: v for k, v in scalars(data).items() if k not in row})
            # the JSON kind of each other top-level field, for the script's own shape checks
            row["field_kinds"] = {k: json_kind(v) for k, v in data.items() if isinstance(k, str) and k not in row}
        out.append(row)
    out.sort(key=lambda d: d["mtime"])
    return out


def load_checkpoint(root: Path, sid: str | None) -> dict:
    """Session `sid`'s checkpoint (the latest saved without one), with `session_id` the id
    of the file it came from."""
    if sid in (None, "", "latest", True):
        items = list_checkpoints(root)
        if not items:
            raise MossError("no saved sessions in .moss/agent/ to resume", kind="not_found")
        sid = items[-1]["id"]
    check_id(sid)
    p = checkpoint_path(root, sid)
    try:
        state = read_checkpoint(p)
    except FileNotFoundError:
        known = ", ".join(d["id"] for d in list_checkpoints(root)[-5:]) or "none"
        raise MossError(f"no session {sid!r} (recent: {known})", kind="not_found") from None
    state["session_id"] = sid  # the file it came from, whatever a copied file says inside
    return state


def new_session_id(root: Path) -> str:
    """A fresh id no checkpoint has (never from Lua's math.random, which --seed repeats)."""
    while True:
        sid = "".join(secrets.choice(ALPHABET) for _ in range(8))
        if storage.lstat(checkpoint_path(root, sid)) is None:
            return sid
