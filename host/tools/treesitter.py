"""Language registry and symbol extraction with tree-sitter.

Grammars come from the individual `tree-sitter-<lang>` wheels and are imported lazily:
importing this module costs nothing until a file of that language is parsed. Parsers are
per thread (a tree-sitter Parser is not thread-safe; child agents run in threads);
languages and queries are shared.

`symbols_of(path)` returns the file's symbols as a nested list of `Symbol`s.
`find_symbol(path, "Agent/run")` picks one of them by its (trailing) qualified name.
"""

from __future__ import annotations

import importlib
import marshal
import os
import re
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

from ..errors import MossError
from . import structcache
from .symbols import Symbol, walk_all


# --------------------------------------------------------------------------- registry

class LangSpec:
    """Everything moss knows about one language; adding a language is adding one of these
    to LANGUAGES (at the end of this module, after the extractors it names).

    name, module (the grammar package, e.g. tree_sitter_rust), func (its function returning
    the language), extensions, extract (node -> (name, kind, signature, outer, doc,
    container)); kinds: node kinds that are symbols (missing ones are dropped); patterns:
    query patterns for symbols only in some places; shebangs: interpreter words of a `#!`
    line; doc_markers: comment starts that document the next symbol; attr_markers:
    attribute/decorator starts that belong to it; doc_style: how a skeleton shows a doc
    summary, module_doc_style: ... and the file's own doc."""

    __slots__ = ("name", "module", "func", "extensions", "extract", "kinds", "patterns", "shebangs",
                 "doc_markers", "attr_markers", "doc_style", "module_doc_style")

    def __init__(self, name: str, module: str, func: str, extensions: tuple[str, ...], extract: Callable,
                 kinds: tuple[str, ...] = (), patterns: tuple[str, ...] = (), shebangs: tuple[str, ...] = (),
                 doc_markers: tuple[str, ...] = (), attr_markers: tuple[str, ...] = (),
                 doc_style: tuple[str, str] = ("# ", ""), module_doc_style: tuple[str, str] | None = None):
        self.name, self.module, self.func, self.extensions, self.extract = name, module, func, extensions, extract
        self.kinds, self.patterns, self.shebangs = kinds, patterns, shebangs
        self.doc_markers, self.attr_markers = doc_markers, attr_markers
        self.doc_style, self.module_doc_style = doc_style, module_doc_style


LANGUAGES: dict[str, LangSpec] = {}  # filled at the end of this module
_BY_EXT: dict[str, str] = {}


def language_for(path: Path | str, source: bytes | None = None) -> str | None:
    """The language name for a file (by extension, else by a `#!` line), or None."""
    p = Path(path)
    lang = _BY_EXT.get(p.suffix.lower())
    if lang or p.suffix:
        return lang
    head = source[:200] if source is not None else None
    if head is None:
        try:
            with open(p, "rb") as fh:
                head = fh.read(200)
        except OSError:
            return None
    if head.startswith(b"#!"):
        first = head.split(b"\n", 1)[0].decode("latin-1")
        for spec in LANGUAGES.values():
            if any(word in first for word in spec.shebangs):
                return spec.name
    return None


_lock = threading.Lock()
_languages: dict[str, object] = {}
_queries: dict[str, object] = {}
_local = threading.local()


def _language(name: str):
    with _lock:
        lang = _languages.get(name)
        if lang is None:
            import tree_sitter as ts
            spec = LANGUAGES[name]
            try:
                mod = importlib.import_module(spec.module)
            except ImportError as e:  # pragma: no cover - depends on the install
                pkg = spec.module.replace("_", "-")
                raise MossError(f"{name} support needs the `{pkg}` package "
                                f"(pip install {pkg})", kind="config") from e
            lang = ts.Language(getattr(mod, spec.func)())
            _languages[name] = lang
        return lang


def load_all() -> None:
    """Load every installed grammar and compile its query now (a zygote, before it forks:
    5-16 ms a language that each forked process would otherwise spend again)."""
    for name in LANGUAGES:
        try:
            _query(name)
        except MossError:
            pass  # a grammar that is not installed: its first use says so


def _parser(name: str):
    parsers = getattr(_local, "parsers", None)
    if parsers is None:
        parsers = _local.parsers = {}
    p = parsers.get(name)
    if p is None:
        import tree_sitter as ts
        p = parsers[name] = ts.Parser(_language(name))
    return p


def parse(source: bytes, lang: str):
    """Parse `source` as `lang`; returns a tree_sitter.Tree."""
    return _parser(lang).parse(source)


def _query(name: str):
    with _lock:
        q = _queries.get(name)
    if q is not None:
        return q
    import tree_sitter as ts
    lang = _language(name)
    spec = LANGUAGES[name]
    parts = [f"({k}) @s" for k in spec.kinds if lang.id_for_node_kind(k, True)]
    parts += spec.patterns
    q = ts.Query(lang, "\n".join(parts))
    with _lock:
        _queries[name] = q
    return q


# ------------------------------------------------------------------------ extraction

_OPEN_PAD = re.compile(r"([(\[]) ")
_CLOSE_PAD = re.compile(r",? ([)\]])")
_BRACE_PAD = re.compile(r", ?}")


