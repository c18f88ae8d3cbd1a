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

\b
First steps:
  moss doctor                                   what works here, and how to fix what does not
  eval "$(_MOSS_COMPLETE=bash_source moss)"     shell completion of commands and @scripts
                                                (zsh_source, fish_source for those shells)
"""


class MossGroup(click.Group):
    """The command group; its shell completion also offers `@NAME` for every runnable script
    (`moss @NAME` itself is dispatched in entry.py, before click)."""

    def shell_complete(self, ctx, incomplete):
        from click.shell_completion import CompletionItem

        items = [] if incomplete.startswith("@") else super().shell_complete(ctx, incomplete)
        if incomplete in ("", "@") or incomplete.startswith("@"):
            try:
                from .context import find_project_root
                from .roots import ScriptRoots

                scripts = ScriptRoots(find_project_root()).list_scripts()
            except Exception:  # completion must never print a traceback into the shell
                scripts = []
            items += [CompletionItem("@" + s.name, help=s.description) for s in scripts
                      if ("@" + s.name).startswith(incomplete or "@")]
        return items

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except OSError as e:  # before click's own handler, which would exit 1
            from .ui import is_broken_pipe, pipe_closed

            if not is_broken_pipe(e):
                raise
            raise SystemExit(pipe_closed()) from None


@click.group(cls=MossGroup, epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="moss")
def cli():
    """moss: a coding agent whose behaviour is a Lua program you can edit."""


@cli.command()
@click.option("--force", is_flag=True, help="Overwrite an existing .moss/config.toml.")
def init(force):
    """Create .moss/ here: config.toml (commented template), memory/, scripts/, .gitignore."""
    from .trust import kept as trust_kept

    with trust_kept(Path.cwd()):  # moss's own write keeps a trusted project trusted (--force)
        made = _init_files(force)
    for m in made:
        click.echo(f"created {m}")
    if made:
        click.echo("Lua completion: open .moss/scripts in an editor with lua-language-server "
                   "(the .luarc.json there points at moss's type annotations).")


def _init_files(force: bool) -> list[str]:
    from .config import GITIGNORE, template
    from .tools import safefs

    # by descriptor from here, never through a link a cloned repository planted under .moss/
    t = safefs.tree(Path.cwd())
    t.mkdirs(".moss/memory")
    t.mkdirs(".moss/scripts")
    made = []

    def put(rel: str, text: str, replace: bool) -> bool:
        if replace:
            t.write_atomic(rel, text)
            return True
        return t.create_exclusive(rel, text)  # False when anything is there, a dangling link too

    if put(".moss/config.toml", template(), force):
        made.append(".moss/config.toml")
    else:
        click.echo(".moss/config.toml exists; kept it (use --force to overwrite)", err=True)
    if put(".moss/.gitignore", GITIGNORE, force):
        made.append(".moss/.gitignore")
    for name in ("facts.md", "preferences.md", "decisions.md"):
        if put(f".moss/memory/{name}", f"# {name[:-3].capitalize()}\n", False):
            made.append(f".moss/memory/{name}")
    if put(".moss/scripts/.luarc.json", _luarc_json(), force):
        made.append(".moss/scripts/.luarc.json")
    return made


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
@click.option("--status", is_flag=True, help="Trusted, not trusted, changed, or nothing to trust; untrusted, "
                                             "one line for each thing that waits for trust.")
@click.option("--list", "list_", is_flag=True, help="Every project you trusted, with when.")
def trust_cmd(directory, yes, revoke, status, list_):
    """Review what this project's .moss/ adds and decide whether moss may use it.

    \b
    A cloned repository can bring Lua that replaces the agent (.moss/scripts/, links
    followed and hashed), commands (any run/cmd/command and the args/env/cwd they run with,
    [mcp.servers.*] entries), LLM endpoints and key variables ([llm.providers.*] base_url,
    api_key_env) and settings that widen what runs, what is spent or what is kept ([agent]
    role, spawn, max_children, [llm] max_cost_usd, [llm.pricing], [shadow] max_total_mb,
    [agent.wild] detach, ...: the list is PROJECT_RULES in host/trust/rules.py). moss uses none of
    it until you trust that exact content; a value that only narrows yours (a smaller budget,
    spawn = false) needs no trust. Until then `moss @NAME` runs the built-in scripts with your
    own config and says what it ignored. Changed content asks again and shows what changed.

    \b
    moss trust               show what the project adds; ask (on a terminal)
    moss trust --yes         trust it without asking
    moss trust --status      trusted / not trusted (and what waits) / changed (exit 0 only when in use)
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
        click.echo("\n".join(trust.status_lines(state)))
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
    """Print the merged value of KEY (dotted, e.g. agent.max_turns).

    When no config file sets KEY, its default is printed and stderr says it is the default
    (the agent's defaults are Lua: scripts/lib/defaults.lua); exit 1 when it has none."""
    import json

    from . import config as cfg
    from .context import find_project_root

    root = find_project_root()
    data = cfg.load(root)
    try:
        value = cfg.lookup(data, key)
    except KeyError:
        default = _default(root, key)
        if default is None:
            raise SystemExit(_fail(f"{key} is not set, and has no default", code=1)) from None
        value, why = default
        click.echo(f"note: {key} is not set in any config file; {value} is its default ({why})", err=True)
    click.echo(value if isinstance(value, str) else json.dumps(value))


