"""Evaluation suites in moss's TOML format: loaded and checked, answers compared, oracles applied.

A suite is a folder with `suite.toml` (or one .toml file) of tasks: each a repository folder to
copy, a prompt, and a check — an expected answer for a question, commands that must pass for a
change. This module is mechanism only. Whether an attempt passed, how a suite becomes attempts
and how results are scored is the Lua's (`moss eval`); `check_answer` is the primitive it calls.

Everything a suite names is checked when it is loaded, so a bad suite fails before any attempt
with the file, the task and the field: a repository must stay inside the suite's folder and hold
no link leading out of it (a hostile suite must not make moss copy /etc), and a question's
reference answer must pass its own check.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ConfigError, MossError
from ..roots import display_path
from ..tools import safefs, saferegex

SUITE_FILE = "suite.toml"
BUILTIN = PurePosixPath("eval/suites/builtin")  # the built-in suite, relative to a scripts root
CHECK_TIMEOUT = 60  # seconds each check command may take (the format's rule)
MAX_TRIES = 10  # a task's `tries`, and --tries

SUITE_FIELDS = ("name", "description")
TASK_FIELDS = ("id", "repo", "commit", "prompt", "setup", "tags", "check", "solution", "solution_answer", "tries")
CHECK_FIELDS = ("answer", "regex", "number", "tolerance", "run", "fail_before")
SOLUTION_FIELDS = ("path", "old", "new")
_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
_COMMIT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]*")


@dataclass(frozen=True)
class Check:
    """A question's expected answer (one of answer / regex / number, with tolerance), or a
    change's commands (run), which must fail on the untouched copy when fail_before is set."""
    answer: str | None = None
    regex: str | None = None
    number: int | float | None = None
    tolerance: float = 0.0
    run: tuple[str, ...] = ()
    fail_before: bool = False
    # an exercise's check (host/eval/exercises.py): its language's toolchain and caches are set up
    # for it at check time (host/eval/languages.py), `label` names it in a row's detail instead of
    # its script, `timeout` is its language's, and `restore` lists the files put back as given
    # before it runs (the tests: an agent cannot pass by editing them)
    language: str = ""
    timeout: float | None = None
    label: str = ""
    restore: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """'change' when the check runs commands, else 'question'."""
        return "change" if self.run else "question"


@dataclass(frozen=True)
class Replacement:
    """One exact-text edit of the reference solution: `old` (which must occur exactly once in
    `path`) becomes `new`; `old` None makes `new` the whole file (an exercise's example)."""
    path: str
    old: str | None
    new: str


@dataclass
class Task:
    id: str
    repo: Path                      # the folder copied per attempt (resolved, inside the suite's folder)
    commit: str                     # "" or a commit to check out in the copy
    prompt: str
    setup: list[str]
    tags: list[str]
    check: Check
    solution: list[Replacement]     # a change's reference solution ([] when the suite has none)
    solution_answer: str | None     # a question's reference answer
    exclude: list[str] = field(default_factory=list)  # paths in `repo` never copied (an exercise's .meta)
    tries: int = 1                  # how many tries the agent gets (--tries overrides): a failed check's
                                    # output goes back to the same session for the next
    problem: str | None = None      # the task cannot be read (an exercise's config): a suite error
    exercise: dict | None = None    # an exercise's facts for the policy's prompt (host/eval/exercises.py)

    @property
    def kind(self) -> str:
        return self.check.kind


@dataclass
class Suite:
    name: str
    description: str
    path: Path                      # the suite file
    tasks: list[Task]


def builtin_suite_dir() -> Path:
    """The built-in suite as shipped (a project may override it under .moss/scripts/eval/)."""
    from ..roots import builtin_scripts_dir

    return builtin_scripts_dir() / BUILTIN


# ----------------------------------------------------------------------------- loading

