"""Whole-file edits: create, replace, delete, append, prepend, and text over the whole file.
"""

from __future__ import annotations

from .files import _File
from .spec import _Spec, _given
from .text import _exact_edit


def _create(f: _File, spec: _Spec) -> None:
    f.set(spec.content)


def _file_edit(f: _File, spec: _Spec) -> None:
    action, text = spec.action, f.existing()
    if action == "insert":
        action = "prepend" if spec.position == "before" else "append"
    if action == "delete":
        f.set(None)
    elif action == "replace":
        f.set(spec.content)
    elif action == "append":
        f.set(text + _own_lines(_given(spec.content)))
    elif action == "prepend":
        f.set(_own_lines(_given(spec.content)) + text)
    elif action == "text":
        _exact_edit(f, spec, 0, len(text), f.rel)


def _own_lines(content: str) -> str:
    return content if not content or content.endswith("\n") else content + "\n"
