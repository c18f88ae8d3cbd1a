"""Deep conversion of values between Python and the Lua runtime.

The runtime uses lupa with ``encoding=None``: Lua strings arrive as ``bytes`` and we
decode them here (invalid UTF-8 is replaced, never an exception). Nothing live crosses
the boundary: tables become dicts/lists, dicts/lists become fresh tables.

Empty tables: a Lua table with no entries converts to an empty *list*, unless it was
made with ``moss.dict()`` (or carries the marker metatable), which converts to ``{}``.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from json.encoder import encode_basestring as _quote
from typing import Any

from lupa import lua54

from . import hostlua
from .errors import MossError

_lua_type = lua54.lua_type
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Lone surrogates (from a JSON "\ud800" escape) have no UTF-8 form; those in the
# surrogateescape range stand for undecodable bytes of a file name and stay bytes.
_LONE_SURROGATE = re.compile("[\ud800-\udc7f\udd00-\udfff]")


_NO = object()


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


# Lua -> Python for a whole table in one crossing: Lua writes the table as JSON text and
# Python parses it with the C json module (host/convert.lua, which says how and why).
RAW_MAX = 100  # raw strings one table may hand over beside its text (see convert.lua)
_decode_json = json.JSONDecoder(strict=False).decode  # one decoder: json.loads(strict=...) makes one a call


class Converter:
    """Converts values for one runtime (tables cannot cross runtimes)."""

    def __init__(self, lua, is_object_table=None, max_depth: int = 200):
        self.lua = lua
        self._table = lua.table
        self._is_object_table = is_object_table
        self._is_null = None
        self.null = None  # moss.json.null, for None inside lists (a nil would leave a hole)
        self.max_depth = max_depth
        self._make_encoder = hostlua.run(lua, "convert.lua", max_depth, RAW_MAX)
        self._encode = None  # made once is_object/is_null are known (after the bootstrap)
        self.hook_fns = (None, None)  # debug.gethook/sethook, kept for host code (Runtime.hook_fns)

    # ---- Python -> Lua -------------------------------------------------------------
    def to_lua(self, value: Any, _depth: int = 0):
        t = type(value)
        if t is str:  # the common cases first, by exact type (isinstance chains cost per value)
            return utf8(value)
        if t is bool or t is float or value is None:
            return value
        if _depth > self.max_depth:
            raise MossError("value nested too deeply to pass to Lua", kind="usage")
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
            return self._dict_to_lua(value, _depth)
        if isinstance(value, (list, tuple)):
            return self._list_to_lua(value, _depth)
        if _lua_type(value) is not None:  # already a Lua object of this runtime
            return value
        raise MossError(f"cannot pass a {type(value).__name__} to Lua", kind="usage")

    def _dict_to_lua(self, value: dict, depth: int):
        """A table keyed like `value` (numbers stay numbers, other keys become strings; None values left out)."""
        t = self._table()
        for k, v in value.items():
            if v is None:
                continue
            key = k if isinstance(k, (int, float)) and not isinstance(k, bool) else str(k)
            t[self.to_lua(key)] = self.to_lua(v, depth + 1)
        return t

    def _list_to_lua(self, value: list | tuple, depth: int):
        """A sequence, None as moss.json.null so it leaves no hole."""
        t = self._table()
        for i, v in enumerate(value, 1):
            t[i] = self.null if v is None else self.to_lua(v, depth + 1)
        return t

    # ---- Lua -> Python -------------------------------------------------------------
    def to_py(self, value: Any, _depth: int = 0, _seen=None):
        if type(value) is bytes:
            return value.decode("utf-8", errors="replace")
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
                raise MossError("table nested too deeply (or a cycle) to pass to Python", kind="usage")
            if _depth == 0:
                fast = self._via_json(value)
                if fast is not _NO:
                    return fast
            return self._table_to_py(value, _depth)
        if kind == "function":
            raise MossError("a Lua function cannot be passed to a moss primitive here", kind="usage")
        if kind is not None:
            raise MossError(f"a Lua {kind} cannot be passed to a moss primitive", kind="usage")
        if isinstance(value, str):
            return value
        raise MossError(f"unexpected value of type {type(value).__name__}", kind="usage")

    def _via_json(self, t):
        """The whole table in one crossing (see convert.lua), or _NO when it needs the slow path."""
        enc = self._encode
        if enc is None:
            if self._is_object_table is None or self._is_null is None or self.null is None:
                return _NO
            enc = self._encode = self._make_encoder(self._is_object_table, self.null, *self.hook_fns)
        try:
            got = enc(t)
        except lua54.LuaError:  # out of memory, or the cancellation hook fired: do it the long way
            return _NO
        if got is None:
            return _NO
        if type(got) is bytes:
            return _decode_json(got.decode("utf-8", errors="replace"))
        # text, raw string, text, ...: the raw strings are escaped here, by the C encoder
        parts = [p.decode("utf-8", errors="replace") for p in got]
        parts[1::2] = map(_quote, parts[1::2])
        return _decode_json("".join(parts))

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
