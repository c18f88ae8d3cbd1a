"""moss.json: encode and decode JSON (tables made with moss.dict() encode as objects)."""

from __future__ import annotations

import json as _json


def functions(ctx):
    def encode(value, opts=None):
        opts = opts or {}
        indent = opts.get("indent")
        return _json.dumps(value, ensure_ascii=False, indent=indent, sort_keys=bool(opts.get("sort_keys")))

    def decode(text):
        try:
            return _json.loads(text)
        except _json.JSONDecodeError as e:
            raise ValueError(f"invalid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None

    return {"json.encode": encode, "json.decode": decode}