def _clean(text: str, limit: int = 160) -> str:
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


def _end_line(node) -> int:
    row, col = node.end_point
    if col == 0 and row > node.start_point[0]:
        return row  # ends with a newline: the last line is the previous one
    return row + 1


class _Ctx:
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


def _summary(lines: list[str]) -> str | None:
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


def _comment_lines(text: str) -> list[str]:
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


def _is_doc_comment(lang: str, node, ctx: _Ctx) -> bool:
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


def _leading(lang: str, outer, ctx: _Ctx) -> tuple[int, int, int, int, str | None]:
    """Attributes and doc comments directly above `outer`.

    Returns (start_byte, start_row, doc_start_byte, doc_start_row, doc summary)."""
    start_b, start_r = outer.start_byte, outer.start_point[0]
    doc_b, doc_r = start_b, start_r
    docs: list[str] = []
    prev = outer.prev_named_sibling
    top_row = start_r
    while prev is not None:
        if _end_line(prev) < top_row:  # a blank line (or more) in between
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
    summary = None
    if docs and not ctx.lite:
        lines: list[str] = []
        for d in docs:
            lines.extend(_comment_lines(d))
        summary = _summary(lines)
    return start_b, start_r, doc_b, doc_r, summary


def _sig_to(ctx: _Ctx, start: int, stop_node, node, limit: int = 160) -> str:
    """Source from `start` up to `stop_node` (a body), else the whole node."""
    if ctx.lite:
        return ""
    end = stop_node.start_byte if stop_node is not None else node.end_byte
    s = _clean(ctx.text(start, end), limit)
    return s.rstrip("{:;, ").rstrip() if stop_node is not None else s.rstrip(";,")


def _name(node, ctx: _Ctx, fieldname: str = "name") -> str | None:
    n = node.child_by_field_name(fieldname)
    return ctx.text(n) if n is not None else None




def _rust(node, ctx: _Ctx):
    t = node.type
    body = node.child_by_field_name("body")
    if t == "impl_item":
        ty = node.child_by_field_name("type")
        name = re.sub(r"<.*", "", ctx.text(ty)).split("::")[-1] if ty is not None else "impl"
        return name, "impl", _sig_to(ctx, node.start_byte, body, node), node, None, None
    name = _name(node, ctx) or "?"
    kind = {"function_item": "function", "function_signature_item": "function",
            "struct_item": "struct", "enum_item": "enum", "union_item": "union",
            "trait_item": "trait", "mod_item": "module", "type_item": "type",
            "associated_type": "type", "const_item": "const", "static_item": "static",
            "macro_definition": "macro", "field_declaration": "field",
            "enum_variant": "variant"}[t]
    if t == "macro_definition":
        return name, kind, f"macro_rules! {name}", node, None, None
    if t == "enum_variant" and body is not None and body.type == "field_declaration_list":
        fields = [_clean(ctx.text(f), 80) for f in body.named_children
                  if f.type == "field_declaration"]
        return name, kind, _clean(f"{name} {{ {', '.join(fields)} }}"), node, None, None
    if t in ("field_declaration", "enum_variant", "const_item", "static_item",
             "type_item", "associated_type", "function_signature_item") or body is None:
        return name, kind, _sig_to(ctx, node.start_byte, None, node, 120), node, None, None
    if body.type == "ordered_field_declaration_list":  # tuple struct: fields are the sig
        return name, kind, _sig_to(ctx, node.start_byte, None, node), node, None, None
    return name, kind, _sig_to(ctx, node.start_byte, body, node), node, None, None


def _python_doc(body, ctx: _Ctx) -> str | None:
    if ctx.lite or body is None or body.named_child_count == 0:
        return None
    first = body.named_children[0]
    if first.type != "expression_statement" or first.named_child_count == 0:
        return None
    s = first.named_children[0]
    if s.type != "string":
        return None
    content = "".join(ctx.text(c) for c in s.named_children if c.type == "string_content")
    return _summary(content.splitlines())


def _python(node, ctx: _Ctx):
    if node.type == "expression_statement":  # class attribute
        a = node.named_children[0]
        left = a.child_by_field_name("left")
        if left is None or left.type != "identifier":
            return None
        return ctx.text(left), "field", "" if ctx.lite else _clean(ctx.text(a), 120), node, None, None
    name = _name(node, ctx) or "?"
    kind = "class" if node.type == "class_definition" else "function"
    if ctx.lite:
        parent = node.parent
        outer = parent if parent is not None and parent.type == "decorated_definition" else node
        return name, kind, "", outer, None, None
    body = node.child_by_field_name("body")
    sig = _sig_to(ctx, node.start_byte, body, node)
    outer = node
    parent = node.parent
    if parent is not None and parent.type == "decorated_definition":
        outer = parent
        decos = [_clean(ctx.text(d), 60) for d in parent.named_children if d.type == "decorator"]
        sig = " ".join(decos + [sig])
    return name, kind, sig, outer, _python_doc(body, ctx) or "", None


