"""The `moss` command: `moss @NAME ...` runs a Lua script; the rest are tools for people."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from . import __version__

EPILOG = """\b
Run a Lua script:
  moss @agent "how many variants does Provider have?"   the coding agent
  moss @NAME [ARGS...]                                  any script (see `moss scripts`)
  moss @NAME --help                                     a script's help (scripts that return {help=, main=})
Scripts come from .moss/scripts/ (project), ~/.config/moss/scripts/ (user), then moss's
built-in scripts, in that order: drop a file of the same name to override one.
"""


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="moss")
def cli():
    """moss: a coding agent whose behaviour is a Lua program you can edit."""


@cli.command()
@click.option("--force", is_flag=True, help="Overwrite an existing .moss/config.toml.")
def init(force):
    """Create .moss/ here: config.toml (commented template), memory/, scripts/, .gitignore."""
    from .config import GITIGNORE, TEMPLATE

    base = Path.cwd() / ".moss"
    base.mkdir(exist_ok=True)
    (base / "memory").mkdir(exist_ok=True)
    (base / "scripts").mkdir(exist_ok=True)
    cfg = base / "config.toml"
    made = []
    if not cfg.exists() or force:
        cfg.write_text(TEMPLATE, encoding="utf-8")
        made.append(".moss/config.toml")
    else:
        click.echo(".moss/config.toml exists; kept it (use --force to overwrite)", err=True)
    gi = base / ".gitignore"
    if not gi.exists() or force:
        gi.write_text(GITIGNORE, encoding="utf-8")
        made.append(".moss/.gitignore")
    for name in ("facts.md", "preferences.md", "decisions.md"):
        f = base / "memory" / name
        if not f.exists():
            f.write_text(f"# {name[:-3].capitalize()}\n", encoding="utf-8")
            made.append(f".moss/memory/{name}")
    luarc = base / "scripts" / ".luarc.json"
    if not luarc.exists() or force:
        luarc.write_text(_luarc_json(), encoding="utf-8")
        made.append(".moss/scripts/.luarc.json")
    for m in made:
        click.echo(f"created {m}")
    if made:
        click.echo("Lua completion: open .moss/scripts in an editor with lua-language-server "
                   "(the .luarc.json there points at moss's type annotations).")


def _luarc_json() -> str:
    import json

    from .roots import builtin_scripts_dir

    builtin = builtin_scripts_dir()
    return json.dumps({
        "runtime.version": "Lua 5.4",
        "runtime.path": ["?.lua", "?/init.lua"],
        "workspace.library": [str(builtin / "types"), str(builtin)],
        "diagnostics.globals": ["moss"],
    }, indent=2) + "\n"


@cli.command("scripts")
def scripts_cmd():
    """List the runnable scripts and where each comes from."""
    from .context import find_project_root
    from .roots import ScriptRoots, display_path

    rows = []
    for s in ScriptRoots(find_project_root()).list_scripts():
        origin = s.origin + (f" (overrides {', '.join(s.shadows)})" if s.shadows else "")
        rows.append(("@" + s.name, origin, display_path(s.path), s.description))
    if not sys.stdout.isatty():
        for row in rows:
            click.echo("\t".join(row))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for col, style in (("script", "bold"), ("from", None), ("path", "dim"), ("description", None)):
        table.add_column(col, style=style)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


@cli.group()
def config():
    """Read and change .moss/config.toml (merged over ~/.config/moss/config.toml)."""


@config.command("get")
@click.argument("key")
def config_get(key):
    """Print the merged value of KEY (dotted, e.g. agent.max_turns)."""
    import json

    from . import config as cfg
    from .context import find_project_root

    data = cfg.load(find_project_root())
    try:
        value = cfg.lookup(data, key)
    except KeyError:
        raise SystemExit(_fail(f"{key} is not set", code=1))
    click.echo(value if isinstance(value, str) else json.dumps(value))


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--user", is_flag=True, help="Write ~/.config/moss/config.toml instead of the project file.")
def config_set(key, value, user):
    """Set KEY to VALUE (parsed as TOML when it is one: 3, true, "s", [1, 2])."""
    from . import config as cfg
    from .context import find_project_root
    from .roots import display_path

    path = cfg.user_config_file() if user else cfg.project_config_file(find_project_root())
    kept = cfg.set_value(path, key, cfg.parse_value(value))
    click.echo(f"{display_path(path)}: {key} = {value}")
    if not kept:
        click.echo(f"note: {display_path(path)} was rewritten; its comments could not be kept", err=True)


@config.command("path")
def config_path():
    """Show which config files are read, in order."""
    from . import config as cfg
    from .context import find_project_root
    from .roots import display_path

    for label, p in (("user", cfg.user_config_file()), ("project", cfg.project_config_file(find_project_root()))):
        click.echo(f"{label}\t{display_path(p)}\t{'exists' if p.exists() else 'absent'}")


@cli.command()
@click.argument("target", default=".")
@click.option("--depth", "-d", type=int, default=1, show_default=True,
              help="Skeleton/tree depth: 0 names only, 1 signatures and members, -1 everything.")
def view(target, depth):
    """Show TARGET: a directory tree, a file skeleton, FILE:A-B lines, or FILE/Symbol.

    \b
    moss view .                    the project tree (.gitignore respected)
    moss view llm.rs               a skeleton; a unique suffix finds the file
    moss view src/main.rs:10-40    numbered lines
    moss view llm.rs/Provider      one symbol's source
    """
    from .context import find_project_root
    from .tools.view import view as _view

    click.echo(_view(find_project_root(), target, depth=depth, max_chars=0))


@cli.command("text-search")
@click.argument("pattern")
@click.option("--only", multiple=True, metavar="GLOB", help="Only files matching GLOB (repeatable).")
@click.option("--limit", type=int, default=100, show_default=True, help="Stop after this many matches.")
@click.option("-i", "--ignore-case", is_flag=True, help="Case-insensitive.")
def text_search(pattern, only, limit, ignore_case):
    """Search file contents for PATTERN (a regex), grouped by file, with enclosing symbols."""
    from .context import find_project_root
    from .tools.search import search

    click.echo(search(find_project_root(), pattern, only=list(only) or None, limit=limit,
                      ignore_case=ignore_case, max_chars=0))


@cli.group()
def sessions():
    """Saved agent sessions (.moss/agent/): list them, or show one as a timeline."""


@sessions.command("list")
def sessions_list():
    """A table of saved sessions: id, age, turns, state, reason, task."""
    import time

    from .api.session import list_checkpoints
    from .context import find_project_root

    rows = list_checkpoints(find_project_root())
    if not rows:
        click.echo("no saved sessions", err=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for col in ("id", "age", "turns", "state", "reason", "task"):
        table.add_column(col)
    now = time.time()
    for r in rows:
        age = now - r["mtime"]
        age_s = f"{int(age)}s" if age < 120 else f"{int(age // 60)}m" if age < 7200 else f"{int(age // 3600)}h"
        task = " ".join(str(r.get("task") or "").split())
        table.add_row(r["id"], age_s, str(r.get("turn") or 0), str(r.get("state") or ""),
                      str(r.get("reason") or "running"), task[:60])
    Console(soft_wrap=True).print(table)


@sessions.command("show")
@click.argument("session_id")
def sessions_show(session_id):
    """Render one session's log as a timeline: turns, LLM calls, commands, validations."""
    from .api.session import read_log
    from .context import find_project_root
    from .timeline import render

    render(read_log(find_project_root(), session_id), session_id)


def _fail(message: str, code: int = 2) -> int:
    from .ui import error

    error(message)
    return code


def main(argv: list[str] | None = None) -> None:
    """The click commands (moss init, view, config, ...); `moss @NAME` is handled in entry.py."""
    from .errors import MossError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=argv, prog_name="moss", standalone_mode=True)
    except MossError as e:
        raise SystemExit(_fail(e.message, code=2 if e.kind in ("usage", "config", "not_found", "ambiguous", "denied") else 1))
