"""The public surface of a source file, and what an edit changed in it.

`items(text, lang)` reads a file with tree-sitter and lists its public items: each with its
qualified name (`Point::scale`, `Vec.push`, `ns::Vec::size`) and its declaration's head,
normalised (comments, annotations and decorators out, whitespace collapsed, no body): `pub fn
scale(x: i32) -> i32`. `compare(path, before, after)` says which public items an edit removed,
changed (same name, other head) or added. moss.edit.preview returns it for every file a batch
changes; how much each difference weighs is policy, in scripts/lib/agent/risk.lua.

What counts as public, by language:
- Python: module-level functions, classes and assigned names not starting with `_` (only those
  in `__all__` when the module lists them), and the public methods and attributes of those
  classes (dunder methods included).
- Rust: `pub` items (not `pub(crate)` and the like), the `pub` fields of a `pub struct`, every
  variant of a `pub enum`, every item of a `pub trait`, the `pub` items of an inherent `impl`,
  `pub mod` contents, `pub use`, and each trait `impl` (as `impl Trait for Type`).
- JavaScript/TypeScript: what `export` exports (functions, classes with their non-private
  members, variables, interfaces and their members, types, enums, `export { ... }` names), and
  CommonJS `module.exports` / `exports.x`.
- Go: exported (capitalised) functions, methods of exported types, types, struct fields,
  interface methods, constants and variables.
- Lua: global functions and functions or values stored in a table field (`function M.f`,
  `M.f = function`, `M.X = 1`), and the named fields of a table the chunk returns.
- Java: public and protected types, methods, constructors and fields (every member of an
  interface), and enum constants.
- C++: namespace-scope declarations that are not `static` nor in an anonymous namespace, and
  the public and protected members of classes, structs and unions.

Any other file falls back to its text: the names on lines that start with `export`, `pub` or
`public` (compared by name only: the fallback reports a name that disappeared, nothing else).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from .treesitter import grammars, language_for

__all__ = ["Item", "items", "compare", "language_of"]

# Languages read here that the symbol tools (treesitter/languages.py) do not; their grammars
# are in treesitter/grammars.py with the others.
_EXTRA_EXT = {".java": "java", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".c++": "cpp", ".hpp": "cpp",
              ".hh": "cpp", ".hxx": "cpp", ".h++": "cpp", ".h": "cpp", ".c": "cpp", ".ipp": "cpp", ".tcc": "cpp"}


@dataclass(frozen=True)
class Item:
    name: str  # qualified: "Point::scale", "Vec.push"
    text: str  # the declaration's head, normalised: "pub fn scale(x: i32) -> i32"
    sig: str   # what follows the item's own name in `text`: "(x: i32) -> i32"

    def as_dict(self) -> dict:
        return {"name": self.name, "text": self.text, "sig": self.sig}


def language_of(path: str, text: str = "") -> str | None:
    """The language whose surface moss reads for `path` (by extension, else a `#!` line)."""
    ext = PurePosixPath(path).suffix.lower()
    if ext in _EXTRA_EXT:
        return _EXTRA_EXT[ext]
    return language_for(path, text[:200].encode("utf-8", "replace"))


# --------------------------------------------------------------------------- normalising

_WS = re.compile(r"\s+")
_OPEN = re.compile(r"([(\[<]) ")
_CLOSE = re.compile(r" ([)\]>,;])")
_TRAILING_COMMA = re.compile(r",([)\]>])")
_SKIPPED = {"marker_annotation", "annotation", "decorator", "attribute_item"}  # and every *comment


def _norm(s: str) -> str:
    s = _WS.sub(" ", s).strip()
    s = _TRAILING_COMMA.sub(r"\1", _CLOSE.sub(r"\1", _OPEN.sub(r"\1", s)))
    return s.rstrip(" ;:{=").rstrip()


class _Walk:
    """One file's walk: its bytes and the items found so far."""

    def __init__(self, src: bytes):
        self.src = src
        self.found: list[Item] = []

    def text(self, node) -> str:
        return self.src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def span(self, start: int, stop: int, within=None) -> str:
        """The source between two bytes, normalised, without the comments, annotations and
        decorators of `within` (a node) that fall inside it."""
        cut: list[tuple[int, int]] = []
        if within is not None:
            self._skipped(within, start, stop, cut)
        out, at = [], start
        for a, b in sorted(cut):
            if a >= at:
                out.append(self.src[at:a])
                at = b
        out.append(self.src[at:stop])
        return _norm(b" ".join(out).decode("utf-8", "replace"))

    def _skipped(self, node, start: int, stop: int, cut: list) -> None:
        for c in node.children:
            if c.end_byte <= start or c.start_byte >= stop:
                continue
            if c.type in _SKIPPED or c.type.endswith("comment"):
                cut.append((c.start_byte, c.end_byte))
            elif c.child_count:
                self._skipped(c, start, stop, cut)

    def add(self, name: str, node, stop: int, name_node=None, start: int | None = None) -> None:
        """An item named `name` whose head runs from `start` (the node's start) to `stop`."""
        begin = node.start_byte if start is None else start
        text = self.span(begin, stop, node)
        sig = self.span(name_node.end_byte, stop, node) if name_node is not None and name_node.end_byte <= stop else ""
        self.found.append(Item(name, text, sig))

    def item(self, name: str, text: str, sig: str = "") -> None:
        self.found.append(Item(name, _norm(text), _norm(sig)))


