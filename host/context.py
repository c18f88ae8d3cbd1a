"""What one run of a script knows about its surroundings (mechanism state only)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def find_project_root(start: Path | None = None) -> Path:
    """The nearest ancestor holding .moss/, else the nearest holding .git, else cwd."""
    start = (start or Path.cwd()).resolve()
    for marker in (".moss", ".git"):
        for d in (start, *start.parents):
            if (d / marker).exists():
                return d
    return start


@dataclass
class Context:
    root: Path
    config: dict
    options: dict = field(default_factory=dict)  # host options: provider, model, record, ...
    args: list[str] = field(default_factory=list)
    script: str = ""
    env: Any = field(default_factory=lambda: os.environ)
    runtime: Any = None  # set once the Runtime exists
    services: dict = field(default_factory=dict)  # lazily created per-run services (llm, ...)

    @property
    def interactive(self) -> bool:
        return bool(sys.stdin and sys.stdin.isatty()) and not self.options.get("non_interactive")

    def cancelled(self) -> bool:
        return bool(self.runtime and self.runtime.cancelled)
