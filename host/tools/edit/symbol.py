"""Symbol edits: where a symbol sits (its doc comment, attributes, item, lines), and deleting,
replacing or inserting next to it by the rules of the package's doc.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import MossError
from ..symbols import Symbol
from ..treesitter import LANGUAGES, grammars, pick_symbol, symbols_of
from .files import File
from .layout import indent_of, end_of_line, line_number, start_of_line, reindent, tidy_gap
from .spec import Spec, given
from .text import exact_edit

_FLAT_KINDS = {"field", "variant"}


@dataclass
class _Span:
    """Where a symbol sits, as character offsets into the file's text."""

    doc: int          # first doc comment (or attribute, or the item when it has neither)
    attrs: int        # first attribute/decorator (or the item)
    item: int         # the item itself (`pub fn`, `def`, `class`, ...)
    end: int          # just past the item
    first: int        # start of the line holding `doc`
    after: int        # just past the line holding `end`
    own_lines: bool   # nothing but whitespace (and a trailing , or ;) shares those lines
    indent: str
    kind: str


def symbol_edit(f: File, symbol: str, spec: Spec) -> None:
    """Delete, replace, insert next to, or edit text inside the symbol `symbol` of the file."""
    if f.lang is None:
        raise MossError(f"{f.rel} is not source code moss parses, so it has no symbol "
                        f"{symbol}; edit it with action text (old/content), or check the "
                        "path", kind="usage")
    if spec.action in ("create", "append", "prepend"):
        raise MossError(f"{spec.action} takes a file, not a symbol; to add code next to "
                        f"{symbol} use insert with position before/after", kind="usage")
    text = f.existing()
    data = text.encode("utf-8")
    syms = symbols_of(f.path, data)
    sym = _pick(syms, symbol, f.rel)
    span = _symbol_span(text, data, f.lang, sym)
    if spec.action == "delete":
        f.set(_delete(text, span))
    elif spec.action == "replace":
        f.set(_replace(text, span, given(spec.content), f.lang))
    elif spec.action == "insert":
        f.set(_insert(text, span, given(spec.content), given(spec.position), f.lang, sym, syms))
    elif spec.action == "text":
        exact_edit(f, spec, span.doc, span.end, f"{f.rel}/{sym.path}")


def _pick(syms: list[Symbol], query: str, rel: str) -> Symbol:
    """One symbol; not_found lists the file's top-level symbols."""
    try:
        return pick_symbol(syms, query, rel)
    except MossError as e:
        if e.kind != "not_found":
            raise
        top = list(dict.fromkeys(s.name for s in syms))
        msg = f"no symbol {query} in {rel}"
        close = e.data.get("suggestions") or []
        if close:
            msg += "; did you mean: " + ", ".join(close)
        msg += ("; its top-level symbols: " + ", ".join(top[:40]) if top
                else "; it defines no symbols")
        raise MossError(msg, kind="not_found", suggestions=close, symbols=top) from None


def _symbol_span(text: str, data: bytes, lang: str, sym: Symbol) -> _Span:
    char = _char_offsets(text, data)
    doc = char(min(sym.doc_start_byte, sym.start_byte))
    end = char(sym.end_byte)
    first, after = start_of_line(text, doc), end_of_line(text, end)
    lead, tail = text[first:doc], text[end:after]
    own = not lead.strip() and tail.strip() in ("", ",", ";")
    return _Span(doc=doc, attrs=char(sym.start_byte), item=char(_item_start(data, lang, sym)),
                 end=end, first=first, after=after, own_lines=own,
                 indent=indent_of(text[first:after]), kind=sym.kind)


def _char_offsets(text: str, data: bytes):
    if len(text) == len(data):
        return lambda b: b
    return lambda b: len(data[:b].decode("utf-8"))