def _js(node, ctx: _Ctx):
    t = node.type
    outer = node
    if t == "variable_declarator":
        value = node.child_by_field_name("value")
        if value is None or value.type not in (
                "arrow_function", "function_expression", "function", "class",
                "generator_function"):
            return None
        decl = node.parent
        if decl is None or decl.type not in ("lexical_declaration", "variable_declaration"):
            return None
        outer = decl
        if decl.parent is not None and decl.parent.type == "export_statement":
            outer = decl.parent
        name = _name(node, ctx) or "?"
        kind = "class" if value.type == "class" else "function"
        body = value.child_by_field_name("body")
        if body is not None and body.type in ("statement_block", "class_body"):
            sig = _sig_to(ctx, outer.start_byte, body, node)
        elif body is not None:  # arrow function with an expression body
            sig = _clean(ctx.text(outer.start_byte, body.start_byte))
        else:
            sig = _clean(ctx.text(outer), 120)
        return name, kind, sig, outer, None, None
    if t in ("property_signature", "method_signature"):
        p = node.parent
        if p is None or not (p.type == "interface_body" or (
                p.type == "object_type" and p.parent is not None
                and p.parent.type == "type_alias_declaration")):
            return None
    if t in ("property_identifier",):  # enum member
        return ctx.text(node), "variant", ctx.text(node), node, None, None
    if t == "enum_assignment":
        return _name(node, ctx) or "?", "variant", _clean(ctx.text(node), 120), node, None, None
    kinds = {"function_declaration": "function", "generator_function_declaration": "function",
             "function_signature": "function", "class_declaration": "class",
             "abstract_class_declaration": "class", "class": "class",
             "method_definition": "method", "abstract_method_signature": "method",
             "method_signature": "method", "field_definition": "field",
             "public_field_definition": "field", "property_signature": "field",
             "interface_declaration": "interface", "type_alias_declaration": "type",
             "enum_declaration": "enum", "internal_module": "module"}
    kind = kinds[t]
    name = _name(node, ctx) or _name(node, ctx, "property") or (
        "default" if t == "class" else "?")
    body = node.child_by_field_name("body")
    if t == "type_alias_declaration":
        body = None
    start = node.start_byte
    if node.parent is not None and node.parent.type == "export_statement":
        outer = node.parent
        start = outer.start_byte
    if body is None:
        sig = _sig_to(ctx, start, None, node, 120)
    else:
        sig = _sig_to(ctx, start, body, node)
    return name, kind, sig, outer, None, None


def _go_type_name(node, ctx: _Ctx) -> str:
    t = ctx.text(node)
    t = t.lstrip("*&").strip()
    return re.sub(r"\[.*", "", t)


def _go(node, ctx: _Ctx):
    t = node.type
    if t in ("const_spec", "var_spec"):
        decl = node.parent
        if decl is not None and decl.type == "var_spec_list":
            decl = decl.parent
        if decl is None or decl.parent is None or decl.parent.type != "source_file":
            return None
        name = _name(node, ctx) or "?"
        word = "const" if t == "const_spec" else "var"
        if node.parent.type != "var_spec_list" and decl.named_child_count == 1:
            outer = decl
            sig = _clean(ctx.text(decl), 120)
        else:  # one of a parenthesised group
            outer = node
            sig = _clean(f"{word} {ctx.text(node)}", 120)
        return name, "const" if t == "const_spec" else "var", sig, outer, None, None
    if t == "field_declaration":
        name = _name(node, ctx) or _go_type_name(node.child_by_field_name("type") or node, ctx)
        return name, "field", _clean(ctx.text(node), 120), node, None, None
    if t in ("method_elem", "method_spec"):
        return _name(node, ctx) or "?", "method", _clean(ctx.text(node), 120), node, None, None
    if t in ("type_spec", "type_alias"):
        name = _name(node, ctx) or "?"
        ty = node.child_by_field_name("type")
        kind = {"struct_type": "struct", "interface_type": "interface"}.get(
            ty.type if ty is not None else "", "type")
        decl = node.parent
        outer = decl if decl is not None and decl.type == "type_declaration" and \
            decl.named_child_count == 1 else node
        start = outer.start_byte
        if kind in ("struct", "interface"):
            text = ctx.text(start, ty.end_byte)
            sig = _clean(text.split("{", 1)[0]).rstrip()
        else:
            sig = _clean(ctx.text(start, node.end_byte), 120)
        return name, kind, sig, outer, None, None
    body = node.child_by_field_name("body")
    name = _name(node, ctx) or "?"
    sig = _sig_to(ctx, node.start_byte, body, node)
    if t == "method_declaration":
        recv = node.child_by_field_name("receiver")
        container = None
        if recv is not None:
            for p in recv.named_children:
                ty = p.child_by_field_name("type")
                if ty is not None:
                    container = _go_type_name(ty, ctx)
        return name, "method", sig, node, None, container
    return name, "function", sig, node, None, None


def _lua_name(n, ctx: _Ctx) -> tuple[str, str | None]:
    if n.type == "dot_index_expression":
        return _name(n, ctx, "field") or "?", ctx.text(n.child_by_field_name("table"))
    if n.type == "method_index_expression":
        return _name(n, ctx, "method") or "?", ctx.text(n.child_by_field_name("table"))
    return ctx.text(n), None


