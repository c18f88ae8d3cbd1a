"""Which Python function is behind each moss.* primitive.

`@primitive` registers a top-level function of host/api/NAME.py as moss.NAME.<its name> (how
to write one: host/api/__init__.py); `primitives()` imports every namespace once and holds what
was registered to host/api/declarations.lua, so a registered function that no declaration
names, or a declared primitive with no function, stops the API from being prepared.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from functools import cache
from pathlib import Path
from typing import Callable

from . import declare

HERE = Path(__file__).resolve().parent
# every module here is a namespace, but this one and declare.py (the declaration's reader and generator)
NAMESPACES = sorted(m.name for m in pkgutil.iter_modules([str(HERE)])
                    if not m.name.startswith("_") and m.name not in ("declare", "registry"))

_REGISTERED: dict[str, Callable] = {}  # "runs.start" -> its function, as the modules are imported


def primitive(fn: Callable | None = None, *, lua_args: bool = False):
    """Register a top-level function of host/api/NAME.py as the primitive moss.NAME.<its name>
    (a trailing `_` dropped); `lua_args`: it takes its tables as raw Lua values."""
    def register(f: Callable) -> Callable:
        name = f"{f.__module__.rpartition('.')[2]}.{f.__name__.removesuffix('_')}"
        prior = _REGISTERED.get(name)
        if prior is not None and prior.__qualname__ != f.__qualname__:  # (the same one again: a reload)
            raise RuntimeError(f"moss.{name} is registered twice, by {prior.__qualname__} and {f.__qualname__} "
                               f"of {f.__module__}")
        _REGISTERED[name] = f
        if lua_args:
            f.lua_args = True  # type: ignore[attr-defined]  # read by Runtime._wrap_primitive
        return f
    return register if fn is None else register(fn)


def unmatched(registered, declared: declare.Declarations, lua_side) -> list[str]:
    """Where registration and the declaration disagree, one line each (none: they agree).
    `lua_side`: the primitives host/bootstrap.lua defines in Lua; `parallel` is host/api's own."""
    primitives = {n for n in declared.functions if ":" not in n} - set(lua_side) - {"parallel"}
    return [*(f"moss.{n} is registered (host/api/{n.rpartition('.')[0]}.py) but not declared in "
              f"host/api/declarations.lua" for n in sorted(set(registered) - set(declared.functions))),
            *(f"moss.{n} is declared in host/api/declarations.lua but no function of host/api is "
              f"registered for it (@primitive)" for n in sorted(primitives - set(registered)))]


def lua_side() -> set[str]:
    """The moss.* functions host/bootstrap.lua defines (moss.spawn, moss.json.keys, ...)."""
    text = (HERE.parent / "bootstrap.lua").read_text(encoding="utf-8")
    return {a or b for a, b in re.findall(r"^\s*(?:function moss\.([\w.]+)\(|moss\.([\w.]+)\s*=)", text, re.M)}


@cache
def primitives() -> dict[str, Callable]:
    """Every primitive's function by name, each namespace imported once and the registration
    held to the declaration (a RuntimeError naming each disagreement)."""
    for name in NAMESPACES:
        importlib.import_module(f"{__package__}.{name}")
    problems = unmatched(_REGISTERED, declare.declarations(), lua_side())
    if problems:
        raise RuntimeError("the Lua API does not match its declaration:\n  " + "\n  ".join(problems))
    return dict(_REGISTERED)
