"""A batch file: a list of agent tasks (``moss batch``), in JSONL (one object a line) or TOML
(``[[task]]`` tables), loaded and checked. The policy (the agent's words, what an outcome is)
is scripts/batch.lua; attempts run as an eval's do (host/eval/session.py).

A task: ``repo`` (a folder, relative to the batch file and inside its folder, no link leading
out: a batch file from elsewhere must not make moss copy ~/.ssh), ``prompt`` (what the agent
is asked), and optional ``id`` (default ``task-N``, N its place in the file), ``machine``,
``role``, ``model``, ``provider``, ``max_turns``, ``max_cost``, ``max_tokens``. A batch task
has no setup or check commands: nothing of the file runs on this machine but the agent, in a
copy. A mistake is one line, ``FILE:LINE[:COL]: task ID: FIELD: what is wrong``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError, MossError
from ..roots import display_path
from .suite import Check, Suite, Task, _repo

FIELDS = ("id", "repo", "prompt", "machine", "role", "model", "provider", "max_turns", "max_cost", "max_tokens")
OPTIONS = ("machine", "role", "model", "provider", "max_turns", "max_cost", "max_tokens")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/,@+-]*")  # a machine, role (or pipeline), model or provider


@dataclass
class Batch(Suite):
    options: dict[str, dict] = field(default_factory=dict)  # task id -> its optional fields
    lines: dict[str, int] = field(default_factory=dict)     # task id -> the line it starts on


def load_batch(path: Path | str) -> Batch:
    """The batch at `path` (.jsonl or .toml), every task checked; a mistake is
    ConfigError naming the file, the line, the task and the field."""
    path = Path(path)
    if not path.exists():
        raise MossError(f"no batch file at {display_path(path)}", kind="not_found")
    if not path.is_file():
        raise ConfigError(f"{display_path(path)} is not a file (a batch is a .jsonl or .toml file of tasks)",
                          file=str(path))
    file = path.absolute()
    shown = display_path(file)
    suffix = file.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        entries = _jsonl(file, shown)
    elif suffix == ".toml":
        entries = _toml(file, shown)
    else:
        raise ConfigError(f"{shown}: a batch file ends in .jsonl (one task object a line) or .toml "
                          f"([[task]] tables), not {suffix or 'no suffix'!r}", file=shown)
    if not entries:
        raise ConfigError(f"{shown}: the batch has no tasks", file=shown)
    base = Path(os.path.realpath(file.parent))
    tasks: list[Task] = []
    options: dict[str, dict] = {}
    lines: dict[str, int] = {}
    for n, (entry, line_of) in enumerate(entries, 1):
        task, opts = _task(entry, n, line_of, base, shown)
        if task.id in options:
            raise ConfigError(f"{shown}:{line_of('id')}: task {task.id!r}: id: the same id as the task on line "
                              f"{lines[task.id]} (ids must be unique in a batch)", file=shown, task=task.id, field="id")
        tasks.append(task)
        options[task.id] = opts
        lines[task.id] = line_of(None)
    return Batch(name=file.stem, description="", path=file, tasks=tasks, options=options, lines=lines)


def _jsonl(file: Path, shown: str) -> list[tuple[dict, Any]]:
    out = []
    text = _read(file, shown)
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{shown}:{i}:{e.colno}: not valid JSON ({e.msg})", file=shown) from None
        if not isinstance(entry, dict):
            raise ConfigError(f"{shown}:{i}: a task must be a JSON object "
                              f'({{"repo": ..., "prompt": ...}}), not {type(entry).__name__}', file=shown)
        out.append((entry, lambda _field, i=i: i))
    return out


_HEADER = re.compile(r"^\s*\[\[\s*task\s*\]\]")
_OTHER = re.compile(r"^\s*\[")


def _toml(file: Path, shown: str) -> list[tuple[dict, Any]]:
    from ..config import read_toml

    data = read_toml(file)  # a syntax error is file:line:column: reason
    for key in data:
        if key != "task":
            raise ConfigError(f"{shown}: unknown table or key {key!r} (a batch file holds [[task]] tables)",
                              file=shown, field=key)
    raw = data.get("task", [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise ConfigError(f"{shown}: task must be an array of tables ([[task]] sections)", file=shown)
    # where each [[task]] starts and what lines it spans, to name the line of a bad field
    text = _read(file, shown).splitlines()
    starts = [i for i, ln in enumerate(text, 1) if _HEADER.match(ln)]
    out = []
    for n, entry in enumerate(raw):
        start = starts[n] if n < len(starts) else 1
        end = len(text)
        for i in range(start + 1, len(text) + 1):
            if _OTHER.match(text[i - 1]):
                end = i - 1
                break

        def line_of(fld, start=start, end=end):
            if fld:
                pat = re.compile(rf"^\s*(?:{re.escape(fld)}|\"{re.escape(fld)}\"|'{re.escape(fld)}')\s*=")
                for i in range(start, end + 1):
                    if pat.match(text[i - 1]):
                        return i
            return start
        out.append((entry, line_of))
    return out


def _read(file: Path, shown: str) -> str:
    try:
        return file.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{shown}: not UTF-8 text ({e.reason} at byte {e.start})", file=shown) from None


def _task(entry: dict, n: int, line_of, base: Path, shown: str) -> tuple[Task, dict]:
    raw_id = entry.get("id")

    def err(fld: str, msg: str, tid: str | None = None) -> ConfigError:
        who = f"task {tid!r}" if tid else f"task #{n}"
        return ConfigError(f"{shown}:{line_of(fld)}: {who}: {fld}: {msg}", file=shown, task=tid or f"#{n}",
                           field=fld)

    if raw_id is None:
        tid = f"task-{n}"
    elif not isinstance(raw_id, str) or not _ID.fullmatch(raw_id):
        raise err("id", f"{raw_id!r} is not a task id (letters, digits and ._-, at most 100, "
                        f"starting with a letter or digit)")
    else:
        tid = raw_id
    named = tid if raw_id is not None else None

    def named_err(fld: str, msg: str) -> ConfigError:
        return err(fld, msg, named)

    _check_fields(entry, named_err)
    repo = _repo(entry["repo"], base, named_err, what="batch")
    opts = _options(entry, named_err)
    task = Task(id=tid, repo=repo, commit="", prompt=entry["prompt"], setup=[], tags=[], check=Check(),
                solution=[], solution_answer=None)
    return task, opts


def _check_fields(entry: dict, err: Callable[[str, str], ConfigError]) -> None:
    """No unknown field; `repo` and `prompt` there, non-empty strings."""
    for key in entry:
        if key not in FIELDS:
            raise err(key, f"unknown field (known: {', '.join(FIELDS)})")
    for fld, what in (("repo", "the repository folder, relative to the batch file"),
                      ("prompt", "what the agent is asked to do")):
        if fld not in entry:
            raise err(fld, f"missing ({what})")
        if not isinstance(entry[fld], str):
            raise err(fld, f"must be a string, not {entry[fld]!r}")
        if not entry[fld].strip():
            raise err(fld, "empty")


def _options(entry: dict, err: Callable[[str, str], ConfigError]) -> dict[str, Any]:
    """A task's own machine, role, model, provider and limits, each checked."""
    opts: dict[str, Any] = {}
    for fld in ("machine", "role", "model", "provider"):
        if fld in entry:
            v = entry[fld]
            if not isinstance(v, str) or not _NAME.fullmatch(v):
                raise err(fld, f"must be a name (letters, digits and ._:/,@+-), not {v!r}")
            opts[fld] = v
    for fld in ("max_turns", "max_tokens"):
        if fld in entry:
            v = entry[fld]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise err(fld, f"must be a whole number >= 1, not {v!r}")
            opts[fld] = v
    if "max_cost" in entry:
        v = entry["max_cost"]
        if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0 or v != v or v == float("inf"):
            raise err("max_cost", f"must be a number of USD > 0, not {v!r}")
        opts["max_cost"] = float(v)
    return opts