def load_suite(path: Path | str) -> Suite:
    """The suite at `path` (a folder with suite.toml, or a .toml file), every task checked.
    A bad suite is MossError(kind="config") naming the file, the task and the field."""
    from ..config import read_toml

    path = Path(path)
    if path.is_dir():
        file = path / SUITE_FILE
        if not file.is_file():
            raise ConfigError(f"{display_path(path)} has no {SUITE_FILE} (a suite is a folder with "
                              f"{SUITE_FILE}, or a .toml file)", file=str(file))
    elif path.exists():
        file = path
    else:
        raise MossError(f"no suite at {display_path(path)}", kind="not_found")
    file = file.absolute()
    shown = display_path(file)
    data = read_toml(file)  # a syntax error is file:line:column: reason
    _known(data, ("suite", "task"), shown, "")
    head = data.get("suite", {})
    if not isinstance(head, dict):
        raise ConfigError(f"{shown}: suite must be a table ([suite] with name and description)", file=shown)
    _known(head, SUITE_FIELDS, shown, "suite: ")
    name = _string(head.get("name", file.parent.name if file.name == SUITE_FILE else file.stem), shown, "suite: name")
    description = _string(head.get("description", ""), shown, "suite: description")
    raw = data.get("task", [])
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        raise ConfigError(f"{shown}: task must be an array of tables ([[task]] sections)", file=shown)
    if not raw:
        raise ConfigError(f"{shown}: the suite has no tasks (add [[task]] sections)", file=shown)
    base = Path(os.path.realpath(file.parent))
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for n, entry in enumerate(raw, 1):
        task = _task(entry, n, base, shown)
        if task.id in seen:
            raise ConfigError(f"{shown}: task {task.id!r}: id: the same id as task #{seen[task.id]} "
                              f"(ids must be unique in a suite)", file=shown, task=task.id, field="id")
        seen[task.id] = n
        tasks.append(task)
    return Suite(name=name, description=description, path=file, tasks=tasks)


def _task(entry: dict, n: int, base: Path, shown: str) -> Task:
    tid = entry.get("id")
    if not isinstance(tid, str) or not _ID.fullmatch(tid):
        what = "missing" if tid is None else f"{tid!r} is not a task id (lower-case letters, digits and -)"
        raise ConfigError(f"{shown}: task #{n}: id: {what}", file=shown, task=f"#{n}", field="id")
    where = f"task {tid!r}: "

    def err(fld: str, msg: str) -> ConfigError:
        return ConfigError(f"{shown}: {where}{fld}: {msg}", file=shown, task=tid, field=fld)

    _known(entry, TASK_FIELDS, shown, where, tid)
    if "prompt" not in entry:
        raise err("prompt", "missing (the text the agent is given)")
    prompt = _string(entry["prompt"], shown, where + "prompt", tid)
    if not prompt.strip():
        raise err("prompt", "empty")
    if "repo" not in entry:
        raise err("repo", "missing (the folder, relative to the suite file, that each attempt copies)")
    repo = _repo(_string(entry["repo"], shown, where + "repo", tid), base, err)
    commit = _string(entry.get("commit", ""), shown, where + "commit", tid)
    if commit:
        _check_commit(commit, repo, err)
    setup = _strings(entry.get("setup", []), shown, where + "setup", tid)
    tags = _strings(entry.get("tags", []), shown, where + "tags", tid, allow_empty_items=False)
    if "check" not in entry:
        raise err("check", "missing ([task.check] with answer, regex or number for a question, run for a change)")
    check = _check(entry["check"], shown, where, tid, err)
    solution = _solution(entry.get("solution", []), shown, where, tid, err)
    answer = _reference_answer(entry.get("solution_answer"), check, solution, shown, where, tid, err)
    tries = entry.get("tries", 1)
    if isinstance(tries, bool) or not isinstance(tries, int) or not 1 <= tries <= MAX_TRIES:
        raise err("tries", f"must be a whole number from 1 to {MAX_TRIES}, not {tries!r}")
    if tries > 1 and check.kind != "change":
        raise err("tries", "is for a change: a question's check would tell the agent the answer")
    return Task(id=tid, repo=repo, commit=commit, prompt=prompt, setup=setup, tags=tags, check=check,
                solution=solution, solution_answer=answer, tries=tries)


