"""The exercise-folder layout of the public polyglot coding benchmark, loaded as a moss Suite.

A folder of exercises, each `NAME/.docs/instructions.md` (with an optional `introduction.md`
before it and `instructions.append.md` after), a stub to complete and test files, named by
`.meta/config.json` (`files.solution`, `files.test`, `files.example`). Each exercise becomes a
change task in its language (host/eval/languages.py: C++, Go, Java, JavaScript, Python, Rust,
chosen by the test file's suffix): the folder without `.meta/`, `.approaches/`, `.articles/`
and the example is the repo, the language's build and test is the check, the example is the
reference. Before each check the exercise's own files other than
the solution (its tests, build files, helpers) are put back as given, so an agent cannot pass
by changing a test. The prompt is the policy's (scripts/eval.lua ``M.prompt``): this module
hands it the instructions and the file names (``Task.exercise``).

An exercise that cannot be read (its config names a file that is not there, no test file, a
language moss has no check for) does not refuse the folder: it becomes a task whose
``problem`` says why, reported as a suite error, and every other exercise runs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path, PurePosixPath

from ..errors import ConfigError, MossError
from ..roots import display_path
from .languages import (BY_SUFFIX, LANGUAGES, js_packages, prepare_catch_main, prepare_go, prepare_javascript, script,
                        toolchain_problem)
from .suite import Check, Replacement, Suite, Task, _repo

CONFIG = PurePosixPath(".meta/config.json")
HIDDEN = (".meta", ".approaches", ".articles")  # the example and write-ups of solutions: never copied
BUILD_OUTPUT = ("node_modules", "target", "build", ".gradle")  # a checkout someone built in: not copied


def is_exercise_dir(path: Path | str) -> bool:
    """Whether `path` is a folder of exercises (some subfolder has .meta/config.json)."""
    path = Path(path)
    return path.is_dir() and any((p / CONFIG).is_file() for p in path.iterdir() if p.is_dir())


def load_exercises(path: Path | str) -> Suite:
    """Every exercise under `path` as a change task (one that cannot be read: a task with a
    `problem`)."""
    path = Path(path)
    if not path.is_dir():
        raise MossError(f"no exercise folder at {display_path(path)} (a folder with one folder per exercise, "
                        f"each holding {CONFIG}: the polyglot benchmark's layout)", kind="not_found")
    base = path.resolve()
    folders = sorted(p for p in base.iterdir() if p.is_dir() and (p / CONFIG).is_file())
    if not folders:
        raise ConfigError(f"{display_path(path)}: no exercises (no NAME/{CONFIG} in it)")
    tasks = [_exercise(folder, base) for folder in folders]
    ids = [t.id for t in tasks]
    for t in tasks:
        if ids.count(t.id) > 1:
            raise ConfigError(f"{display_path(path)}: two exercises have the id {t.id!r} (their folder names "
                              f"differ only in case or punctuation)", task=t.id, field="id")
    return Suite(name=base.name, description=f"{len(tasks)} exercises from {display_path(path)}",
                 path=base, tasks=tasks)


def _exercise(folder: Path, base: Path) -> Task:
    tid = re.sub(r"[^a-z0-9]+", "-", folder.name.lower()).strip("-") or "exercise"
    try:
        return _read(folder, base, tid)
    except ConfigError as e:
        return Task(id=tid, repo=folder, commit="", prompt="", setup=[], tags=["exercise"], check=Check(),
                    solution=[], solution_answer=None, problem=e.message)


def _files(folder: Path, conf: Path, tid: str) -> dict[str, list[str]]:
    shown = display_path(conf)

    def err(fld: str, msg: str) -> ConfigError:
        return ConfigError(f"{shown}: {fld}: {msg}", file=shown, task=tid, field=fld)

    try:
        meta = json.loads(conf.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ConfigError(f"{shown}:{e.lineno}:{e.colno}: {e.msg}", file=shown, task=tid) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{shown}: cannot read it ({e})", file=shown, task=tid) from None
    files = meta.get("files") if isinstance(meta, dict) else None
    if not isinstance(files, dict):
        raise err("files", "missing (an object with solution, test and example lists)")
    names: dict[str, list[str]] = {}
    for key in ("solution", "test", "example"):
        value = files.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise err(f"files.{key}", f"must be a list of file names, not {value!r}")
        for v in value:
            pure = PurePosixPath(v)
            if pure.is_absolute() or ".." in pure.parts:
                raise err(f"files.{key}", f"{v!r} must be a path inside the exercise")
            if not (folder / v).is_file():
                raise err(f"files.{key}", f"{v} does not exist")
        names[key] = value
    if not names["solution"] or not names["test"]:
        raise err("files", "needs at least one solution file and one test file")
    suffix = PurePosixPath(names["test"][0]).suffix
    if suffix not in BY_SUFFIX:
        known = ", ".join(f"{s} ({lang.title})" for s, lang in BY_SUFFIX.items())
        raise err("files.test", f"no check for {suffix or 'suffix-less'} tests (moss knows {known})")
    return names


def _read(folder: Path, base: Path, tid: str) -> Task:
    names = _files(folder, folder / CONFIG, tid)
    lang = BY_SUFFIX[PurePosixPath(names["test"][0]).suffix]
    docs = folder / ".docs"
    if not (docs / "instructions.md").is_file():
        shown = display_path(docs / "instructions.md")
        raise ConfigError(f"{shown}: missing (the exercise's instructions)", file=shown, task=tid, field="prompt")
    parts = [(docs / n).read_text(encoding="utf-8").strip() for n in
             ("introduction.md", "instructions.md", "instructions.append.md") if (docs / n).is_file()]
    instructions = "\n\n".join(p for p in parts if p)

    def rel_err(fld: str, msg: str) -> ConfigError:
        shown = display_path(folder / CONFIG)
        return ConfigError(f"{shown}: {'folder' if fld == 'repo' else fld}: {msg}", file=shown, task=tid, field=fld)

    repo = _repo(str(folder.relative_to(base)), base, rel_err)
    exclude = list(HIDDEN) + [e for e in names["example"] if PurePosixPath(e).parts[0] not in HIDDEN]
    exclude += [b for b in BUILD_OUTPUT if (folder / b).is_dir()]
    # no fail_before: as on the benchmark's leaderboard every exercise counts, also the few whose
    # tests pass as shipped (Go's counter, ledger, markdown), and each attempt builds once less
    given = _given(repo, exclude, names["solution"])
    check = Check(run=(script(lang, folder.name, names["test"], sorted({*given, *names["solution"]})),),
                  fail_before=False, language=lang.name, timeout=lang.timeout, label=lang.how,
                  restore=tuple(given))
    return Task(id=tid, repo=repo, commit="", prompt=instructions, setup=[], tags=["exercise", lang.name],
                check=check, solution=_reference(folder, names), solution_answer=None, exclude=exclude,
                exercise={"language": lang.name, "title": lang.title, "name": folder.name,
                          "instructions": instructions, "solution": list(names["solution"]),
                          "test": list(names["test"])})


def _given(repo: Path, exclude: list[str], solution: list[str]) -> list[str]:
    """The exercise's files an attempt's check puts back as given: every one that is copied
    and is not a solution file or its instructions (tests, build files, helpers)."""
    skip = {PurePosixPath(e) for e in exclude} | {PurePosixPath(".docs")}
    out = []
    for top, dirs, files in os.walk(repo):
        rel_top = PurePosixPath(Path(top).relative_to(repo).as_posix())
        dirs[:] = [d for d in dirs if (rel_top / d) not in skip and not (rel_top == PurePosixPath(".") and
                                                                       PurePosixPath(d) in skip)]
        for f in files:
            rel = PurePosixPath(os.path.normpath(rel_top / f))
            if rel not in skip and str(rel) not in solution and not os.path.islink(os.path.join(top, f)):
                out.append(str(rel))
    return sorted(out)


def _reference(folder: Path, names: dict[str, list[str]]) -> list[Replacement]:
    """The example as whole files at the paths they take in a solved exercise: Java's
    `.meta/src/reference/java/X.java` at `src/main/java/X.java`; otherwise the solution file of
    the same suffix (`.meta/example.rs` is `src/lib.rs`; `.meta/example.h` the `.h` one), else of
    the same name. An example that fits no solution file leaves the task without a reference."""
    out = []
    solution = names["solution"]
    for example in names["example"]:
        pure = PurePosixPath(example)
        target = None
        if pure.parts[:3] == (".meta", "src", "reference"):
            target = str(PurePosixPath("src", "main", *pure.parts[3:]))
        else:
            same = [s for s in solution if PurePosixPath(s).suffix == pure.suffix]
            named = [s for s in same if PurePosixPath(s).name == pure.name]
            target = named[0] if named else same[0] if len(same) == 1 else None
        if target is None:
            return []
        out.append(Replacement(path=target, old=None, new=(folder / example).read_text(encoding="utf-8")))
    manifest = folder / ".meta" / "Cargo-example.toml"  # a Rust example's own manifest (its crates)
    if out and "Cargo.toml" in solution and manifest.is_file():
        out.append(Replacement(path="Cargo.toml", old=None, new=manifest.read_text(encoding="utf-8")))
    return out


def prepare_folder(folder: Path, log=print) -> list[dict]:
    """`moss eval --prepare DIR`: what the checks of DIR's exercises need made once, one entry
    per language ({language, ready, detail}): JavaScript's packages from the npm registry (the
    one step of an eval that reaches the network), Go's warm build cache, the C++ Catch main."""
    by: dict[str, list] = {}
    for t in load_exercises(folder).tasks:
        if t.exercise:
            by.setdefault(t.exercise["language"], []).append(Path(t.repo))
    out = []
    for name, repos in sorted(by.items()):
        problem = toolchain_problem(LANGUAGES[name])
        if problem:
            out.append({"language": name, "ready": False, "detail": problem})
            continue
        try:
            ready, detail = _prepare(name, repos, log)
        except MossError as e:
            ready, detail = False, e.message
        out.append({"language": name, "ready": ready, "detail": detail})
    return out


def _prepare(name: str, repos: list[Path], log) -> tuple[bool, str]:
    if name == "javascript":
        sets = {json.dumps(p, sort_keys=True): p for p in (js_packages(r) for r in repos)}
        where = [prepare_javascript(p, log=log) for p in sets.values()]
        return True, f"jest and babel in {', '.join(str(w) for w in where)}"
    if name == "go":
        warm = prepare_go()
        return warm is not None, f"warm build cache {warm}" if warm else "could not build Go's testing package"
    if name == "cpp":
        made = sorted({str(m) for m in (prepare_catch_main(r) for r in repos) if m is not None})
        return True, f"Catch main built once: {', '.join(made)}" if made else "nothing to prepare"
    return True, "nothing to prepare"
