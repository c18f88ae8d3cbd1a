"""The kernel (`scripts/lib/machine/`) and its declared contract with the machines it runs.

Two kinds of story. The structural ones read the scripts the way `require` would: the kernel
requires only itself, and the machines that are not the coding agent (the Wild Loop, TCE)
never reach the coding agent's policy in `lib/agent`, directly, through a library, or through
a `$(command)` the kernel loads for them. The behavioural ones run the real CLI against the
fake API server: a hook with a misspelt name or a wrong type stops the session before the
first model call, with a usage error that names it; a machine that does not use the coding
agent is neither offered nor allowed `$(run)`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fakeapi import last_user_text, system_text

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"

REQUIRE = re.compile(r"""\brequire\s*\(?\s*["']([\w.\-]+)["']""")
NEEDS_AGENT = re.compile(r"""^\s*needs\s*=\s*["']agent["']""", re.M)
USES = re.compile(r"^\s*uses\s*=\s*\{([^}]*)\}", re.M)


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(SCRIPTS).with_suffix("").parts)


def modules() -> dict[str, Path]:
    return {module_of(p): p for p in SCRIPTS.rglob("*.lua") if "types" not in p.relative_to(SCRIPTS).parts}


def requires(path: Path) -> set[str]:
    """Every module named in a `require("...")` anywhere in the file (top level or in a
    function: a lazy require is still a way to reach it)."""
    return set(REQUIRE.findall(path.read_text()))


def graph() -> dict[str, set[str]]:
    """Static require edges, plus the one dynamic load: lib.machine.commands loads every file
    under commands/ (moss.scripts.list), except that a command declaring needs = "agent" is
    offered and run only by a machine that `uses` "agent" (lib/machine/commands.lua)."""
    mods = modules()
    g = {m: requires(p) for m, p in mods.items()}
    g["lib.machine.commands"] |= {m for m, p in mods.items()
                                  if m.startswith("commands.") and not NEEDS_AGENT.search(p.read_text())}
    return g


def reach(g: dict[str, set[str]], start: str) -> dict[str, str]:
    """Every module reachable from `start`, each with the module that first required it."""
    seen, todo = {start: ""}, [start]
    while todo:
        m = todo.pop()
        for n in g.get(m, ()):
            if n not in seen:
                seen[n] = m
                todo.append(n)
    return seen


def path_to(seen: dict[str, str], m: str) -> str:
    chain = [m]
    while seen.get(chain[-1]):
        chain.append(seen[chain[-1]])
    return " <- ".join(chain)


def test_the_kernel_requires_only_itself():
    """Every file of lib/machine requires only lib.machine modules: a project can swap the
    coding agent's policy, or run a machine of its own, without the kernel dragging it in."""
    files = sorted((SCRIPTS / "lib/machine").glob("*.lua"))
    assert len(files) >= 10
    for f in files:
        outside = sorted(r for r in requires(f) if not r.startswith("lib.machine."))
        assert outside == [], f"{f.name} requires {outside}"


def test_wild_and_tce_never_reach_the_coding_agent():
    """The Wild Loop and TCE, and their libraries, never reach lib.agent: not directly, not
    through the kernel, and not through a command the kernel loads for them."""
    g = graph()
    starts = ["machines.wild", "machines.tce"] + sorted(
        m for m in modules() if m.startswith("lib.wild.") or m.startswith("lib.tce."))
    assert len(starts) > 10
    for s in starts:
        seen = reach(g, s)
        bad = sorted(m for m in seen if m.startswith("lib.agent"))
        assert bad == [], f"{s} reaches {[path_to(seen, b) for b in bad]}"
    # the machines say so: neither uses "agent", so the kernel offers them no agent command
    for name in ("wild", "tce"):
        m = USES.search((SCRIPTS / f"machines/{name}.lua").read_text())
        assert m and "agent" not in m.group(1), name


def test_every_command_that_reaches_the_agent_declares_it():
    """A $(command) that reaches lib.agent declares needs = "agent" (so only the coding
    agent's machines get it); one that does not, does not need to."""
    g = graph()
    needing = set()
    for m, p in modules().items():
        if not m.startswith("commands."):
            continue
        reaches = any(x.startswith("lib.agent") for x in reach(g, m))
        if reaches:
            assert NEEDS_AGENT.search(p.read_text()), f"{m} reaches lib.agent without needs = \"agent\""
            needing.add(m.split(".", 1)[1])
    assert {"edit", "batch-edit", "run", "spawn", "await"} <= needing


def test_no_machine_vocabulary_in_the_kernel():
    """V2's words (its evaluator, its shared prefix) live with V2 (lib/v2), not in the kernel."""
    hits = [f"{f.name}:{i}" for f in (SCRIPTS / "lib/machine").glob("*.lua")
            for i, line in enumerate(f.read_text().splitlines(), 1) if "evaluator" in line.lower()]
    assert hits == []


def function_lines(src: str, header: str) -> int:
    """Lines of a Lua function from its header line to its closing `end` at column 0."""
    lines = src.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    end = next(i for i in range(start + 1, len(lines)) if lines[i] == "end")
    return end - start + 1


def test_the_runner_loop_reads_in_one_sitting():
    """What one turn does, from the hooks between turns to the next state, and the loop
    that catches a finish: together they fit on a screen (about 60 lines)."""
    src = (SCRIPTS / "lib/machine/runner.lua").read_text()
    total = sum(function_lines(src, h) for h in
                ("function M.run(", "local function turn(", "local function between_turns("))
    assert total <= 65, total
    # one way to finish: the loop catches a finish, nothing else ends the session
    assert src.count("return close(") == 1


# ---- the runner's env, checked --------------------------------------------------------------

def role_with_prepare(project, body: str) -> None:
    """A project role whose `prepare` (called before the runner starts) sets up env."""
    project.write(".moss/scripts/roles/hooked.lua", f"""
        local base = require("roles.explorer")
        return {{ name = "hooked", description = "test role", access = "read-only",
                 commands = {{ "view" }}, prompts = base.prompts,
                 prepare = function(S, env, o) {body} end }}
    """)


def run_agent(project, api, *args):
    return project.moss("@agent", "--provider", "anthropic", "-n", *args, env=api.env(), timeout=90)


def test_a_misspelt_hook_is_a_usage_error_naming_it(project, api):
    """A project's hook with a typo (after_trun) would silently never run; instead the session
    stops before any model call, exit 2, naming the key and the ones that exist."""
    role_with_prepare(project, "env.after_trun = function() return nil end")
    api.push("$(answer fine)")
    r = run_agent(project, api, "--v1", "--role", "hooked", "what is this?")
    assert r.returncode == 2, r.stderr
    assert "env.after_trun" in r.stderr and "after_turn" in r.stderr
    assert api.requests == []


def test_a_hook_of_the_wrong_type_is_a_usage_error_naming_it(project, api):
    """A setting of the wrong type (a string where a whole number goes) is named, with what it
    should be, before the first model call."""
    role_with_prepare(project, 'env.loop_limit = "3"')
    api.push("$(answer fine)")
    r = run_agent(project, api, "--v1", "--role", "hooked", "what is this?")
    assert r.returncode == 2, r.stderr
    assert "env.loop_limit must be an integer" in r.stderr and "string" in r.stderr
    assert api.requests == []


def test_a_key_the_runner_owns_cannot_be_given(project, api):
    """The runner sets env.machine itself; a caller that sets it is told so."""
    role_with_prepare(project, "env.machine = {}")
    r = run_agent(project, api, "--v1", "--role", "hooked", "what is this?")
    assert r.returncode == 2, r.stderr
    assert "env.machine is set by the runner" in r.stderr


def test_a_declared_hook_runs(project, api):
    """A hook from the contract is called: after_turn's reason ends the session with it."""
    role_with_prepare(project, 'env.after_turn = function() return "checkpoint" end')
    api.push("$(view .)")
    r = run_agent(project, api, "--v1", "--role", "hooked", "--output-format", "json", "what is this?")
    out = json.loads(r.stdout)
    assert out["reason"] == "checkpoint" and out["turns"] == 1 and r.returncode == 1, r.stderr


@pytest.mark.parametrize("where", ["handle", "command"])
def test_a_finish_returned_as_data_is_a_usage_error_naming_finish_now(project, api, where):
    """A session ends one way (finish.now). A project machine's handle or a project command
    written for the older shape, returning { finished = ... }, stops with exit 2 naming who
    returned it and the call to make instead, rather than ending the session a second way."""
    if where == "handle":
        project.write(".moss/scripts/machines/oldshape.lua", """
            return { name = "oldshape", start = "agent", max_turns = 3, uses = {},
                     states = { agent = { context = "task_only", concludes = true,
                                          handle = function() return { finished = "checkpoint" } end } } }
        """)
        api.push("any reply")
        args = ("--machine", "oldshape")
    else:
        project.write(".moss/scripts/commands/stophere.lua", """
            return { name = "stophere", help = "stophere — stop", states = { "agent" },
                     run = function() return { finished = "checkpoint" } end }
        """)
        api.push("$(stophere)")
        args = ("--v1",)
    r = run_agent(project, api, *args, "what is this?")
    assert r.returncode == 2, r.stderr
    who = ("machine oldshape, state agent: its handle" if where == "handle"
           else "command stophere (.moss/scripts/commands/stophere.lua)")
    assert f'{who} returned {{ finished = "checkpoint" }}' in r.stderr, r.stderr
    assert 'require("lib.machine.finish").now(reason, answer, extra)' in r.stderr
    # the error ended the session where it stopped, once, as "error": its log and the listing
    # say what stderr said (not "interrupted", as if it could go on as it was)
    [log] = (project.root / ".moss/agent/logs").glob("*.jsonl")
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["reason"] for e in events if e["event"] == "session_end"] == ["error"]
    assert events[-1]["event"] == "session_end"
    listed = project.moss("sessions", "list")
    assert listed.returncode == 0 and "error" in listed.stdout and "interrupted" not in listed.stdout, listed.stdout


