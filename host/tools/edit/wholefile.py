"""Whole-file edits: create, replace, delete, append, prepend, and text over the whole file."""

from __future__ import annotations

from .files import File
from .spec import Spec, given
from .text import exact_edit


def create(f: File, spec: Spec) -> None:
    """A new file holding the content (`locate_file` made sure nothing is there)."""
    f.set(spec.content)


def file_edit(f: File, spec: Spec) -> None:
    """An edit whose target is a whole existing file (insert before/after: prepend/append)."""
    action, text = spec.action, f.existing()
    if action == "insert":
        action = "prepend" if spec.position == "before" else "append"
    if action == "delete":
        f.set(None)
    elif action == "replace":
        f.set(spec.content)
    elif action == "append":
        f.set(text + _own_lines(given(spec.content)))
    elif action == "prepend":
        f.set(_own_lines(given(spec.content)) + text)
    elif action == "text":
        exact_edit(f, spec, 0, len(text), f.rel)


def _own_lines(content: str) -> str:
    return content if not content or content.endswith("\n") else content + "\n"
