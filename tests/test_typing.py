"""Typing to the agent while it works, on a real terminal.

moss runs with stdin and stderr on a pseudo-terminal (tests/screen.py reads what it draws, as
a terminal would show it, and answers its cursor-position questions) and stdout on a pipe,
against the fake API server. What a person at that terminal must see: the line they type stays
whole at the bottom while the status line above it redraws; Enter is acknowledged at once (the
reading of the message comes afterwards); nothing moss asks the model about the message (the
classifier's one-word reply) reaches the screen; `pause` cuts the reply being streamed (the
server sees the client hang up) and `go on` runs the turn once more, once.
"""

from __future__ import annotations

import json
import sys
import time

import pytest
from fakeapi import last_user_text, slow, state_of
from screen import Terminal, python_on_a_terminal

SPINNER = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")  # rich's "dots", which the status line shows
ACK_WITHIN = 0.3  # seconds from Enter to "got it" on the screen
N_WORDS = 300
WORDS = " ".join(f"word{i}" for i in range(N_WORDS))  # a reply that streams for a while


def start(project, api, task="how is this project built?", *args) -> Terminal:
    env = {k: v for k, v in project.env.items() if k not in ("NO_COLOR", "COLUMNS")}
    env.update(api.env())
    project.trust()
    return Terminal([sys.executable, "-m", "moss", "@agent", "--provider", "anthropic", "--v1", *args, task],
                    cwd=project.root, env=env)


def agent_requests(api) -> list:
    return [r for r in api.requests if state_of(r.body) == "agent"]


def input_line(t: Terminal) -> str:
    """The line of the screen where the text is typed: the one with the cursor."""
    with t.changed:
        return t.screen[t.screen_.y]


def type_slowly(t: Terminal, text: str) -> None:
    """Type `text` a key at a time, each key once the screen shows the one before."""
    for i in range(len(text)):
        t.type(text[i])
        want = ("› " + text[: i + 1]).rstrip()
        t.wait(lambda want=want: input_line(t) == want, 5, f"{want!r} on the input line")


def status_line(t: Terminal) -> str:
    rows = [ln for ln in t.screen if ln[:1] in SPINNER]
    return rows[-1] if rows else ""


def enter_and_time_the_ack(t: Terminal, text: str) -> float:
    """Press Enter; the seconds until the pty carried the acknowledgement of `text`."""
    with t.changed:
        seen = len(t.log)
    pressed = time.monotonic()
    t.type("\r")
    t.wait(lambda: t.shows(f"› got it: {text}"), 5, "the acknowledgement")
    so_far = ""
    for ts, chunk in t.log[seen:]:
        so_far += chunk
        if f"got it: {text}" in so_far:
            return ts - pressed
    raise AssertionError("the acknowledgement is on the screen but not in what was read")


def model(api, turns, classified="RELATED"):
    """Replies by label: the classifier answers `classified` (slowly: the acknowledgement must
    not wait for it), agent turns answer in order from `turns`."""
    def reply(body):
        if state_of(body) == "inbox":
            return slow(classified, delay=1.5)
        n = len(agent_requests(api))
        r = turns[min(n, len(turns)) - 1]
        return r(body) if callable(r) else r
    return [reply] * 12


