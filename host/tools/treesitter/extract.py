"""A file's symbols from its tree: the languages' extractors run on what the symbol query
captures, nested by containment, with the doc comments and attributes above each.
"""

from __future__ import annotations

import re

from ..symbols import Symbol
from . import grammars, python
from .common import Ctx, comment_lines, end_line, summary
from .languages import LANGUAGES, query


# Languages whose symbols may start above their node (`_leading`: doc comments, Rust
# attributes); a Python symbol starts with its node (decorators are inside it).
LEADING_LANGS = frozenset({"rust", "javascript", "typescript", "tsx", "go", "lua"})


def _is_doc_comment(lang: str, node, ctx: Ctx) -> bool:
    t = ctx.text(node)
    if lang == "rust":
        return (t.startswith("///") and not t.startswith("////")) or (
            t.startswith("/**") and not t.startswith("/***"))
    if lang in ("javascript", "typescript", "tsx"):
        return t.startswith("/**")
    if lang == "go":
        return t.startswith("//") or t.startswith("/*")
    if lang == "lua":
        return t.startswith("--")
    return False


def _leading(lang: str, outer, ctx: Ctx) -> tuple[int, int, int, int, str | None]:
    """Attributes and doc comments directly above `outer`.

    Returns (start_byte, start_row, doc_start_byte, doc_start_row, doc summary)."""
    start_b, start_r = outer.start_byte, outer.start_point[0]
    doc_b, doc_r = start_b, start_r
    docs: list[str] = []
    prev = outer.prev_named_sibling
    top_row = start_r
    while prev is not None:
        if end_line(prev) < top_row:  # a blank line (or more) in between
            break
        if prev.type == "attribute_item" and lang == "rust":
            if doc_b == start_b:  # attributes below the docs belong to the item
                start_b, start_r = prev.start_byte, prev.start_point[0]
            doc_b, doc_r = prev.start_byte, prev.start_point[0]
        elif prev.type in ("line_comment", "block_comment", "comment") and _is_doc_comment(
                lang, prev, ctx):
            docs.insert(0, ctx.text(prev))
            doc_b, doc_r = prev.start_byte, prev.start_point[0]
        else:
            break
        top_row = prev.start_point[0]
        prev = prev.prev_named_sibling
    doc_summary = None
    if docs and not ctx.lite:
        lines: list[str] = []
        for d in docs:
            lines.extend(comment_lines(d))
        doc_summary = summary(lines)
    return start_b, start_r, doc_b, doc_r, doc_summary


_CONTAINERS = {"class", "impl", "trait", "interface", "struct"}


def module_doc(tree, ctx: Ctx) -> str | None:
    """The file's own doc: a Python module docstring, Rust `//!`, a leading comment."""
    root = tree.root_node
    if ctx.lang == "python":
        return python.docstring(root, ctx)
    if ctx.lang == "rust":
        lines = []
        for c in root.named_children:
            t = ctx.text(c) if c.type in ("line_comment", "block_comment") else ""
            if t.startswith("//!") or t.startswith("/*!"):
                lines.extend(comment_lines(t))
            else:
                break
        return summary(lines) if lines else None
    return None


def extract_file(src: bytes, lang: str, lite: bool = False,
                 nodes: dict | None = None) -> tuple[list[Symbol], str | None]:
    """The file's symbols, nested, and its module doc. `lite` leaves signatures empty and
    docs None (see Ctx); `nodes`, if given, receives id(symbol) -> (symbol, its node, its
    outer node) so `complete_symbol` can fill a lite symbol in while the tree is alive."""
    tree = grammars.parse(src, lang)
    ctx = Ctx(src, lang, lite)
    return (build(_captures(tree.root_node, lang), ctx, nodes, unique=lang == "python"),
            None if lite else module_doc(tree, ctx))


def _captures(root, lang: str) -> list:
    """The nodes the language's symbol query captures in the whole tree."""
    if lang == "python":
        return python.captures(root)
    import tree_sitter as ts
    return ts.QueryCursor(query(lang)).captures(root).get("s", [])


