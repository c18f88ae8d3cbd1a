"""What a person sees on a terminal while the agent works, and that nothing of it leaks.

moss runs with stderr on a real pseudo-terminal (python's pty module) and stdout on a pipe,
against the fake API server with a slow reply: the live status line (spinner, elapsed
seconds, state, model) must show on the terminal while the reply is pending, the model's
text must be set apart, the closing line must name the session and `moss sessions show`,
and stdout must carry only the answer. With NO_COLOR on the terminal, or stderr on a pipe,
there is no escape sequence anywhere.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading

from fakeapi import slow
import forkserver

SPINNER = set("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")  # rich's "dots"


def run_on_pty(project, api, *args, env=None, timeout=60):
    """Run moss with stderr on a pty (stdin and stdout pipes): (returncode, stdout, pty text)."""
    master, slave = pty.openpty()
    e = dict(project.env)
    e.pop("NO_COLOR", None)
    e.update(TERM="xterm-256color", COLUMNS="120", LINES="40", **api.env())
    e.update(env or {})
    project.trust()
    proc = forkserver.popen([sys.executable, "-m", "moss", *args], cwd=project.root, env=e,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
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
        out, _ = proc.communicate(timeout=timeout)
    finally:
        reader.join(5)
        os.close(master)
    return proc.returncode, out.decode(), b"".join(chunks).decode("utf-8", "replace")


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r", "", text)


def session_id(project) -> str:
    [path] = (project.root / ".moss" / "agent").glob("session-*.json")
    return json.loads(path.read_text())["id"]


def test_a_terminal_shows_a_live_status_line_while_the_model_is_slow(project, api):
    api.push(slow("Let me answer.\n$(answer forty-two)", delay=2.5))
    code, out, tty = run_on_pty(project, api, "@agent", "--provider", "anthropic", "what is six times seven?")
    assert code == 0, tty
    assert out == "forty-two\n"  # stdout: the answer and nothing else
    shown = plain(tty)
    # while the reply was pending: a spinner, the state and model, and the seconds going by
    assert SPINNER & set(shown), shown
    assert "waiting for explorer/agent · claude-sonnet-5-5 (anthropic)" in shown
    seconds = {int(s) for s in re.findall(r"explorer/agent[^\n]*? · (\d+)s", shown)}
    assert {1, 2} <= seconds, shown
    assert "\x1b[" in tty  # it redraws itself: a terminal gets escape sequences
    # the model's own text, set apart from moss's lines
    assert "  │ Let me answer." in shown
    # the closing line: turns, tokens, cost, the session and how to look at it again
    sid = session_id(project)
    closing = [ln for ln in shown.splitlines() if f"session {sid}" in ln]
    assert closing and re.search(r"answered · 1 turn · [\d,]+ tokens · (\$\d+\.\d{4}|cost unknown)", closing[0]), shown
    assert f"moss sessions show {sid}" in shown and f"moss @agent --resume {sid}" in shown
    assert "forty-two" not in shown.replace("$(answer forty-two)", "")  # the answer is not echoed on stderr


def test_the_status_line_counts_streamed_tokens(project, api):
    words = " ".join(f"word{i}" for i in range(60))
    api.push(slow(words + "\n$(answer done)", delay=0.3, chunk_delay=0.05))
    code, out, tty = run_on_pty(project, api, "@agent", "--provider", "openai", "count")
    assert code == 0, tty
    assert out == "done\n"
    counts = [int(n) for n in re.findall(r"~(\d+) tokens", plain(tty))]
    assert counts and max(counts) > 10, plain(tty)  # it went up while the reply streamed


def test_no_color_on_a_terminal_and_a_pipe_get_no_escape_sequences(project, api):
    api.push(slow("$(answer forty-two)", delay=1.2))
    code, out, tty = run_on_pty(project, api, "@agent", "--provider", "anthropic", "six times seven?",
                                env={"NO_COLOR": "1"})
    assert code == 0, tty
    assert out == "forty-two\n"
    assert "\x1b" not in tty, repr(tty)
    assert not SPINNER & set(tty)
    sid = session_id(project)
    assert f"moss sessions show {sid}" in tty  # still a terminal: the closing line, plain

    api.push(slow("$(answer forty-two)", delay=1.2))
    e = {k: v for k, v in api.env().items()}
    r = project.moss("@agent", "--provider", "anthropic", "six times seven?", env={**e, "TERM": "xterm-256color"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == "forty-two\n"
    assert "\x1b" not in r.stderr and not SPINNER & set(r.stderr)
    assert "moss sessions show" not in r.stderr  # a log, not a person: no closing line


def test_json_output_on_a_terminal_has_no_status_line(project, api):
    api.push(slow("$(answer forty-two)", delay=1.2))
    code, out, tty = run_on_pty(project, api, "@agent", "--provider", "anthropic", "-n", "--output-format", "json",
                                "six times seven?")
    assert code == 0, tty
    result = json.loads(out)  # stdout is exactly one JSON object
    assert result["answer"] == "forty-two"
    assert not SPINNER & set(plain(tty)) and "moss sessions show" not in tty


def test_bidi_overrides_and_escapes_from_the_model_reach_the_terminal_only_as_visible_escapes(project, api):
    # U+202E would show `txt.exe` as `exe.txt`; OSC 0 would retitle the terminal
    api.push(slow("Saved to \u202etxt.exe\u202c.\x1b]0;pwned\x07\n$(answer saved)", delay=1.2))
    code, out, tty = run_on_pty(project, api, "@agent", "--provider", "anthropic", "where is it?")
    assert code == 0, tty
    assert "\u202e" not in tty and "\u202c" not in tty and "\x1b]0;pwned" not in tty, repr(tty)
    assert "  │ Saved to \\u202etxt.exe\\u202c.\\x1b]0;pwned\\x07" in plain(tty)  # the gutter shows what was sent