# ---- commands that need the coding agent ----------------------------------------------------

def test_a_machine_that_does_not_use_the_agent_never_gets_run(project, api):
    """A project machine built from V1's state but declaring uses = {} (as the Wild Loop and TCE
    do) is not offered $(run) though the role has it, and a $(run) it writes anyway is refused,
    not run. The same machine without `uses` (a machine of the coding agent) still runs it."""
    project.write(".moss/scripts/machines/plain.lua", """
        local v1 = require("machines.v1")
        return { name = "plain", start = "agent", max_turns = 3, uses = {}, states = { agent = v1.states.agent } }
    """)
    project.write(".moss/scripts/machines/agentlike.lua", """
        local v1 = require("machines.v1")
        return { name = "agentlike", start = "agent", max_turns = 3, states = { agent = v1.states.agent } }
    """)
    api.push("$(run touch made-by-run)",
             lambda body: "$(answer refused)" if "not available in this machine" in last_user_text(body)
             else "$(answer ran)")
    r = run_agent(project, api, "--machine", "plain", "make a file")
    assert r.stdout.strip() == "refused", r.stderr
    assert not (project.root / "made-by-run").exists()
    assert "$(run" not in system_text(api.requests[0].body) and "$(view" in system_text(api.requests[0].body)

    api.push("$(run echo hello)",
             lambda body: "$(answer ran)" if "hello" in last_user_text(body) else "$(answer refused)")
    r = run_agent(project, api, "--machine", "agentlike", "say hello")
    assert r.stdout.strip() == "ran", r.stderr
    assert "$(run" in system_text(api.requests[2].body)


