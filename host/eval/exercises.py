"""The exercise-directory layout of public polyglot coding benchmarks, loaded as a moss Suite.

A folder of exercises, each `NAME/.docs/instructions.md` (+ an optional
`instructions.append.md`), a stub to complete and a test file, named by `.meta/config.json`
(`files.solution`, `files.test`, `files.example`). Each exercise becomes a change task: the
instructions are the prompt, the folder without `.meta/` and the example is the repo, the
language's test command is the check (it must fail on the stub), the example the reference.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path, PurePosixPath

from ..errors import ConfigError, MossError
from ..roots import display_path
from .suite import Check, Replacement, Suite, Task, _repo

CONFIG = PurePosixPath(".meta/config.json")


def _python(tests: list[str]) -> str:
    # unittest needs nothing but python3 (the benchmarks' Python tests are unittest.TestCase classes)
    modules = [str(PurePosixPath(t).with_suffix("")).replace("/", ".") for t in tests]
    return "python3 -m unittest -q " + " ".join(shlex.quote(m) for m in modules)


# The test command per language, chosen by the test file's suffix: one entry per language.
COMMANDS = {".py": ("python", _python)}


def is_exercise_dir(path: Path | str) -> bool:
    """Whether `path` is a folder of exercises (some subfolder has .meta/config.json)."""
    path = Path(path)
    return path.is_dir() and any((p / CONFIG).is_file() for p in path.iterdir() if p.is_dir())


def load_exercises(path: Path | str) -> Suite:
    """Every exercise under `path` as a change task; a malformed exercise is
    MossError(kind="config") naming its file and what is wrong."""
    path = Path(path)
    if not path.is_dir():
        raise MossError(f"no exercise folder at {display_path(path)}", kind="not_found")
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
    conf = folder / CONFIG
    shown = display_path(conf)
    tid = re.sub(r"[^a-z0-9]+", "-", folder.name.lower()).strip("-") or "exercise"

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
    if suffix not in COMMANDS:
        known = ", ".join(COMMANDS)
        raise err("files.test", f"no test command for {suffix or 'suffix-less'} tests (known: {known})")
    language, command = COMMANDS[suffix]

    docs = folder / ".docs"
    if not (docs / "instructions.md").is_file():
        raise ConfigError(f"{display_path(docs / 'instructions.md')}: missing (the exercise's instructions)",
                          file=str(docs / "instructions.md"), task=tid, field="prompt")
    parts = [(docs / "instructions.md").read_text(encoding="utf-8").strip()]
    if (docs / "instructions.append.md").is_file():
        parts.append((docs / "instructions.append.md").read_text(encoding="utf-8").strip())
    parts.append(f"Write the solution in {', '.join(names['solution'])}; the tests are in "
                 f"{', '.join(names['test'])}.")

    def rel_err(fld: str, msg: str) -> ConfigError:
        return err("folder" if fld == "repo" else fld, msg)

    repo = _repo(str(folder.relative_to(base)), base, rel_err)
    solution = []
    if len(names["example"]) == len(names["solution"]):
        solution = [Replacement(path=s, old=None, new=(folder / e).read_text(encoding="utf-8"))
                    for s, e in zip(names["solution"], names["example"])]
    exclude = [".meta"] + [e for e in names["example"] if PurePosixPath(e).parts[0] != ".meta"]
    return Task(id=tid, repo=repo, commit="", prompt="\n\n".join(parts), setup=[], tags=["exercise", language],
                check=Check(run=(command(names["test"]),), fail_before=True), solution=solution,
                solution_answer=None, exclude=exclude)
