"""What a person reads on stderr: each reply once, markdown rendered on a terminal, plain text
elsewhere, and the way back into an interrupted session."""

from __future__ import annotations

import json
import forkserver


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


def run_on_terminal(project, api, *args, env=None, columns=60):
    """moss with stdout and stderr on one pseudo-terminal, as in a person's shell:
    (exit status, everything the terminal received)."""
    import os
    import pty
    import subprocess
    import sys
    import threading

    master, slave = pty.openpty()
    e = dict(project.env)
    e.pop("NO_COLOR", None)
    e.update(TERM="xterm-256color", COLUMNS=str(columns), LINES="40", **api.env())
    e.update(env or {})
    project.trust()
    proc = forkserver.popen([sys.executable, "-m", "moss", *args], cwd=project.root, env=e,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    chunks: list[bytes] = []

    def drain():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(5)
        os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace")


def plain(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r", "", text)


REPLY = ("Looking at **the enum** now, and this sentence is long enough that a sixty column "
         "terminal has to wrap it more than once.\n$(answer The enum has **13 variants**:\n\n- Anthropic\n- OpenAI)")


def test_a_terminal_gets_markdown_wrapped_inside_the_gutter(project, api):
    """On a terminal the model's text is markdown rendered (bold, not `**`), every wrapped
    line of it behind the `│` gutter; the answer is rendered too (bold, bullets)."""
    from fakeapi import slow

    api.push(slow(REPLY, delay=0.3))
    code, tty = run_on_terminal(project, api, "@agent", "--provider", "anthropic", "how many variants?")
    assert code == 0, tty
    shown = plain(tty).splitlines()
    reply = [ln for ln in shown if "│" in ln]
    assert any("Looking at the enum now" in ln for ln in reply), shown
    words = "Looking at the enum now, and this sentence is long enough that a sixty column terminal has to wrap it".split()
    gutter_text = " ".join(ln.split("│", 1)[1] for ln in reply)
    assert " ".join(w for w in gutter_text.split() if w in words)[:40] == " ".join(words)[:40]
    assert len(reply) >= 3 and all(ln.startswith("  │ ") and len(ln) <= 60 for ln in reply), reply
    assert "**" not in plain(tty).split("$(answer")[0]
    assert "\x1b[1m" in tty  # bold
    assert any(ln.strip() == "The enum has 13 variants:" for ln in shown), shown
    assert any(ln.strip() in ("• Anthropic", "- Anthropic") and "•" in ln for ln in shown), shown


def test_a_pipe_and_no_color_get_the_text_as_written(project, api):
    """Piped, the answer on stdout is byte for byte what the model wrote; with NO_COLOR a
    terminal shows it plain too (no escape sequence, the `**` as typed)."""
    import sys

    from fakeapi import slow

    api.push(slow(REPLY, delay=0.1))
    r = forkserver.run([sys.executable, "-m", "moss", "@agent", "--provider", "anthropic", "how many?"],
                       cwd=project.root, env={**project.env, **api.env()}, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "The enum has **13 variants**:\n\n- Anthropic\n- OpenAI\n"

    api.push(slow(REPLY, delay=0.1))
    code, tty = run_on_terminal(project, api, "@agent", "--provider", "anthropic", "how many?",
                                env={"NO_COLOR": "1"})
    assert code == 0, tty
    assert "\x1b" not in tty
    assert "The enum has **13 variants**:\r\n\r\n- Anthropic\r\n- OpenAI\r\n" in tty


def test_markdown_on_a_terminal_hides_no_link_and_obeys_no_escape(project, api):
    """Rendered markdown is still the model's text shown, not obeyed: a link shows where it
    goes (no hidden hyperlink target), and an escape in the answer arrives as visible text."""
    from fakeapi import slow

    api.push(slow("See [the docs](http://evil.example/steal).\n"
                  "$(answer Done. [details](http://evil.example/x)\x1b]0;pwned\x07)", delay=0.1))
    code, tty = run_on_terminal(project, api, "@agent", "--provider", "anthropic", "what now?")
    assert code == 0, tty
    assert "\x1b]8;" not in tty and "\x1b]0;pwned" not in tty, repr(tty)
    shown = plain(tty)
    assert "http://evil.example/steal" in shown and "http://evil.example/x" in shown
    assert "\\x1b]0;pwned\\x07" in shown
