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


# Lua -> Python for a whole table in one crossing: Lua writes the table as JSON text (one
# string), Python parses it with the C json module. Walking a table from Python costs a
# bridge crossing per entry; this costs one, which is what makes a checkpoint of a long
# session or a prompt of hundreds of blocks cheap to hand over. It covers plain data (string
# keys, or exactly the keys 1..n; strings, numbers, booleans, moss.json.null, nested to
# max_depth) and answers nil for anything else (a mixed table, a function, too deep), which
# then takes the entry-by-entry path below, with its errors. Compiled before the sandbox
# strips the globals, so it keeps its own references to the library functions it uses.
#
# Strings are not escaped in Lua: a Lua pattern scan (gsub) costs ~15 ns a byte, so escaping
# a 3 KB system prompt took ~50 µs and a 30-block prompt ~200 µs, most of a call's bridge
# time. Control characters go into the text raw (Python parses with strict=False, which takes
# them inside strings); a string holding `"` or `\` (found with plain finds, i.e. memchr) is
# handed over beside the text instead: the encoder returns the text cut where such strings
# go, with those strings in between (text, raw, text, raw, ..., text), and Python escapes them
# with the json module's C encoder. Past RAW_MAX such strings in one table (a result count
# Lua must not exceed), the rest are escaped in Lua as before.
#
# The encoder runs with the runtime's count hook off (see Runtime.hook_fns): while any count
# hook is set, Lua 5.4 traps every VM instruction, which made this loop half as slow again.
# It is host code over plain data (raw access only: no metamethod, no script code runs in it)
# and ends, so the cancellation hook has nothing to catch here; it is put back before return.
_ENCODER = rb"""
local max_depth, raw_max = ...
local pcall = pcall
local next, type, rawlen, rawget, rawequal = next, type, rawlen, rawget, rawequal
local mtype, concat, format, find, gsub = math.type, table.concat, string.format, string.find, string.gsub
local unpack = table.unpack
local huge = math.huge
local ESC = { ['"'] = '\\"', ['\\'] = '\\\\' }
return function(is_object, null, gethook, sethook)
  local out, n, cuts
  local keys, nkeys = {}, 0 -- '"key":' for the keys seen so far (a few hundred at most)
  local enc
  local function str(s)
    if find(s, '"', 1, true) or find(s, '\\', 1, true) then
      if #cuts < raw_max then
        -- cut the text here: the string goes over raw, between two pieces of text
        cuts[#cuts + 1] = n
        n = n + 1; out[n] = s
        return
      end
      s = gsub(s, '["\\]', ESC)
    end
    out[n + 1] = '"'; out[n + 2] = s; out[n + 3] = '"'
    n = n + 3
  end
  local function key(k)
    local q = keys[k]
    if q then n = n + 1; out[n] = q return end
    if find(k, '"', 1, true) or find(k, '\\', 1, true) then
      str(k)
      n = n + 1; out[n] = ":"
      return
    end
    q = '"' .. k .. '":'
    if nkeys < 512 then nkeys = nkeys + 1; keys[k] = q end
    n = n + 1; out[n] = q
  end
  local function num(x)
    n = n + 1
    if mtype(x) == "integer" then out[n] = format("%d", x)
    elseif x ~= x then out[n] = "NaN"
    elseif x == huge then out[n] = "Infinity"
    elseif x == -huge then out[n] = "-Infinity"
    else
      local t = format("%.17g", x)
      if not find(t, "[.eEn]") then t = t .. ".0" end
      out[n] = t
    end
  end
  enc = function(v, depth)
    local tv = type(v)
    if tv == "string" then str(v) return true end
    if tv == "number" then num(v) return true end
    if tv == "boolean" then n = n + 1; out[n] = v and "true" or "false" return true end
    if tv ~= "table" then return false end
    if rawequal(v, null) then n = n + 1; out[n] = "null" return true end
    if depth > max_depth then return false end
    local k1 = next(v)
    if k1 == nil then
      n = n + 1; out[n] = is_object(v) and "{}" or "[]"
      return true
    end
    local len = rawlen(v)
    if len > 0 and mtype(k1) == "integer" then
      -- a list when its keys are exactly 1..len
      local count = 0
      for k in next, v do
        if mtype(k) ~= "integer" or k < 1 or k > len then return false end
        count = count + 1
      end
      if count ~= len then return false end
      n = n + 1; out[n] = "["
      for i = 1, len do
        if i > 1 then n = n + 1; out[n] = "," end
        if not enc(rawget(v, i), depth + 1) then return false end
      end
      n = n + 1; out[n] = "]"
      return true
    end
    n = n + 1; out[n] = "{"
    local first = true
    for k, x in next, v do
      if type(k) ~= "string" then return false end
      if not first then n = n + 1; out[n] = "," end
      first = false
      key(k)
      if not enc(x, depth + 1) then return false end
    end
    n = n + 1; out[n] = "}"
    return true
  end
  return function(v)
    local hook, mask, count
    if gethook then
      hook, mask, count = gethook()
      if hook then sethook() end
    end
    out, n, cuts = {}, 0, {}
    local done, ok = pcall(enc, v, 0)
    if hook then sethook(hook, mask, count) end
    if not (done and ok) then out, cuts = nil, nil return nil end
    if #cuts == 0 then -- one piece of text (most small tables): no list of pieces to make
      local text = concat(out, "", 1, n)
      out, cuts = nil, nil
      return text
    end
    local pieces, prev = {}, 1
    for i = 1, #cuts do
      local at = cuts[i] + 1 -- out[at] is a raw string
      pieces[#pieces + 1] = concat(out, "", prev, at - 1)
      pieces[#pieces + 1] = out[at]
      prev = at + 1
    end
    pieces[#pieces + 1] = concat(out, "", prev, n)
    out, cuts = nil, nil
    return unpack(pieces)
  end
end
"""
RAW_MAX = 100  # raw strings one table may hand over beside its text (see _ENCODER)
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
        self._make_encoder = lua.execute(_ENCODER, max_depth, RAW_MAX)
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
        """The whole table in one crossing (see _ENCODER), or _NO when it needs the slow path."""
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
