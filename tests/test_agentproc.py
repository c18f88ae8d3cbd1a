"""host/agentproc.py: the one place moss starts an agent as a process of its own, reads its
stream-json events as host/api/events.lua declares them, and stops it; and the executors'
registries (host/tools/registry.py), whose entries are imported when first chosen.

The agents themselves run in the eval, batch, MCP and board stories (tests/test_eval.py,
test_batch.py, test_mcp.py, test_board.py); here are what those cannot show cheaply: how a
line that does not match its declaration is read, that an agent deaf to SIGINT is killed after
its grace either way a caller waits, and that nothing else in host/ starts one.
"""

from __future__ import annotations

import ast
import json
import re
import signal
import subprocess
import sys

from conftest import REPO

from moss import agentproc


def test_every_documented_event_reads_as_itself():
    """Each example line of docs/events.md (one per stream-json event) comes out of the
    reader unchanged: the types it reads with accept all that the schema does."""
    examples = re.findall(r"^(\{\"type\".*\})$", (REPO / "docs" / "events.md").read_text(), re.M)
    assert len(examples) >= 15
    for line in examples:
        assert agentproc.parse(line.encode()) == json.loads(line), line


def test_a_line_is_read_as_its_declaration_types_it():
    """What does not fit the declaration is left out, never handed on as something else: a
    field of the wrong type (here `success` as a string, a step that is no object) is
    dropped, an integral float for an integer is the integer, Lua's empty table `[]` for an
    object is `{}`; a field events.lua does not name is kept as it came. A line that is no
    JSON object, or whose type events.lua does not declare, is no event at all."""
    line = json.dumps({"type": "result", "answer": None, "success": "yes", "reason": "answered", "turns": 3.0,
                       "usage": [], "steps": [{"role": "explorer", "reason": "answered", "turns": 2}, "x"],
                       "validation": {"passed": True, "exit": 1.5}, "novel": {"kept": 1}})
    assert agentproc.parse(line) == {
        "type": "result", "answer": None, "reason": "answered", "turns": 3, "usage": {},
        "steps": [{"role": "explorer", "reason": "answered", "turns": 2}], "validation": {"passed": True},
        "novel": {"kept": 1}}
    assert agentproc.parse('{"type": "input_received", "class": "stop", "action": "halt", "turn": true}') == \
        {"type": "input_received", "class": "stop"}
    assert agentproc.parse('{"type": "session_start", "schema": 2}') == {"type": "session_start"}
    for line in ('{"type": "no_such_event", "turn": 1}', '{"turn": 1}', '[{"type": "turn"}]', "not json", "",
                 b"\xff\xfe", "[" * 100_000):
        assert agentproc.parse(line) is None, line


DEAF = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); print('ready', flush=True); signal.pause()"


def _deaf() -> agentproc.AgentProcess:
    """A process that ignores SIGINT (an agent stuck where Ctrl-C cannot reach), ready."""
    proc = subprocess.Popen([sys.executable, "-c", DEAF], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    return agentproc.AgentProcess(proc)


def test_an_agent_deaf_to_sigint_is_killed_after_its_grace_whether_the_caller_waits_or_not():
    """The MCP server waits for a cancelled agent (block); an eval stopping its attempts
    cannot (a timer kills it). Either way one that SIGINT does not end is killed, the signal
    to its whole group."""
    waited = _deaf()
    waited.interrupt(kill_after=0.2, block=True)
    assert waited.poll() == -signal.SIGKILL
    timed = _deaf()
    timed.interrupt(group=False, kill_after=0.2)
    assert timed.wait(timeout=30) == -signal.SIGKILL
    timed.interrupt(kill_after=0.2)  # one that has ended is left alone
    for agent in (waited, timed):
        agent.close()


def test_agent_processes_are_started_in_one_place():
    """Only host/agentproc.py makes the command line of a moss process to start (an agent,
    its entries, the board's `moss eval compare`): nothing else in host/ calls moss_command."""
    callers = []
    for path in sorted((REPO / "host").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", None))
                if name == "moss_command":
                    callers.append(path.relative_to(REPO).as_posix())
    assert set(callers) == {"host/agentproc.py"}, callers


PROBE = """
import json, sys
from moss.eval import executors as attempts, session  # noqa: F401 - what `moss eval` imports
from moss.tools import runs  # noqa: F401
from moss.tools.runs import executors as run_executors
named = ("moss.eval.ray_executor", "moss.tools.runs.executors.ray")
before = [m in sys.modules for m in named]
chosen = [attempts.executor("ray").__name__, run_executors.executor("ray").__name__]
print(json.dumps([before, [m in sys.modules for m in named], chosen, attempts.names(), run_executors.names()]))
"""


def test_an_executor_is_imported_when_it_is_first_chosen():
    """Neither registry is filled by importing its executors: the Ray ones are listed by name,
    and their modules are imported only when `--executor ray` / `executor = "ray"` chooses one."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [[False, False], [True, True], ["RayAttempts", "RayExecutor"],
                                      ["local", "ray"], ["local", "ray"]]