def _check_commit(commit: str, repo: Path, err) -> None:
    """A commit the copy can check out from a history of its own."""
    if not _COMMIT.fullmatch(commit):
        raise err("commit", f"{commit!r} is not a commit or ref name")
    git = repo / ".git"
    if not git.exists():
        raise err("commit", f"the repo {display_path(repo)} is not a git repository (it has no .git)")
    # the copy's git must be its own: not a `.git` file, commondir or alternates naming another
    if git.is_symlink() or not git.is_dir():
        raise err("commit", f"{display_path(git)} must be a folder (a .git file points at a repository elsewhere)")
    for other in ("commondir", "objects/info/alternates"):
        if os.path.lexists(git / other):
            raise err("commit", f"{display_path(git / other)} points at a repository elsewhere; "
                                f"the copy must hold its whole history")


def _reference_answer(answer: Any, check: Check, solution: list[Replacement], shown: str, where: str, tid: str,
                      err) -> str | None:
    """A question's reference answer (given, else the check's own answer or number), which
    must pass its check; a change has none (its reference is its solution)."""
    if check.kind == "change":
        if answer is not None:
            raise err("solution_answer", "is for questions; a change's reference is [[task.solution]]")
        return None
    if solution:
        raise err("solution", "is for changes; a question's reference answer is solution_answer")
    if answer is None:
        if check.regex is not None:
            raise err("solution_answer", "missing: a regex check needs a reference answer that matches it")
        answer = check.answer if check.answer is not None else str(check.number)
    answer = _string(answer, shown, where + "solution_answer", tid)
    if not check_answer(check, answer):
        raise err("solution_answer", f"{answer!r} does not pass the task's own check")
    return answer


def _repo(rel: str, base: Path, err, what: str = "suite") -> Path:
    """The task's repository folder: inside the suite's (or batch file's) folder, a directory,
    and holding only regular files, folders and links that stay inside it."""
    if not rel.strip():
        raise err("repo", "empty")
    real = Path(os.path.realpath(base / rel))
    if real != base and base not in real.parents:
        where = "the suite's folder" if what == "suite" else "the folder of the batch file"
        raise err("repo", f"{rel!r} leads outside {where} {display_path(base)} "
                          f"(a {what} copies only what lies beside it)")
    if not real.is_dir():
        raise err("repo", f"{rel!r} is not a folder" + ("" if real.exists() else " (it does not exist)"))
    for top, dirs, files in os.walk(real):
        for name in dirs + files:
            p = Path(top) / name
            mode = os.lstat(p).st_mode
            if stat.S_ISLNK(mode):
                target = Path(os.path.realpath(p))
                if target != real and real not in target.parents:
                    raise err("repo", f"{display_path(p)} is a link leading outside the repo "
                                      f"(to {os.readlink(p)}); moss will not copy it")
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise err("repo", f"{display_path(p)} is neither a file, a folder nor a link")
    return real


def _check(raw: Any, shown: str, where: str, tid: str, err) -> Check:
    if not isinstance(raw, dict):
        raise err("check", "must be a table ([task.check])")
    _known(raw, CHECK_FIELDS, shown, where + "check: ", tid, prefix="check.")
    asks = [k for k in ("answer", "regex", "number") if k in raw]
    if "run" in raw and asks:
        raise err(f"check.{asks[0]}", "a check has either run (a change) or answer/regex/number (a question)")
    if len(asks) > 1:
        raise err(f"check.{asks[1]}", f"a question has one of answer, regex, number, not {' and '.join(asks)}")
    if not asks and "run" not in raw:
        raise err("check", "needs answer, regex or number (a question) or run (a change)")
    if "run" in raw:
        return _change_check(raw, shown, where, tid, err)
    return _question_check(raw, shown, where, tid, err)


def _change_check(raw: dict, shown: str, where: str, tid: str, err) -> Check:
    """A change's check: commands run in the attempt's copy."""
    if "tolerance" in raw:
        raise err("check.tolerance", "is for a number check")
    run = _strings(raw["run"], shown, where + "check.run", tid, allow_empty_items=False)
    if not run:
        raise err("check.run", "empty: a change needs at least one command")
    fail_before = raw.get("fail_before", False)
    if not isinstance(fail_before, bool):
        raise err("check.fail_before", f"must be true or false, not {fail_before!r}")
    return Check(run=tuple(run), fail_before=fail_before)


