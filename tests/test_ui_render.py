"""What a person reads on stderr: each reply once, markdown rendered on a terminal, plain text
elsewhere, and the way back into an interrupted session."""

from __future__ import annotations

import json


def test_verbose_with_stderr_piped_shows_each_reply_once(project):
    """`moss @agent --verbose ... 2>log`: the model's reply streams into the log once, not
    streamed and then printed again."""
    script = project.root / "answers.json"
    script.write_text(json.dumps(["Let me look around first.\n$(note the crate is small)",
                                  "Now I know.\n$(answer it is small)"]))
    r = project.moss("@agent", "--verbose", "-n", "--provider", "script", "--script", str(script), "how big?")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "it is small\n"
    assert r.stderr.count("Let me look around first.") == 1, r.stderr
    assert r.stderr.count("Now I know.") == 1, r.stderr


def test_ctrl_c_says_the_exact_command_that_resumes_the_session(project, api):
    """Ctrl-C while the model thinks: the last line names the session and the command that
    goes on with it; running that very command (with the same provider flags) answers."""
    import shlex
    import signal
    import subprocess
    import sys

    from fakeapi import slow

    api.push(slow("$(answer never seen)", delay=60))
    p = project.popen("@agent", "--provider", "anthropic", "-n", "what is this?", env=api.env())
    try:
        for line in p.stderr:  # the turn is announced before its request: then Ctrl-C
            if line.startswith("› Turn 1/"):
                break
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130
    last = err.strip().splitlines()[-1]
    assert "go on with: moss @agent --resume " in last, err
    command = shlex.split(last.split("go on with: ", 1)[1])
    sid = command[-1]
    assert command == ["moss", "@agent", "--resume", sid] and f"session {sid}" in last

    api.replies.clear()
    api.push("$(answer a small project)")
    r = subprocess.run([sys.executable, "-m", *command, "--provider", "anthropic", "-n"], cwd=project.root,
                       env={**project.env, **api.env()}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "a small project\n"