@pytest.mark.slow
def test_a_line_typed_while_the_reply_streams_stays_whole_and_is_acknowledged_at_once(project, api):
    api.push(*model(api, [slow(WORDS + "\n$(view .)", delay=0.2, chunk_delay=0.08), "$(answer built with make)"]))
    with start(project, api) as t:
        t.wait(lambda: api.deltas >= 3 and status_line(t), 30, "the reply streaming under a status line")
        said = "the build script is make.sh"
        type_slowly(t, said)
        # the status line goes on redrawing (its token count grows) and the typed text stays whole
        before = status_line(t)
        t.wait(lambda: status_line(t) and status_line(t) != before, 5, "a redraw of the status line")
        assert input_line(t) == "› " + said, t.screen
        row = t.screen_.y
        assert t.screen[row - 1][:1] in SPINNER  # the status line right above what is typed
        assert len(agent_requests(api)) == 1 and api.deltas < N_WORDS  # all this while the reply streamed

        assert enter_and_time_the_ack(t, said) < ACK_WITHIN
        t.wait(lambda: input_line(t) == "›", 2, "the input area empty again: the line was taken")
        assert api.deltas < N_WORDS  # taken while the reply still streamed; the rest need not crawl
        api.hurry()
        # classified afterwards, in words a person reads; never the classifier's own reply
        t.wait(lambda: t.shows("↳ noted for the task"), 20, "what the message was read as")
        assert t.proc.wait(60) == 0
        assert t.proc.stdout.read().decode() == "built with make\n"
    t.wait(lambda: t.closed, 10, "the end of output")
    shown = "\n".join(t.everything())
    assert "RELATED" not in t.raw and "RELATED" not in shown
    assert f"› got it: {said}" in shown and "↳ noted for the task" in shown
    assert not SPINNER & set(shown), shown  # no frozen status line left behind
    assert said in last_user_text(agent_requests(api)[1].body)


def test_a_line_typed_while_a_command_runs_is_kept_and_acknowledged_at_once(project, api):
    api.push(*model(api, ["$(run sleep 6)", "$(answer built with make)"]))
    with start(project, api) as t:
        # the first reply is in, the second turn not yet asked: the command is running
        t.wait(lambda: len(api.completed) == 1 and input_line(t) == "›", 30, "the command to start, the input area up")
        said = "also look at the Makefile"
        type_slowly(t, said)
        assert input_line(t) == "› " + said
        assert enter_and_time_the_ack(t, said) < ACK_WITHIN
        assert len(agent_requests(api)) == 1  # acknowledged while the command still ran
        t.wait(lambda: t.shows("↳ noted for the task"), 20, "what the message was read as")
        assert t.proc.wait(60) == 0, "\n".join(t.everything())
    t.wait(lambda: t.closed, 10, "the end of output")
    shown = "\n".join(t.everything())
    assert "RELATED" not in t.raw and "RELATED" not in shown
    assert "✓ run sleep 6" in shown, shown  # the command ran to its end meanwhile
    assert said in last_user_text(agent_requests(api)[1].body)


def test_pause_cancels_the_streamed_reply_and_go_on_runs_the_turn_once(project, api):
    api.push(*model(api, [slow(WORDS + "\n$(answer never seen)", delay=0.2, chunk_delay=0.1),
                          "$(answer built with make)"]))
    with start(project, api) as t:
        t.wait(lambda: api.deltas >= 3 and status_line(t), 30, "the reply streaming")
        t.type("pause")
        t.wait(lambda: input_line(t) == "› pause", 5, "pause typed")
        assert enter_and_time_the_ack(t, "pause") < ACK_WITHIN
        t.wait(lambda: t.shows("paused: type 'go on'"), 10, "the pause")
        # the reply being streamed was cancelled: the client hung up on the server
        t.wait(lambda: len(api.disconnected) == 1, 10, "the server to see the disconnect")
        streamed = api.deltas
        assert streamed < N_WORDS and not api.completed
        assert len(agent_requests(api)) == 1 and t.proc.poll() is None  # it waits for the user
        t.type("go on\r")
        assert t.proc.wait(60) == 0, "\n".join(t.everything())
        assert t.proc.stdout.read().decode() == "built with make\n"
    # the turn ran once: one request cut off, one answered; nothing of the cut reply was kept
    first, second = agent_requests(api)
    assert api.disconnected == [first] and api.completed == [second]
    assert "word1 " not in json.dumps(second.body)
    ckpt = next((project.root / ".moss" / "agent").glob("session-*.json"))
    saved = json.loads(ckpt.read_text())
    assert saved["turn"] == 1 and saved["reason"] == "answered"
    assert "never seen" not in "\n".join(t.everything())
    # billed once: the cut reply counts what was generated before the hang-up, and no more
    log = [json.loads(ln) for ln in (ckpt.parent / "logs" / f"{saved['id']}.jsonl").read_text().splitlines()]
    [cut] = [e for e in log if e["event"] == "llm_error" and e["kind"] == "stopped"]
    [answered] = [e for e in log if e["event"] == "llm_response"]
    assert cut["usage"]["output_tokens"] < len(WORDS) // 4 // 2  # far from the whole reply
    assert saved["usage"]["calls"] == 2
    assert saved["usage"]["output_tokens"] == cut["usage"]["output_tokens"] + answered["usage"]["output_tokens"]