def _lua(node, ctx: _Ctx):
    if node.type == "function_declaration":
        n = node.child_by_field_name("name")
        name, container = _lua_name(n, ctx) if n is not None else ("?", None)
        params = node.child_by_field_name("parameters")
        end = params.end_byte if params is not None else node.end_byte
        kind = "method" if container else "function"
        return name, kind, _clean(ctx.text(node.start_byte, end)), node, None, container
    if node.type == "field":
        fn = node.child_by_field_name("value")
        params = fn.child_by_field_name("parameters")
        name = _name(node, ctx) or "?"
        sig = _clean(ctx.text(node.start_byte, params.end_byte if params else fn.end_byte))
        return name, "function", sig, node, None, None
    # assignment_statement: `M.run = function(...)` / `local f = function(...)`
    names = node.named_children[0]
    values = node.named_children[-1]
    fn = values.named_children[0] if values.named_child_count else None
    if names.type != "variable_list" or names.named_child_count != 1 or fn is None \
            or fn.type != "function_definition":
        return None
    name, container = _lua_name(names.named_children[0], ctx)
    outer = node.parent if node.parent is not None and \
        node.parent.type == "variable_declaration" else node
    params = fn.child_by_field_name("parameters")
    sig = _clean(ctx.text(outer.start_byte, params.end_byte if params else fn.end_byte))
    return name, "method" if container else "function", sig, outer, None, container



_CONTAINERS = {"class", "impl", "trait", "interface", "struct"}


def module_doc(tree, ctx: _Ctx) -> str | None:
    """The file's own doc: a Python module docstring, Rust `//!`, a leading comment."""
    root = tree.root_node
    if ctx.lang == "python":
        return _python_doc(root, ctx)
    if ctx.lang == "rust":
        lines = []
        for c in root.named_children:
            t = ctx.text(c) if c.type in ("line_comment", "block_comment") else ""
            if t.startswith("//!") or t.startswith("/*!"):
                lines.extend(_comment_lines(t))
            else:
                break
        return _summary(lines) if lines else None
    return None


def _extract(src: bytes, lang: str, lite: bool = False,
             nodes: dict | None = None) -> tuple[list[Symbol], str | None]:
    """The file's symbols, nested, and its module doc. `lite` leaves signatures empty and
    docs None (see _Ctx); `nodes`, if given, receives id(symbol) -> (symbol, its node, its
    outer node) so `_complete` can fill a lite symbol in while the tree is alive."""
    tree = parse(src, lang)
    ctx = _Ctx(src, lang, lite)
    return (_build(_captures(tree.root_node, lang), ctx, nodes, unique=lang == "python"),
            None if lite else module_doc(tree, ctx))


def _captures(root, lang: str) -> list:
    """The nodes the language's symbol query captures in the whole tree."""
    if lang == "python":
        return _python_captures(root)
    import tree_sitter as ts
    return ts.QueryCursor(_query(lang)).captures(root).get("s", [])


# Nodes a Python definition can be found under: statements that hold blocks, and blocks.
# An expression never holds a def or a class, except in a tree with a parse error: there a
# node holding an error is looked into whatever it is.
_PY_HOLDERS = frozenset({
    "module", "block", "decorated_definition", "class_definition", "function_definition",
    "if_statement", "elif_clause", "else_clause", "for_statement", "while_statement",
    "try_statement", "except_clause", "except_group_clause", "finally_clause", "with_statement",
    "match_statement", "case_clause", "ERROR"})


def _python_captures(root) -> list:
    """What the Python symbol query (LANGUAGES["python"]) captures — every function and
    class definition, and the assignments directly in a class body — found by walking only
    the statements instead of every node (the query visits each expression too: twice the
    time). tests/test_treesitter.py checks the two agree."""
    out = []
    stack = [root]
    while stack:
        node = stack.pop()
        err = node.has_error
        for child in node.named_children:
            t = child.type
            if t == "function_definition":
                out.append(child)
            elif t == "class_definition":
                out.append(child)
                body = child.child_by_field_name("body")
                if body is not None and body.type == "block":
                    for st in body.named_children:
                        if st.type == "expression_statement" and any(
                                c.type == "assignment" for c in st.named_children):
                            out.append(st)
            if t in _PY_HOLDERS or (err and child.has_error):
                stack.append(child)
    return out


_NAMED_MAX = 400  # occurrences of a name beyond which _extract_named gives up


def _extract_named(src: bytes, lang: str, name: str, nodes: dict | None = None) -> list[Symbol] | None:
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
    tree = parse(src, lang)
    root = tree.root_node
    query = _query(lang)
    captured = []
    for a, b in spans:
        cursor = ts.QueryCursor(query)
        cursor.set_byte_range(a, b)  # symbols intersecting the occurrence: its ancestors
        captured.extend(cursor.captures(root).get("s", []))
    captured.sort(key=lambda n: (n.start_byte, -n.end_byte))  # document order, as one query gives
    return _build(captured, _Ctx(src, lang, lite=True), nodes)


