"""What the host reads of a saved session: the declared row and timeline (host/api/events.lua's
`moss.events.session_row` and `moss.events.session_timeline`, typed in host/streamevents.py)
and a result's declared fields (`moss.events.result_fields`), and nothing else of it. What the agent script's `sessions` entry prints, or what a checkpoint
holds, is read through here: a field of another type is left out, a field not declared is
dropped, so no host code can come to depend on one (docs/agent.md, "What the host reads of a
session")."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from ..storage import ID_RE
from ..streamevents import ResultFields, SessionChild, SessionRow, SessionTimeline
from ..typedjson import reader
from .listing import list_checkpoints

_row = reader(SessionRow, only_declared=True)
_timeline = reader(SessionTimeline, only_declared=True)
_child = reader(SessionChild, only_declared=True)
_result = reader(ResultFields, only_declared=True)


def read_row(value: Any) -> SessionRow | None:
    """`value` as a session row; None when it is not an object with a usable id."""
    row = _row(value)
    if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not ID_RE.match(row["id"]):
        return None
    return cast(SessionRow, row)


def read_rows(listing: Any) -> list[SessionRow]:
    """The rows of a `sessions json` document ({"sessions": [...]}), those without a usable
    id left out."""
    raw = listing.get("sessions") if isinstance(listing, dict) else None
    rows = (read_row(r) for r in raw) if isinstance(raw, list) else ()
    return [r for r in rows if r is not None]


def read_timeline(value: Any) -> SessionTimeline:
    """`value` (a `sessions timeline ID` document) as a session timeline; {} when it is not one.
    Its children without a usable id are left out, as at every depth (read_children)."""
    timeline = cast(SessionTimeline, _timeline(value) or {})
    if "children" in timeline:
        timeline["children"] = [c for c in timeline["children"] if _usable(c)]
    return timeline


def read_children(value: Any) -> list[SessionChild]:
    """A session child's `children` as session children, those without a usable id left out."""
    kids = (_child(c) for c in value) if isinstance(value, list) else ()
    return [cast(SessionChild, c) for c in kids if _usable(c)]


def _usable(child: Any) -> bool:
    """A child whose id is a session id (what the board links to as /sessions/ID)."""
    return isinstance(child, dict) and isinstance(child.get("id"), str) and bool(ID_RE.match(child["id"]))


def read_result(value: Any) -> ResultFields:
    """A session's result (what a child agent's entry returned) as `moss.events.result_fields`
    declares it; {} when it is not an object."""
    return cast(ResultFields, _result(value) or {})


def saved_row(root: Path, sid: str) -> SessionRow | None:
    """Session `sid`'s row as its checkpoint has it (what its script last saved, `running`
    from its marker; not what the script's `sessions` entry makes of it); None without one."""
    for raw in list_checkpoints(root):
        if raw["id"] == sid:
            return read_row(raw)
    return None
