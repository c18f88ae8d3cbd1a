"""Go's symbols: functions, methods with their receiver's type, types, fields, constants."""

from __future__ import annotations

import re

from .common import Ctx, clean, name_of, sig_to


def _go_type_name(node, ctx: Ctx) -> str:
    t = ctx.text(node)
    t = t.lstrip("*&").strip()
    return re.sub(r"\[.*", "", t)


def extract(node, ctx: Ctx):
    """What `node`, a capture of the symbol query, is: (name, kind, signature, outer node, doc,
    container), or None when it is not a symbol after all."""
    t = node.type
    if t in ("const_spec", "var_spec"):
        decl = node.parent
        if decl is not None and decl.type == "var_spec_list":
            decl = decl.parent
        if decl is None or decl.parent is None or decl.parent.type != "source_file":
            return None
        name = name_of(node, ctx) or "?"
        word = "const" if t == "const_spec" else "var"
        if node.parent.type != "var_spec_list" and decl.named_child_count == 1:
            outer = decl
            sig = clean(ctx.text(decl), 120)
        else:  # one of a parenthesised group
            outer = node
            sig = clean(f"{word} {ctx.text(node)}", 120)
        return name, "const" if t == "const_spec" else "var", sig, outer, None, None
    if t == "field_declaration":
        name = name_of(node, ctx) or _go_type_name(node.child_by_field_name("type") or node, ctx)
        return name, "field", clean(ctx.text(node), 120), node, None, None
    if t in ("method_elem", "method_spec"):
        return name_of(node, ctx) or "?", "method", clean(ctx.text(node), 120), node, None, None
    if t in ("type_spec", "type_alias"):
        name = name_of(node, ctx) or "?"
        ty = node.child_by_field_name("type")
        kind = {"struct_type": "struct", "interface_type": "interface"}.get(
            ty.type if ty is not None else "", "type")
        decl = node.parent
        outer = decl if decl is not None and decl.type == "type_declaration" and \
            decl.named_child_count == 1 else node
        start = outer.start_byte
        if kind in ("struct", "interface"):
            text = ctx.text(start, ty.end_byte)
            sig = clean(text.split("{", 1)[0]).rstrip()
        else:
            sig = clean(ctx.text(start, node.end_byte), 120)
        return name, kind, sig, outer, None, None
    body = node.child_by_field_name("body")
    name = name_of(node, ctx) or "?"
    sig = sig_to(ctx, node.start_byte, body, node)
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