def _build(captured: list, ctx: _Ctx, nodes: dict | None, unique: bool = False) -> list[Symbol]:
    """Symbols from the captured nodes, nested by byte containment. `unique`: no node is
    in `captured` twice (else the repeats are skipped)."""
    lang = ctx.lang
    handler = LANGUAGES[lang].extract
    leading = lang in _LEADING_LANGS
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
            start_line=sr + 1, end_line=_end_line(outer),
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


def _complete(sym: Symbol, node, src: bytes, lang: str) -> None:
    """Fill in a lite symbol's signature and doc from its node (as a full extraction would)."""
    ctx = _Ctx(src, lang)
    made = LANGUAGES[lang].extract(node, ctx)
    if made is None:  # pragma: no cover - the lite pass kept it, so the full one does
        return
    _, _, sig, outer, doc, _ = made
    lead_doc = _leading(lang, outer, ctx)[4]
    sym.signature = sig
    sym.doc = doc if doc is not None and doc != "" else (lead_doc if doc is None else None)


# ----------------------------------------------------------------------------- cache

_CACHE_MAX = 512  # files; a session searching a project keeps returning to the same ones
# str(resolved path) -> ((mtime_ns, size), symbols, module doc, lite)
_cache: "OrderedDict[str, tuple[tuple[int, int], list[Symbol], str | None, bool]]" = OrderedDict()


def _cached(path: Path, lite: bool) -> tuple[str, tuple[int, int], tuple | None]:
    key = str(path.resolve())
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == stamp and (lite or not hit[3]):
            _cache.move_to_end(key)
            return key, stamp, hit
    return key, stamp, None


def _store(key: str, stamp: tuple[int, int], syms: list[Symbol], doc: str | None, lite: bool) -> None:
    with _lock:
        old = _cache.get(key)
        if lite and old is not None and old[0] == stamp and not old[3]:
            return  # a full outline of the same file is already there
        _cache[key] = (stamp, syms, doc, lite)
        _cache.move_to_end(key)
        while len(_cache) > _CACHE_MAX:
            _cache.popitem(last=False)


def outline(path: Path, source: bytes | None = None) -> tuple[list[Symbol], str | None]:
    """(symbols, module doc summary) for a file; cached by path, mtime and size."""
    path = Path(path)
    lang = language_for(path, source)
    if lang is None:
        return [], None
    if source is not None:
        return _extract(source, lang)
    key, stamp, hit = _cached(path, lite=False)
    if hit is not None:
        return hit[1], hit[2]
    src = path.read_bytes()
    dkey, chash, got = _disk_get(src, lang, lite_ok=False)
    if got is not None:
        _store(key, stamp, got[0], got[1], lite=False)
        return got[0], got[1]
    syms, doc = _extract(src, lang)
    _store(key, stamp, syms, doc, lite=False)
    _disk_put(dkey, chash, syms, doc, lite=False)
    return syms, doc


def _disk_get(src: bytes, lang: str, lite_ok: bool) -> tuple[bytes, bytes, tuple | None]:
    """(entry key, content hash, (symbols, module doc, lite) or None) from the structure
    cache on disk (host/tools/structcache.py) for these bytes."""
    module = LANGUAGES[lang].module
    chash = structcache.content_hash(src)
    dkey = structcache.content_key(chash, lang, module)
    return dkey, chash, structcache.get(dkey, chash, lite_ok)


def _disk_put(dkey: bytes, chash: bytes, syms: list[Symbol], doc: str | None, lite: bool) -> None:
    structcache.put(dkey, chash, syms, doc, lite)


def _lite_lookup(path) -> tuple:
    """(path, language, cache key, stamp, symbols): the symbols are the cached lite ones, []
    for a file of no known language, or None when they must be extracted."""
    path = Path(path)
    lang = language_for(path)
    if lang is None:
        return path, None, None, None, []
    key, stamp, hit = _cached(path, lite=True)
    return path, lang, key, stamp, (hit[1] if hit is not None else None)


def structure(path: Path) -> list[Symbol]:
    """The file's symbols with names, kinds, nesting and lines but empty signatures and no
    docs: enough for `innermost`, `Symbol.path`/`lines` and picking a symbol by name, for
    less than `outline` (no signature or doc text is built). Cached like `outline`;
    a cached full outline serves too. Never show a signature or doc taken from these."""
    path, lang, key, stamp, syms = _lite_lookup(path)
    if syms is not None:
        return syms
    src = path.read_bytes()
    dkey, chash, got = _disk_get(src, lang, lite_ok=True)
    if got is not None:
        _store(key, stamp, got[0], got[1], lite=got[2])
        return got[0]
    syms, _ = _extract(src, lang, lite=True)
    _store(key, stamp, syms, None, lite=True)
    _disk_put(dkey, chash, syms, None, lite=True)
    return syms


# ------------------------------------------------------------ many files, for search labels

_FORK_BYTES = 128 * 1024   # parse in worker processes only when the files to parse hold this much
_WORKER_BYTES = 64 * 1024  # ... and at most one worker per this much
_MAX_WORKERS = 8


