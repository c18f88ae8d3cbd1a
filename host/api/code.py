"""moss.code: view (tree, skeleton, lines, symbol) and text search, inside the project."""

from __future__ import annotations

from .registry import primitive


@primitive
def view(ctx, target=".", opts=None):
    from ..tools.view import view as _view

    opts = opts or {}
    return _view(ctx.workdir, str(target or "."), depth=int(opts.get("depth", 1)),
                 max_chars=int(opts.get("max_chars", 20000)), compact=bool(opts.get("compact")))


@primitive
def search(ctx, pattern, opts=None):
    from ..tools.search import search as _search

    opts = opts or {}
    only = opts.get("only")
    if isinstance(only, str):
        only = [only]
    return _search(ctx.workdir, str(pattern), only=only or None, limit=int(opts.get("limit", 100)),
                   ignore_case=bool(opts.get("ignore_case")), max_chars=int(opts.get("max_chars", 20000)),
                   compact=bool(opts.get("compact")))
