"""Which suite loader the runner uses: the full one (host/eval/suite.py) when it is there, else
the minimal reader (host/eval/_load_min.py). One place to change when they are reconciled."""

from __future__ import annotations

import importlib

try:
    _impl = importlib.import_module(f"{__package__}.suite")
except ImportError:
    _impl = importlib.import_module(f"{__package__}._load_min")

load_suite = _impl.load_suite
check_answer = _impl.check_answer

__all__ = ["check_answer", "load_suite"]
