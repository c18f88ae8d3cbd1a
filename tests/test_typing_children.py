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
from screen import Terminal, python_on_a_terminal

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


PANEL_FIRST = """
import sys, threading, time
from moss import ui
from rich.live import Live

area = ui.input_open(lambda line: None)
panel = Live("agents v1", console=ui.console(), refresh_per_second=4, transient=True, redirect_stdout=False)
panel.start()  # the panel redirects stderr before the input area has taken the terminal's streams
threading.Thread(target=ui.input_run, args=(area,), daemon=True).start()
area.taken.wait(10)
while not (area.app and area.app.is_running):
    time.sleep(0.01)
print("a line above", file=sys.stderr)
panel.update("agents v2", refresh=True)
time.sleep(0.5)  # not an ordering: the window in which a runaway would redraw hundreds of times
panel.stop()
ui.input_stop()
print("the end", file=sys.stderr)
"""


def test_a_panel_up_before_the_input_area_is_drawn_a_few_times_not_in_a_loop(tmp_path):
    """A child spawned in the first moments of a session puts its panel up before the input
    area has taken the terminal's streams (the panel normally waits for it: ui.input_settled,
    but not forever). The area then wraps the terminal, not the panel's redirect: before, each
    redraw of the one wrote through the other, hundreds of times a second, the screen was
    never still and the session made no progress (seen when agents started faster)."""
    t = python_on_a_terminal(tmp_path, "panel_first.py", PANEL_FIRST)
    shown = "\n".join(t.everything())
    assert "a line above" in shown and "the end" in shown
    redraws = t.raw.count("\x1b[?2004l")  # each time prompt_toolkit steps aside to write above the area
    assert redraws < 20, f"the area stepped aside {redraws} times"
