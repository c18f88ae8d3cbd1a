"""`moss @NAME ARGS...`: find the script, build its runtime, run it, map the outcome to an exit status.

A script is either plain top-level code, or returns a table
`{ help = "text" | function, main = function(args) ... end }`; `main`'s return value
(an integer, true/false or nil) becomes the exit status.
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import api, trust as trust_mod, ui
from .context import Context, find_project_root
from .errors import MossError
from .roots import ScriptRoots
from .runtime import DEFAULT_MEMORY_MB, LuaScriptError, Runtime

from .errors import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, exit_status
from .hostoptions import HOST_OPTIONS_HELP, split_host_options


def build(name: str, args: list[str], options: dict | None = None, root: Path | None = None,
          trust: trust_mod.Trust | None = None) -> tuple[Context, Runtime]:
    """Context + runtime for one script run (also used by tests and spawned agents).

    An untrusted project (see host/trust/) gets no project script root and only the
    parts of its config that need no trust; `trust` is the decision, made here without
    asking when not given."""
    root = root or find_project_root()
    options = dict(options or {})
    if trust is None:
        trust = trust_mod.evaluate(root, vouched=bool(options.get("trust")))
    cfg = trust.config
    ctx = Context(root=root, config=cfg, options=options, args=list(args), script=name,
                  user_config=trust.user_config, trust=trust)
    memory_mb = _memory_mb(options, cfg)
    roots = ScriptRoots(root, project=trust.trusted, pins=trust.manifest.pins)
    rt = Runtime(roots, api.functions(ctx), memory_mb=int(memory_mb))
    ctx.runtime = rt
    rt.on_project_override = ctx.project_override  # [trust] max_access then holds (host/api/access.py)
    rt.set("args", list(args))
    rt.set("root", str(root))
    rt.set("config", cfg)
    rt.set("trust", trust.lua_value())
    rt.set("options", options)
    rt.set("script", name)
    from . import __version__

    rt.set("version", __version__)
    seed = options.get("seed")
    if seed is None and (options.get("provider") in ("replay", "script") or options.get("replay")
                         or options.get("script") or options.get("record")):
        seed = 0  # recording and replaying need deterministic scripts (working-memory ids)
    if seed is not None:
        rt.execute(f"math.randomseed({int(seed)})", "=(seed)")
    return ctx, rt


def build_child(parent: Context, child, parent_llm) -> tuple[Context, Runtime]:
    """Context + runtime of a child agent (host/api/agents.py), in the child's own thread:
    the parent's project, config, trust and script roots; its own session id, access cap,
    log and Lua state; the tree's registry, budget and SDK clients; the parent's tree to work
    in, or its own copy when it is isolated."""
    options = {k: v for k, v in parent.options.items() if k not in ("record", "entry")}  # one recorder per tree
    script = child.spec.get("script") or "agent"
    # an isolated child works in its own copy, which its sandbox shows where the project is
    wt = getattr(child, "worktree", None)
    ctx = Context(root=parent.root, config=parent.config, options=options, args=[], script=script,
                  env=parent.env, user_config=parent.user_config, trust=parent.trust,
                  workdir=wt.tree if wt is not None else parent.workdir,
                  bind_as=(parent.bind_as or parent.workdir) if wt is not None else parent.bind_as)
    ctx.session_id = child.id
    ctx.parent_id = parent.session_id
    ctx.tree = parent.tree
    ctx.max_access = child.spec.get("max_access")
    ctx.role = child.spec.get("role") or ""
    ctx.child = child
    ctx.parent_llm = parent_llm
    prt = parent.runtime
    rt = Runtime(prt.roots, api.functions(ctx), memory_mb=prt.memory_mb)
    ctx.runtime = rt
    ctx.project_code = parent.project_code  # the parent's project code chose this child
    rt.on_project_override = ctx.project_override
    rt.set("args", [])
    rt.set("root", str(ctx.root))
    rt.set("config", ctx.config)
    rt.set("trust", ctx.trust.lua_value() if ctx.trust is not None else {})
    rt.set("options", options)
    rt.set("script", script)
    from . import __version__

    rt.set("version", __version__)
    seed = options.get("seed")
    if seed is None and (options.get("provider") in ("replay", "script") or options.get("replay")
                         or options.get("script") or parent.options.get("record")):
        seed = 0
    if seed is not None:
        n = int(child.id.rpartition("-")[2] or 0)
        rt.execute(f"math.randomseed({int(seed) + n})", "=(seed)")
    return ctx, rt


def _memory_mb(options: dict, cfg: dict) -> int:
    lua_cfg = cfg.get("lua", {})
    if not isinstance(lua_cfg, dict):
        raise MossError("[lua] in the config must be a table, e.g. [lua] max_memory_mb = 256", kind="config")
    value = options.get("memory_mb")
    source = "--memory-mb"
    if value is None:
        value, source = lua_cfg.get("max_memory_mb", DEFAULT_MEMORY_MB), "[lua] max_memory_mb"
    if isinstance(value, bool) or not isinstance(value, int) or value < 4:
        raise MossError(f"{source} must be a whole number of MiB (4 or more), got {value!r}", kind="config")
    return value


def run_script(name: str, words: list[str]) -> int:
    status = _run_script(name, words)
    return ui.EXIT_PIPE if ui.pipe_was_closed() else status  # `| head` stopped reading: end quietly


def _run_script(name: str, words: list[str]) -> int:
    try:
        ready = _prepare(name, words)
    except KeyboardInterrupt:
        ui.console().print("[yellow]interrupted[/]")
        return EXIT_INTERRUPTED
    except MossError as e:
        ui.error(e.message)
        return exit_status(e.kind)
    options, args, ctx, rt, (path, shown, origin) = ready
    module = None
    try:
        with rt.sigint_cancels():
            chunk = rt.load_file(path, shown, origin)
            module = rt.call(chunk, *args)
            return _call_entry(rt, module, args, options, shown)
    except LuaScriptError as e:
        if e.kind == "interrupted":
            return _interrupted(ctx)
        return _report(e, options)
    except KeyboardInterrupt:
        return _interrupted(ctx)
    except MossError as e:  # an entry the script does not provide
        ui.error(e.message)
        return exit_status(e.kind)
    finally:
        _wind_up(ctx, rt, module, shown)


def _prepare(name: str, words: list[str]) -> tuple:
    """The host's options and the script's words, its context and runtime (trust decided, asked
    inline when a person is there) and where the script is: (options, args, ctx, rt, (path,
    shown, origin)). MossError "usage" when the script may not run here."""
    options, args = split_host_options(words)
    root = find_project_root()
    state = trust_mod.evaluate(root, vouched=bool(options.get("trust")))
    if not state.trusted and trust_mod.stdin_interactive():
        state = _ask_trust(state)
    ctx, rt = build(name, args, options, root=root, trust=state)
    if state.ignored:  # (rich is imported only to say something)
        trust_mod.notice(state, ui.console())
    if not state.trusted and ScriptRoots(root).origin_of(name) == "project" \
            and rt.roots.origin_of(name) is None:
        raise MossError(f"@{name} exists only in this project's .moss/scripts/, and this project is not "
                        f"trusted: review and trust it with `moss trust`, or pass --trust to trust it for "
                        f"this run", kind="usage")
    return options, args, ctx, rt, rt.roots.locate(name, what="script")


def _call_entry(rt, module, args: list[str], options: dict, shown: str) -> int:
    """Call what the script returned: the entry --entry names (host/entries.py), else its
    `main` (its `help` for -h/--help before a --), else the chunk's value is the result."""
    entry = options.get("entry")
    if entry is not None:  # a declared entry point (host/entries.py), not main
        from .entries import find

        return _exit_status(_plain(rt, rt.call(find(module, entry, shown), args)))
    result = module
    main = _field(rt, result, "main")
    if main is not None:
        flags = args[: args.index("--")] if "--" in args else args  # after --, words are data
        if any(a in ("-h", "--help") for a in flags):
            help_ = _field(rt, result, "help")
            if help_ is not None:
                text = rt.call(help_) if _is_function(help_) else help_
                sys.stdout.write(rt.to_py(text).rstrip("\n") + "\n\n" + HOST_OPTIONS_HELP + "\n")
                return EXIT_OK
        result = rt.call(main, args)
    return _exit_status(rt.to_py(result) if not _is_lua(result) else None)


