"""Sessions that carry on when the context fills (lib/machine/compact.lua).

A tiny `[llm] context_window` in the test project's config makes a real session cross the
limit after one large tool result: the runner must have the LLM summarise (a request
labelled ROLE/compact), log one `compacted` event, checkpoint, and send a smaller request
that carries the summary instead of the raw output, and the session must still answer.
Against the fake API server with the real SDKs.
"""

from __future__ import annotations

import json

from fakeapi import last_user_text, label_of, state_of, system_text

BIG_LINE = "the quick brown fox jumps over the lazy dog {:05d}\n"
SUMMARY = "SUMMARY: big.txt holds 400 numbered fox lines; the answer is 400."


def chars(body) -> int:
    """The request's size as moss measures it (UTF-8 bytes of the system prompt and messages)."""
    return len(system_text(body).encode()) + sum(len(last_user_text({"messages": [m]}).encode())
                                                 for m in body["messages"] if m.get("role") == "user")


def script(api, replies_for_agent):
    """Replies by state: the summariser gets SUMMARY, the agent its replies in order."""
    agent = list(replies_for_agent)

    def reply(body):
        if state_of(body) == "compact":
            return SUMMARY
        return agent.pop(0)

    api.push(*([reply] * (len(agent) + 3)))


def setup(project, window: int, compact_at: float = 0.8):
    project.write("big.txt", "".join(BIG_LINE.format(i) for i in range(400)))  # ~20,000 characters
    project.write(".moss/config.toml", f"""
        [llm]
        context_window = {window}
        [agent]
        compact_at = {compact_at}
    """)


def events(project):
    [log] = (project.root / ".moss" / "agent" / "logs").glob("*.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_session_that_fills_its_context_compacts_and_still_answers(project, api):
    # 3,000 tokens at 0.8: requests over 9,600 characters (4 a token) are compacted. The
    # first turn (system prompt and task) is well under; the second carries big.txt's lines.
    setup(project, window=3000)
    script(api, ["$(view big.txt:1-400)", "$(answer 400 lines)"])
    r = project.moss("@agent", "--provider", "anthropic", "-n", "how many lines does big.txt have?",
                     env=api.env(), timeout=90)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "400 lines\n"

    bodies = [q.body for q in api.requests if q.body]
    assert [label_of(b) for b in bodies] == ["explorer/agent", "explorer/compact", "explorer/agent"]
    first, summarise, after = bodies
    # the summariser saw what the turn was about to send (the big output, its middle cut
    # so that the summarising request itself fits the window) ...
    assert "fox jumps over the lazy dog 00399" in last_user_text(summarise)
    assert chars(summarise) < 3000 * 4
    # ... and the turn that followed carries the summary instead, and is much smaller
    assert SUMMARY in last_user_text(after)
    assert "lazy dog 00200" not in last_user_text(after)

    log = events(project)
    [c] = [e for e in log if e["event"] == "compacted"]
    assert c["chars_before"] > 9_600 > c["chars_after"]  # the limit: 3,000 tokens × 0.8 × 4 characters
    assert c["chars_after"] == chars(after) < c["chars_before"] // 3
    assert c["turn"] == 2 and c["summary_chars"] == len(SUMMARY)
    assert "context compacted" in r.stderr  # said on stderr too
    # checkpointed with the summary as the working memory
    [cp] = (project.root / ".moss" / "agent").glob("session-*.json")
    saved = json.loads(cp.read_text())
    assert saved["compactions"] == 1 and [SUMMARY in it["content"] for it in saved["mem"]["items"]] == [True]

    # the timeline shows it
    show = project.moss("sessions", "show", saved["id"])
    assert show.returncode == 0, show.stderr
    assert any("compacted" in ln and "context compacted at turn 2" in ln for ln in show.stdout.splitlines()), show.stdout


def test_a_session_under_its_window_is_never_compacted(project, api):
    setup(project, window=200_000)
    script(api, ["$(view big.txt:1-400)", "$(answer 400 lines)"])
    r = project.moss("@agent", "--provider", "anthropic", "-n", "how many lines?", env=api.env(), timeout=90)
    assert r.returncode == 0, r.stderr
    assert [state_of(q.body) for q in api.requests if q.body] == ["agent", "agent"]
    assert not [e for e in events(project) if e["event"] == "compacted"]


def test_compaction_off_and_bad_settings(project, api):
    setup(project, window=3000)
    project.write(".moss/config.toml", """
        [llm]
        context_window = 3000
        [agent]
        compact_at = false
    """)
    script(api, ["$(view big.txt:1-400)", "$(answer 400 lines)"])
    r = project.moss("@agent", "--provider", "anthropic", "-n", "how many lines?", env=api.env(), timeout=90)
    assert r.returncode == 0, r.stderr
    assert [state_of(q.body) for q in api.requests if q.body] == ["agent", "agent"]

    for bad, says in (('[agent]\ncompact_at = 3', "[agent] compact_at must be"),
                      ('[llm]\ncontext_window = "big"', "[llm] context_window must be")):
        project.write(".moss/config.toml", bad)
        api.push("$(answer x)")
        r = project.moss("@agent", "--provider", "anthropic", "-n", "q", env=api.env(), timeout=60)
        assert r.returncode == 2, r.stderr
        assert says in r.stderr and "Traceback" not in r.stderr


def test_the_window_is_known_for_default_models_and_configurable(project, api):
    project.script("window", "print(moss.llm.provider().context_window)")
    r = project.moss("@window", "--provider", "anthropic", env=api.env())
    assert r.returncode == 0 and r.stdout == "200000\n", r.stderr  # claude-sonnet-5-5
    r = project.moss("@window", "--provider", "openai", "--model", "some-unknown-model", env=api.env())
    assert r.stdout == "nil\n"  # unknown: no compaction unless [llm] context_window says
    project.write(".moss/config.toml", "[llm]\ncontext_window = 32768\n")
    r = project.moss("@window", "--provider", "openai", "--model", "some-unknown-model", env=api.env())
    assert r.stdout == "32768\n"