def _item_start(data: bytes, lang: str, sym: Symbol) -> int:
    """Byte where the item itself starts, after its attributes/decorators."""
    root = grammars.parse(data, lang).root_node
    node = root.named_descendant_for_byte_range(sym.start_byte, sym.end_byte)
    if node is None:
        return sym.start_byte
    if node.start_byte == sym.start_byte and node.end_byte == sym.end_byte:
        if node.type == "decorated_definition":  # Python: decorators wrap the def
            inner = node.child_by_field_name("definition")
            return inner.start_byte if inner is not None else sym.start_byte
        return sym.start_byte
    for child in node.named_children:  # Rust: attributes are the item's siblings
        if child.end_byte == sym.end_byte and child.start_byte >= sym.start_byte:
            return child.start_byte
    return sym.start_byte


def _delete(text: str, span: _Span) -> str:
    if span.own_lines:
        return tidy_gap(text[:span.first] + text[span.after:], span.first, span.indent)
    start, end = span.doc, span.end
    m = re.match(r"[ \t]*,[ \t]*", text[end:])
    if m:
        end += m.end()
    else:
        m = re.search(r",[ \t]*$", text[:start])
        if m:
            start = m.start()
    return text[:start] + text[end:]


def _replace(text: str, span: _Span, content: str, lang: str) -> str:
    if not content.strip():
        raise MossError("replace needs non-empty content (to remove the symbol use "
                        "action delete)", kind="usage")
    start = _replace_start(span, content, lang)
    if not span.own_lines:
        new = content.strip("\n")
        if text[span.end:].lstrip(" \t").startswith(",") and new.rstrip().endswith(","):
            new = new.rstrip()[:-1]
        return text[:start] + new + text[span.end:]
    line_start = start_of_line(text, start)
    block = reindent(content, span.indent)
    if text[line_start:start].strip():  # something else precedes it on that line
        line_start, block = start, block.lstrip(" \t")
    sep = text[span.end:span.after].strip()
    if sep and not block.rstrip().endswith(sep):
        block = block.rstrip("\n") + sep + "\n"
    return text[:line_start] + block + text[span.after:]


def _replace_start(span: _Span, content: str, lang: str) -> int:
    """See the module doc: the content's own head decides what it replaces."""
    head = next((line.strip() for line in content.split("\n") if line.strip()), "")
    spec = LANGUAGES.get(lang)
    if spec and head.startswith(spec.doc_markers):
        return span.doc
    if spec and head.startswith(spec.attr_markers):
        return span.attrs
    return span.item


def _insert(text: str, span: _Span, content: str, position: str, lang: str,
            sym: Symbol, syms: list[Symbol]) -> str:
    if not span.own_lines:
        line = line_number(text, span.doc)
        raise MossError(f"{sym.path} shares line {line} with other code, so there is no "
                        "line above or below it to insert on; use action text", kind="usage")
    block = reindent(content, span.indent)
    if not block:
        raise MossError("insert needs non-empty content", kind="usage")
    prev, nxt = _neighbours(sym, syms)
    gap_before, gap_after = _gap(prev, sym), _gap(sym, nxt)
    if position == "before":
        gap = _first_known(gap_before, gap_after, _default_gap(lang, span))
        return text[:span.first] + block + "\n" * gap + text[span.first:]
    gap = _first_known(gap_after, gap_before, _default_gap(lang, span))
    return text[:span.after] + "\n" * gap + block + text[span.after:]


def _neighbours(sym: Symbol, syms: list[Symbol]):
    """The symbols just before and after `sym` in its block (None at either end)."""
    siblings = sym.parent.children if sym.parent is not None else syms
    i = next(k for k, s in enumerate(siblings) if s is sym)
    return (siblings[i - 1] if i > 0 else None,
            siblings[i + 1] if i + 1 < len(siblings) else None)


def _gap(upper: Symbol | None, lower: Symbol | None) -> int | None:
    """Lines between two neighbouring symbols of the same sort, else None."""
    if upper is None or lower is None or _sort(upper) != _sort(lower):
        return None
    top = min(lower.doc_start_line or lower.start_line, lower.start_line)
    return max(top - upper.end_line - 1, 0)


def _sort(sym: Symbol) -> str:
    return "function" if sym.kind == "method" else sym.kind


def _first_known(*gaps: int | None) -> int:
    return next(g for g in gaps if g is not None)


def _default_gap(lang: str, span: _Span) -> int:
    if span.kind in _FLAT_KINDS:
        return 0
    return 2 if lang == "python" and not span.indent else 1
