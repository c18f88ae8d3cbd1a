"""Workspace trust: a cloned repository must not own the person who runs moss in it.

A project's .moss/ can bring Lua that replaces the agent (links followed and hashed), commands
to run, LLM endpoints and key variables to send, and settings that widen what runs, what is
spent or what is kept (PROJECT_RULES in rules.py: the one list, each key with why). None of
that is used until the user said yes to that exact content; the yes is kept in the user's data
directory ($XDG_DATA_HOME/moss/trust/, outside every repository), keyed by the project's path
and a hash of what it brings, so a changed file, link or setting asks again, and the loader
runs no project script bytes but those hashed (Manifest.pins, ScriptRoots.read). Trust pins
what arrives from elsewhere, not what the user types: in a git work tree, a change git could
not have brought is the user's own edit and keeps the project trusted (judge.judge), and
moss's own writes (`moss config set`, `moss init`) keep it trusted too (judge.kept). A project
value that only narrows the user's own (a smaller budget, spawn = false) needs no trust, nor
does anything else in a project's config (custom fields).

Some settings never come from a project, trusted or not: [agent] allow_full and
unsandboxed_ok, and the [trust] and [sandbox] tables. A trusted project's [agent]
auto_approve is capped at the user's own (default "low").

One job per module, each using only those above it in this list:

- text.py: what a person is shown (hidden characters written as escapes)
- rules.py: which project keys need trust and which values only narrow (reads no config)
- manifest.py: what a project brings, scripts hashed and config keys judged by the rules
- record.py: the trust record (grant, revoke), its kept script copies, what it pins
- judge.py: the decision for one run, the user's own edits told from arrivals, the caps
- diffs.py: each changed script's diff, shown after a pull
- display.py: `moss trust`'s table, --status lines, the notice, the y/N question

The names callers use are here; host/config.py imports rules.py alone.
"""

from .display import ask, notice, origin_lines, render, status_line, status_lines, stdin_interactive, where
from .judge import LOCAL, Trust, effective, evaluate, kept, local_edits_on, max_access
from .manifest import Change, Item, Manifest, diff, scan, scan_config, scan_scripts
from .record import grant, list_records, load_record, record_file, revoke, trust_dir
from .rules import PROJECT_RULES, Rule, limit_keys, rule_for
from .text import visible

__all__ = [
    "Change", "Item", "LOCAL", "Manifest", "PROJECT_RULES", "Rule", "Trust", "ask", "diff", "effective", "evaluate",
    "grant", "kept", "limit_keys", "list_records", "load_record", "local_edits_on", "max_access", "notice",
    "origin_lines", "record_file", "render", "revoke", "rule_for", "scan", "scan_config", "scan_scripts",
    "status_line", "status_lines", "stdin_interactive", "trust_dir", "visible", "where",
]
