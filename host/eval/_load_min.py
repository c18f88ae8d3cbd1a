"""A minimal reader of the agreed suite format (docs/eval.md), for the runner until the full
loader (host/eval/suite.py) is merged; the lead reconciles the two. It reads ``suite.toml`` (or
one .toml file) into Suite/Task/Check and checks a question's answer. Every mistake is a
MossError of kind ``config`` naming the file and the task."""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MossError

ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,80}$")
NUMBER_RE = re.compile(r"[-+]?\d+(?:\.\d+)?")


@dataclass
class Check:
    answer: str | None = None
    regex: str | None = None
    number: float | None = None
    tolerance: float = 0.0
    run: list[str] = field(default_factory=list)
    fail_before: bool = False

    @property
    def kind(self) -> str:
        return "change" if self.run else "question"


@dataclass
class Task:
    id: str
    repo: Path
    prompt: str
    check: Check
    commit: str = ""
    setup: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return self.check.kind


@dataclass
class Suite:
    name: str
    path: Path  # the suite file
    tasks: list[Task]
    description: str = ""


def load_suite(path: Path) -> Suite:
    """The suite at `path` (a folder with suite.toml, or a .toml file)."""
    path = Path(path)
    file = path / "suite.toml" if path.is_dir() else path
    if not file.is_file():
        raise MossError(f"no suite at {path}: expected a folder with suite.toml, or a .toml file", kind="not_found")
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise MossError(f"{file}: not valid TOML ({e})", kind="config") from None
    head = data.get("suite") or {}
    base = file.parent
    tasks, seen = [], set()
    for n, t in enumerate(data.get("task") or [], 1):
        where = f"{file}: task {n}"
        if not isinstance(t, dict):
            raise MossError(f"{where} is not a table", kind="config")
        tid = t.get("id")
        if not isinstance(tid, str) or not ID_RE.match(tid):
            raise MossError(f"{where}: id must be lower-case letters, digits and dashes, got {tid!r}", kind="config")
        if tid in seen:
            raise MossError(f"{file}: task id {tid!r} appears twice", kind="config")
        seen.add(tid)
        where = f"{file}: task {tid}"
        repo = t.get("repo")
        if not isinstance(repo, str) or not (base / repo).is_dir():
            raise MossError(f"{where}: repo must name a folder beside the suite file, got {repo!r}", kind="config")
        prompt = t.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise MossError(f"{where}: prompt must be a non-empty string", kind="config")
        c = t.get("check")
        if not isinstance(c, dict):
            raise MossError(f"{where}: [task.check] is missing", kind="config")
        run = c.get("run") or []
        if isinstance(run, str):
            run = [run]
        check = Check(answer=c.get("answer"), regex=c.get("regex"), number=c.get("number"),
                      tolerance=float(c.get("tolerance") or 0.0), run=list(run),
                      fail_before=bool(c.get("fail_before", False)))
        if not run and check.answer is None and check.regex is None and check.number is None:
            raise MossError(f"{where}: the check needs answer, regex, number or run", kind="config")
        tasks.append(Task(id=tid, repo=(base / repo).resolve(), prompt=prompt, check=check,
                          commit=str(t.get("commit") or ""), setup=list(t.get("setup") or []),
                          tags=list(t.get("tags") or [])))
    if not tasks:
        raise MossError(f"{file}: the suite has no [[task]]", kind="config")
    return Suite(name=str(head.get("name") or file.parent.name), path=file, tasks=tasks,
                 description=str(head.get("description") or ""))


def check_answer(check: Check, answer: str | None) -> tuple[bool, str]:
    """Whether a question's answer passes its check, and why not."""
    text = (answer or "").strip()
    if not text:
        return False, "no answer"
    if check.answer is not None:
        want = str(check.answer).strip().rstrip(".").strip().lower()
        got = text.rstrip(".").strip().lower()
        return (got == want, "" if got == want else f"expected {check.answer!r}")
    if check.regex is not None:
        from ..tools import saferegex

        ok = saferegex.compile(check.regex, what="check regex").search(text) is not None
        return ok, "" if ok else f"does not match {check.regex!r}"
    if check.number is not None:
        m = NUMBER_RE.search(text)
        if not m:
            return False, "no number in the answer"
        ok = math.isclose(float(m.group()), float(check.number), abs_tol=check.tolerance)
        return ok, "" if ok else f"expected {check.number}, got {m.group()}"
    return False, "not a question"
