"""Rust's symbols: what each item node is called, its kind and signature."""

from __future__ import annotations

import re

from .common import Ctx, clean, name_of, sig_to


def extract(node, ctx: Ctx):
    """What `node`, a capture of the symbol query, is: (name, kind, signature, outer node, doc,
    container), or None when it is not a symbol after all."""
    t = node.type
    body = node.child_by_field_name("body")
    if t == "impl_item":
        ty = node.child_by_field_name("type")
        name = re.sub(r"<.*", "", ctx.text(ty)).split("::")[-1] if ty is not None else "impl"
        return name, "impl", sig_to(ctx, node.start_byte, body, node), node, None, None
    name = name_of(node, ctx) or "?"
    kind = {"function_item": "function", "function_signature_item": "function",
            "struct_item": "struct", "enum_item": "enum", "union_item": "union",
            "trait_item": "trait", "mod_item": "module", "type_item": "type",
            "associated_type": "type", "const_item": "const", "static_item": "static",
            "macro_definition": "macro", "field_declaration": "field",
            "enum_variant": "variant"}[t]
    if t == "macro_definition":
        return name, kind, f"macro_rules! {name}", node, None, None
    if t == "enum_variant" and body is not None and body.type == "field_declaration_list":
        fields = [clean(ctx.text(f), 80) for f in body.named_children
                  if f.type == "field_declaration"]
        return name, kind, clean(f"{name} {{ {', '.join(fields)} }}"), node, None, None
    if t in ("field_declaration", "enum_variant", "const_item", "static_item",
             "type_item", "associated_type", "function_signature_item") or body is None:
        return name, kind, sig_to(ctx, node.start_byte, None, node, 120), node, None, None
    if body.type == "ordered_field_declaration_list":  # tuple struct: fields are the sig
        return name, kind, sig_to(ctx, node.start_byte, None, node), node, None, None
    return name, kind, sig_to(ctx, node.start_byte, body, node), node, None, None