def lite_entries(paths: list[Path], workers: bool = False) -> dict[Path, tuple]:
    """The lite structure of each file, as the structure cache stores it: a tuple of
    symbol tuples (structcache's encoding: name, kind, signature, start line, end line,
    start byte, end byte, doc, doc start line, doc start byte, container, children), for
    labelling search hits without building Symbols. Entries already on disk are read in
    one query; the other files are parsed and all their entries stored in one
    transaction. With `workers`, in a process running no other thread, many files are
    parsed in forked worker processes at once (py-tree-sitter holds the GIL while it
    parses, so threads would not help). A file of no known language, whose grammar is not
    installed, or that cannot be read, is left out. Nothing is kept in memory (a one-shot
    search)."""
    todo = []
    for path in paths:
        lang = language_for(path)
        if lang is None:
            continue
        try:
            src = path.read_bytes()
        except OSError:
            continue
        chash = structcache.content_hash(src)
        todo.append((path, lang, src, chash, structcache.content_key(chash, lang, LANGUAGES[lang].module)))
    got = structcache.get_many([(t[4], t[3]) for t in todo], lite_ok=True)
    out: dict[Path, tuple] = {}
    misses = []
    for t in todo:
        hit = got.get(t[4])
        if hit is not None:
            out[t[0]] = hit[0]
        else:
            misses.append(t)
    usable = set()
    for lang in {t[1] for t in misses}:
        try:
            _language(lang)  # a grammar package that is not installed: those files get no labels
            usable.add(lang)
        except MossError:
            pass
    misses = [t for t in misses if t[1] in usable]
    if not misses:
        return out
    made = _entries(misses, workers)
    for t, (raw, _) in zip(misses, made):
        out[t[0]] = raw
    structcache.put_many([(t[4], t[3], data, True) for t, (_, data) in zip(misses, made)])
    return out