_NAMED_MAX = 400  # occurrences of a name beyond which extract_named gives up


def extract_named(src: bytes, lang: str, name: str, nodes: dict | None = None) -> list[Symbol] | None:
    """Lite symbols of the file that contain an occurrence of `name` (ASCII letters in
    any case), with their ancestors, without running the symbol query over the whole
    tree: every symbol named `name` exactly (a symbol's name is text inside it), and in an
    ASCII file every one named so in any letter case. None when there are too many
    occurrences or none at all: then extract everything."""
    if not name:
        return None
    needle = re.compile(re.escape(name.encode()), re.IGNORECASE)
    spans = [(m.start(), m.end()) for m in needle.finditer(src)]
    if not spans or len(spans) > _NAMED_MAX:
        return None
    import tree_sitter as ts
    tree = grammars.parse(src, lang)
    root = tree.root_node
    symbol_query = query(lang)
    captured = []
    for a, b in spans:
        cursor = ts.QueryCursor(symbol_query)
        cursor.set_byte_range(a, b)  # symbols intersecting the occurrence: its ancestors
        captured.extend(cursor.captures(root).get("s", []))
    captured.sort(key=lambda n: (n.start_byte, -n.end_byte))  # document order, as one query gives
    return build(captured, Ctx(src, lang, lite=True), nodes)


def build(captured: list, ctx: Ctx, nodes: dict | None, unique: bool = False) -> list[Symbol]:
    """Symbols from the captured nodes, nested by byte containment. `unique`: no node is
    in `captured` twice (else the repeats are skipped)."""
    lang = ctx.lang
    handler = LANGUAGES[lang].extract
    leading = lang in LEADING_LANGS
    seen: set[tuple[int, int, str]] = set()
    flat: list[tuple[Symbol, int, int]] = []
    for node in captured:
        if not unique:
            key = (node.start_byte, node.end_byte, node.type)
            if key in seen:
                continue
            seen.add(key)
        made = handler(node, ctx)
        if made is None:
            continue
        name, kind, sig, outer, doc, container = made
        if leading:
            sb, sr, db, dr, lead_doc = _leading(lang, outer, ctx)
        else:  # nothing above a node belongs to it in this language
            sb = db = outer.start_byte
            sr = dr = outer.start_point[0]
            lead_doc = None
        sym = Symbol(
            name=name, kind=kind, signature=sig,
            start_line=sr + 1, end_line=end_line(outer),
            start_byte=sb, end_byte=outer.end_byte,
            doc=doc if doc is not None and doc != "" else (lead_doc if doc is None else None),
            doc_start_line=dr + 1, doc_start_byte=db, container=container,
        )
        if nodes is not None:
            nodes[id(sym)] = (sym, node)
        flat.append((sym, outer.start_byte, outer.end_byte))
    flat.sort(key=lambda t: (t[1], -t[2]))
    top: list[Symbol] = []
    stack: list[tuple[Symbol, int, int]] = []
    for item in flat:
        sym, b0, b1 = item
        while stack and not (stack[-1][1] <= b0 and b1 <= stack[-1][2]):
            stack.pop()
        if stack:
            parent = stack[-1][0]
            sym.parent = parent
            parent.children.append(sym)
            if sym.kind == "function" and parent.kind in _CONTAINERS:
                sym.kind = "method"
        else:
            top.append(sym)
        stack.append(item)
    return top


def complete_symbol(sym: Symbol, node, src: bytes, lang: str) -> None:
    """Fill in a lite symbol's signature and doc from its node (as a full extraction would)."""
    ctx = Ctx(src, lang)
    made = LANGUAGES[lang].extract(node, ctx)
    if made is None:  # pragma: no cover - the lite pass kept it, so the full one does
        return
    _, _, sig, outer, doc, _ = made
    lead_doc = _leading(lang, outer, ctx)[4]
    sym.signature = sig
    sym.doc = doc if doc is not None and doc != "" else (lead_doc if doc is None else None)
