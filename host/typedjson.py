"""A JSON value read as a type host/streamevents.py declares (made from host/api/events.lua):
the host's readers of what an agent script writes (host/agentproc.py's stream-json events,
host/sessions/row.py's session rows) read it through here, so a field has its declared type
or is not there.

A field whose value is not of its declared type is left out (an integral float where an
integer is declared is that integer, and Lua's empty table, `[]`, where an object is declared
is `{}`). Fields the declaration does not have are kept as they came, unless the reader is
made with `only_declared` (then they are left out too: what the host reads of a session).
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

__all__ = ["reader"]

_OUT = object()  # what a reader gives for a value that does not fit: it is left out


def reader(tp: Any, *, only_declared: bool = False) -> Callable[[Any], Any]:
    """A function giving a JSON value as the type `tp` has it, or None when it does not fit;
    `only_declared`: the undeclared fields of a TypedDict, at any depth, are left out too."""
    fit = _fitter(tp, only_declared)

    def read(value: Any) -> Any:
        got = fit(value)
        return None if got is _OUT else got
    return read


def _integer(v: Any) -> Any:
    if type(v) is int:
        return v
    return int(v) if type(v) is float and v.is_integer() else _OUT


def _number(v: Any) -> Any:
    return v if type(v) in (int, float) else _OUT


def _record(fields: dict[str, Callable[[Any], Any]], only_declared: bool, v: Any) -> Any:
    if v == []:  # Lua's empty table
        return {}
    if not isinstance(v, dict):
        return _OUT
    out = {}
    for key, value in v.items():
        fit = fields.get(key)
        if fit is None and only_declared:
            continue
        got = value if fit is None else fit(value)
        if got is not _OUT:
            out[key] = got
    return out


@functools.cache
def _fitter(tp: Any, only_declared: bool = False) -> Callable[[Any], Any]:
    """A function giving a JSON value as the type `tp` has it, or _OUT."""
    if tp is Any:
        return lambda v: v
    if tp is type(None):
        return lambda v: v if v is None else _OUT
    if tp is str or tp is bool:
        return lambda v: v if type(v) is tp else _OUT
    if tp is int:
        return _integer
    if tp is float:
        return _number
    if is_typeddict(tp):
        fields = {name: _fitter(t, only_declared) for name, t in get_type_hints(tp).items()}
        return functools.partial(_record, fields, only_declared)
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return lambda v: v if any(type(v) is type(a) and v == a for a in args) else _OUT
    if origin is Union or origin is types.UnionType:
        options = [_fitter(a, only_declared) for a in args]

        def one_of(v: Any) -> Any:
            for fit in options:
                got = fit(v)
                if got is not _OUT:
                    return got
            return _OUT
        return one_of
    if origin is list:
        item = _fitter(args[0], only_declared)
        return lambda v: [x for x in map(item, v) if x is not _OUT] if isinstance(v, list) else _OUT
    if origin is dict:
        return lambda v: v if isinstance(v, dict) else {} if v == [] else _OUT
    raise TypeError(f"host/streamevents.py: there is no reader for the type {tp!r}")
