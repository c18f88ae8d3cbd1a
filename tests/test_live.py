"""Talking to a running agent: moss say, a line typed on its terminal, stream-json on stdin.

Each test runs a real `moss @agent` against the fake API server, whose reply to the turn we
talk over is held back (fakeapi.held) until the test releases it: the test speaks to moss while
it waits for that reply, and checks what a user would see: the acknowledgement, the session's
end, and what the model's next request contains. Nothing is timed: "while the model was still
answering" is true because the reply had not been sent yet."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time

from agentmodel import H
from fakeapi import FakeAPI, held, last_user_text, state_of
import forkserver

SOON = 20  # the most seconds a test waits to see moss do something (a limit, never a pause)


def start(project, api, *args, **kw):
    return project.popen("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "stream-json",
                         *args, "how is this project built?", env=api.env(), **kw)


def start_on_a_terminal(project, api, *args):
    """A session whose stdin is a real pty (stdout and stderr piped): (process, the pty's master fd)."""
    master, slave = pty.openpty()
    p = forkserver.popen([sys.executable, "-m", "moss", "@agent", "--provider", "anthropic", "--v1", *args,
                          "how is this project built?"], cwd=project.root, env={**project.env, **api.env()},
                         stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    os.close(slave)
    return p, master


def wait_for_running(project, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = list((project.root / ".moss/agent/running").glob("*.json")) \
            if (project.root / ".moss/agent/running").is_dir() else []
        if running:
            return running[0].stem
        time.sleep(0.05)
    raise AssertionError("the session never started running")


def wait_for_the_model(gate):
    """Until the session's model call reached the fake API and is held there: the user now
    talks over a model that is thinking."""
    assert gate.wait_reached(SOON), "the session never called the model"


def events_of(stdout: str) -> list[dict]:
    return [json.loads(ln) for ln in stdout.splitlines() if ln.startswith("{")]


def say_while_it_waits(project, api, gate, message, until=None, timeout=40):
    """Start a session, tell it `message` with `moss say` while its model's reply (`gate`) is
    held; with `until`, release the reply once moss printed that stream-json event. (process,
    stdout, stderr)"""
    p = start(project, api)
    wait_for_running(project)
    wait_for_the_model(gate)
    said = project.moss("say", message)
    assert said.returncode == 0, said.stderr
    seen = ""
    if until is not None:
        seen = read_until(p.stdout, '{"type": "%s"' % until, SOON)
        assert '{"type": "%s"' % until in seen, seen
        assert gate.held, "the model answered before moss took the message in"
        gate.release()
    out, err = p.communicate(timeout=timeout)
    return p, seen + out, err


def read_until(stream, text, limit):
    """What `stream` (a pipe) printed until `text` appeared, it closed, or `limit` seconds passed."""
    seen, deadline = b"", time.monotonic() + limit
    while time.monotonic() < deadline and text.encode() not in seen:
        ready, _, _ = select.select([stream], [], [], 0.2)
        if ready:
            chunk = os.read(stream.fileno(), 4096)
            if not chunk:
                break
            seen += chunk
    return seen.decode("utf-8", "replace")


def model(replies_by_state):
    """A model that answers by the label of the request: agent turns, inbox classification, asides."""
    turns = {"n": 0}

    def reply(body):
        state = state_of(body)
        if state in replies_by_state:
            r = replies_by_state[state]
            return r(body) if callable(r) else r
        turns["n"] += 1
        return replies_by_state["turns"][min(turns["n"], len(replies_by_state["turns"])) - 1](body)
    return reply


def test_moss_say_stop_ends_the_running_session_at_once_and_it_resumes(project, api):
    gate = held("$(view .)")
    api.push(gate)
    p = start(project, api)
    sid = wait_for_running(project)
    wait_for_the_model(gate)
    said = project.moss("say", "stop")
    assert said.returncode == 0 and sid in said.stderr
    out, err = p.communicate(timeout=30)
    assert gate.held  # the session ended while the model's reply was still held: not waited for
    assert p.returncode == 3, err  # stopped: needs the user, resumable
    ev = events_of(out)
    kinds = [e["type"] for e in ev]
    assert kinds.index("input_received") < kinds.index("result")
    assert ev[kinds.index("input_received")]["class"] == "stop"
    assert ev[-1]["reason"] == "stopped" and ev[-1]["session_id"] == sid
    ckpt = json.loads((project.root / f".moss/agent/session-{sid}.json").read_text())
    assert ckpt["turn"] == 0 and ckpt["reason"] == "stopped"
    assert not (project.root / f".moss/agent/running/{sid}.json").exists()
    with FakeAPI() as api2:
        api2.push("$(answer built with cargo)")
        r = project.moss("@agent", "--provider", "anthropic", "--resume", sid, "-n", "go on", env=api2.env())
    assert r.returncode == 0 and r.stdout.strip() == "built with cargo", r.stderr


def test_moss_say_pause_without_a_terminal_ends_the_session_paused_and_it_resumes(project, api):
    """Nobody at a terminal to say "go on": pause ends the session `paused`, exit 3, not a
    success, with a checkpoint that --resume continues."""
    gate = held("$(view .)")
    api.push(gate)
    p, out, err = say_while_it_waits(project, api, gate, "pause")
    assert p.returncode == 3, err
    result = events_of(out)[-1]
    assert result["reason"] == "paused" and result["success"] is False
    sid = result["session_id"]
    ckpt = json.loads((project.root / f".moss/agent/session-{sid}.json").read_text())
    assert ckpt["reason"] == "paused" and not (project.root / f".moss/agent/running/{sid}.json").exists()
    with FakeAPI() as api2:
        api2.push("$(answer built with cargo)")
        r = project.moss("@agent", "--provider", "anthropic", "--resume", sid, "-n", "go on", env=api2.env())
    assert r.returncode == 0 and r.stdout.strip() == "built with cargo", r.stderr


def test_a_related_message_joins_the_next_request(project, api):
    gate = held("$(view .)")
    api.push(*[model({"inbox": "RELATED", "turns": [lambda b: gate, lambda b: "$(answer ok)"]})] * 4)
    p, out, err = say_while_it_waits(project, api, gate, "the build script is make.sh", until="input_received")
    assert p.returncode == 0, err
    agent_turns = [r.body for r in api.requests if state_of(r.body) == "agent"]
    assert "make.sh" not in last_user_text(agent_turns[0])
    assert "the build script is make.sh" in last_user_text(agent_turns[1])
    received = [e for e in events_of(out) if e["type"] == "input_received"]
    assert received and received[0]["class"] == "related"


def test_in_v2_a_message_said_while_the_evaluator_thinks_reaches_the_explorer_next(project, api):
    """v2's explorer starts from what the evaluator saw (a shared, cached prefix); a task the
    user added to meanwhile must not be hidden behind that reused prefix."""
    gate = held("Not yet.")
    api.push(*[model({"inbox": "RELATED",
                      "explorer": "$(view .)",
                      "evaluator": lambda b: gate if "make.sh" not in last_user_text(b)
                      else "$(answer ok)"})] * 6)
    p = project.popen("@agent", "--provider", "anthropic", "--v2", "-n", "--output-format", "stream-json",
                      "how is this project built?", env=api.env())
    wait_for_running(project)
    wait_for_the_model(gate)  # the evaluator is thinking
    said = project.moss("say", "the build script is make.sh")
    assert said.returncode == 0, said.stderr
    seen = read_until(p.stdout, '{"type": "input_received"', SOON)
    assert '{"type": "input_received"' in seen, seen  # taken in while the evaluator still thinks
    assert gate.held
    gate.release()
    out, err = p.communicate(timeout=40)
    assert p.returncode == 0, err
    states = [state_of(r.body) for r in api.requests if state_of(r.body) in ("explorer", "evaluator")]
    assert states[:3] == ["explorer", "evaluator", "explorer"]
    explorer2 = [r.body for r in api.requests if state_of(r.body) == "explorer"][1]
    assert f"**{H['user_adds']}:** the build script is make.sh" in last_user_text(explorer2)


def test_an_unrelated_question_is_answered_apart_and_stays_out_of_the_task(project, api):
    gate = held("$(view .)")
    api.push(*[model({"inbox": "UNRELATED", "aside": "Paris.", "turns": [lambda b: gate,
                                                                        lambda b: "$(answer ok)"]})] * 5)
    p, out, err = say_while_it_waits(project, api, gate, "by the way, what is the capital of France?",
                                     until="aside")
    assert p.returncode == 0, err
    asides = [e for e in events_of(out) if e["type"] == "aside"]
    assert asides and asides[0]["answer"] == "Paris." and "capital of France" in asides[0]["question"]
    for r in api.requests:
        if state_of(r.body) == "agent":
            assert "capital of France" not in json.dumps(r.body)


def test_a_line_typed_on_the_terminal_is_acknowledged_before_the_model_answers(project, api):
    gate = held("$(view .)")
    api.push(gate, "$(answer ok)")
    p, master = start_on_a_terminal(project, api, "-n")
    try:
        wait_for_running(project)
        wait_for_the_model(gate)
        os.write(master, b"stop\n")
        seen = read_until(p.stderr, "will stop after this step", SOON)
        # the receipt at once, then what it was read as
        assert "› got it: stop\n  ↳ will stop after this step" in seen, seen
        assert gate.held  # acknowledged while the model was still answering
        p.wait(timeout=30)
        assert p.returncode == 3
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()


def test_stream_json_input_controls_a_session(project, api):
    gate = held("$(view .)")
    api.push(gate)
    p = start(project, api, "--input-format", "stream-json", stdin=subprocess.PIPE)
    wait_for_running(project)
    wait_for_the_model(gate)
    p.stdin.write(json.dumps({"type": "control", "action": "stop"}) + "\n")
    p.stdin.flush()
    out, err = p.communicate(timeout=30)
    assert p.returncode == 3, err
    ev = events_of(out)
    assert any(e["type"] == "input_received" and e["action"] == "stop" and e["source"] == "stream-json" for e in ev)
    assert ev[-1]["reason"] == "stopped"


def test_say_without_a_running_session_says_so(project):
    r = project.moss("say", "hello")
    assert r.returncode == 2 and "no moss session is running" in r.stderr


def test_pause_on_a_terminal_waits_for_go_on_and_carries_on(project, api):
    import threading

    resumed = threading.Event()  # a request may reach the server late (the SDK loads in the
    # background): what it gets depends on whether the user already said "go on", not on order
    gate = held("$(view .)")  # what the model says before that: held back
    api.push(*[lambda body: "$(answer built with make)" if resumed.is_set() else gate] * 4)
    p, master = start_on_a_terminal(project, api)

    try:
        wait_for_running(project)
        wait_for_the_model(gate)
        os.write(master, b"pause\n")
        assert "paused: type 'go on'" in read_until(p.stderr, "paused: type 'go on'", SOON)
        assert p.poll() is None  # it waits for the user, in the same process (what it prints
        # after "go on" below shows that: a session that ended paused could not carry on)
        resumed.set()
        gate.release()
        os.write(master, b"go on\n")
        out, err = p.communicate(timeout=30)
        assert p.returncode == 0 and out.strip() == "built with make", err
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
