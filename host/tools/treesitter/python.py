"""Python's symbols: definitions, class attributes and docstrings, and the walk that finds
them faster than the symbol query.
"""

from __future__ import annotations

from .common import Ctx, clean, name_of, sig_to, summary


def docstring(body, ctx: Ctx) -> str | None:
    """The summary of the docstring opening `body` (a block, or the module's root), or None."""
    if ctx.lite or body is None or body.named_child_count == 0:
        return None
    first = body.named_children[0]
    if first.type != "expression_statement" or first.named_child_count == 0:
        return None
    s = first.named_children[0]
    if s.type != "string":
        return None
    content = "".join(ctx.text(c) for c in s.named_children if c.type == "string_content")
    return summary(content.splitlines())


def extract(node, ctx: Ctx):
    """What `node`, a capture of the symbol query, is: (name, kind, signature, outer node, doc,
    container), or None when it is not a symbol after all."""
    if node.type == "expression_statement":  # class attribute
        a = node.named_children[0]
        left = a.child_by_field_name("left")
        if left is None or left.type != "identifier":
            return None
        return ctx.text(left), "field", "" if ctx.lite else clean(ctx.text(a), 120), node, None, None
    name = name_of(node, ctx) or "?"
    kind = "class" if node.type == "class_definition" else "function"
    if ctx.lite:
        parent = node.parent
        outer = parent if parent is not None and parent.type == "decorated_definition" else node
        return name, kind, "", outer, None, None
    body = node.child_by_field_name("body")
    sig = sig_to(ctx, node.start_byte, body, node)
    outer = node
    parent = node.parent
    if parent is not None and parent.type == "decorated_definition":
        outer = parent
        decos = [clean(ctx.text(d), 60) for d in parent.named_children if d.type == "decorator"]
        sig = " ".join(decos + [sig])
    return name, kind, sig, outer, docstring(body, ctx) or "", None


# Nodes a Python definition can be found under: statements that hold blocks, and blocks.
# An expression never holds a def or a class, except in a tree with a parse error: there a
# node holding an error is looked into whatever it is.
_HOLDERS = frozenset({
    "module", "block", "decorated_definition", "class_definition", "function_definition",
    "if_statement", "elif_clause", "else_clause", "for_statement", "while_statement",
    "try_statement", "except_clause", "except_group_clause", "finally_clause", "with_statement",
    "match_statement", "case_clause", "ERROR"})


def captures(root) -> list:
    """What the Python symbol query (LANGUAGES["python"]) captures — every function and
    class definition, and the assignments directly in a class body — found by walking only
    the statements instead of every node (the query visits each expression too: twice the
    time). tests/test_view.py checks the two agree."""
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
            if t in _HOLDERS or (err and child.has_error):
                stack.append(child)
    return out