def _default(root, key: str):
    """(value, why) of KEY's default, which is the scripts' policy (scripts/lib/defaults.lua),
    or None."""
    from .run import build
    from .runtime import DEFAULT_MEMORY_MB

    if key == "lua.max_memory_mb":
        return DEFAULT_MEMORY_MB, "MiB per Lua runtime"
    ctx, rt = build("config", [], root=root)
    found = rt.execute('local d = require("lib.defaults"); return { d.get(moss.config, ...) }',
                       "=(config get)", key)
    found = rt.to_py(found)
    return (found[0], found[1] if len(found) > 1 else "") if found else None


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--user", is_flag=True, help="Write ~/.config/moss/config.toml instead of the project file.")
def config_set(key, value, user):
    """Set KEY to VALUE (parsed as TOML when it is one: 3, true, "s", [1, 2])."""
    from . import config as cfg
    from .context import find_project_root
    from .roots import display_path

    from contextlib import nullcontext

    from .trust import kept as trust_kept

    root = find_project_root()
    path = cfg.user_config_file() if user else cfg.project_config_file(root)
    # your own write keeps a trusted project trusted (a write to your user config does not re-trust)
    with nullcontext() if user else trust_kept(root):
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
@click.option("--compact", is_flag=True, help="The form an agent's model is shown (first lines, short docstrings).")
def view(target, depth, compact):
    """Show TARGET: a directory tree, a file skeleton, FILE:A-B lines, or FILE/Symbol.

    \b
    moss view .                    the project tree (.gitignore respected)
    moss view llm.rs               a skeleton; a unique suffix finds the file
    moss view src/main.rs:10-40    numbered lines
    moss view llm.rs/Provider      one symbol's source
    """
    from .context import find_project_root
    from .tools.view import view as _view

    click.echo(_view(find_project_root(), target, depth=depth, max_chars=0, compact=compact))


@cli.command("text-search")
@click.argument("pattern")
@click.option("--only", multiple=True, metavar="GLOB", help="Only files matching GLOB (repeatable).")
@click.option("--limit", type=int, default=100, show_default=True, help="Stop after this many matches.")
@click.option("-i", "--ignore-case", is_flag=True, help="Case-insensitive.")
@click.option("--compact", is_flag=True, help="The form an agent's model is shown (a few hits a file).")
def text_search(pattern, only, limit, ignore_case, compact):
    """Search file contents for PATTERN (a regex), grouped by file, with enclosing symbols."""
    from .context import find_project_root
    from .tools.search import search

    click.echo(search(find_project_root(), pattern, only=list(only) or None, limit=limit,
                      ignore_case=ignore_case, max_chars=0, keep=False,  # one shot: labels kept on disk only
                      compact=compact))


@cli.group("cache")
def cache_group():
    """The structure cache: parsed symbols of files moss has searched or viewed, kept in
    your cache directory ($XDG_CACHE_HOME/moss, default ~/.cache/moss) so the next command,
    session or child agent reads them instead of parsing again. Entries are keyed by the
    file's content; the size is bounded by $MOSS_STRUCTURE_CACHE_MB (default 64)."""


