"""An edit spec: its shape checked, its text with LF line endings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...errors import MossError

ACTIONS = ("delete", "replace", "insert", "text", "create", "append", "prepend")
_NEEDS_CONTENT = {"replace", "insert", "text", "create", "append", "prepend"}
_KEYS = ("target", "action", "content", "position", "old")


@dataclass
class Spec:
    """One edit, as `parse_spec` checked it (content and old with LF line endings)."""

    number: int
    target: str
    action: str
    content: str | None = None
    position: str | None = None
    old: str | None = None
    symbol: str = ""  # the target after its file path ("" for the whole file)


def parse_spec(number: int, raw) -> Spec:
    """Check a spec's shape; returns it with newlines normalized to LF."""
    if not isinstance(raw, Mapping):
        raise MossError(f"a spec must be a table/dict, got {type(raw).__name__}", kind="usage")
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise MossError(f"unknown key(s) {', '.join(unknown)}; a spec has: "
                        + ", ".join(_KEYS), kind="usage")
    target, action = raw.get("target"), raw.get("action")
    if not isinstance(target, str) or not target.strip():
        raise MossError("missing target (a path, or path/Symbol)", kind="usage")
    if action not in ACTIONS:
        raise MossError(f"action {action!r} is not one of: {', '.join(ACTIONS)}",
                        kind="usage")
    spec = Spec(number, target.strip(), action)
    content = raw.get("content")
    if action in _NEEDS_CONTENT:
        if not isinstance(content, str):
            raise MossError(f"action {action} needs content (a string)", kind="usage")
        spec.content = _lf(content)
    elif content is not None:
        raise MossError(f"action {action} takes no content", kind="usage")
    position = raw.get("position")
    if action == "insert":
        position = "after" if position is None else position
        if position not in ("before", "after"):
            raise MossError(f"position must be 'before' or 'after', not {position!r} "
                            "(for the start or end of a file use prepend/append)",
                            kind="usage")
        spec.position = position
    elif position is not None:
        raise MossError(f"position is only for insert, not {action}", kind="usage")
    old = raw.get("old")
    if action == "text":
        if not isinstance(old, str) or old == "":
            raise MossError("action text needs old: the exact text to replace", kind="usage")
        spec.old = _lf(old)
    elif old is not None:
        raise MossError(f"old is only for action text, not {action}", kind="usage")
    return spec


def given(value: str | None) -> str:
    """A spec field `parse_spec` made sure of for the spec's action (content, old, position)."""
    assert value is not None
    return value


def _lf(s: str) -> str:
    return s.replace("\r\n", "\n")
