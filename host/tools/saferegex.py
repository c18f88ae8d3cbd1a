"""Regexes whose pattern comes from config or a model, on a non-backtracking engine.

Python's `re` backtracks: `/(a+)+$/` against 'a' * 50 + 'b' never ends, so a pattern from a
project's config or a model's `<sweep>` could hold the host at full CPU. RE2 matches in time
linear in the text whatever the pattern; the price is that it refuses backreferences and
lookaround, which compile() reports in one line.
"""

from __future__ import annotations

import re2

from ..errors import MossError

escape = re2.escape  # a literal for compile()

MAX_MEMORY = 8 << 20  # bytes RE2 may use for one compiled pattern (its default)


def compile(pattern: str, *, ignore_case: bool = False, what: str = "regex"):
    """`pattern` compiled by RE2 (search, finditer, group and pattern as with `re`), or
    MossError(kind="usage"): one line naming `what`, the pattern and why RE2 refuses it."""
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False  # else RE2 writes its own copy of the error to stderr
    options.max_mem = MAX_MEMORY
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        raise MossError(f"{what} {pattern!r}: {_reason(e)}", kind="usage") from None


def _reason(e: Exception) -> str:
    detail = e.args[0] if e.args else str(e)
    if isinstance(detail, bytes):
        detail = detail.decode("utf-8", "replace")
    detail = " ".join(str(detail).split()) or "not a valid pattern"
    if detail.startswith(("invalid perl operator", "invalid escape sequence")):
        detail += " (patterns run on RE2, which has no backreferences or lookaround)"
    return detail