@cache_group.command("path")
def cache_path_cmd():
    """Where the structure cache is, how many entries it holds and their size."""
    from .tools import structcache

    path, n, size = structcache.stats()
    if path is None:
        click.echo("the structure cache is off (MOSS_STRUCTURE_CACHE=off)")
        return
    bound = structcache.max_bytes() / (1024 * 1024)
    click.echo(f"{path}: {n:,} {'entry' if n == 1 else 'entries'}, {size / 1024:,.0f} KiB "
               f"(bound {bound:g} MiB)")


@cache_group.command("clear")
def cache_clear_cmd():
    """Remove every entry of the structure cache."""
    from .tools import structcache

    path, n = structcache.clear()
    if path is None:
        click.echo("the structure cache is off (MOSS_STRUCTURE_CACHE=off)")
        return
    click.echo(f"removed {n:,} {'entry' if n == 1 else 'entries'} from {path}")


@cli.command()
@click.option("--provider", metavar="NAME", help="Check this provider instead of the one moss would pick.")
@click.option("--model", metavar="NAME", help="Check this model.")
@click.option("--base-url", metavar="URL", help="Check this endpoint.")
@click.option("--timeout", type=float, default=5.0, show_default=True, help="Seconds to wait for the provider.")
def doctor(provider, model, base_url, timeout):
    """Check what moss needs, here: one row each, with the command that fixes a failing one.

    \b
    python        the interpreter running moss (3.11 or later)
    lua           lupa's Lua 5.4, which runs every script
    sandbox       bubblewrap, and whether it can build its sandbox on this kernel
                  (the agent's shell commands need it)
    ripgrep       rg, for text search
    tree-sitter   the grammars behind code skeletons
    user config / project config    found, and whether they parse
    llm           the provider and model moss would use (flag, config, key, or a local
                  server found running), and whether it answers: its model list is
                  fetched, no tokens are spent
    project .moss/   trusted or not (`moss trust`)

    A table on a terminal, tab-separated lines (check, status, detail, fix) otherwise.
    Exit status: 0 when `moss @agent "question"` can run here (no row says fail), 1 otherwise.
    """
    from . import doctor as doc
    from .context import find_project_root

    options = {k: v for k, v in (("provider", provider), ("model", model), ("base_url", base_url)) if v}
    table = doc.rows(find_project_root(), options, timeout=timeout)
    doc.render(table, sys.stdout.isatty())
    raise SystemExit(1 if any(r.status == doc.FAIL for r in table) else 0)


@cli.command("say")
@click.argument("words", nargs=-1)
@click.option("--session", "-s", "session_id", metavar="ID", help="The session to tell (default: the latest running).")
@click.option("--stop", "action", flag_value="stop", help="Ask the session to stop (resumable).")
@click.option("--pause", "action", flag_value="pause", help="Ask the session to pause.")
@click.option("--resume", "action", flag_value="resume", help="Let a paused session go on.")
def say(words, session_id, action):
    """Tell a running agent something: moss say "also update the docs".

    \b
    moss say "stop"                        the latest running session stops after this step
    moss say -s k3v9qz2m "use pathlib"     a given session; it sees the message next turn
    moss say --pause                       control messages: --stop, --pause, --resume
    The message lands in the session's inbox (.moss/agent/inbox/ID.jsonl) and is acknowledged
    by the agent at once. A session that is not running is not told (exit 2, naming how it
    ended): resume it with the message instead, moss @agent --resume ID "message"."""
    from . import inbox, sessions
    from .context import find_project_root

    root = find_project_root()
    if not words and not action:
        raise click.UsageError('say what? moss say "message" (or --stop, --pause, --resume)')
    if session_id is None and len(words) > (0 if action else 1) and _looks_like_id(words[0], root):
        session_id, words = words[0], words[1:]
    sid = session_id or sessions.latest_running(root)
    inbox.require_running(root, sid)  # a session that ended would never read it
    if action:
        inbox.post(root, sid, source="say", action=action)
        click.echo(f"asked session {sid} to {action}", err=True)
    else:
        inbox.post(root, sid, " ".join(words), source="say")
        click.echo(f"told session {sid}", err=True)


def _looks_like_id(word: str, root) -> bool:
    """`moss say ID message`: the first word names a saved session."""
    from .sessions import checkpoint_path
    from .storage import ID_RE, lstat

    return bool(ID_RE.match(word)) and lstat(checkpoint_path(root, word)) is not None


