"""What a batch reports: each change's diff and counts, the whole diff, and a warning when
an edit left a file with more parse errors than it had.
"""

from __future__ import annotations

import difflib

from ..treesitter import grammars
from .files import File, Plan
from .spec import Spec

DIFF_CONTEXT = 2


def change_entry(f: File, before: str | None, spec: Spec) -> dict:
    """What one spec changed in its file: its diff, lines added and removed, target and action."""
    diff = _diff(f.rel, before, f.text)
    added, removed = _count(diff)
    return {"path": f.rel, "diff": diff, "added": added, "removed": removed,
            "target": spec.target, "action": spec.action}


def batch_result(plan: Plan) -> dict:
    """What `preview` and `apply` return (see the package doc), but the surfaces."""
    changed = plan.changed()
    result = {
        "files": [f.rel for f in changed],
        "changes": plan.changes,
        "diff": "".join(_diff(f.rel, f.initial, f.text) for f in changed),
    }
    warnings = [w for w in (_syntax_warning(f) for f in changed) if w]
    if warnings:
        result["syntax_warning"] = "\n".join(warnings)
    return result


def _diff(rel: str, before: str | None, after: str | None) -> str:
    if before == after:
        return ""
    a = before.split("\n")[:-1] if before else []
    b = after.split("\n")[:-1] if after else []
    out = difflib.unified_diff(a, b, "/dev/null" if before is None else f"a/{rel}",
                               "/dev/null" if after is None else f"b/{rel}",
                               n=DIFF_CONTEXT, lineterm="")
    return "".join(line + "\n" for line in out)


def _count(diff: str) -> tuple[int, int]:
    lines = diff.split("\n")[2:]
    return (sum(1 for x in lines if x.startswith("+")),
            sum(1 for x in lines if x.startswith("-")))


def _syntax_warning(f: File) -> str | None:
    """"path: parse error near line N" when the batch added parse errors to the file."""
    if f.lang is None or not f.text:
        return None
    errors = _parse_errors(f.text, f.lang)
    if not errors:
        return None
    before = len(_parse_errors(f.initial, f.lang)) if f.initial else 0
    if len(errors) <= before:
        return None
    return f"{f.rel}: parse error near line {errors[0]}"


def _parse_errors(text: str, lang: str, limit: int = 200) -> list[int]:
    """Lines (1-based) of the ERROR and MISSING nodes in a parse, in order."""
    root = grammars.parse(text.encode("utf-8"), lang).root_node
    if not root.has_error:
        return []
    found: list[int] = []
    stack = [root]
    while stack and len(found) < limit:
        node = stack.pop()
        if node.is_error or node.is_missing:
            found.append(node.start_point[0] + 1)
            continue
        stack.extend(c for c in reversed(node.children) if c.has_error or c.is_missing)
    return found
