"""The languages moss reads symbols of: each one's extensions, extractor, symbol query and
doc conventions (`LangSpec`), which language a file is, and the compiled symbol queries.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

from ...errors import MossError
from . import go, js, lua, python, rust
from .grammars import GRAMMARS, language


class LangSpec:
    """Everything moss knows about one language; adding a language is adding one of these
    to LANGUAGES (at the end of this module), its grammar to grammars.GRAMMARS and its
    extractor in a module of its own.

    name (its grammar's, in grammars.GRAMMARS), extensions, extract (node -> (name, kind,
    signature, outer, doc, container)); kinds: node kinds that are symbols (missing ones are
    dropped); patterns: query patterns for symbols only in some places; shebangs:
    interpreter words of a `#!` line; doc_markers: comment starts that document the next
    symbol; attr_markers: attribute/decorator starts that belong to it; doc_style: how a
    skeleton shows a doc summary, module_doc_style: ... and the file's own doc."""

    __slots__ = ("name", "extensions", "extract", "kinds", "patterns", "shebangs",
                 "doc_markers", "attr_markers", "doc_style", "module_doc_style")

    def __init__(self, name: str, extensions: tuple[str, ...], extract: Callable,
                 kinds: tuple[str, ...] = (), patterns: tuple[str, ...] = (), shebangs: tuple[str, ...] = (),
                 doc_markers: tuple[str, ...] = (), attr_markers: tuple[str, ...] = (),
                 doc_style: tuple[str, str] = ("# ", ""), module_doc_style: tuple[str, str] | None = None):
        self.name, self.extensions, self.extract = name, extensions, extract
        self.kinds, self.patterns, self.shebangs = kinds, patterns, shebangs
        self.doc_markers, self.attr_markers = doc_markers, attr_markers
        self.doc_style, self.module_doc_style = doc_style, module_doc_style

    @property
    def module(self) -> str:
        """The grammar's package (tree_sitter_rust)."""
        return GRAMMARS[self.name][0]


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
_queries: dict[str, object] = {}


def load_all() -> None:
    """Load every installed grammar and compile its query now (a zygote, before it forks:
    5-16 ms a language that each forked process would otherwise spend again)."""
    for name in LANGUAGES:
        try:
            query(name)
        except MossError:
            pass  # a grammar that is not installed: its first use says so


def query(name: str):
    """The compiled symbol query of language `name` (its captures are named `s`)."""
    with _lock:
        q = _queries.get(name)
    if q is not None:
        return q
    import tree_sitter as ts
    lang = language(name)
    spec = LANGUAGES[name]
    parts = [f"({k}) @s" for k in spec.kinds if lang.id_for_node_kind(k, True)]
    parts += spec.patterns
    q = ts.Query(lang, "\n".join(parts))
    with _lock:
        _queries[name] = q
    return q


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
    LangSpec("python", (".py", ".pyi", ".pyw"), python.extract,
             kinds=("function_definition", "class_definition"),
             patterns=("(class_definition body: (block (expression_statement (assignment)) @s))",),
             shebangs=("python",), attr_markers=("@",), doc_style=('"""', '"""'),
             module_doc_style=('"""', '"""')),
    LangSpec("rust", (".rs",), rust.extract,
             kinds=("function_item", "function_signature_item", "struct_item", "enum_item", "union_item",
                    "trait_item", "impl_item", "mod_item", "type_item", "const_item", "static_item",
                    "macro_definition", "field_declaration", "enum_variant", "associated_type"),
             doc_markers=("///", "/**"), attr_markers=("#[",), doc_style=("/// ", ""),
             module_doc_style=("//! ", "")),
    LangSpec("javascript", (".js", ".mjs", ".cjs", ".jsx"), js.extract,
             kinds=_JS_KINDS, patterns=("(export_statement value: (class) @s)",), shebangs=("node",), **_JS_DOC),
    LangSpec("typescript", (".ts", ".mts", ".cts"), js.extract,
             kinds=_TS_KINDS, patterns=_TS_PATTERNS, shebangs=("deno",), **_JS_DOC),
    LangSpec("tsx", (".tsx",), js.extract,
             kinds=_TS_KINDS, patterns=_TS_PATTERNS, **_JS_DOC),
    LangSpec("go", (".go",), go.extract,
             kinds=("function_declaration", "method_declaration", "type_spec", "type_alias", "field_declaration",
                    "method_elem", "method_spec", "const_spec", "var_spec"),
             doc_markers=("//", "/*"), doc_style=("// ", "")),
    LangSpec("lua", (".lua",), lua.extract,
             kinds=("function_declaration",),
             patterns=("(assignment_statement (expression_list value: (function_definition))) @s",
                       "(field name: (identifier) value: (function_definition)) @s"),
             shebangs=("lua",), doc_markers=("--",), doc_style=("--- ", "")),
]:
    LANGUAGES[_spec.name] = _spec
    _BY_EXT.update({ext: _spec.name for ext in _spec.extensions})