def _wind_up(ctx, rt, module, shown: str) -> None:
    """After the script, however it ended: its child agents stopped (resumable), its sessions
    settled, its services closed."""
    tree = ctx.tree
    if tree is not None:  # children of an interrupted or finished root stop (resumable)
        tree.close(grace=2.0 if rt.cancelled else 5.0)
    _settle_sessions(ctx, module, shown)
    services = ctx.services
    for svc in list(services.values()):
        close = getattr(svc, "close", None)
        if close:
            try:
                close()
            except Exception:
                pass


def _ask_trust(state: trust_mod.Trust) -> trust_mod.Trust:
    """The inline trust question of an interactive first run (or after the content changed)."""
    console = ui.console()
    trust_mod.render(state, console)
    if not trust_mod.ask(console, "Trust this project's .moss/ content and use it?"):
        return state
    trust_mod.grant(state.root, manifest=state.manifest)
    new = trust_mod.evaluate(state.root)  # the content may have changed while we asked
    if new.trusted:
        new.how = "answered yes"
    return new


def _settle_sessions(ctx, module=None, shown: str = "") -> None:
    """The sessions this process ran whose script could not close them (an interrupt trips
    every further Lua instruction): the script's optional `interrupted` entry is called once
    with their ids (what it records is the script's business: the agent marks their
    checkpoints), then their running markers go, so no listing calls them running."""
    from . import sessions

    try:
        ids = [row["id"] for row in sessions.running(ctx.root, mine=True)]
    except (OSError, MossError):
        ids = []
    if ctx.interrupted:
        if ctx.session_id and ctx.session_id not in ids:
            ids.insert(0, ctx.session_id)
        after_interrupt(ctx.runtime, module, {"ids": ids, "cancelled": False}, shown)
    for sid in ids:
        sessions.mark_stopped(ctx.root, sid)