def _field(node, name: str):
    return node.child_by_field_name(name) if node is not None else None


def _stop(node, *fields: str) -> int:
    """Where a head ends: the start of the first of `fields` the node has, else its end."""
    for f in fields:
        c = node.child_by_field_name(f)
        if c is not None:
            return c.start_byte
    return node.end_byte


# ------------------------------------------------------------------------------- Python

def _py_public(name: str, allowed: set[str] | None) -> bool:
    if allowed is not None:
        return name in allowed
    return not name.startswith("_") or (name.startswith("__") and name.endswith("__"))


def _py_all(w: _Walk, root) -> set[str] | None:
    """The names in a literal module-level `__all__`, or None."""
    names: set[str] | None = None
    for node in root.named_children:
        expr = node.named_children[0] if node.type == "expression_statement" and node.named_children else None
        if expr is None or expr.type not in ("assignment", "augmented_assignment"):
            continue
        left, right = _field(expr, "left"), _field(expr, "right")
        if left is None or w.text(left) != "__all__" or right is None:
            continue
        if right.type not in ("list", "tuple") or any(c.type != "string" for c in right.named_children):
            return None
        names = names or set()
        names |= {w.text(c).strip("'\"") for c in right.named_children}
    return names


def _python(w: _Walk, root) -> None:
    allowed = _py_all(w, root)
    for node in root.named_children:
        _py_item(w, node, "", allowed)


def _py_item(w: _Walk, node, prefix: str, allowed: set[str] | None) -> None:
    if node.type == "decorated_definition":
        node = _field(node, "definition")
        if node is None:
            return
    if node.type in ("function_definition", "class_definition"):
        name = _field(node, "name")
        if name is None or not _py_public(w.text(name), allowed):
            return
        w.add(prefix + w.text(name), node, _stop(node, "body"), name)
        body = _field(node, "body")
        if node.type == "class_definition" and body is not None:
            for c in body.named_children:
                _py_item(w, c, prefix + w.text(name) + ".", None)
    elif node.type == "expression_statement" and node.named_children and node.named_children[0].type == "assignment":
        a = node.named_children[0]
        left = _field(a, "left")
        if left is not None and left.type == "identifier" and _py_public(w.text(left), allowed):
            typ = _field(a, "type")
            w.add(prefix + w.text(left), a, (typ or left).end_byte, left)


# --------------------------------------------------------------------------------- Rust

_RUST_ITEMS = {"function_item", "function_signature_item", "struct_item", "enum_item", "union_item",
               "trait_item", "type_item", "const_item", "static_item", "mod_item", "macro_definition"}


def _rust_pub(w: _Walk, node) -> bool:
    return any(c.type == "visibility_modifier" and w.text(c) == "pub" for c in node.children)


def _rust(w: _Walk, root, prefix: str = "") -> None:
    for node in root.named_children:
        if node.type == "impl_item":
            _rust_impl(w, node, prefix)
        elif node.type == "use_declaration" and _rust_pub(w, node):
            w.item(prefix + "use " + _norm(w.text(_field(node, "argument") or node)), w.text(node))
        elif node.type in _RUST_ITEMS and _rust_pub(w, node):
            _rust_item(w, node, prefix)