def _question_check(raw: dict, shown: str, where: str, tid: str, err) -> Check:
    """A question's check: one of answer, regex, number (with its tolerance)."""
    if "fail_before" in raw:
        raise err("check.fail_before", "is for a change (a check with run)")
    if "tolerance" in raw and "number" not in raw:
        raise err("check.tolerance", "is for a number check")
    if "answer" in raw:
        answer = _string(raw["answer"], shown, where + "check.answer", tid)
        if not answer.strip():
            raise err("check.answer", "empty")
        return Check(answer=answer)
    if "regex" in raw:
        pattern = _string(raw["regex"], shown, where + "check.regex", tid)
        try:
            saferegex.compile(pattern, what="check.regex")
        except MossError as e:
            raise err("check.regex", e.message) from None
        return Check(regex=pattern)
    number, tolerance = raw["number"], raw.get("tolerance", 0)
    for fld, value in (("number", number), ("tolerance", tolerance)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise err(f"check.{fld}", f"must be a number, not {value!r}")
    if tolerance < 0:
        raise err("check.tolerance", "must not be negative")
    return Check(number=number, tolerance=float(tolerance))


def _solution(raw: Any, shown: str, where: str, tid: str, err) -> list[Replacement]:
    if not isinstance(raw, list) or not all(isinstance(r, dict) for r in raw):
        raise err("solution", "must be an array of tables ([[task.solution]] with path, old, new)")
    out = []
    for i, r in enumerate(raw, 1):
        here = f"solution #{i}"
        _known(r, SOLUTION_FIELDS, shown, f"{where}{here}: ", tid, prefix="solution.")
        for fld in SOLUTION_FIELDS:
            if fld not in r:
                raise err(f"{here}.{fld}", "missing")
        path, old, new = (_string(r[f], shown, f"{where}{here}.{f}", tid) for f in SOLUTION_FIELDS)
        pure = PurePosixPath(path)
        if not path or pure.is_absolute() or ".." in pure.parts:
            raise err(f"{here}.path", f"{path!r} must be a path inside the repo (relative, no ..)")
        if not old:
            raise err(f"{here}.old", "empty (the exact text to replace)")
        out.append(Replacement(path=path, old=old, new=new))
    return out


def _known(table: dict, fields: tuple[str, ...], shown: str, where: str, tid: str | None = None,
           prefix: str = "") -> None:
    for key in table:
        if key not in fields:
            hint = ""
            if key in TASK_FIELDS and prefix:  # `solution_answer = ...` written after [task.check]
                hint = f"; {key} belongs to the task: write it before [task.check]"
            raise ConfigError(f"{shown}: {where}unknown field {key!r} (known: {', '.join(fields)}){hint}",
                              file=shown, task=tid, field=prefix + key)


def _string(value: Any, shown: str, where: str, tid: str | None = None) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{shown}: {where}: must be a string, not {value!r}", file=shown, task=tid,
                          field=where.rpartition(": ")[2])
    return value


def _strings(value: Any, shown: str, where: str, tid: str | None = None, allow_empty_items: bool = False
             ) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{shown}: {where}: must be a list of strings, not {value!r}", file=shown, task=tid,
                          field=where.rpartition(": ")[2])
    if not allow_empty_items and any(not v.strip() for v in value):
        raise ConfigError(f"{shown}: {where}: holds an empty string", file=shown, task=tid,
                          field=where.rpartition(": ")[2])
    return list(value)


# ----------------------------------------------------------------------------- answers

