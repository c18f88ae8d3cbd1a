"""`moss ... | head -1`: a reader that stops after the first line ends moss quietly.

Each test runs a listing command with stdout on a real pipe, reads its first line and closes
the pipe, as `head -1` does. The pipe is shrunk to one page and every listing is made longer
than that page plus the line read, so the command must write into a closed pipe (EPIPE)
whatever the timing: no sleeps. What a user sees afterwards is what they see with git: no
traceback, no "internal error", nothing at all on stderr, and the status a shell shows for a
writer whose reader went away (141, 128 + SIGPIPE).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys

import pytest
import forkserver

PAGE = 4096
EXIT_PIPE = 141


def head_1(project, *args, env: dict | None = None) -> tuple[str, str, int]:
    """Run `moss ARGS | head -1`: (first line, stderr, exit status)."""
    r, w = os.pipe()
    fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PAGE)
    if project.trusted:
        project.trust()
    e = dict(project.env)
    e.update(env or {})
    p = forkserver.popen([sys.executable, "-m", "moss", *args], cwd=project.root, env=e, stdin=subprocess.DEVNULL,
                         stdout=w, stderr=subprocess.PIPE, text=True)
    os.close(w)
    line = b""
    while not line.endswith(b"\n"):  # one byte at a time: exactly the first line leaves the pipe
        ch = os.read(r, 1)
        if not ch:
            break
        line += ch
    os.close(r)
    try:
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    return line.decode(), err, p.returncode


def quiet(err: str, code: int) -> None:
    """Nothing on stderr but the progress lines (`› ...`) an agent shows before the cut."""
    assert "Traceback" not in err and "traceback" not in err and "internal error" not in err, err
    assert "Broken pipe" not in err and "BrokenPipe" not in err and "interrupted" not in err, err
    assert all(ln.startswith("› ") for ln in err.splitlines()), err
    assert code == EXIT_PIPE, (code, err)


@pytest.fixture
def sessions(project):
    """A project with one real session (answered through the script provider) and 120 more
    checkpoints and logs like it, so every session listing is longer than the pipe."""
    answers = project.root / "answers.json"
    answers.write_text(json.dumps([f"$(note look number {i})" for i in range(40)] + ["$(answer done)"]))
    r = project.moss("@agent", "-n", "--max-turns", "50", "--provider", "script", "--script", str(answers),
                     "--output-format", "json", "the first task")
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["session_id"]
    agent = project.root / ".moss" / "agent"
    state = json.loads((agent / f"session-{sid}.json").read_text())
    log = (agent / "logs" / f"{sid}.jsonl").read_text()
    for i in range(120):
        other = f"copy{i:04d}"
        state.update(id=other, task=f"task number {i}: " + "look around " * 5)
        (agent / f"session-{other}.json").write_text(json.dumps(state))
        (agent / "logs" / f"{other}.jsonl").write_text(log.replace(sid, other))
    return project, sid


def test_sessions_list_through_head(sessions):
    """`moss sessions list | head -1` shows the header and ends without a word."""
    project, _ = sessions
    line, err, code = head_1(project, "sessions", "list")
    assert line.startswith("id\t")
    quiet(err, code)


def test_agent_list_sessions_through_head(sessions):
    project, _ = sessions
    line, err, code = head_1(project, "@agent", "--list-sessions")
    assert line.startswith("id\t")
    quiet(err, code)


def test_sessions_show_through_head(sessions):
    """A 40-turn timeline, cut after its first line."""
    project, sid = sessions
    line, err, code = head_1(project, "sessions", "show", sid)
    assert line.strip()
    quiet(err, code)


def test_agent_list_logs_through_head(sessions):
    project, _ = sessions
    line, err, code = head_1(project, "@agent", "--list-logs")
    assert line.startswith("id\t")
    quiet(err, code)


def test_agent_answer_through_head(project):
    """The answer itself, many lines long, read only to its first line."""
    answers = project.root / "answers.json"
    answers.write_text(json.dumps(["$(answer " + "\n".join(f"line {i} of the answer" for i in range(400)) + ")"]))
    line, err, code = head_1(project, "@agent", "-n", "--provider", "script", "--script", str(answers), "a task")
    assert line == "line 0 of the answer\n"
    quiet(err, code)


def test_stream_json_through_head_stops_the_session(project):
    """An IDE that stops reading the events: the session ends there, quietly, resumable."""
    answers = project.root / "answers.json"
    answers.write_text(json.dumps([f"$(note {'x' * 300} {i})" for i in range(60)] + ["$(answer done)"]))
    line, err, code = head_1(project, "@agent", "-n", "--max-turns", "70", "--output-format", "stream-json",
                             "--provider", "script", "--script", str(answers), "a task")
    assert json.loads(line)["type"] == "session_start"
    quiet(err, code)
    sid = json.loads(line)["session_id"]
    state = json.loads((project.root / ".moss" / "agent" / f"session-{sid}.json").read_text())
    assert state["reason"] != "answered"


def test_memory_list_and_search_through_head(project):
    project.write(".moss/memory/facts.md", "# Facts\n" + "".join(f"- the build step {i} uses docker\n"
                                                                for i in range(300)))
    line, err, code = head_1(project, "memory", "list")
    assert line.startswith("kind\t")
    quiet(err, code)
    line, err, code = head_1(project, "memory", "search", "--limit", "300", "docker")
    assert line.strip()
    quiet(err, code)


def test_runs_list_and_logs_through_head(project):
    from moss.tools.runs.store import RunStore

    store = RunStore(project.root)
    for i in range(80):
        rid = f"{i:012x}"
        store.save({"id": rid, "name": f"sweep point {i}", "cmd": "python train.py", "status": "finished",
                    "code": 0, "created_at": 1_700_000_000 + i, "started_at": 1_700_000_000 + i,
                    "ended_at": 1_700_000_001 + i, "duration": 1.0, "alerts": [], "access": "read-shell",
                    "workdir": ".", "sandbox": "read-shell", "log": f".moss/agent/runs/{rid}.log"})
    (project.root / ".moss/agent/runs" / f"{0:012x}.log").write_text("".join(f"step {i} loss 0.1\n"
                                                                           for i in range(2000)))
    line, err, code = head_1(project, "runs", "list")
    assert line.startswith("id\t")
    quiet(err, code)
    line, err, code = head_1(project, "runs", "logs", f"{0:012x}")
    assert line == "step 0 loss 0.1\n"
    quiet(err, code)


def test_scripts_roles_and_commands_through_head(project):
    for i in range(100):
        project.script(f"tool{i:03d}", f"-- the project's tool number {i}, which does a thing\nprint('{i}')\n")
        project.write(f".moss/scripts/roles/role{i:03d}.lua",
                      f'return {{ name = "role{i:03d}", access = "read-only", description = "role number {i}" }}\n')
    for args, head in ((("scripts",), "script\t"), (("@agent", "--roles"), "role\t"),
                       (("@agent", "--commands"), "command\t")):
        line, err, code = head_1(project, *args)
        assert line.startswith(head), (args, line)
        if args == ("@agent", "--commands"):  # the built-in commands alone fit in the pipe
            assert code in (0, EXIT_PIPE) and err == "", err
        else:
            quiet(err, code)


def test_view_and_text_search_through_head(project):
    for i in range(200):
        project.write(f"src/module_{i:03d}.py", f"def handler_{i}():\n    return 'fn main {i}'\n")
    project.write("src/big.py", "".join(f"x{i} = {i}\n" for i in range(3000)))
    line, err, code = head_1(project, "view", "src/big.py:1-3000")
    assert line.strip()
    quiet(err, code)
    line, err, code = head_1(project, "text-search", "fn main", "--limit", "500")
    assert line.strip()
    quiet(err, code)


def test_trust_list_through_head(project):
    """`moss trust --list` with 150 trusted projects (records made the way `moss trust --yes`
    makes them, in this user's data directory): cut after the first line, it ends quietly."""
    from moss import trust
    from moss.config import read_layers

    for i in range(150):
        other = project.root.parent / f"other-{i:03d}"
        (other / ".moss" / "scripts").mkdir(parents=True)
        (other / ".moss" / "scripts" / "mine.lua").write_text("return {}\n")
        trust.grant(other, project.env, trust.scan(other, read_layers(other, project.env)[1], project.env))
    line, err, code = head_1(project, "trust", "--list")
    assert line.strip()
    quiet(err, code)


def test_eval_compare_through_head(project):
    """`moss eval compare` naming 300 flipped tasks: cut after the first line, it ends quietly."""
    rows = []
    for i in range(300):
        for cell, passed in (("variant=a", i % 2 == 0), ("variant=b", i % 2 == 1)):
            rows.append({"key": f"task-{i:03d}|{cell}|1", "task": f"task-{i:03d}", "cell": cell, "trial": 1,
                         "passed": passed, "reason": "answered"})
    project.write("results.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    line, err, code = head_1(project, "eval", "compare", "results.jsonl")
    assert line.startswith("A = variant=a")
    quiet(err, code)