def _rust_item(w: _Walk, node, prefix: str) -> None:
    name = _field(node, "name")
    if name is None:
        return
    qual = prefix + w.text(name)
    body = _field(node, "body")
    if node.type in ("const_item", "static_item"):
        w.add(qual, node, (_field(node, "type") or name).end_byte, name)
    elif node.type in ("type_item", "function_signature_item") or (node.type == "struct_item" and body is not None
                                                                   and body.type == "ordered_field_declaration_list"):
        w.add(qual, node, node.end_byte, name)
    else:
        w.add(qual, node, body.start_byte if body is not None else node.end_byte, name)
    if body is None:
        return
    if node.type == "struct_item" and body.type == "field_declaration_list":
        for f in body.named_children:
            fname = _field(f, "name")
            if f.type == "field_declaration" and fname is not None and _rust_pub(w, f):
                w.add(qual + "." + w.text(fname), f, f.end_byte, fname)
    elif node.type == "enum_item":
        for v in body.named_children:
            vname = _field(v, "name")
            if v.type == "enum_variant" and vname is not None:
                w.add(qual + "::" + w.text(vname), v, _stop(v, "value"), vname)
    elif node.type == "trait_item":
        for m in body.named_children:
            mname = _field(m, "name")
            if mname is not None:
                w.add(qual + "::" + w.text(mname), m, _stop(m, "body", "value", "default_type"), mname)
    elif node.type == "mod_item":
        _rust(w, body, qual + "::")


def _rust_impl(w: _Walk, node, prefix: str) -> None:
    typ, trait, body = _field(node, "type"), _field(node, "trait"), _field(node, "body")
    if typ is None:
        return
    if trait is not None:
        w.add(prefix + "impl " + _norm(w.text(trait)) + " for " + _norm(w.text(typ)), node, _stop(node, "body"))
        return
    owner = prefix + re.sub(r"<.*", "", _norm(w.text(typ)))
    for m in body.named_children if body is not None else ():
        mname = _field(m, "name")
        if m.type in ("function_item", "const_item", "type_item") and mname is not None and _rust_pub(w, m):
            stop = (_field(m, "type") or mname).end_byte if m.type == "const_item" else _stop(m, "body")
            w.add(owner + "::" + w.text(mname), m, stop, mname)


# ---------------------------------------------------------------------- JavaScript, TS

_JS_FUNCS = ("function_declaration", "generator_function_declaration", "function_signature")
_JS_CLASSES = ("class_declaration", "abstract_class_declaration", "class")
_JS_FUNC_VALUES = ("arrow_function", "function_expression", "function", "generator_function")


def _js(w: _Walk, root) -> None:
    for node in root.named_children:
        if node.type == "export_statement":
            _js_export(w, node)
        elif node.type == "expression_statement" and node.named_children:
            _js_commonjs(w, node.named_children[0])


def _js_export(w: _Walk, node) -> None:
    decl, value, source = _field(node, "declaration"), _field(node, "value"), _field(node, "source")
    if decl is not None:
        _js_decl(w, decl, node)
    elif value is not None:
        if value.type in _JS_CLASSES:
            _js_class(w, value, "default", node)
        else:
            w.item("default", "export default " + _js_callable(w, value), _js_callable(w, value))
    else:
        clause = next((c for c in node.named_children if c.type in ("export_clause", "namespace_export")), None)
        specs = [c for c in clause.named_children if c.type == "export_specifier"] if clause is not None else []
        for s in specs:
            shown = _field(s, "alias") or _field(s, "name")
            w.item(w.text(shown) if shown is not None else w.text(s), "export " + w.text(s)
                   + (" from " + w.text(source) if source is not None else ""))
        if not specs:
            w.item("* from " + (w.text(source) if source is not None else "?"), w.text(node))


def _js_callable(w: _Walk, value) -> str:
    """The parameters and return type of a function value ("" for any other value)."""
    if value.type not in _JS_FUNC_VALUES:
        return ""
    params = _field(value, "parameters") or _field(value, "parameter")
    if params is None:
        return ""
    return w.span(params.start_byte, _stop(value, "body"), value).removesuffix("=>").rstrip()