# The first number in a text: -12, 3.5, 1,250.75, 2e3; not the 3 of "py3" or "x-3".
_NUMBER = re.compile(r"(?<![\w.-])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def check_answer(check: Check, text: str | None) -> bool:
    """Whether `text` (a session's answer) passes a question's check: `answer` equal after
    trimming whitespace and a final period, ignoring case; `regex` (RE2) found in it; `number`
    equal to the first number in it, within `tolerance`. A change's check is a usage error."""
    return judge_answer(check, text)[0]


def judge_answer(check: Check, text: str | None) -> tuple[bool, str]:
    """check_answer with the reason when it fails ("" when it passes), for a results line."""
    if not check.answer and check.regex is None and check.number is None:
        raise MossError("check_answer: this check runs commands (a change), it has no answer to compare",
                        kind="usage")
    text = text or ""
    if not text.strip():
        return False, "no answer"
    if check.answer is not None:
        ok = _plain(text) == _plain(check.answer)
        return ok, "" if ok else f"expected {check.answer!r}"
    if check.regex is not None:
        ok = saferegex.compile(check.regex, what="check.regex").search(text) is not None
        return ok, "" if ok else f"does not match {check.regex!r}"
    m = _NUMBER.search(text)
    if m is None:
        return False, "no number in the answer"
    try:
        got = Decimal(m.group().replace(",", ""))
    except InvalidOperation:
        return False, "no number in the answer"
    ok = abs(got - Decimal(str(check.number))) <= Decimal(str(check.tolerance))
    return ok, "" if ok else f"expected {check.number}, got {m.group()}"


def _plain(text: str) -> str:
    text = text.strip()
    if text.endswith("."):
        text = text[:-1].rstrip()
    return text.casefold()


# ----------------------------------------------------------------------------- copies

def copy_repo(task: Task, dest: Path | str) -> Path:
    """A fresh copy of the task's repository at `dest` (which must not exist yet): links are
    copied as links (load_suite refused any leading out), `task.exclude` is left out, and a
    `commit` is checked out with git's hooks, fsmonitor and filters off (the repository's own
    config names programs; the host does not run them)."""
    dest = Path(dest)
    skip = {PurePosixPath(e) for e in task.exclude}

    def ignore(folder: str, names: list[str]) -> list[str]:
        rel = PurePosixPath(Path(folder).relative_to(task.repo).as_posix())
        return [n for n in names if rel / n in skip or (rel == PurePosixPath(".") and PurePosixPath(n) in skip)]

    shutil.copytree(task.repo, dest, symlinks=True, ignore=ignore if skip else None)
    if task.commit:
        info = dest / ".git" / "info"
        info.mkdir(parents=True, exist_ok=True)
        # takes precedence over every .gitattributes: no filter, eol or ident conversion
        (info / "attributes").write_text("* -filter -text -ident -eol -working-tree-encoding\n")
        # --git-dir/--work-tree beat a core.worktree in the copy's config that names a folder elsewhere
        cmd = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.allow=never",
               "-c", "core.autocrlf=false", f"--git-dir={dest / '.git'}", f"--work-tree={dest}", "-C", str(dest),
               "checkout", "-q", "--force", "--detach", task.commit, "--"]
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0"}
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=CHECK_TIMEOUT)
        if r.returncode != 0:
            raise MossError(f"task {task.id!r}: cannot check out {task.commit} in the copy: "
                            f"{' '.join(r.stderr.split())}", kind="config", task=task.id, field="commit")
    return dest


def apply_solution(task: Task, copy_dir: Path | str) -> None:
    """Apply the task's reference solution to a copy of its repo, in order. A replacement whose
    `old` text is not in its file exactly once is MossError(kind="config") naming the task; files
    are touched only beneath `copy_dir` and never through a link."""
    with safefs.Tree(copy_dir) as tree:
        for i, r in enumerate(task.solution, 1):
            where = f"task {task.id!r}: solution #{i} ({r.path})"
            if r.old is None:
                tree.write_atomic(r.path, r.new, sync=False)
                continue
            try:
                text = tree.read_bytes(r.path).decode("utf-8")
            except FileNotFoundError:
                raise ConfigError(f"{where}: no such file in the repo", task=task.id, field="solution") from None
            except UnicodeDecodeError:
                raise ConfigError(f"{where}: not UTF-8 text", task=task.id, field="solution") from None
            count = text.count(r.old)
            if count != 1:
                found = "not found" if count == 0 else f"found {count} times (it must be unique)"
                raise ConfigError(f"{where}: the old text is {found}", task=task.id, field="solution")
            tree.write_atomic(r.path, text.replace(r.old, r.new, 1), sync=False)
