"""Lua's symbols: functions declared, assigned to a name or a table field, or in a table."""

from __future__ import annotations

from .common import Ctx, clean, name_of


def _lua_name(n, ctx: Ctx) -> tuple[str, str | None]:
    if n.type == "dot_index_expression":
        return name_of(n, ctx, "field") or "?", ctx.text(n.child_by_field_name("table"))
    if n.type == "method_index_expression":
        return name_of(n, ctx, "method") or "?", ctx.text(n.child_by_field_name("table"))
    return ctx.text(n), None


def extract(node, ctx: Ctx):
    """What `node`, a capture of the symbol query, is: (name, kind, signature, outer node, doc,
    container), or None when it is not a symbol after all."""
    if node.type == "function_declaration":
        n = node.child_by_field_name("name")
        name, container = _lua_name(n, ctx) if n is not None else ("?", None)
        params = node.child_by_field_name("parameters")
        end = params.end_byte if params is not None else node.end_byte
        kind = "method" if container else "function"
        return name, kind, clean(ctx.text(node.start_byte, end)), node, None, container
    if node.type == "field":
        fn = node.child_by_field_name("value")
        params = fn.child_by_field_name("parameters")
        name = name_of(node, ctx) or "?"
        sig = clean(ctx.text(node.start_byte, params.end_byte if params else fn.end_byte))
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
    sig = clean(ctx.text(outer.start_byte, params.end_byte if params else fn.end_byte))
