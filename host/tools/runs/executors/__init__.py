"""Executors: how a run is carried out, chosen by name (``executor("local")``, ``executor("ray")``).

What an executor is, and all it may ask of the RunManager (``Runs``), is in ``base.py``; the
two moss ships are ``local.py`` (a sandboxed process group here) and ``ray.py`` (a Ray job).
A new executor (a fleet of machines, a batch scheduler) is a subclass of ``Executor`` with a
``name``, made known with ``register(cls)`` as the two below are; ``moss.runs.start{executor
= NAME}`` then reaches it, and ``names()`` lists it in the error for an unknown one.
"""

from __future__ import annotations

from ....errors import MossError
from .base import Executor, Runs, StartRequest
from .local import LocalExecutor
from .ray import RayExecutor

__all__ = ["Executor", "Runs", "StartRequest", "executor", "register", "names"]

_REGISTRY: dict[str, type[Executor]] = {}


def register(cls: type[Executor]) -> type[Executor]:
    """Make an Executor subclass reachable by its ``name`` (also usable as a class decorator)."""
    if not cls.name or cls.name in _REGISTRY:
        raise ValueError(f"executor name {cls.name!r} is empty or taken")
    _REGISTRY[cls.name] = cls
    return cls


register(LocalExecutor)
register(RayExecutor)


def names() -> tuple[str, ...]:
    """The names of the known executors, in the order they were registered."""
    return tuple(_REGISTRY)


def executor(name: str) -> type[Executor]:
    """The executor class called `name`; MossError(kind="usage") naming the known ones."""
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise MossError(f"runs.start: executor must be one of {', '.join(_REGISTRY)}, got {name!r}", kind="usage")
    return cls
