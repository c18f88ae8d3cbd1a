"""moss.json: encode and decode JSON (tables made with moss.dict() encode as objects)."""

from __future__ import annotations

import json as _json

from ..errors import MossError
from .registry import primitive

# Deeper than this cannot become a Lua table anyway (convert.Converter.max_depth); say so
# before Python's own recursion limit turns into an internal error.
MAX_DEPTH = 200


@primitive
def encode(ctx, value, opts=None):
    opts = opts or {}
    indent = opts.get("indent")
    return _json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=bool(opts.get("sort_keys")))


@primitive
def decode(ctx, text, opts=None):
    from ..storage import loads

    if (opts or {}).get("ordered"):
        return _ordered(text)
    depth = _nesting(text)
    if depth > MAX_DEPTH:
        raise MossError(f"JSON nested {depth:,} levels deep; moss.json.decode takes at most {MAX_DEPTH}", kind="usage")
    try:
        return loads(text)  # integers beyond 64 bits come back as floats, as in Lua
    except _json.JSONDecodeError as e:
        raise MossError(f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}", kind="usage") from None


def _ordered(text: str):
    """Like decode, but every object also carries its keys in source order under the
    integer key 0 (no JSON key is an integer); bootstrap.lua moves them aside for
    moss.json.keys()."""
    depth = _nesting(text)
    if depth > MAX_DEPTH:
        raise MossError(f"JSON nested {depth:,} levels deep; moss.json.decode takes at most {MAX_DEPTH}", kind="usage")

    def obj(pairs):
        out = dict(pairs)
        out[0] = list(out.keys())
        return out

    try:
        return _json.loads(text, object_pairs_hook=obj,
                           parse_int=lambda s: int(s) if abs(int(s)) < 2**63 else float(s))
    except _json.JSONDecodeError as e:
        raise MossError(f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}", kind="usage") from None


def _nesting(text: str) -> int:
    """The deepest [ / { nesting of JSON text, brackets inside strings not counted (an
    upper bound for invalid JSON, which then fails to parse anyway)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0  # the common case: too few brackets to matter
    import re

    depth = deepest = 0
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]', text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif tok in "]}":
            depth -= 1
    return deepest
