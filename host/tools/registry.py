"""Things chosen by name (an executor of runs, of eval attempts), each registered as a dotted
path and imported only when first asked for.

A registry is made where its interface is, with its entries as `{"name": "package.module:Attr"}`
strings: the registry imports an entry's module when that entry is first asked for, so
nothing is registered by the side effect of importing something else, and an entry's module
imports its interface, never the reverse (docs/architecture.md, the import graph: a module
named only by a string is no arrow). `register` adds one later (a test's, a plug-in's),
as a path or as the object itself.
"""

from __future__ import annotations

import importlib
import threading
from typing import Generic, TypeVar

from ..errors import MossError

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name, in the order registered. `what` begins the error for a name that is
    not one (`"--executor"`: "--executor must be one of local, ray, got 'fleet'")."""

    def __init__(self, what: str, entries: dict[str, str] | None = None):
        self.what = what
        self._targets: dict[str, str | T] = {}
        self._lock = threading.RLock()  # an entry's module may register another as it is imported
        for name, path in (entries or {}).items():
            self.register(name, path)

    def register(self, name: str, target: str | T) -> None:
        """Make `target` the entry called `name`: a "package.module:Attr" path (imported when
        first asked for) or the object itself. A name that is empty or taken is a ValueError."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"{self.what}: a registry entry needs a name, got {name!r}")
        if isinstance(target, str) and target.count(":") != 1:
            raise ValueError(f"{self.what}: {name!r} must be registered as 'package.module:Attr', got {target!r}")
        with self._lock:
            if name in self._targets:
                raise ValueError(f"{self.what}: the name {name!r} is taken")
            self._targets[name] = target

    def unregister(self, name: str) -> None:
        with self._lock:
            self._targets.pop(name, None)

    def names(self) -> tuple[str, ...]:
        """The registered names, in the order registered."""
        with self._lock:
            return tuple(self._targets)

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return isinstance(name, str) and name in self._targets

    def get(self, name: str) -> T:
        """The entry called `name`, its module imported now if it was not; a name that is not
        one is MossError(kind="usage") listing those that are."""
        with self._lock:
            target = self._targets.get(name) if isinstance(name, str) else None
            if target is None:
                raise MossError(f"{self.what} must be one of {', '.join(self._targets)}, got {name!r}", kind="usage")
            if isinstance(target, str):
                module, _, attr = target.partition(":")
                target = self._targets[name] = getattr(importlib.import_module(module), attr)
            return target
