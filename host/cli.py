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
A project's scripts, commands, LLM endpoints and access settings are used only once you
trusted them: `moss trust` (or `moss @NAME --trust` for one run).
"""


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="moss")
def cli():
    """moss: a coding agent whose behaviour is a Lua program you can edit."""


@cli.command()
@click.option("--force", is_flag=True, help="Overwrite an existing .moss/config.toml.")
def init(force):
    """Create .moss/ here: config.toml (commented template), memory/, scripts/, .gitignore."""
    from .config import GITIGNORE, template

    base = Path.cwd() / ".moss"
    base.mkdir(exist_ok=True)
    (base / "memory").mkdir(exist_ok=True)
    (base / "scripts").mkdir(exist_ok=True)
    cfg = base / "config.toml"
    made = []
    if not cfg.exists() or force:
        cfg.write_text(template(), encoding="utf-8")
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
    """List the runnable scripts and where each comes from.

    Project scripts of a project you have not trusted are marked `not trusted`: until you
    run `moss trust`, `moss @NAME` runs the user's or built-in script of that name instead."""
    from . import trust
    from .context import find_project_root
    from .roots import ScriptRoots, display_path

    from .errors import MossError

    root = find_project_root()
    try:
        trusted = trust.evaluate(root).trusted
    except MossError as e:  # a broken config file: list anyway, the runs will say what is wrong
        click.echo(f"note: {e.message}", err=True)
        trusted = False
    rows = []
    for s in ScriptRoots(root).list_scripts():
        origin = s.origin + (f" (overrides {', '.join(s.shadows)})" if s.shadows else "")
        if s.origin == "project" and not trusted:
            origin += " [not trusted]"
        rows.append(("@" + s.name, origin, display_path(s.path), s.description))
    if not trusted:
        click.echo("this project is not trusted: its scripts do not run until you review them "
                   "with `moss trust`", err=True)
    from .tables import show

    show(("script", "from", "path", "description"), rows, styles={"script": "bold", "path": "dim"})


@cli.command("trust")
@click.argument("directory", required=False, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--yes", "-y", is_flag=True, help="Trust what is shown without asking.")
@click.option("--revoke", is_flag=True, help="Forget the trust: the project's .moss/ content is ignored again.")
@click.option("--status", is_flag=True, help="One line: trusted, not trusted, changed, or nothing to trust.")
@click.option("--list", "list_", is_flag=True, help="Every project you trusted, with when.")
def trust_cmd(directory, yes, revoke, status, list_):
    """Review what this project's .moss/ adds and decide whether moss may use it.

    \b
    A cloned repository can bring Lua that replaces the agent (.moss/scripts/), commands
    ([agent] validate_commands, any run/cmd/command), LLM endpoints and key variables
    ([llm.providers.*] base_url, api_key_env) and settings that widen access or approval
    ([agent] role, pipeline, dispatch, auto_approve, machine). moss uses none of it until you
    trust that exact content; until then `moss @NAME` runs the built-in scripts with your own
    config and says what it ignored. Changed content asks again and shows what changed.

    \b
    moss trust               show what the project adds; ask (on a terminal)
    moss trust --yes         trust it without asking
    moss trust --status      trusted / not trusted / changed (exit 0 only when in use)
    moss trust --revoke      forget it
    moss trust --list        every trusted project
    moss trust DIR           the project around DIR instead of the current directory

    Exit status: 0 trusted (or nothing to trust), 1 not trusted, 3 needs your answer but
    stdin is not a terminal. Records live in $XDG_DATA_HOME/moss/trust/ (default ~/.local/share/moss/trust/), keyed by
    the project's path and a hash of its content. [agent] allow_full and unsandboxed_ok
    never come from a project; a project's auto_approve is capped at yours (default low).
    For one run, `moss @NAME --trust` trusts without recording (CI vouching for a checkout).
    """
    from rich.console import Console

    from . import trust
    from .context import find_project_root
    from .roots import display_path

    if sum((yes, revoke, status, list_)) > 1:
        raise SystemExit(_fail("choose one of --yes, --revoke, --status, --list"))
    out = Console(highlight=False, soft_wrap=True)
    if list_:
        records = trust.list_records()
        if not records:
            click.echo("no trusted projects", err=True)
        for rec in records:
            click.echo(f"{trust.where(Path(rec['path']))}\t{rec.get('trusted_at', '?')}\t"
                       f"{len(rec.get('items') or [])} items")
        return
    root = find_project_root(directory.resolve() if directory else None)
    if revoke:
        gone = trust.revoke(root)
        click.echo(f"{trust.where(root)}: {'trust revoked' if gone else 'was not trusted'}")
        return
    state = trust.evaluate(root)
    if status:
        click.echo(trust.status_line(state))
        raise SystemExit(0 if state.trusted else 1)
    if state.trusted and state.how != "nothing to trust" and not yes:
        trust.render(state, out)
        return
    trust.render(state, out)
    if not state.manifest.needed:
        return
    if not yes:
        if not trust.stdin_interactive():
            raise SystemExit(_fail("not trusted: answer on a terminal, or run `moss trust --yes` to trust "
                                   "what is shown", code=3))
        if not trust.ask(out, "Trust this content and let moss use it?"):
            click.echo("not trusted: moss @NAME keeps running with built-in scripts and your own config")
            raise SystemExit(1)
    path = trust.grant(root, manifest=state.manifest)
    click.echo(f"trusted {trust.where(root)} ({len(state.manifest.items)} items; recorded in {display_path(path)})")


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


from .runs_cli import runs  # noqa: E402  (moss runs list|show|logs|stop|alert)

cli.add_command(runs)


def _fail(message: str, code: int = 2) -> int:
    from .ui import error

    error(message)
    return code


def main(argv: list[str] | None = None) -> None:
    """The click commands (moss init, view, config, ...); `moss @NAME` is handled in entry.py."""
    from .errors import MossError, exit_status

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cli.main(args=argv, prog_name="moss", standalone_mode=True)
    except MossError as e:
        raise SystemExit(_fail(e.message, code=exit_status(e.kind)))