INTERRUPT_GRACE = 5.0  # seconds an `interrupted` entry may run


def after_interrupt(rt, module, info: dict, shown: str = ""):
    """Call the script's `interrupted` entry (if it has one) after an interrupt, with
    cancellation held off for at most INTERRUPT_GRACE seconds; what it returns, or None.
    Whatever goes wrong there is said on stderr and the run ends as interrupted anyway."""
    if rt is None or module is None:
        return None
    from .entries import find

    try:
        fn = find(module, "interrupted", shown, required=False)
        if fn is None:
            return None
        return _plain(rt, rt.call_after_interrupt(fn, info, timeout=INTERRUPT_GRACE))
    except (LuaScriptError, MossError) as e:
        ui.error(f"{shown or 'the script'}: its interrupted entry failed: {e.message}")
    except BaseException as e:  # a second Ctrl-C, a host bug: the run is over anyway
        ui.error(f"{shown or 'the script'}: its interrupted entry failed: {type(e).__name__}: {e}")
    return None


def _plain(rt, value):
    """A Lua value as plain data (tables converted), functions as None."""
    from lupa import lua54

    if lua54.lua_type(value) == "function":
        return None
    return rt.to_py(value)


def _interrupted(ctx) -> int:
    ctx.interrupted = True
    msg = "interrupted"
    if ctx.session_id:
        # a host event: the process was interrupted (how the session ends is its script's to say)
        ctx.log("interrupt", {"by": "signal"})
        msg += f" (session {ctx.session_id} keeps its last checkpoint)"
        if ctx.resume:  # as the script said when it bound the session
            msg += f"; go on with: {ctx.resume}"
    ui.console().print(f"[yellow]{ui.escape(ui.sanitize(msg))}[/]")
    return EXIT_INTERRUPTED


def _report(e: LuaScriptError, options: dict) -> int:
    """An error that ended the script, for the person: one raised on purpose (moss.error)
    as its sentence alone; anything else (a bug, a primitive's error the script left uncaught)
    with the file:line it came from and, unless it is the person's to fix (exit 2), the Lua
    traceback. --verbose shows both for every error."""
    verbose = bool(options.get("verbose"))
    if e.on_purpose and not verbose:
        ui.error(e.sentence)
        return exit_status(e.kind)
    ui.error(e.message)
    if e.trace and e.kind not in ("memory", "timeout") and (verbose or exit_status(e.kind) == EXIT_FAIL):
        ui.console().print(ui.escape(e.trace), style="dim", markup=False)
    return exit_status(e.kind)


def _is_lua(value) -> bool:
    from lupa import lua54

    return lua54.lua_type(value) in ("table", "function")


def _is_function(value) -> bool:
    from lupa import lua54

    return lua54.lua_type(value) == "function"


def _field(rt, value, key):
    from lupa import lua54

    if lua54.lua_type(value) != "table":
        return None
    return value[key.encode()]


def _exit_status(value) -> int:
    if value is None or value is True:
        return EXIT_OK
    if value is False:
        return EXIT_FAIL
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= 255:
        return value
    ui.error(f"the script's main returned {value!r}; an exit status is a whole number 0-255 (or true/false/nil)")
    return EXIT_FAIL

