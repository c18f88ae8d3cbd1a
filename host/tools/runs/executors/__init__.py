"""Executors: how a run is carried out, chosen by name (``executor("local")``, ``executor("ray")``).

What an executor is, and all it may ask of the RunManager (``Runs``), is in ``base.py``; the
two moss ships are ``local.py`` (a sandboxed process group here) and ``ray.py`` (a Ray job),
named below by their paths and imported when first chosen (host/tools/registry.py). A new
executor (a fleet of machines, a batch scheduler) is a subclass of ``Executor`` with a
``name``, made known with ``register(cls)``; ``moss.runs.start{executor = NAME}`` then
reaches it, and ``names()`` lists it in the error for an unknown one.
"""

from __future__ import annotations

from ...registry import Registry
from .base import Executor, Runs, StartRequest

__all__ = ["Executor", "Runs", "StartRequest", "executor", "register", "unregister", "names"]

EXECUTORS: Registry[type[Executor]] = Registry("runs.start: executor", {
    "local": "moss.tools.runs.executors.local:LocalExecutor",
    "ray": "moss.tools.runs.executors.ray:RayExecutor",
})


def register(cls: type[Executor]) -> type[Executor]:
    """Make an Executor subclass reachable by its ``name`` (also usable as a class decorator)."""
    EXECUTORS.register(cls.name, cls)
    return cls


def unregister(name: str) -> None:
    EXECUTORS.unregister(name)


def names() -> tuple[str, ...]:
    """The names of the known executors, in the order they were registered."""
    return EXECUTORS.names()


def executor(name: str) -> type[Executor]:
    """The executor class called `name`; MossError(kind="usage") naming the known ones."""
    return EXECUTORS.get(name)