def _js_decl(w: _Walk, decl, outer) -> None:
    name = _field(decl, "name")
    t = decl.type
    if t in _JS_FUNCS and name is not None:
        w.add(w.text(name), decl, _stop(decl, "body"), name, start=outer.start_byte)
    elif t in _JS_CLASSES and name is not None:
        _js_class(w, decl, w.text(name), outer)
    elif t in ("lexical_declaration", "variable_declaration"):
        kind = w.text(decl).split(None, 1)[0]
        for d in decl.named_children:
            dname, value = _field(d, "name"), _field(d, "value")
            if d.type != "variable_declarator" or dname is None:
                continue
            typ = _field(d, "type")
            sig = (w.span(typ.start_byte, typ.end_byte, d) if typ is not None else "")
            sig += _js_callable(w, value) if value is not None else ""
            w.item(w.text(dname), f"export {kind} {w.text(dname)}{sig}", sig)
    elif t == "interface_declaration" and name is not None:
        w.add(w.text(name), decl, _stop(decl, "body"), name, start=outer.start_byte)
        body = _field(decl, "body")
        for m in body.named_children if body is not None else ():
            mname = _field(m, "name")
            if mname is not None:
                w.add(w.text(name) + "." + w.text(mname), m, m.end_byte, mname)
    elif t == "enum_declaration" and name is not None:
        w.add(w.text(name), decl, _stop(decl, "body"), name, start=outer.start_byte)
        body = _field(decl, "body")
        for m in body.named_children if body is not None else ():
            mname = _field(m, "name") or m
            w.item(w.text(name) + "." + w.text(mname), w.text(m))
    elif name is not None:  # type aliases, namespaces, ambient declarations
        stop = decl.end_byte if t == "type_alias_declaration" else _stop(decl, "body")
        w.add(w.text(name), decl, stop, name, start=outer.start_byte)


def _js_class(w: _Walk, cls, shown: str, outer) -> None:
    w.add(shown, cls, _stop(cls, "body"), _field(cls, "name"), start=outer.start_byte)
    body = _field(cls, "body")
    for m in body.named_children if body is not None else ():
        mname = _field(m, "name") or _field(m, "property")
        if mname is None or mname.type == "private_property_identifier":
            continue
        if any(c.type == "accessibility_modifier" and w.text(c) == "private" for c in m.children):
            continue
        w.add(shown + "." + w.text(mname), m, _stop(m, "body", "value"), mname)


def _js_commonjs(w: _Walk, expr) -> None:
    if expr.type != "assignment_expression":
        return
    left, right = _field(expr, "left"), _field(expr, "right")
    if left is None or right is None:
        return
    target = _norm(w.text(left))
    if target == "module.exports" and right.type == "object":
        for p in right.named_children:
            key = _field(p, "key") or _field(p, "name") or (p if p.type == "shorthand_property_identifier" else None)
            if key is not None:
                value = _field(p, "value")
                sig = _js_callable(w, value) if value is not None else ""
                w.item(w.text(key), "exports." + w.text(key) + sig, sig)
    elif target == "module.exports":
        w.item("module.exports", "module.exports" + _js_callable(w, right), _js_callable(w, right))
    elif target.startswith(("exports.", "module.exports.")):
        short = target.rsplit(".", 1)[1]
        w.item(short, "exports." + short + _js_callable(w, right), _js_callable(w, right))


# ----------------------------------------------------------------------------------- Go

def _exported(name: str) -> bool:
    return name[:1].isupper()


def _go(w: _Walk, root) -> None:
    for node in root.named_children:
        name = _field(node, "name")
        if node.type == "function_declaration" and name is not None and _exported(w.text(name)):
            w.add(w.text(name), node, _stop(node, "body"), name)
        elif node.type == "method_declaration" and name is not None and _exported(w.text(name)):
            recv = _field(node, "receiver")
            owner = re.findall(r"[A-Za-z_]\w*", re.sub(r"\[.*?\]", "", w.text(recv))) if recv is not None else []
            if owner and _exported(owner[-1]):
                w.add(owner[-1] + "." + w.text(name), node, _stop(node, "body"), name)
        elif node.type == "type_declaration":
            for spec in node.named_children:
                _go_type(w, spec)
        elif node.type in ("const_declaration", "var_declaration"):
            for spec in _go_specs(node):
                typ = _field(spec, "type")
                for n in spec.children_by_field_name("name"):
                    if _exported(w.text(n)):
                        w.add(w.text(n), spec, (typ or n).end_byte, n, start=n.start_byte)