def _entry(src: bytes, lang: str, chash: bytes) -> tuple[tuple, bytes]:
    """(symbol tuples, encoded cache entry) of one file's lite structure."""
    syms, _ = _extract(src, lang, lite=True)
    raw = tuple(structcache.encode_symbol(s) for s in syms)
    return raw, structcache.encode_raw(raw, None, True, chash)


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _entries(jobs: list[tuple], workers: bool) -> list[tuple[tuple, bytes]]:
    """`_entry` of each job (path, lang, src, chash, key), in order; in forked workers
    when `workers` allows it and the work is large enough to gain from it."""
    total = sum(len(j[2]) for j in jobs)
    n = min(_cpus(), _MAX_WORKERS, len(jobs), 1 + total // _WORKER_BYTES)
    if not (workers and n > 1 and total >= _FORK_BYTES and hasattr(os, "fork")
            and threading.active_count() == 1):
        return [_entry(j[2], j[1], j[3]) for j in jobs]
    for lang in {j[1] for j in jobs}:  # load grammars and queries once, before forking
        _query(lang)
        _parser(lang)
    bins: list[list[int]] = [[] for _ in range(n)]
    loads = [0] * n
    for i in sorted(range(len(jobs)), key=lambda i: -len(jobs[i][2])):
        k = loads.index(min(loads))
        bins[k].append(i)
        loads[k] += len(jobs[i][2])
    children = []
    for part in bins[1:]:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: parse its part, send the entries, leave without cleanup
            code = 1
            try:
                os.close(r)
                data = marshal.dumps([(i, _entry(jobs[i][2], jobs[i][1], jobs[i][3])[1]) for i in part])
                view = memoryview(data)
                while view:
                    view = view[os.write(w, view):]
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        children.append((pid, r))
    out: list = [None] * len(jobs)
    for i in bins[0]:
        out[i] = _entry(jobs[i][2], jobs[i][1], jobs[i][3])
    for pid, r in children:
        chunks = []
        try:
            while True:
                chunk = os.read(r, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(r)
            _, status = os.waitpid(pid, 0)
        if status != 0:
            continue  # its files are parsed here, below
        try:
            sent = marshal.loads(b"".join(chunks))
        except (ValueError, EOFError, TypeError):
            continue
        for i, data in sent if type(sent) is list else ():
            if type(i) is not int or not 0 <= i < len(jobs):
                continue
            got = structcache.decode_raw(data, jobs[i][3])
            if got is not None:
                out[i] = (got[0], data)
    for i, o in enumerate(out):  # a worker that failed: its files, here
        if o is None:
            out[i] = _entry(jobs[i][2], jobs[i][1], jobs[i][3])
    return out


def clear_caches() -> None:
    """Forget every cached outline (for measuring a first look)."""
    with _lock:
        _cache.clear()


# Languages whose symbols may start above their node (`_leading`: doc comments, Rust
# attributes); a Python symbol starts with its node (decorators are inside it).
_LEADING_LANGS = frozenset({"rust", "javascript", "typescript", "tsx", "go", "lua"})


def around_lines(path: Path, line_starts: list[int]) -> list[Symbol]:
    """Lite symbols enough for `innermost` at the lines beginning at the byte offsets
    `line_starts`: every symbol that shares a byte with one of those lines, with its
    ancestors (a symbol containing a line shares its bytes, and so do its ancestors). The
    symbol query then runs on those lines only, and nothing is cached: for a one-shot
    search, where this costs about the parse alone against half as much again for the
    whole structure. A cached outline is used when there is one; for languages whose
    symbols may start above their node (a doc comment above a Rust fn), the whole
    file's `structure`. With the structure cache on disk (structcache.py) the whole
    structure is always extracted and kept there: the next process reads it."""
    if structcache.cache_path() is not None:
        return structure(path)
    path, lang, key, stamp, syms = _lite_lookup(path)
    if syms is not None:
        return syms
    if lang in _LEADING_LANGS:
        return structure(path)
    import tree_sitter as ts
    src = path.read_bytes()
    tree = parse(src, lang)
    root = tree.root_node
    query = _query(lang)
    spans = []
    for start in sorted(set(line_starts)):
        nl = src.find(b"\n", start)
        end = len(src) if nl == -1 else nl + 1
        spans.append((start, end))
        # A decorator line is in a Python symbol (its outer node) but not in the node the
        # query captures: look at the decorated definition too.
        line = src[start:end]
        first = start + len(line) - len(line.lstrip())  # indentation belongs to the block
        for node in (root.descendant_for_byte_range(start, max(start, end - 1)),
                     root.descendant_for_byte_range(first, first) if first < end else None):
            while node is not None:
                if node.type == "decorated_definition":
                    inner = node.child_by_field_name("definition")
                    if inner is not None:
                        spans.append((inner.start_byte, inner.start_byte + 1))
                node = node.parent
    captured = []
    for a, b in spans:
        cursor = ts.QueryCursor(query)
        cursor.set_byte_range(a, b)
        captured.extend(cursor.captures(root).get("s", []))
    captured.sort(key=lambda n: (n.start_byte, -n.end_byte))
    return _build(captured, _Ctx(src, lang, lite=True), None)


def for_lookup(path: Path, src: bytes, query: str = "") -> tuple[list[Symbol], Callable[[Symbol], None]]:
    """Symbols of `path` (whose bytes are `src`) for picking one by name with `query`, and
    a function that fills in the signature and doc of the symbols the caller will show.

    A cached full outline is used as it is. Otherwise only the structure is extracted —
    of the symbols around the occurrences of the query's last name when they hold a
    match (what `pick_symbol` then chooses from, with their classes and same-named
    impls), else of the whole file (for the error's suggestions) — and the few symbols
    shown are completed from their nodes."""
    path = Path(path)
    lang = language_for(path, src)
    if lang is None:
        return [], lambda sym: None
    key, stamp, hit = _cached(path, lite=False)
    if hit is not None:
        return hit[1], lambda sym: None
    got = _disk_get(src, lang, lite_ok=False)[2]
    if got is not None:
        return got[0], lambda sym: None
    nodes: dict = {}
    want = [p for p in _SPLIT.split(query.strip()) if p]
    syms = _extract_named(src, lang, want[-1], nodes) if want else None
    # match_symbols prefers exact-case matches, and those are all found around the
    # occurrences; case-insensitive ones are too when no case folding can change a
    # length or turn a non-ASCII letter into an ASCII one (ß, ſ, the Kelvin sign).
    exact = syms is not None and any(s.name == want[-1] and s.segments[-len(want):] == want
                                     for s in walk_all(syms))
    if syms is None or not (exact or (src.isascii() and query.isascii() and match_symbols(syms, query))):
        nodes.clear()
        syms, _ = _extract(src, lang, lite=True, nodes=nodes)
    done: set[int] = set()

    def complete(sym: Symbol) -> None:
        got = nodes.get(id(sym))
        if got is not None and id(sym) not in done:
            done.add(id(sym))
            _complete(sym, got[1], src, lang)

    return syms, complete


def symbols_of(path: Path, source: bytes | None = None) -> list[Symbol]:
    """The symbols defined in a file, nested (methods under classes/impls, fields and
    variants under structs/enums). Empty for a language we do not parse."""
    return outline(path, source)[0]


def innermost(symbols: list[Symbol], line: int,
              skip_kinds: tuple[str, ...] = ()) -> Symbol | None:
    """The smallest symbol whose lines (doc comments included) contain `line`, ignoring
    `skip_kinds`."""
    best = None
    level = symbols
    while True:
        for s in level:
            if min(s.start_line, s.doc_start_line or s.start_line) <= line <= s.end_line:
                if s.kind not in skip_kinds:
                    best = s
                level = s.children
                break
        else:
            return best


_SPLIT = re.compile(r"::|[/.:]")


def match_symbols(symbols: list[Symbol], query: str) -> list[Symbol]:
    """Symbols whose qualified path ends with `query`'s segments: exact-case matches if
    there are any, else case-insensitive ones."""
    want = [p for p in _SPLIT.split(query.strip()) if p]
    if not want:
        return []
    every = list(walk_all(symbols))
    for key in (lambda s: s, str.casefold):
        w = [key(x) for x in want]
        # The last segment is the symbol's own name: compare it before building paths.
        found = [s for s in every if key(s.name) == w[-1]
                 and [key(x) for x in s.segments[-len(w):]] == w]
        if found:
            return found
    return []


def pick_symbol(symbols: list[Symbol], query: str, where: str) -> Symbol:
    """Pick one symbol by trailing qualified name; see `find_symbol`."""
    want = [p for p in _SPLIT.split(query.strip()) if p]
    if not want:
        raise MossError("empty symbol name", kind="usage")
    found = match_symbols(symbols, query)
    if len(found) > 1:
        exact = [s for s in found if len(s.segments) == len(want)]
        if exact:
            found = exact
    if len(found) > 1:
        not_impl = [s for s in found if s.kind != "impl"]
        if not_impl:
            found = not_impl
    if len(found) == 1:
        return found[0]
    if found:
        lines = "\n".join(f"  {s.path} ({s.kind}, {s.lines})" for s in found[:20])
        raise MossError(f"{query} matches {len(found)} symbols in {where}; say which:\n{lines}",
                        kind="ambiguous", candidates=[s.path for s in found])
    import difflib  # an error's suggestions only

    every = list(walk_all(symbols))
    names = sorted({s.path for s in every})
    close = difflib.get_close_matches(query, names, n=6, cutoff=0.5)
    if not close:
        close = difflib.get_close_matches(want[-1], sorted({s.name for s in every}), n=6,
                                          cutoff=0.5)
    msg = f"no symbol {query} in {where}"
    if close:
        msg += "; did you mean: " + ", ".join(close)
    elif symbols:
        names_in_order = list(dict.fromkeys(s.path for s in symbols))  # an enum and its impls share a name
        msg += "; it defines: " + ", ".join(names_in_order[:20])
    else:
        msg += " (no symbols found)"
    raise MossError(msg, kind="not_found", suggestions=close)


def find_symbol(path: Path, dotted_or_slashed: str) -> Symbol:
    """The symbol named `dotted_or_slashed` in `path`: "Provider", "Agent/run",
    "Agent.run", "Provider::default_model". A trailing match is enough ("run" finds
    Agent/run when it is the only run); an exact-case match wins over a case-insensitive
    one, a full path over a trailing one, a type over its impl. Raises MossError
    not_found (with close names) or ambiguous (listing candidates)."""
    return pick_symbol(symbols_of(path), dotted_or_slashed, str(path))


# --------------------------------------------------------------------------- the languages

_JS_KINDS = ("function_declaration", "generator_function_declaration", "class_declaration",
             "method_definition", "field_definition", "variable_declarator")
_TS_KINDS = _JS_KINDS + ("abstract_class_declaration", "abstract_method_signature", "public_field_definition",
                         "interface_declaration", "type_alias_declaration", "enum_declaration",
                         "property_signature", "method_signature", "function_signature", "internal_module")
_TS_PATTERNS = ("(enum_body (property_identifier) @s)", "(enum_body (enum_assignment) @s)",
                "(export_statement value: (class) @s)")
_JS_DOC: dict[str, Any] = dict(doc_markers=("/**",), attr_markers=("@",), doc_style=("/** ", " */"))

for _spec in [
    LangSpec("python", "tree_sitter_python", "language", (".py", ".pyi", ".pyw"), _python,
             kinds=("function_definition", "class_definition"),
             patterns=("(class_definition body: (block (expression_statement (assignment)) @s))",),
             shebangs=("python",), attr_markers=("@",), doc_style=('"""', '"""'),
             module_doc_style=('"""', '"""')),
    LangSpec("rust", "tree_sitter_rust", "language", (".rs",), _rust,
             kinds=("function_item", "function_signature_item", "struct_item", "enum_item", "union_item",
                    "trait_item", "impl_item", "mod_item", "type_item", "const_item", "static_item",
                    "macro_definition", "field_declaration", "enum_variant", "associated_type"),
             doc_markers=("///", "/**"), attr_markers=("#[",), doc_style=("/// ", ""),
             module_doc_style=("//! ", "")),
    LangSpec("javascript", "tree_sitter_javascript", "language", (".js", ".mjs", ".cjs", ".jsx"), _js,
             kinds=_JS_KINDS, patterns=("(export_statement value: (class) @s)",), shebangs=("node",), **_JS_DOC),
    LangSpec("typescript", "tree_sitter_typescript", "language_typescript", (".ts", ".mts", ".cts"), _js,
             kinds=_TS_KINDS, patterns=_TS_PATTERNS, shebangs=("deno",), **_JS_DOC),
    LangSpec("tsx", "tree_sitter_typescript", "language_tsx", (".tsx",), _js,
             kinds=_TS_KINDS, patterns=_TS_PATTERNS, **_JS_DOC),
    LangSpec("go", "tree_sitter_go", "language", (".go",), _go,
             kinds=("function_declaration", "method_declaration", "type_spec", "type_alias", "field_declaration",
                    "method_elem", "method_spec", "const_spec", "var_spec"),
             doc_markers=("//", "/*"), doc_style=("// ", "")),
    LangSpec("lua", "tree_sitter_lua", "language", (".lua",), _lua,
             kinds=("function_declaration",),
             patterns=("(assignment_statement (expression_list value: (function_definition))) @s",
                       "(field name: (identifier) value: (function_definition)) @s"),
             shebangs=("lua",), doc_markers=("--",), doc_style=("--- ", "")),
]:
    LANGUAGES[_spec.name] = _spec
    _BY_EXT.update({ext: _spec.name for ext in _spec.extensions})