@cli.group()
def sessions():
    """Saved agent sessions (.moss/agent/): list them, or show one as a timeline; clean removes the
    copies of the tree that isolated child agents left behind."""


@sessions.command("list")
def sessions_list():
    """A table of saved sessions: id, age, turns, state, reason, task."""
    _run_lua("agent", ["--entry", "sessions", "list"])  # the agent script's `sessions` entry


@sessions.command("show")
@click.argument("session_id")
def sessions_show(session_id):
    """Render one session's log as a timeline: turns, LLM calls, commands, validations."""
    from .storage import check_id

    _run_lua("agent", ["--entry", "sessions", "show", check_id(session_id)])


@sessions.command("clean")
@click.option("--all", "everywhere", is_flag=True, help="Every project's copies, not only this project's.")
def sessions_clean(everywhere):
    """Remove the copies of the tree isolated child agents left behind.

    \b
    A child spawned with isolate = true (or $(spawn --isolated ...)) works in its own copy,
    kept in your cache folder (~/.cache/moss/copies) or the system temp folder until its
    parent merges or discards it. A copy no running moss process works in (its run crashed,
    or ended without merging or discarding it) is removed here; a resumed session can no
    longer merge that child's change afterwards."""
    from .context import find_project_root
    from .tools.worktree import homes

    root = None if everywhere else find_project_root()
    gone = homes.stale(root)
    if not gone:
        click.echo("no copies to remove" + ("" if everywhere else " in this project"), err=True)
        return
    total = 0
    for c in gone:
        freed = homes.remove(Path(c["home"]))
        total += freed
        click.echo(f"removed the copy of {c['child']} ({c.get('project') or '?'}): {freed / 1e6:.1f} MB freed")
    click.echo(f"{len(gone)} cop{'y' if len(gone) == 1 else 'ies'} removed, {total / 1e6:.1f} MB freed", err=True)


@cli.group("memory")
def memory_group():
    """The project's long-term memory, .moss/memory/*.md: list, search, forget, organize.

    \b
    The agent writes memories with $(memorize ...) and starts each session with the ones
    that share words with its task. These commands are the same memory for people; the
    files are plain Markdown you may also edit by hand and keep in git. What they do is
    Lua (scripts/memory.lua; copy it to .moss/scripts/ to change it)."""


@memory_group.command("list")
def memory_list():
    """Every memory: kind, text and file:line (a table on a terminal, tab-separated otherwise)."""
    _run_lua("memory", ["list"])


@memory_group.command("search")
@click.argument("query", nargs=-1, required=True)
@click.option("--limit", type=click.IntRange(1), default=10, show_default=True, help="Show at most this many.")
def memory_search(query, limit):
    """The memories sharing the most words with QUERY, best first (the agent's recall).

    Exit status 1 when none matches."""
    _run_lua("memory", ["search", "--limit", str(limit), "--", *query])


@memory_group.command("forget")
@click.argument("text", nargs=-1, required=True)
@click.option("--yes", "-y", is_flag=True, help="Forget every match without asking.")
def memory_forget(text, yes):
    """Remove the memories containing TEXT (case-insensitive) and say how many.

    More than one match asks first (without a terminal: lists them and exits 3, unless
    --yes). Exit status 1 when nothing matches."""
    _run_lua("memory", ["forget", *(["--yes"] if yes else []), "--", *text])


ORGANIZE_HELP = """Have the LLM merge duplicate memories and group them under headings.

\b
It sees every .moss/memory/*.md file and answers each one's new content; moss shows the
diff (on stdout) and writes only after you say yes, or with --yes. Without a terminal and
without --yes it shows the diff, writes nothing and exits 3. A reply that is cut off, not
in the expected form, or would delete every memory is refused (exit 1). Files the reply
leaves out are kept as they are.

\b
The LLM is chosen as for `moss @agent`; host options pass through, e.g.
  moss memory organize --provider anthropic --model claude-sonnet-5-5 --max-cost 0.05
The prompt and the reading of the reply are Lua: scripts/memory.lua.
"""


