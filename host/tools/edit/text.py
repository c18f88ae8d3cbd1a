"""Exact-text edits: `old` found exactly once, or an error saying where it nearly is."""

from __future__ import annotations

import difflib
import re

from ...errors import MossError
from .files import File
from .layout import line_number, start_of_line
from .spec import Spec, given


def exact_edit(f: File, spec: Spec, lo: int, hi: int, where: str) -> None:
    """Replace the one occurrence of `spec.old` in the file's text[lo:hi] (`where` names it in
    errors): not_found says where it nearly is, ambiguous on which lines it occurs."""
    text, old = f.existing(), given(spec.old)
    hits = _occurrences(text, old, lo, hi)
    if not hits:
        raise MossError(_no_match(text, old, lo, hi, where), kind="not_found")
    if len(hits) > 1:
        lines = [line_number(text, i) for i in hits]
        shown = ", ".join(map(str, lines[:10])) + (", …" if len(lines) > 10 else "")
        raise MossError(f"old text occurs {len(hits)} times in {where} (lines {shown}); "
                        "include more surrounding text so it occurs once", kind="ambiguous",
                        count=len(hits), lines=lines)
    i = hits[0]
    f.set(text[:i] + given(spec.content) + text[i + len(old):])


def _occurrences(text: str, old: str, lo: int, hi: int, limit: int = 100) -> list[int]:
    """Start offsets of `old` within text[lo:hi], overlapping ones included."""
    hits: list[int] = []
    i = text.find(old, lo, hi)
    while i >= 0 and len(hits) < limit:
        hits.append(i)
        i = text.find(old, i + 1, hi)
    return hits


_SPACES = re.compile(r"\s+")


def _no_match(text: str, old: str, lo: int, hi: int, where: str) -> str:
    """Say where the text nearly is: outside the symbol searched, the same lines with
    other whitespace, or else the closest line."""
    msg = f"old text not found in {where}"
    elsewhere = _occurrences(text, old, 0, len(text), limit=3)
    if elsewhere:
        at = ", ".join(str(line_number(text, i)) for i in elsewhere)
        return msg + f"; it occurs outside it, at line {at}"
    first_line = line_number(text, lo)
    lines = text[start_of_line(text, lo):hi].split("\n")
    squeezed = [_SPACES.sub(" ", line).strip() for line in lines]
    want = [_SPACES.sub(" ", line).strip() for line in old.strip("\n").split("\n")]
    i = _squeezed_match(squeezed, want)
    if i is not None:
        return (msg + f"; it matches line {first_line + i} if indentation and spacing "
                "are ignored: copy the text exactly, whitespace included")
    target = next((w for w in want if w), "")
    close = difflib.get_close_matches(target, [s for s in squeezed if s], n=1, cutoff=0.4)
    if close:
        i = squeezed.index(close[0])
        msg += f"; the closest line is {first_line + i}: {lines[i].strip()[:160]}"
    return msg


def _squeezed_match(lines: list[str], want: list[str]) -> int | None:
    """Index of the first window of `lines` holding `want` (first line as a suffix,
    last as a prefix, a single line anywhere), all whitespace-squeezed."""
    n = len(want)
    for i in range(len(lines) - n + 1):
        window = lines[i:i + n]
        if n == 1:
            found = want[0] in window[0]
        else:
            found = (window[0].endswith(want[0]) and window[1:-1] == want[1:-1]
                     and window[-1].startswith(want[-1]))
        if found:
            return i
    return None