def _go_specs(node) -> list:
    out = []
    for c in node.named_children:
        if c.type in ("const_spec", "var_spec"):
            out.append(c)
        elif c.type == "var_spec_list":
            out.extend(s for s in c.named_children if s.type == "var_spec")
    return out


def _go_type(w: _Walk, spec) -> None:
    name, typ = _field(spec, "name"), _field(spec, "type")
    if name is None or typ is None or not _exported(w.text(name)):
        return
    tname = w.text(name)
    brace = w.src.find(b"{", typ.start_byte, typ.end_byte)
    if typ.type in ("struct_type", "interface_type") and brace >= 0:
        w.add(tname, spec, brace, name)
    else:
        w.add(tname, spec, spec.end_byte, name)
    if typ.type == "struct_type":
        for fl in typ.named_children:
            for f in fl.named_children if fl.type == "field_declaration_list" else ():
                names = f.children_by_field_name("name")
                ftype = _field(f, "type")
                rest = w.span(ftype.start_byte, f.end_byte, f) if ftype is not None else ""
                for n in names:
                    if _exported(w.text(n)):
                        w.item(tname + "." + w.text(n), w.text(n) + " " + rest, rest)
                if not names and f.type == "field_declaration":  # an embedded type
                    embedded = re.sub(r"^\*", "", _norm(w.text(_field(f, "type") or f)))
                    if _exported(embedded.rsplit(".", 1)[-1]):
                        w.item(tname + "." + embedded, w.text(f))
    elif typ.type == "interface_type":
        for m in typ.named_children:
            mname = _field(m, "name")
            if mname is not None and _exported(w.text(mname)):
                w.add(tname + "." + w.text(mname), m, m.end_byte, mname)
            elif mname is None:
                w.item(tname + "." + _norm(w.text(m)), w.text(m))


# ---------------------------------------------------------------------------------- Lua

def _lua(w: _Walk, root) -> None:
    for i, node in enumerate(root.named_children):
        local = root.field_name_for_named_child(i) == "local_declaration"
        if node.type == "function_declaration" and not local:
            name = _field(node, "name")
            if name is not None:
                w.add(_norm(w.text(name)), node, (_field(node, "parameters") or name).end_byte, name)
        elif node.type == "assignment_statement" and not local:
            _lua_assign(w, node)
        elif node.type == "return_statement":
            for table in (c for e in node.named_children for c in e.named_children if c.type == "table_constructor"):
                for f in table.named_children:
                    fname, value = _field(f, "name"), _field(f, "value")
                    if f.type == "field" and fname is not None:
                        w.item(w.text(fname), w.text(fname) + _lua_params(w, value), _lua_params(w, value))


def _lua_params(w: _Walk, value) -> str:
    params = _field(value, "parameters") if value is not None and value.type == "function_definition" else None
    return w.text(params) if params is not None else ""


def _lua_assign(w: _Walk, node) -> None:
    targets = [c for c in (node.named_children[0].named_children if node.named_children else [])]
    values = [c for e in node.named_children[1:] for c in e.named_children]
    for k, t in enumerate(targets):
        if t.type not in ("dot_index_expression", "method_index_expression"):
            continue
        value = values[k] if k < len(values) else None
        sig = _lua_params(w, value)
        w.item(_norm(w.text(t)), _norm(w.text(t)) + sig, sig)


# --------------------------------------------------------------------------------- Java

_JAVA_TYPES = {"class_declaration", "interface_declaration", "enum_declaration", "record_declaration",
               "annotation_type_declaration"}
_JAVA_MEMBERS = {"method_declaration", "constructor_declaration", "compact_constructor_declaration",
                 "annotation_type_element_declaration"}