@memory_group.command("organize", help=ORGANIZE_HELP,
                      context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--yes", "-y", is_flag=True, help="Write the changes without asking.")
@click.argument("host_options", nargs=-1, type=click.UNPROCESSED)
def memory_organize(yes, host_options):
    from .hostoptions import split_host_options

    _, rest = split_host_options(list(host_options))
    if rest:
        raise SystemExit(_fail(f"moss memory organize: unexpected {' '.join(rest)!r} "
                               f"(it takes --yes and host options such as --provider, --model)"))
    _run_lua("memory", ["organize", *(["--yes"] if yes else []), *host_options])


def _run_lua(name: str, words: list[str]) -> None:
    """What these commands show is the agent's policy: they run its Lua (like @agent does)."""
    from .run import run_script

    raise SystemExit(run_script(name, words))


EVAL_HELP = """Run a suite of tasks across a matrix of cells; say how often the agent succeeded.

\b
  moss eval builtin --variant base= --variant terse=./terse -j 4 --max-cost 2
  moss eval --resume .moss/eval/RUN_ID builtin --variant base= --variant terse=./terse
  moss eval compare A/attempts.jsonl B/attempts.jsonl --fail-if worse
`moss eval --help` lists every option; docs/eval.md says how to write a suite. What an
attempt is and what counts as a pass is Lua: scripts/eval.lua (override it like any script).
"""


@cli.command("eval", help=EVAL_HELP, add_help_option=False,
             context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
def eval_cmd(words):
    _run_lua("eval", list(words))


BATCH_HELP = """Run a list of agent tasks, each in a fresh copy of its repository; collect outcomes and patches.

\b
  moss batch tasks.jsonl -j 4 --max-cost 5 -o results.jsonl
  moss batch tasks.jsonl -o results.jsonl --resume      (go on after a stop or a crash)
  moss batch status results.jsonl [--patch ID]
`moss batch --help` lists every option; docs/batch.md says how to write TASKS. What a
task's outcome is and what the agent is told is Lua: scripts/batch.lua.
"""


@cli.command("batch", help=BATCH_HELP, add_help_option=False,
             context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
def batch_cmd(words):
    _run_lua("batch", list(words))


@cli.group("mcp")
def mcp_group():
    """The Model Context Protocol: moss as an MCP server (`moss mcp serve`).

    moss as an MCP client is configured with [mcp.servers.NAME] (see docs/lua-api.md#mossmcp)."""


MCP_SERVE_HELP = """Serve moss to an MCP client (an IDE, another agent) for the project here.

\b
Tools: run_agent (progress per turn; cancelling interrupts the agent, whose session
stays resumable), resume_session, send_message, list_sessions, show_session, and the
agent's read-only view and text_search, confined to the project. Agents run as child
processes and obey trust like any moss run.

\b
Register it with an MCP client (Claude Desktop, Cursor, VS Code, ... mcpServers):
  {
    "mcpServers": {
      "moss": {
        "command": "moss",
        "args": ["mcp", "serve", "--project", "/path/to/your/project"],
        "env": {"ANTHROPIC_API_KEY": "..."}
      }
    }
  }
Over HTTP instead: `moss mcp serve --http 8765`, then the client's "url" is
http://127.0.0.1:8765/mcp (bound to 127.0.0.1 only; other Host headers are refused).
"""


@mcp_group.command("serve", help=MCP_SERVE_HELP)
@click.option("--http", "http_port", type=click.IntRange(1, 65535), metavar="PORT",
              help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio.")
@click.option("--project", "-C", "project", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The project to serve (default: the one around the current directory).")
def mcp_serve(http_port, project):
    from .context import find_project_root
    from .mcp.server import serve

    serve(find_project_root(project.resolve() if project else None), http_port=http_port)


@cli.command("ui")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port to listen on (0: a free one).")
@click.option("--host", "bind_host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but 127.0.0.1 answers other machines too (a warning says so).")
@click.option("--no-open", is_flag=True, help="Print the URL only; do not open a browser.")
def ui_cmd(port, bind_host, no_open):
    """The board in a browser: sessions (live text, messages, stop), runs and the Wild Loop
    (metrics, alerts), evaluations and batches. Prints its URL, with the token every request needs.

    \b
    Serves the project here on 127.0.0.1 only; a browser is opened when one is available
    (not under CI, not with --no-open). docs/ui.md says what it shows, docs/security.md
    what it refuses."""
    from .board.app import serve
    from .context import find_project_root

    serve(find_project_root(), host=bind_host, port=port, open_browser=not no_open)


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
        raise SystemExit(_fail(e.message, code=exit_status(e.kind))) from None