# ---- role prompts keyed by machine ----------------------------------------------------------

def test_role_prompts_are_keyed_by_machine_with_a_default(project, api):
    """A role's prompt for a state is looked up under the machine's name first, then under
    `default`: one role speaks differently in a project machine than in v1."""
    project.write(".moss/scripts/roles/keyed.lua", """
        return { name = "keyed", description = "test role", access = "read-only", commands = { "view" },
                 prompts = { default = { agent = "You are THE DEFAULT AGENT." },
                             mine = { agent = "You are MY MACHINE'S AGENT." } } }
    """)
    project.write(".moss/scripts/machines/mine.lua", """
        local v1 = require("machines.v1")
        return { name = "mine", start = "agent", max_turns = 2, states = { agent = v1.states.agent } }
    """)
    api.push("$(answer one)", "$(answer two)")
    r = run_agent(project, api, "--machine", "mine", "--role", "keyed", "q")
    assert r.stdout.strip() == "one", r.stderr
    r = run_agent(project, api, "--v1", "--role", "keyed", "q")
    assert r.stdout.strip() == "two", r.stderr
    assert system_text(api.requests[0].body).startswith("You are MY MACHINE'S AGENT.")
    assert system_text(api.requests[1].body).startswith("You are THE DEFAULT AGENT.")


def test_the_wild_loop_is_not_offered_run_and_does_not_run_it(project, api):
    """The Wild Loop does not use the coding agent: its EXPLORING prompt lists $(view) but not
    $(run) (the explorer role has both), and a $(run) the model writes anyway runs nothing."""
    api.push("$(run touch made-by-run)",
             lambda body: "<promise>COMPLETE</promise> refused" if "not available in this machine"
             in last_user_text(body) else "<promise>COMPLETE</promise> ran")
    r = project.moss("@agent", "--provider", "openai", "--machine", "wild", "-n", "--allow-full", "study it",
                     env=api.env(), timeout=90)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "refused"
    assert not (project.root / "made-by-run").exists()
    prompt = system_text(api.requests[0].body)
    assert "$(view" in prompt and "$(run" not in prompt
