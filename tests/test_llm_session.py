"""The LLM primitive inside real sessions: budgets, record/replay, retries in the log, no provider."""

from __future__ import annotations

import json

from agentmodel import Model
from fakeapi import error
import forkserver


TASK = "How many variants does Provider have?"


def test_budget_reached_mid_session_ends_with_reason_budget(crate, api):
    api.push(*[Model("provider")] * 10)
    r = crate.moss("@agent", "--provider", "anthropic", "--v2", "-n", "--max-tokens", "700",
                   "--output-format", "json", TASK, env=api.env())
    assert r.returncode == 1, r.stderr
    result = json.loads(r.stdout)
    assert result["reason"] == "budget" and result["success"] is False
    assert 0 < result["turns"] < 4  # stopped before the answer
    total = sum(result["usage"][k] for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                              "cache_write_tokens"))
    assert total >= 700
    saved = json.loads((crate.root / f".moss/agent/session-{result['session_id']}.json").read_text())
    assert saved["reason"] == "budget" and saved["turn"] == result["turns"]  # resumable, nothing half-written


def test_record_then_replay_gives_the_same_session(crate, api, tmp_path):
    cassette = tmp_path / "session.jsonl"
    api.push(*[Model("provider")] * 10)
    r1 = crate.moss("@agent", "--provider", "openai", "--record", str(cassette), "--v2", "-n",
                    "--output-format", "stream-json", TASK, env=api.env())
    assert r1.returncode == 0, r1.stderr
    assert len(cassette.read_text().splitlines()) == 4
    # No server at all now: every answer comes from the cassette.
    r2 = crate.moss("@agent", "--provider", "replay", "--replay", str(cassette), "--v2", "-n",
                    "--output-format", "stream-json", TASK)
    assert r2.returncode == 0, r2.stderr

    def transcript(out):
        return [(e["type"], e.get("text"), e.get("cmd"), e.get("answer")) for e in map(json.loads, out.splitlines())]

    assert transcript(r1.stdout) == transcript(r2.stdout)
    # A changed prompt misses the cassette, and the error names what differs.
    r3 = crate.moss("@agent", "--provider", "replay", "--replay", str(cassette), "--v2", "-n",
                    "How many variants does Model have?")
    assert r3.returncode == 1
    assert "messages[0].content" in r3.stderr and "differs" in r3.stderr


def test_retries_are_visible_in_the_session_log(crate, api):
    api.push(error(429, retry_after_ms=1), "$(answer 13)")
    r = crate.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "json", TASK,
                   env=api.env())
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["session_id"]
    events = [json.loads(x) for x in (crate.root / f".moss/agent/logs/{sid}.jsonl").read_text().splitlines()]
    names = [e["event"] for e in events]
    assert "llm_retry" in names and names.count("llm_attempt") == 2
    retry = next(e for e in events if e["event"] == "llm_retry")
    assert retry["status"] == 429


def test_no_provider_from_any_script_exits_2_with_three_ways(project):
    project.script("ask", 'print(moss.llm.chat{prompt = "hi"}.text)\n')
    r = project.moss("@ask")
    assert r.returncode == 2
    for way in ("--provider", "config.toml", "ANTHROPIC_API_KEY"):
        assert way in r.stderr


def test_verbose_streams_to_stderr_and_answer_stays_on_stdout(crate, api):
    api.push("Looking now. $(answer thirteen variants)")
    r = crate.moss("@agent", "--provider", "openai", "--verbose", "--v1", "-n", TASK, env=api.env())
    assert r.returncode == 0, r.stderr
    assert r.stdout == "thirteen variants\n"
    assert "Looking now." in r.stderr


def test_streams_to_stderr_when_it_is_a_terminal(crate, api):
    """On a terminal the model's words appear while it writes; stdout keeps only the answer."""
    import os
    import pty
    import subprocess
    import sys

    api.push("Reading the enum definition now. $(answer thirteen)")
    master, slave = pty.openpty()
    env = {**crate.env, **api.env()}
    p = forkserver.popen([sys.executable, "-m", "moss", "@agent", "--provider", "anthropic", "--v1", "-n", TASK],
                         cwd=crate.root, env=env, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    out, _ = p.communicate(timeout=60)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert p.returncode == 0
    assert out == b"thirteen\n"
    assert b"Reading the enum definition now." in seen
