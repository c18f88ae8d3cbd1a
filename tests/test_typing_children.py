"""Typing to the agent while its child agents work, on a real terminal.

With `--spawn` the parent starts a child and awaits it; while the child runs, the terminal shows
the child agents' panel (a table titled "agents" with each child's id, role and state) instead of
the status line. The input area must work there too: the line typed stays whole on the line
with the cursor, Enter is acknowledged at once, and the message reaches the parent's next turn.

The child is held at a gate (its model call does not return until the test opens it), so the
panel is up for as long as the test needs, without a sleep to order anything.
"""

from __future__ import annotations

import re
import sys
import threading

import pytest
from fakeapi import last_user_text, slow, state_of
from screen import Terminal

ACK_WITHIN = 0.3  # seconds from Enter to "got it" on the screen, as in tests/test_typing.py
CHILD_TASK = "count the functions in calc.py"


def task_of(body) -> str:
    m = re.search(r"\*\*Task:\*\* (.*)", last_user_text(body))
    return m.group(1).strip() if m else ""


def family(gate: threading.Event, parent_turns: list):
    """The parent spawns one explorer child, awaits it and answers with its count; the child's
    first call waits for `gate`, then it views calc.py and answers. The inbox classifier says
    the message is related. Every parent request is kept in `parent_turns`."""
    def reply(body):
        if state_of(body) == "inbox":
            return "RELATED"
        user = last_user_text(body)
        if task_of(body) == CHILD_TASK:
            gate.wait(60)
            funcs = set(re.findall(r"\bf(\d+)\(", user))
            return slow(f"$(answer {len(funcs)} functions)") if funcs else "$(view calc.py)"
        parent_turns.append(body)
        m = re.search(r"answer:\s*(\d+) functions", user)
        if m:
            return f"$(answer the child found {m.group(1)})"
        if "started child agent" in user:
            return "$(await)"
        return f'$(spawn explorer "{CHILD_TASK}")'
    return reply


def input_line(t: Terminal) -> str:
    with t.changed:
        return t.screen[t.screen_.y]


@pytest.mark.slow
def test_a_line_typed_while_a_child_agent_runs_is_acknowledged_and_reaches_the_parent(project, api):
    project.write("calc.py", "\n\n".join(f"def f{i}():\n    return {i}" for i in (1, 2, 3)) + "\n")
    gate, parent_turns = threading.Event(), []
    api.push(*[family(gate, parent_turns)] * 30)
    env = {k: v for k, v in project.env.items() if k not in ("NO_COLOR", "COLUMNS")}
    env.update(api.env())
    project.trust()
    argv = [sys.executable, "-m", "moss", "@agent", "--spawn", "--provider", "anthropic", "--v1",
            "how many functions does calc.py define?"]
    try:
        with Terminal(argv, cwd=project.root, env=env) as t:
            # the child is running (held at the gate): the panel names it
            t.wait(lambda: t.shows("agents") and t.shows("explorer"), 60, "the child agents' panel")
            said = "only count top-level functions"
            for i in range(len(said)):
                t.type(said[i])
                want = "› " + said[: i + 1]
                t.wait(lambda want=want: input_line(t) == want.rstrip(), 5, f"{want!r} on the input line")
            assert t.shows("explorer")  # the panel is still up while the line is typed
            with t.changed:
                seen = len(t.log)
            import time

            pressed = time.monotonic()
            t.type("\r")
            t.wait(lambda: t.shows(f"› got it: {said}"), 5, "the acknowledgement")
            so_far, acked = "", None
            for ts, chunk in t.log[seen:]:
                so_far += chunk
                if f"got it: {said}" in so_far:
                    acked = ts - pressed
                    break
            assert acked is not None and acked < ACK_WITHIN
            gate.set()
            assert t.proc.wait(120) == 0, "\n".join(t.everything())
            out = t.proc.stdout.read().decode()
            assert out == "the child found 3\n", (out, "\n".join(t.everything()), [last_user_text(b)[-300:] for b in parent_turns])
    finally:
        gate.set()
    shown = "\n".join(t.everything())
    assert "RELATED" not in t.raw and "RELATED" not in shown
    # the message reached the parent: a turn after the acknowledgement carries it
    assert any(said in last_user_text(b) for b in parent_turns[1:]), [last_user_text(b) for b in parent_turns]
