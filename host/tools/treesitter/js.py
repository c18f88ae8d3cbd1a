"""JavaScript's, TypeScript's and TSX's symbols."""

from __future__ import annotations

from .common import Ctx, clean, name_of, sig_to


def extract(node, ctx: Ctx):
    """What `node`, a capture of the symbol query, is: (name, kind, signature, outer node, doc,
    container), or None when it is not a symbol after all."""
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
        name = name_of(node, ctx) or "?"
        kind = "class" if value.type == "class" else "function"
        body = value.child_by_field_name("body")
        if body is not None and body.type in ("statement_block", "class_body"):
            sig = sig_to(ctx, outer.start_byte, body, node)
        elif body is not None:  # arrow function with an expression body
            sig = clean(ctx.text(outer.start_byte, body.start_byte))
        else:
            sig = clean(ctx.text(outer), 120)
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
        return name_of(node, ctx) or "?", "variant", clean(ctx.text(node), 120), node, None, None
    kinds = {"function_declaration": "function", "generator_function_declaration": "function",
             "function_signature": "function", "class_declaration": "class",
             "abstract_class_declaration": "class", "class": "class",
             "method_definition": "method", "abstract_method_signature": "method",
             "method_signature": "method", "field_definition": "field",
             "public_field_definition": "field", "property_signature": "field",
             "interface_declaration": "interface", "type_alias_declaration": "type",
             "enum_declaration": "enum", "internal_module": "module"}
    kind = kinds[t]
    name = name_of(node, ctx) or name_of(node, ctx, "property") or (
        "default" if t == "class" else "?")
    body = node.child_by_field_name("body")
    if t == "type_alias_declaration":
        body = None
    start = node.start_byte
    if node.parent is not None and node.parent.type == "export_statement":
        outer = node.parent
        start = outer.start_byte
    if body is None:
        sig = sig_to(ctx, start, None, node, 120)
    else:
        sig = sig_to(ctx, start, body, node)
    return name, kind, sig, outer, None, None