def _java_visible(w: _Walk, node, in_interface: bool) -> bool:
    mods = next((c for c in node.children if c.type == "modifiers"), None)
    words = set(w.text(mods).split()) if mods is not None else set()
    if in_interface:
        return "private" not in words
    return bool(words & {"public", "protected"})


def _java(w: _Walk, root, prefix: str = "", in_interface: bool = False) -> None:
    for node in root.named_children:
        t = node.type
        if t == "enum_body_declarations":
            _java(w, node, prefix, in_interface)
        elif t == "enum_constant":
            name = _field(node, "name")
            if name is not None:
                w.item(prefix + w.text(name), w.text(name))
        elif (t in _JAVA_TYPES or t in _JAVA_MEMBERS or t in ("field_declaration", "constant_declaration")) \
                and _java_visible(w, node, in_interface):
            _java_item(w, node, prefix)


def _java_item(w: _Walk, node, prefix: str) -> None:
    t = node.type
    if t in ("field_declaration", "constant_declaration"):
        typ = _field(node, "type")
        for d in node.children_by_field_name("declarator"):
            name = _field(d, "name")
            if name is not None:
                w.item(prefix + w.text(name), w.span(node.start_byte, (typ or name).end_byte, node) + " " + w.text(name),
                       w.text(typ) if typ is not None else "")
        return
    name = _field(node, "name")
    if name is None:
        return
    w.add(prefix + w.text(name), node, _stop(node, "body"), name)
    body = _field(node, "body")
    if t in _JAVA_TYPES and body is not None:
        _java(w, body, prefix + w.text(name) + ".", t in ("interface_declaration", "annotation_type_declaration"))


# ---------------------------------------------------------------------------------- C++

_CPP_GROUPS = {"preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef",
               "declaration_list"}
_CPP_CLASSES = {"class_specifier", "struct_specifier", "union_specifier"}
_CPP_NAMES = {"identifier", "field_identifier", "qualified_identifier", "operator_name", "destructor_name",
              "type_identifier", "template_function", "template_method", "operator_cast"}


def _cpp(w: _Walk, root, prefix: str = "") -> None:
    for node in root.named_children:
        _cpp_node(w, node, prefix, None)


def _cpp_node(w: _Walk, node, prefix: str, start: int | None, in_class: bool = False) -> None:
    """One declaration at namespace or class scope; `start`: where a template head began."""
    t = node.type
    if t == "namespace_definition":
        name, body = _field(node, "name"), _field(node, "body")
        if name is not None and body is not None:  # an anonymous namespace is private
            _cpp(w, body, prefix + w.text(name) + "::")
    elif t == "linkage_specification" or t in _CPP_GROUPS:
        for i, c in enumerate(node.children):  # not a preprocessor condition or an "extern" string
            if c.is_named and node.field_name_for_child(i) not in ("condition", "name", "value"):
                _cpp_node(w, c, prefix, None)
    elif t == "template_declaration":
        inner = node.named_children[-1] if node.named_children else None
        if inner is not None:
            _cpp_node(w, inner, prefix, node.start_byte if start is None else start, in_class)
    elif t in _CPP_CLASSES:
        _cpp_class(w, node, prefix, start)
    elif t == "enum_specifier":
        _cpp_enum(w, node, prefix, start)
    elif t in ("alias_declaration", "type_definition"):
        name = _field(node, "name") or _field(node, "declarator")
        if name is not None:
            w.add(prefix + _norm(w.text(name)), node, node.end_byte, name, start=start)
    elif t in ("declaration", "field_declaration", "function_definition"):
        _cpp_decl(w, node, prefix, start, in_class)


def _cpp_enum(w: _Walk, node, prefix: str, start: int | None) -> None:
    name = _field(node, "name")
    if name is None:
        return
    w.add(prefix + w.text(name), node, _stop(node, "body"), name, start=start)
    body = _field(node, "body")
    for e in body.named_children if body is not None else ():
        ename = _field(e, "name")
        if ename is not None:
            w.item(prefix + w.text(name) + "::" + w.text(ename), w.text(ename))


def _cpp_class(w: _Walk, node, prefix: str, start: int | None) -> None:
    name, body = _field(node, "name"), _field(node, "body")
    if name is None or body is None:
        return
    qual = prefix + _norm(w.text(name))
    w.add(qual, node, body.start_byte, name, start=start)
    public = node.type != "class_specifier"
    for c in body.named_children:
        if c.type == "access_specifier":
            public = w.text(c).strip() in ("public", "protected")
        elif public:
            _cpp_node(w, c, qual + "::", None, in_class=True)