def test_ctrl_c_while_typing_stops_moss_and_gives_the_terminal_back(project, api):
    """The input area reads keys itself (the terminal is raw meanwhile): Ctrl-C still stops
    moss at once, exit 130, and the terminal is left echoing lines again, as it was."""
    import termios

    api.push(slow("$(answer never seen)", delay=30))
    with start(project, api) as t:
        t.wait(lambda: len(api.requests) >= 1 and status_line(t), 30, "the model to be asked")
        type_slowly(t, "half a thou")
        t.type("\x03")
        assert t.proc.wait(10) == 130
        mode = termios.tcgetattr(t.master)[3]
        assert mode & termios.ICANON and mode & termios.ECHO
    t.wait(lambda: t.closed, 10, "the end of output")
    assert any(ln.startswith("interrupted") for ln in t.everything())


def test_with_stdout_on_the_same_terminal_the_answer_comes_above_the_input_area_in_order(project, api):
    """The usual run, nothing redirected: the answer (stdout) goes through the same one writer
    as moss's own lines, so it lands whole, after the model's text and before the closing line;
    and it is read once: the model's text shows its $(answer …) set apart, not the answer twice."""
    api.push(slow("Thinking.\n$(answer forty-two is the answer)", delay=1.0))
    env = {k: v for k, v in project.env.items() if k not in ("NO_COLOR", "COLUMNS")}
    env.update(api.env())
    project.trust()
    with Terminal([sys.executable, "-m", "moss", "@agent", "--provider", "anthropic", "--v1", "what?"],
                  cwd=project.root, env=env, stdout_on_pty=True) as t:
        assert t.proc.wait(60) == 0
        t.wait(lambda: t.closed, 10, "the end of output")
    lines = [ln for ln in t.everything() if ln]
    assert lines.count("forty-two is the answer") == 1, lines
    at = lines.index("forty-two is the answer")
    assert lines[at - 2:at] == ["  │ Thinking.", "  │ $(answer …)"] and lines[at + 1].startswith("answered · 1 turn")
    assert sum(ln.count("forty-two") for ln in lines) == 1
    assert not SPINNER & set("".join(lines)) and not any(ln.strip() == "›" for ln in lines)


MARKDOWN_RACE = """
import sys, threading, time
import rich.markdown
from moss import ui

area = ui.input_open(lambda line: None)
render = rich.markdown.Markdown.__init__
def held(self, *a, **k):  # the render waits until the area holds the terminal and is drawn
    area.taken.wait(10)
    while not (area.app and area.app.is_running):
        time.sleep(0.01)
    drawn = threading.Event()  # the area's loop gets to this after its first draw
    area.app.loop.call_soon_threadsafe(drawn.set)
    drawn.wait(10)
    render(self, *a, **k)
rich.markdown.Markdown.__init__ = held
echo = threading.Thread(target=ui.markdown, args=("$(run make)",), kwargs={"gutter": "  │ "})
echo.start()  # it looks at the stream first, then renders (the first render imports rich's markdown)
threading.Thread(target=ui.input_run, args=(area,), daemon=True).start()
echo.join()
ui.input_stop()
"""


def test_a_line_rendered_while_the_input_area_starts_goes_above_it(tmp_path):
    """The command echo is rendered as markdown; the first render is slow (it imports rich's
    markdown), and the input area could take the terminal meanwhile. The echo then went to the
    stream it had looked at before, past the area, into the line being typed ("› also look at
    the Makef  │ $(run sleep 6)"). It is written to the stream as it is when the render ends."""
    t = python_on_a_terminal(tmp_path, "markdown_race.py", MARKDOWN_RACE)
    assert "  │ $(run make)" in t.everything(), t.everything()  # a line of its own, not after "› "
