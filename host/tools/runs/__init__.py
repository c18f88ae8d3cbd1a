"""Background runs: long commands (training jobs, sweep members) that outlive one primitive call.

One job per module:

    manager.py     RunManager: starts runs, watches them (one monitor thread), raises and
                   resolves alerts, hands out events (`wait`); what moss.runs and `moss runs` use
    store.py       RunStore: the files under .moss/agent/runs (records, logs, exit, stop and
                   trigger files) through moss.tools.safefs, and which records are corrupt
    executors/     how a run is carried out, chosen by name: executor("local") (a sandboxed
                   process group here), executor("ray") (a Ray job; client in ray_jobs.py);
                   base.py: the Executor interface, and Runs, all an executor may ask of
                   the manager
    live.py        Live: what this process knows about a run it watches
    alerts.py      the alert-rule language: parse a rule, check log lines (RE2, bounded)

`from moss.tools.runs import RunManager, parse_rule` keeps working for callers of the old
single module.
"""

from __future__ import annotations

from ...tools.runs.alerts import RULE_GRAMMAR, Rule, parse_rule
from ...tools.runs.executors import executor
from ...tools.runs.manager import RunManager
from ...tools.runs.store import STATUSES, TERMINAL, RunStore

__all__ = ["RunManager", "RunStore", "Rule", "parse_rule", "executor", "RULE_GRAMMAR", "STATUSES", "TERMINAL"]