def _cpp_name(decl):
    """(the name node, the function declarator or None) of a declarator."""
    func = None
    while decl is not None and decl.type not in _CPP_NAMES:
        if decl.type == "function_declarator":
            func = func or decl
        decl = _field(decl, "declarator")
    return decl, func


def _cpp_decl(w: _Walk, node, prefix: str, start: int | None, in_class: bool) -> None:
    if not in_class and any(c.type == "storage_class_specifier" and w.text(c) == "static" for c in node.children):
        return  # internal linkage
    typ = _field(node, "type")
    if typ is not None and typ.type in _CPP_CLASSES | {"enum_specifier"} and _field(typ, "body") is not None:
        _cpp_node(w, typ, prefix, start)
    for d in node.children_by_field_name("declarator"):
        name, func = _cpp_name(d)
        if name is None:
            continue
        stop = func.end_byte if func is not None else name.end_byte
        w.add(prefix + _norm(w.text(name)), node, stop, name, start=start)


# ------------------------------------------------------------------------------ the rest

_EXTRACTORS: dict[str, Callable] = {"python": _python, "rust": _rust, "javascript": _js, "typescript": _js,
                                    "tsx": _js, "go": _go, "lua": _lua, "java": _java, "cpp": _cpp}

_TEXT_EXPORT = re.compile(
    r"^[ \t]*(?:export|pub|public)\b(?:[ \t]+(?:default|declare|async|static|final|abstract|const|let|var|unsafe|"
    r"extern(?:[ \t]+\"[^\"]*\")?|function\*?|class|interface|type|enum|struct|trait|fn|mod|union|def|func|fun|"
    r"sealed|open|override|virtual|readonly|inline|partial|[\w.<>\[\],?]+(?=[ \t]+\w)))*[ \t]+([A-Za-z_$][\w$]*)",
    re.M)


def _textual(text: str) -> list[Item]:
    return [Item(m.group(1), _norm(m.group(0)), "") for m in _TEXT_EXPORT.finditer(text)]


def items(text: str, lang: str | None) -> list[Item]:
    """The public items of `text` in `lang` (None: the textual fallback), in file order."""
    extract = _EXTRACTORS.get(lang or "")
    if extract is None:
        return _textual(text)
    src = text.encode("utf-8")
    tree = grammars.parse(src, lang or "")
    w = _Walk(src)
    extract(w, tree.root_node)
    return w.found


def _grouped(found: list[Item]) -> dict[str, list[Item]]:
    out: dict[str, list[Item]] = {}
    for it in found:
        out.setdefault(it.name, []).append(it)
    return out


def compare(path: str, before: str | None, after: str | None) -> dict:
    """What an edit changed in the public surface of the file at `path` (before None: a new
    file; after None: a deleted one): {path, lang, how ("tree-sitter" or "text"), removed,
    changed, added}, items as {name, text, sig}, changes as {name, before, after,
    before_sig, after_sig}. The textual fallback reports only names that disappeared."""
    lang = language_of(path, before or after or "")
    how = "tree-sitter" if lang in _EXTRACTORS else "text"
    old = _grouped(items(before, lang)) if before else {}
    new = _grouped(items(after, lang)) if after else {}
    removed, changed, added = [], [], []
    for name, was in old.items():
        now = new.get(name)
        if now is None:
            removed.append(was[0].as_dict())
            continue
        if how == "text":
            continue
        gone = [i for i in was if i.text not in {j.text for j in now}]
        came = [i for i in now if i.text not in {j.text for j in was}]
        if gone and came:
            changed.append({"name": name, "before": gone[0].text, "after": came[0].text,
                            "before_sig": gone[0].sig, "after_sig": came[0].sig})
        elif gone:  # one of several (an overload) went
            removed.append(gone[0].as_dict())
        elif came:
            added.append(came[0].as_dict())
    added += [now[0].as_dict() for name, now in new.items() if name not in old]
    return {"path": path, "lang": lang, "how": how, "removed": removed, "changed": changed, "added": added}
