"""Bad input gets a clear answer: no hang, no traceback, no unbounded memory.

Each case is run the way a user meets it: the real `moss` CLI as a subprocess (a script in
the project's .moss/scripts/ when the input arrives through a primitive). A clear answer is
an exit status, one `error:` line naming the culprit, and no Python traceback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest
import forkserver


def clean_error(r, code: int = 2) -> str:
    """Assert a one-line error with exit `code` and no traceback; return the error line."""
    assert r.returncode == code, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def run_lua(project, body: str, *args, **kw):
    """Run `body` as the project script @case and return the finished process."""
    project.script("case", body)
    return project.moss("@case", *args, **kw)


# ------------------------------------------------------------------ pipes, sockets, loops

@pytest.fixture
def specials(project):
    """A project with a named pipe, a socket, a symlink loop and one ordinary file."""
    os.mkfifo(project.root / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(project.root / "sock"))
    (project.root / "loop1").symlink_to("loop2")
    (project.root / "loop2").symlink_to("loop1")
    project.write("main.rs", "fn main() {}\n")
    yield project
    sock.close()


@pytest.mark.parametrize("target,what", [("pipe", "named pipe"), ("pipe:1-3", "named pipe"),
                                         ("pipe:2", "named pipe"), ("pipe/Foo", "named pipe"),
                                         ("sock", "socket")])
def test_view_refuses_a_pipe_or_socket_instead_of_hanging(specials, target, what):
    """Reading a FIFO blocks until someone writes to it: view must never open one."""
    line = clean_error(specials.moss("view", target, timeout=20))
    assert what in line and target.split(":")[0].split("/")[0] in line


@pytest.mark.parametrize("target", ["loop1", "loop1:1-3", "loop1/Foo"])
def test_view_of_a_symlink_loop_says_so(specials, target):
    assert "symlink loop" in clean_error(specials.moss("view", target, timeout=20))


def test_tree_and_search_walk_past_pipes_sockets_and_loops(specials):
    tree = specials.moss("view", ".", timeout=20)
    assert tree.returncode == 0 and "main.rs" in tree.stdout, tree.stderr
    found = specials.moss("text-search", "main", timeout=20)
    assert found.returncode == 0 and "main.rs:" in found.stdout, found.stderr
    for name, what in (("pipe", "named pipe"), ("loop1", "symlink loop")):
        line = clean_error(specials.moss("text-search", "main", "--only", name, timeout=20))
        assert what in line and name in line


def test_edit_and_fs_refuse_pipes_and_loops(specials):
    """A write through a pipe would block; replacing it with a file would destroy it."""
    r = run_lua(specials, """
        moss.access.set("edit")
        local function try(f, ...)
          local ok, e = pcall(f, ...)
          print(ok and "ok" or (moss.error_kind(e) .. ": " .. tostring(e.message or e):gsub("\\n.*", "")))
        end
        try(moss.edit.preview, {{target = "pipe", action = "replace", content = "x"}})
        try(moss.edit.preview, {{target = "pipe/Foo", action = "replace", content = "x"}})
        try(moss.edit.preview, {{target = "pipe", action = "create", content = "x"}})
        try(moss.edit.preview, {{target = "loop1", action = "replace", content = "x"}})
        try(moss.fs.read, "pipe")
        try(moss.fs.read, "loop1")
        try(moss.fs.write, "pipe", "x")
        try(moss.fs.write, "loop1", "x")
    """, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 8
    for line in lines[:3] + lines[4:5] + lines[6:7]:
        assert line.startswith("usage: ") and "pipe is a named pipe" in line, line
    for line in (lines[3], lines[5], lines[7]):
        assert line.startswith("usage: ") and "loop1 is a symlink loop" in line, line
    assert (specials.root / "pipe").is_fifo() and (specials.root / "loop1").is_symlink()


def test_fs_write_of_the_root_is_refused_and_writes_nothing_outside(project):
    """`moss.fs.write("")` used to rename a temp file over the root, from outside it."""
    (project.root / "sub").mkdir()
    before = sorted(os.listdir(project.root.parent))
    r = run_lua(project, """
        moss.access.set("edit")
        for _, p in ipairs({"", ".", "sub"}) do
          local ok, e = pcall(moss.fs.write, p, "x")
          print(ok and "ok" or (moss.error_kind(e) .. ": " .. e.message))
        end
    """)
    assert r.returncode == 0, r.stderr
    kinds = [ln.split(":")[0] for ln in r.stdout.splitlines()]
    assert kinds == ["usage", "usage", "usage"], r.stdout
    assert "project root" in r.stdout and "directory" in r.stdout
    assert sorted(os.listdir(project.root.parent)) == before


def test_view_of_a_name_too_long_for_the_os(project):
    assert clean_error(project.moss("view", "a" * 300)).startswith("error: a")
    assert "a/" * 10 in clean_error(project.moss("view", "a/" * 3000))
    clean_error(project.moss("text-search", "x", "--only", "a" * 300))


# ------------------------------------------------------------------- search stays bounded

def _peak_rss_mb(project, *args) -> tuple[float, float, str]:
    """Run moss; return (seconds, peak RSS in MB of moss and ripgrep, stdout)."""
    out = project.root.parent / "search.out"
    with open(out, "wb") as f:
        env = dict(project.env)
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "moss", *args], cwd=project.root, env=env,
                                stdout=f, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - t0
    assert proc.returncode == 0
    return seconds, usage.ru_maxrss / 1024, out.read_text()


def test_search_over_a_5mb_single_line_file_stays_small(project):
    """One minified-style 5 MB line that matches `.` five million times: ripgrep's JSON
    repeated every submatch (16 s, 2.8 GB); now the line is capped and re-read in a window."""
    words = ("alpha", "beta", "gamma", "needle", "delta")
    line = " ".join(words[i % 5] for i in range(900_000))[:5_000_000]
    (project.root / "one.txt").write_text(line)
    project.write("main.rs", "fn main() { let needle = 1; }\n")
    seconds, peak, out = _peak_rss_mb(project, "text-search", ".")
    assert peak < 400, f"peak RSS {peak:.0f} MB"
    assert seconds < 30
    hit = next(ln for ln in out.splitlines() if ln.startswith("  1:") and "alpha" in ln)
    assert len(hit) < 260 and hit.endswith("…")
    assert out.rstrip().endswith("2 matches in 2 files")


# ------------------------------------------------------------------------------ config

@pytest.mark.parametrize("args", [("@agent", "what is this?"), ("config", "get", "agent.max_turns")])
def test_config_integer_beyond_64_bits_names_file_line_column(project, args):
    """lupa raised OverflowError from deep inside the runtime; the file says where."""
    project.write(".moss/config.toml", "[agent]\n# turns\nmax_turns =  99999999999999999999\n")
    line = clean_error(project.moss(*args))
    assert line.startswith("error: .moss/config.toml:3:14: agent.max_turns = 99999999999999999999")


def test_user_config_integer_beyond_64_bits_in_a_list(project):
    project.user_file("config.toml", "[agent]\nlimits = [1, 0x1F]\nsizes = [1, [2, -99999999999999999999]]\n")
    line = clean_error(project.moss("@agent", "x"))
    assert "config.toml:3:17: agent.sizes[1][1] = -99999999999999999999" in line


@pytest.mark.parametrize("value", ["9223372036854775807", "17592186044416"])
def test_a_memory_limit_no_machine_has_is_a_config_error(project, value):
    project.write(".moss/config.toml", f"[lua]\nmax_memory_mb = {value}\n")
    assert "MiB" in clean_error(project.moss("@agent", "x"))
    project.write(".moss/config.toml", "")
    assert "MiB" in clean_error(project.moss("@agent", "--memory-mb", value, "x"))


def test_an_option_beyond_64_bits_is_a_usage_error(project):
    line = clean_error(project.moss("@agent", "--max-tokens", "99999999999999999999", "x"))
    assert "99999999999999999999" in line


def test_toml_dates_reach_lua_as_iso_strings(project):
    project.write(".moss/config.toml", "[agent]\nsince = 1979-05-27T07:32:00Z\nday = 1979-05-27\n")
    r = run_lua(project, "print(moss.config.agent.since, moss.config.agent.day)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1979-05-27T07:32:00+00:00", "1979-05-27"]


@pytest.mark.parametrize("args", [("@agent", "--list-sessions"), ("@agent", "x"), ("init",),
                                  ("config", "get", "agent.max_turns"), ("config", "set", "agent.x", "1")])
def test_dot_moss_as_a_regular_file(project, args):
    """`.moss` must be a directory; a file there is named, with what to do about it."""
    import shutil

    shutil.rmtree(project.root / ".moss")
    (project.root / ".moss").write_text("not a directory\n")
    line = clean_error(project.moss(*args))
    assert ".moss is a file" in line and "rename or remove .moss" in line


def test_config_file_that_is_a_pipe_is_refused(project):
    os.mkfifo(project.root / ".moss" / "config.toml")
    line = clean_error(project.moss("@agent", "x", timeout=20))
    assert ".moss/config.toml is a named pipe" in line


# ---------------------------------------------------------------------------- sessions

def _agent_dir(project):
    d = project.root / ".moss" / "agent"
    (d / "logs").mkdir(parents=True, exist_ok=True)
    return d


GOOD = {"id": "good1", "session_id": "good1", "task": "what is this?", "machine": "v1", "role": "explorer",
        "state": "agent", "turn": 2, "max_turns": 15, "mem": {"items": []}, "messages": {}, "done": False}


def test_sessions_show_survives_bytes_shapes_and_markup_in_a_log(project):
    """A log is whatever was appended to it: a torn line, a stray byte, another shape."""
    log = _agent_dir(project) / "logs" / "abc.jsonl"
    log.write_bytes(b'{"event":"task","ts":1,"task":"caf\xe9 \xff"}\n'
                    b'[1,2]\n"text"\n{"event":"turn_start","ts":"x","context_chars":"lots"}\n'
                    b'{"event":["a"]}\n{"event":"llm_response","duration":"slow","usage":[1]}\n'
                    b'{"event":"response","ts":2,"text":"[/x] [bold]hi \\u001b]0;pwned\\u0007"}\n'
                    b'{"event":"session_end","usage":{"input_tokens":"a"}}\n' + b"[" * 5000 + b"\n")
    r = project.moss("sessions", "show", "abc")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr and "\x1b" not in r.stdout
    assert "unreadable_line" in r.stdout and "[/x] [bold]hi" in r.stdout and "session_end" in r.stdout


@pytest.mark.parametrize("content,why", [
    (b"{bad", "not valid JSON"),
    (b"[1, 2]", "a JSON array"),
    (json.dumps({**GOOD, "task": 5}).encode(), "task is number"),
    (json.dumps({**GOOD, "turn": 99999999999999999999}).encode(), "turn is number"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
    (b'{"a":' * 300 + b"1" + b"}" * 300, "nested more than"),
    (b"{}", "id is missing"),
    (json.dumps({**GOOD, "messages": 3}).encode(), "messages is number"),
])
def test_resume_of_a_corrupt_checkpoint_names_it_and_how_to_start_fresh(project, content, why):
    (_agent_dir(project) / "session-abc.json").write_bytes(content)
    for args in (("--resume", "abc"), ("--resume",)):
        line = clean_error(project.moss("@agent", "-n", *args))
        assert ".moss/agent/session-abc.json is not a usable checkpoint" in line, line
        assert why in line and "delete it to start fresh" in line, line


def test_list_sessions_shows_the_good_and_names_the_corrupt(project):
    d = _agent_dir(project)
    (d / "session-good1.json").write_text(json.dumps(GOOD))
    (d / "session-bad1.json").write_bytes(b'{"task": ')
    (d / "session-bad2.json").write_text("[]")
    r = project.moss("@agent", "--list-sessions")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    rows = {ln.split("\t")[0]: ln.split("\t") for ln in r.stdout.splitlines()[1:]}
    assert rows["good1"][3:6] == ["agent", "interrupted", "what is this?"]  # no process runs it
    assert rows["bad1"][3] == rows["bad2"][3] == "corrupt"
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 2 and all("delete it to start fresh" in e for e in errors)
    r = project.moss("sessions", "list")  # the same listing (it runs the agent's Lua)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stdout.count("corrupt") >= 2


def test_list_runs_shows_the_good_and_names_the_corrupt(project):
    """`moss runs list` answers as `moss sessions list` does: a run that really ran is
    listed as it ended, a record moss cannot use is listed as corrupt and named on stderr in
    one line, and the exit status is 2 so a script notices there is one to act on."""
    project.script("one", """
        moss.access.set("full")
        local r = moss.runs.start{ cmd = "echo hello", name = "good one" }
        local ev = moss.runs.wait(20)
        while ev and not (ev.id == r.id and ev.status ~= "running" and ev.status ~= "queued") do
          ev = moss.runs.wait(20)
        end
        print(r.id)
    """)
    r = project.moss("@one", "--allow-full")
    assert r.returncode == 0, r.stderr
    good = r.stdout.strip()
    (project.root / ".moss/agent/runs/torn.json").write_bytes(b'{"id": "torn", ')
    r = project.moss("runs", "list")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    rows = {ln.split("\t")[0]: ln.split("\t") for ln in r.stdout.splitlines()[1:]}
    assert rows[good][1:4] == ["good one", "local (none)", "finished"]
    assert rows["torn"][3] == "corrupt"
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [ln for ln in r.stderr.splitlines() if ln.strip()] and len(errors) == 1
    assert ".moss/agent/runs/torn.json is not a usable run record (not valid JSON" in errors[0]
    assert errors[0].endswith("; delete it")
    (project.root / ".moss/agent/runs/torn.json").unlink()
    r = project.moss("runs", "list")  # the corrupt one gone: a clean listing, exit 0
    assert r.returncode == 0 and r.stderr == "" and good in r.stdout, r.stderr


def test_a_checkpoint_that_is_a_pipe_is_refused_not_read(project):
    os.mkfifo(_agent_dir(project) / "session-abc.json")
    line = clean_error(project.moss("@agent", "-n", "--resume", "abc", timeout=20))
    assert "named pipe" in line
    r = project.moss("@agent", "--list-sessions", timeout=20)
    assert r.returncode == 2 and "corrupt" in r.stdout


# ------------------------------------------------------------------ what the model says

def _surrogate_model(body):
    return 'Looking \ud800 here. $(answer 42 \ud800)'


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_lone_surrogate_in_a_reply_does_not_end_the_session(project, api, provider):
    """JSON may escape a lone surrogate ("\\ud800"); no UTF-8 log, checkpoint or Lua
    string can hold one. It becomes U+FFFD and the session goes on to its answer."""
    api.push(*[_surrogate_model] * 3)
    r = project.moss("@agent", "--provider", provider, "-n", "--verbose", "what?", env=api.env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "42 \ufffd"
    assert "Traceback" not in r.stderr and "error:" not in r.stderr
    logs = list((project.root / ".moss" / "agent" / "logs").glob("*.jsonl"))
    assert logs and all(json.loads(ln) for ln in logs[0].read_text(encoding="utf-8").splitlines())


HOSTILE = "Title \x1b]0;pwned\x07 clear \x1b[2J back\x08\x08 csi\x9b31m $(answer done \x1b]52;c;Zm9v\x07 now)"


def _run_with_tty_stdout(project, api, *args):
    """Run moss with stdout on a pseudo-terminal (as a person sees it); stderr piped."""
    import pty

    master, slave = pty.openpty()
    env = dict(project.env, **api.env())
    proc = forkserver.popen([sys.executable, "-m", "moss", *args], cwd=project.root, env=env,
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end closed
            break
        if not data:
            break
        chunks.append(data)
    err = proc.stderr.read()
    proc.wait(timeout=60)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode("utf-8", "replace"), err.decode("utf-8", "replace")


def test_control_sequences_from_the_model_never_reach_the_terminal(project, api):
    """Model text with OSC (title, clipboard), CSI (clear screen), backspaces and a C1 CSI:
    shown as visible \\xNN on the terminal (streamed, printed, the answer), raw in the log."""
    api.push(HOSTILE)
    code, out, err = _run_with_tty_stdout(project, api, "@agent", "--provider", "anthropic", "-n",
                                          "--verbose", "what?")
    assert code == 0, err
    for text in (out, err):
        assert "\x1b" not in text and "\x07" not in text and "\x08" not in text and "\x9b" not in text
    assert "\\x1b]52;c;Zm9v\\x07" in out      # the answer, on the terminal, made visible
    assert "\\x1b]0;pwned\\x07" in err        # the streamed reply on stderr, made visible
    log = next((project.root / ".moss" / "agent" / "logs").glob("*.jsonl")).read_text()
    assert any(json.loads(ln).get("text") == HOSTILE for ln in log.splitlines())


def test_json_outputs_keep_the_model_text_raw(project, api):
    """stream-json and json are data for programs: the text is kept, JSON-escaped."""
    api.push(HOSTILE, HOSTILE)
    r = project.moss("@agent", "--provider", "anthropic", "-n", "--output-format", "stream-json", "what?",
                     env=api.env())
    assert r.returncode == 0, r.stderr
    events = [json.loads(ln) for ln in r.stdout.splitlines()]
    assert any(e.get("text") == HOSTILE for e in events if e["type"] == "assistant")
    assert "\x1b" not in r.stdout and "\x1b" not in r.stderr  # escaped as \u001b in JSON
    r = project.moss("@agent", "--provider", "anthropic", "-n", "--output-format", "json", "what?",
                     env=api.env())
    assert json.loads(r.stdout)["answer"] == "done \x1b]52;c;Zm9v\x07 now"


def test_script_messages_are_sanitised_on_stderr(project):
    r = run_lua(project, r'''
        moss.ui.print("a\27]0;pwned\7b")
        moss.ui.status("c\27[2Jd")
        moss.error("usage", "e\27[31mf")
    ''')
    assert r.returncode == 2 and "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "a\\x1b]0;pwned\\x07b" in r.stderr and "c\\x1b[2Jd" in r.stderr and "e\\x1b[31mf" in r.stderr


# -------------------------------------------------------------------------------- json

def test_json_decode_of_deep_nesting_is_a_usage_error(project):
    r = run_lua(project, r'''
        for _, s in ipairs({ string.rep("[", 100000) .. string.rep("]", 100000),
                              string.rep('{"a":', 300) .. "1" .. string.rep("}", 300) }) do
          local ok, e = pcall(moss.json.decode, s)
          print(ok, moss.error_kind(e), e.message)
        end
        local v = moss.json.decode('[99999999999999999999, "\\ud800", "[[[[["]')
        print(math.type(v[1]), v[2], v[3])
    ''')
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("false\tusage\t") and "JSON nested 100,000 levels deep" in lines[0]
    assert lines[1].startswith("false\tusage\t") and "JSON nested 300 levels deep" in lines[1]
    assert lines[2] == "float\t\ufffd\t[[[[["
