"""Deep conversion of values between Python and the Lua runtime.

The runtime uses lupa with ``encoding=None``: Lua strings arrive as ``bytes`` and we
decode them here (invalid UTF-8 is replaced, never an exception). Nothing live crosses
the boundary: tables become dicts/lists, dicts/lists become fresh tables.

Empty tables: a Lua table with no entries converts to an empty *list*, unless it was
made with ``moss.dict()`` (or carries the marker metatable), which converts to ``{}``.
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Any

from lupa import lua54

from .errors import MossError

_lua_type = lua54.lua_type
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Lone surrogates (from a JSON "\ud800" escape) have no UTF-8 form; those in the
# surrogateescape range stand for undecodable bytes of a file name and stay bytes.
_LONE_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")


class RangeError(MossError, ValueError):
    """A value Lua cannot hold (an integer beyond 64 bits): a usage error, never a crash."""

    def __init__(self, message: str):
        super().__init__(message, kind="usage")


def decode(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


def utf8(text: str) -> bytes:
    """`text` as UTF-8 for Lua; a lone surrogate becomes U+FFFD instead of an exception."""
    try:
        return text.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text).encode("utf-8", errors="surrogateescape")


class Converter:
    """Converts values for one runtime (tables cannot cross runtimes)."""

    def __init__(self, lua, is_object_table=None, max_depth: int = 200):
        self.lua = lua
        self._table = lua.table
        self._is_object_table = is_object_table
        self._is_null = None
        self.null = None  # moss.json.null, for None inside lists (a nil would leave a hole)
        self.max_depth = max_depth

    # ---- Python -> Lua -------------------------------------------------------------
    def to_lua(self, value: Any, _depth: int = 0):
        if _depth > self.max_depth:
            raise ValueError("value nested too deeply to pass to Lua")
        if value is None or isinstance(value, (bool, float)):
            return value
        if isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise RangeError(f"the integer {value} does not fit in Lua's 64-bit integers")
            return value
        if isinstance(value, str):
            return utf8(value)
        if isinstance(value, (datetime.date, datetime.time)):  # TOML dates and times
            return value.isoformat().encode()
        if isinstance(value, bytes):
            return value
        if isinstance(value, dict):
            t = self._table()
            for k, v in value.items():
                if v is None:
                    continue
                key = k if isinstance(k, (int, float)) and not isinstance(k, bool) else str(k)
                t[self.to_lua(key)] = self.to_lua(v, _depth + 1)
            return t
        if isinstance(value, (list, tuple)):
            t = self._table()
            for i, v in enumerate(value, 1):
                t[i] = self.null if v is None else self.to_lua(v, _depth + 1)
            return t
        if _lua_type(value) is not None:  # already a Lua object of this runtime
            return value
        raise TypeError(f"cannot pass a {type(value).__name__} to Lua")

    # ---- Lua -> Python -------------------------------------------------------------
    def to_py(self, value: Any, _depth: int = 0, _seen=None):
        if isinstance(value, bytes):
            return decode(value)
        if value is None or isinstance(value, (bool, int)):
            return value
        if isinstance(value, float):
            if value.is_integer() and not math.isinf(value) and abs(value) < 2**53:
                return value  # keep floats as floats; Lua 5.4 distinguishes them
            return value
        kind = _lua_type(value)
        if kind == "table":
            if self._is_null is not None and self._is_null(value):
                return None
            if _depth > self.max_depth:
                raise ValueError("table nested too deeply (or a cycle) to pass to Python")
            return self._table_to_py(value, _depth)
        if kind == "function":
            raise TypeError("a Lua function cannot be passed to a moss primitive here")
        if kind is not None:
            raise TypeError(f"a Lua {kind} cannot be passed to a moss primitive")
        if isinstance(value, str):
            return value
        raise TypeError(f"unexpected value of type {type(value).__name__}")

    def _table_to_py(self, t, depth):
        items = list(t.items())
        if not items:
            if self._is_object_table is not None and self._is_object_table(t):
                return {}
            return []
        n = len(items)
        keys = [k for k, _ in items]
        if all(isinstance(k, int) and not isinstance(k, bool) for k in keys) and set(keys) == set(range(1, n + 1)):
            ordered = sorted(items, key=lambda kv: kv[0])
            return [self.to_py(v, depth + 1) for _, v in ordered]
        out = {}
        for k, v in items:
            key = decode(k) if isinstance(k, bytes) else k
            if isinstance(key, float) and key.is_integer():
                key = int(key)
            out[key if isinstance(key, (str, int)) else str(key)] = self.to_py(v, depth + 1)
        return out
