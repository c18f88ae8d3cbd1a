"""Requests every OpenAI-compatible server understands.

Local servers (llama.cpp's, and others built on the same chat-template code) read a
message's content only when it is a string, and cap the reply only with `max_tokens`.
tests/fakeapi.py's strict mode behaves that way; these tests fail when moss sends content
blocks or `max_completion_tokens` to such a server.
"""

from __future__ import annotations

import json

import pytest
from agentmodel import Model
from conftest import FIXTURES, lua_value
from fakeapi import FakeAPI, last_user_text

from moss.llm import LLM, resolve_provider
from moss.llm.openai_client import build_params


@pytest.fixture
def strict():
    with FakeAPI(strict=True, keyless=True) as server:
        yield server


def test_agent_sees_the_task_on_a_strict_server(project, strict):
    """The whole agent, --provider openai with OPENAI_BASE_URL at a strict local server: the
    scripted model can only find the answer if it can read the user turns."""
    import shutil

    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    strict.push(*[Model("provider")] * 20)
    r = project.moss("@agent", "--provider", "openai", "--v2", "-n", "--output-format", "json",
                     "How many variants does Provider have?",
                     env={"OPENAI_BASE_URL": strict.openai_url, "OPENAI_API_KEY": "fake-key"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["answer"] == "13"
    for req in strict.requests:
        for m in req.body["messages"]:
            assert isinstance(m["content"], str), m
        assert "max_completion_tokens" not in req.body and req.body["max_tokens"] > 0


def test_reply_limit_is_honoured_by_a_local_openai_base_url(strict):
    strict.push("word " * 200)
    llm = LLM({}, {"provider": "openai"}, env={"OPENAI_BASE_URL": strict.openai_url, "OPENAI_API_KEY": "fake"})
    r = llm.chat({"prompt": "talk", "max_tokens": 10})
    assert r["stop_reason"] == "max_tokens"
    assert len(r["text"]) <= 40


def test_block_content_is_sent_as_one_string(strict):
    strict.push(lambda body: "saw: " + last_user_text(body))
    llm = LLM({"llm": {"providers": {"llamacpp": {"base_url": strict.openai_url}}}},
              {"provider": "llamacpp"}, env={})
    r = llm.chat({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "stable part\n\n", "cache": True}, {"type": "text", "text": "the question"}]}]})
    assert r["text"] == "saw: stable part\n\nthe question"


def test_openai_itself_still_gets_max_completion_tokens():
    """OpenAI's own endpoint wants max_completion_tokens (its reasoning models refuse
    max_tokens); every other endpoint gets max_tokens."""
    own = resolve_provider({}, {"provider": "openai"}, {"OPENAI_API_KEY": "fake"})
    req = {"system": None, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 7}
    assert build_params(req, own)["max_completion_tokens"] == 7
    local = resolve_provider({}, {"provider": "openai"}, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    params = build_params(req, local)
    assert params["max_tokens"] == 7 and "max_completion_tokens" not in params
    for name in ("ollama", "vllm", "groq", "openrouter"):
        p = resolve_provider({}, {"provider": name, "model": "m"}, {"GROQ_API_KEY": "k", "OPENROUTER_API_KEY": "k"})
        assert "max_tokens" in build_params(req, p), name
    # A provider of one's own can still ask for the other spelling.
    cfg = {"llm": {"providers": {"azure": {"base_url": "https://x.example/v1", "model": "m",
                                           "max_tokens_param": "max_completion_tokens"}}}}
    assert "max_completion_tokens" in build_params(req, resolve_provider(cfg, {"provider": "azure"}, {}))


def test_a_whole_session_fits_a_2048_token_server_window(project):
    """llama.cpp with `-c 2048`: moss asks the server its window (GET /props) once, and no
    request asks for more than the prompt leaves of it. The strict server refuses (400) any
    request whose prompt and max_tokens exceed its window, so one over-window request would
    end the session as an error."""
    import shutil

    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    with FakeAPI(strict=True, keyless=True, n_ctx=2048) as server:
        server.push(*[Model("provider")] * 30)
        project.write(".moss/config.toml", f'[llm.providers.llamacpp]\nbase_url = "{server.openai_url}"\n')
        r = project.moss("@agent", "--provider", "llamacpp", "-n", "--output-format", "json",
                         "How many variants does Provider have?")
        assert server.rejected == []
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout)["answer"] == "13"
        assert server.window_asks == 1  # once per session
        chats = [q.body for q in server.requests if q.path.endswith("/chat/completions")]
        assert len(chats) >= 2 and all(0 < b["max_tokens"] <= 1024 for b in chats)


def test_without_a_window_a_local_reply_is_capped_at_a_local_default(strict):
    """A local server that does not say its window (no /props) still gets no 16k-token reply
    limit: moss asks at most 1024 tokens of it unless [llm] max_output_tokens says more."""
    strict.push("hi", "hi")
    llm = LLM({"llm": {"providers": {"llamacpp": {"base_url": strict.openai_url}}}}, {"provider": "llamacpp"}, env={})
    llm.chat({"prompt": "talk"})
    assert strict.requests[-1].body["max_tokens"] == 1024
    more = LLM({"llm": {"max_output_tokens": 3000, "providers": {"llamacpp": {"base_url": strict.openai_url}}}},
               {"provider": "llamacpp"}, env={})
    more.chat({"prompt": "talk"})
    assert strict.requests[-1].body["max_tokens"] == 3000


def test_context_window_setting_overrides_what_the_server_says(project):
    with FakeAPI(strict=True, keyless=True, n_ctx=2048) as server:
        server.push("fine")
        cfg = {"llm": {"context_window": 1000, "providers": {"llamacpp": {"base_url": server.openai_url}}}}
        llm = LLM(cfg, {"provider": "llamacpp"}, env={})
        r = llm.chat({"prompt": "x" * 1200})
        assert r["max_tokens"] == server.requests[-1].body["max_tokens"]
        assert r["max_tokens"] <= 1000 - 1200 // 4 and server.window_asks == 0


def test_a_reply_cut_at_its_limit_tells_the_model_next_turn(project):
    """A turn that hits the cap (finish_reason length) goes on; the session's log says
    `truncated` and the next request carries a note from moss."""
    import shutil

    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    with FakeAPI(strict=True, keyless=True, n_ctx=2048) as server:
        server.push("$(view Cargo.toml) " + "and so on " * 2000, "$(answer A Rust crate.)")
        project.write(".moss/config.toml", f'[llm.providers.llamacpp]\nbase_url = "{server.openai_url}"\n')
        r = project.moss("@agent", "--provider", "llamacpp", "--v1", "-n", "--output-format", "json", "What is it?")
        assert r.returncode == 0, r.stderr[-2000:]
        result = json.loads(r.stdout)
        log = (project.root / ".moss" / "agent" / "logs" / f"{result['session_id']}.jsonl").read_text()
        events = [json.loads(line) for line in log.splitlines()]
        cut = [e for e in events if e["event"] == "truncated"]
        assert [e["turn"] for e in cut] == [1] and cut[0]["max_tokens"] <= 1024
        assert [e["cmd"] for e in events if e["event"] == "command"] == ["view Cargo.toml"]
        second = [q.body for q in server.requests if q.path.endswith("/chat/completions")][1]
        assert f"**{lua_value('lib.machine.messages', 'HEADING')}:**" in second["messages"][-1]["content"]
