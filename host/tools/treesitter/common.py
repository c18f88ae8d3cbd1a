"""What every language's extractor uses: the source being read (`Ctx`), signatures cut
from it and cleaned, doc comments turned into a summary line.
"""

from __future__ import annotations

import re


_OPEN_PAD = re.compile(r"([(\[]) ")
_CLOSE_PAD = re.compile(r",? ([)\]])")
_BRACE_PAD = re.compile(r", ?}")


def clean(text: str, limit: int = 160) -> str:
    """One line, whitespace collapsed, bracket padding removed, length capped."""
    s = " ".join(text.split())  # str.split() and re's \s agree on what is whitespace
    # Each substitution only where it can match (most signatures need none of them).
    if "( " in s or "[ " in s:
        s = _OPEN_PAD.sub(r"\1", s)
    if " )" in s or " ]" in s:
        s = _CLOSE_PAD.sub(r"\1", s)
    if ",}" in s or ", }" in s:
        s = _BRACE_PAD.sub(" }", s)
    if len(s) > limit:
        s = s[: limit - 1].rstrip() + "…"
    return s


def end_line(node) -> int:
    """The 1-based line `node` ends on (one ending with a newline ends on the line before it)."""
    row, col = node.end_point
    if col == 0 and row > node.start_point[0]:
        return row  # ends with a newline: the last line is the previous one
    return row + 1


class Ctx:
    """The source being extracted. `lite`: names, kinds, nesting and lines only — no
    signatures or doc summaries (what search labels and symbol lookup need)."""

    def __init__(self, src: bytes, lang: str, lite: bool = False):
        self.src = src
        self.lang = lang
        self.lite = lite

    def text(self, node_or_start, end: int | None = None) -> str:
        if end is None:
            n = node_or_start
            return self.src[n.start_byte:n.end_byte].decode("utf-8", "replace")
        return self.src[node_or_start:end].decode("utf-8", "replace")


def summary(lines: list[str]) -> str | None:
    """First paragraph of a doc text, as one line; None when trivial."""
    para: list[str] = []
    for line in lines:
        s = line.strip()
        if not s:
            if para:
                break
            continue
        if s.startswith("@") or s.startswith(":param") or s.startswith("Args:"):
            break
        para.append(s)
    text = " ".join(para).strip()
    if len(text) < 2:
        return None
    if len(text) > 200:
        text = text[:199].rstrip() + "…"
    return text


def comment_lines(text: str) -> list[str]:
    """Strip comment syntax from a doc comment (///, //!, /** */, --, #)."""
    t = text.strip()
    if t.startswith("/*"):
        t = t[2:]
        t = t[:-2] if t.endswith("*/") else t
        t = t.lstrip("*!")
        out = []
        for line in t.splitlines():
            line = line.strip()
            out.append(line[1:].lstrip() if line.startswith("*") else line)
        return out
    out = []
    for line in t.splitlines():
        line = line.strip()
        for pre in ("///", "//!", "//", "---", "--", "#"):
            if line.startswith(pre):
                line = line[len(pre):]
                break
        out.append(line[1:] if line.startswith(" ") else line)
    return out


def sig_to(ctx: Ctx, start: int, stop_node, node, limit: int = 160) -> str:
    """Source from `start` up to `stop_node` (a body), else the whole node."""
    if ctx.lite:
        return ""
    end = stop_node.start_byte if stop_node is not None else node.end_byte
    s = clean(ctx.text(start, end), limit)
    return s.rstrip("{:;, ").rstrip() if stop_node is not None else s.rstrip(";,")


def name_of(node, ctx: Ctx, fieldname: str = "name") -> str | None:
    """The text of `node`'s field `fieldname`, or None when it has none."""
    n = node.child_by_field_name(fieldname)
    return ctx.text(n) if n is not None else None
