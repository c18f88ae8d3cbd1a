"""Lines, indentation and blank lines: how symbol and text edits find and lay out their text."""

from __future__ import annotations

import textwrap

_CLOSERS = ("}", ")", "]", "end")


def start_of_line(text: str, pos: int) -> int:
    """Where the line holding `pos` starts."""
    return text.rfind("\n", 0, pos) + 1


def end_of_line(text: str, end: int) -> int:
    """Just past the newline ending the line that holds the character before `end`."""
    j = text.find("\n", max(end - 1, 0))
    return len(text) if j < 0 else j + 1


def line_number(text: str, offset: int) -> int:
    """The 1-based number of the line holding `offset`."""
    return text.count("\n", 0, offset) + 1


def indent_of(line: str) -> str:
    """The spaces and tabs `line` starts with."""
    return line[:len(line) - len(line.lstrip(" \t"))]


def _blanks_before(text: str, pos: int) -> tuple[int, int, str | None]:
    """Blank lines ending at line start `pos`: (count, where the run starts, the
    non-blank line above them or None at the start of the file)."""
    count = 0
    while pos > 0:
        start = text.rfind("\n", 0, pos - 1) + 1
        line = text[start:pos]
        if line.strip():
            return count, pos, line
        count, pos = count + 1, start
    return count, pos, None


def _blanks_after(text: str, pos: int) -> tuple[int, int, str | None]:
    """Blank lines starting at line start `pos`: (count, where the run ends, the
    non-blank line below them or None at the end of the file)."""
    count = 0
    while pos < len(text):
        j = text.find("\n", pos)
        end = len(text) if j < 0 else j + 1
        line = text[pos:end]
        if line.strip():
            return count, pos, line
        count, pos = count + 1, end
    return count, pos, None


def _sibling(line: str | None, indent: str) -> bool:
    """A neighbouring line at the symbol's level or deeper (not the block's opener or
    closer, not the start or end of the file)."""
    return line is not None and len(indent_of(line)) >= len(indent)


def tidy_gap(text: str, pos: int, indent: str) -> str:
    """Blank lines around the hole a deletion left at line start `pos`."""
    n_before, run_start, prev = _blanks_before(text, pos)
    n_after, run_end, nxt = _blanks_after(text, pos)
    open_before, open_after = not _sibling(prev, indent), not _sibling(nxt, indent)
    if open_before and open_after:
        return text[:run_start] + text[run_end:]
    if open_before:
        return text[:pos] + text[run_end:]
    if open_after:
        return text[:run_start] + text[pos:]
    cut = pos
    for _ in range(min(n_before, n_after)):
        cut = text.index("\n", cut) + 1
    return text[:pos] + text[cut:]


def reindent(content: str, indent: str) -> str:
    """`content` as lines at `indent` (see the module doc), ending with a newline."""
    lines = content.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return ""
    if _lost_first_indent(lines, indent):
        lines[0] = indent + lines[0]
    body = textwrap.dedent("\n".join(lines)).split("\n")
    return "".join((indent + line if line.strip() else "") + "\n" for line in body)


def _lost_first_indent(lines: list[str], indent: str) -> bool:
    rest = [line for line in lines[1:] if line.strip()]
    if indent_of(lines[0]) or not indent or not rest:
        return False
    least = min(len(indent_of(line)) for line in rest)
    last = rest[-1]
    return least > len(indent) or (
        least == len(indent) == len(indent_of(last)) and last.strip().startswith(_CLOSERS))
