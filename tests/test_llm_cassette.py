"""Deterministic LLM answers: record, replay, script."""

import json

import pytest

from fakeapi import FakeAPI, last_user_text
from moss.errors import MossError
from moss.llm import LLM

CONVERSATION = [{"role": "user", "content": "Plan the fix."},
                {"role": "assistant", "content": "1. read the code 2. patch it"},
                {"role": "user", "content": "Now patch parser.py"}]


def test_record_then_replay_returns_identical_results(tmp_path):
    cassette = tmp_path / "run.jsonl"
    requests = [{"system": "sys", "messages": [{"role": "user", "content": "What is 2+2?"}], "max_tokens": 50},
                {"system": "sys", "messages": CONVERSATION, "stop": ["DONE"], "temperature": 0.0}]
    with FakeAPI() as api:
        api.push(lambda body: "answer to " + last_user_text(body), lambda body: "patched it")
        recorder = LLM({}, {"provider": "anthropic", "record": str(cassette)}, env=api.env())
        recorded = [recorder.chat(r) for r in requests]
    lines = [json.loads(line) for line in cassette.read_text().splitlines()]
    assert len(lines) == 2 and lines[0]["request"]["messages"][0]["content"] == "What is 2+2?"
    assert lines[0]["request"]["model"] is None  # the call relied on the default: replays anywhere
    assert len(lines[0]["key"]) == 64

    streamed = []
    replayer = LLM({}, {"replay": str(cassette)}, env={}, stream=streamed.append)  # no key, no server
    replayed = [replayer.chat(r) for r in requests]
    for a, b in zip(recorded, replayed):
        assert {k: a[k] for k in ("text", "stop_reason", "model", "usage")} == \
            {k: b[k] for k in ("text", "stop_reason", "model", "usage")}
        assert b["provider"] == "replay"
    assert streamed == ["answer to What is 2+2?", "patched it"]
    assert replayer.usage["output_tokens"] == recorder.usage["output_tokens"]
    assert replayer.usage["cost_usd"] == pytest.approx(recorder.usage["cost_usd"])  # budgets work in replay


def _cassette(tmp_path):
    cassette = tmp_path / "c.jsonl"
    with FakeAPI() as api:
        api.push("one", "two")
        llm = LLM({}, {"provider": "openai", "record": str(cassette)}, env=api.env())
        llm.chat({"prompt": "What is 2+2?"})
        llm.chat({"system": "sys", "messages": CONVERSATION})
    return cassette


def test_changed_prompt_names_the_differing_field(tmp_path):
    cassette = _cassette(tmp_path)
    replayer = LLM({}, {"provider": "replay", "replay": str(cassette)}, env={})
    with pytest.raises(MossError) as e:
        replayer.chat({"prompt": "What is 2+3?"})
    assert e.value.kind == "llm"
    assert "nearest is entry 1: messages[0].content differs: recorded 'What is 2+2?' vs now 'What is 2+3?'" \
        in e.value.message
    changed = [*CONVERSATION[:2], {"role": "user", "content": "Now patch lexer.py"}]
    with pytest.raises(MossError, match=r"entry 2: messages\[2\].content differs: recorded "
                                        r"'Now patch parser.py' vs now 'Now patch lexer.py'"):
        replayer.chat({"system": "sys", "messages": changed})
    with pytest.raises(MossError, match=r"entry 2: system differs: recorded 'sys' vs now 'other'"):
        replayer.chat({"system": "other", "messages": CONVERSATION})
    with pytest.raises(MossError, match=r"max_tokens differs: recorded 16384 vs now 10"):
        replayer.chat({"prompt": "What is 2+2?", "max_tokens": 10})


def test_replay_long_texts_show_where_they_differ(tmp_path):
    cassette = tmp_path / "c.jsonl"
    long = "x" * 200 + " the end"
    with FakeAPI() as api:
        api.push("ok")
        LLM({}, {"provider": "anthropic", "record": str(cassette)}, env=api.env()).chat({"prompt": long})
    with pytest.raises(MossError) as e:
        LLM({}, {"replay": str(cassette)}, env={}).chat({"prompt": long.replace("end", "END")})
    # The excerpt starts shortly before the first differing character.
    assert f"recorded ...'{'x' * 15} the end' vs now ...'{'x' * 15} the END'" in e.value.message


def test_missing_cassette_is_a_clear_error(tmp_path):
    with pytest.raises(MossError, match="cannot read the cassette .*nope.jsonl") as e:
        LLM({}, {"replay": str(tmp_path / "nope.jsonl")}, env={}).chat({"prompt": "hi"})
    assert e.value.kind == "config"


def test_script_answers_in_order_then_is_exhausted(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["first", {"text": "second", "stop_reason": "max_tokens"}]))
    events = []
    llm = LLM({}, {"script": str(script)}, env={}, on_event=lambda n, f: events.append(n))
    first = llm.chat({"prompt": "a"})
    second = llm.chat({"prompt": "b"})
    assert (first["text"], first["stop_reason"], first["provider"]) == ("first", "end_turn", "script")
    assert (second["text"], second["stop_reason"]) == ("second", "max_tokens")
    assert first["usage"]["output_tokens"] > 0 and first["usage"]["cost_usd"] is None
    with pytest.raises(MossError) as e:
        llm.chat({"prompt": "c"})
    assert e.value.kind == "llm" and "script exhausted after 2 responses" in e.value.message
    assert events[-1] == "llm_error" and llm.usage["calls"] == 2


def test_script_accepts_jsonl_and_respects_budgets(tmp_path):
    script = tmp_path / "script.jsonl"
    script.write_text('"a reply long enough to spend the budget"\n{"text": "never"}\n')
    llm = LLM({"llm": {"max_total_tokens": 5}}, {"provider": "script", "script": str(script)}, env={})
    assert llm.chat({"prompt": "hi"})["text"] == "a reply long enough to spend the budget"
    with pytest.raises(MossError, match="token budget spent") as e:
        llm.chat({"prompt": "again"})
    assert e.value.kind == "budget"


def test_script_cost_with_a_configured_price(tmp_path):
    script = tmp_path / "s.json"
    script.write_text('["x"]')
    llm = LLM({"llm": {"pricing": {"script": {"input": 1e6, "output": 1e6}}}}, {"script": str(script)}, env={})
    usage = llm.chat({"prompt": "abcdefgh"})["usage"]
    assert usage["cost_usd"] == usage["input_tokens"] + usage["output_tokens"]


def test_bad_script_file(tmp_path):
    script = tmp_path / "s.json"
    script.write_text('[{"txt": "typo"}]')
    with pytest.raises(MossError, match=r"response 1 must be a string or an object with a \"text\""):
        LLM({}, {"script": str(script)}, env={}).chat({"prompt": "x"})
    script.write_text('["ok", ')
    with pytest.raises(MossError, match="not valid JSON"):
        LLM({}, {"script": str(script)}, env={}).chat({"prompt": "x"})


def test_a_miss_says_which_request_and_its_event_carries_where(tmp_path):
    """Replaying a conversation whose second request changed: the first is answered, the second
    fails naming request 2, and its `llm_error` event says the same as fields (what a caller in
    another process, `moss eval --replay`, reads from the session log): the last user message
    changed, with excerpts of both."""
    cassette = _cassette(tmp_path)
    events = []
    replayer = LLM({}, {"replay": str(cassette)}, env={}, on_event=lambda n, f: events.append((n, f)))
    assert replayer.chat({"prompt": "What is 2+2?"})["text"] == "one"
    changed = [*CONVERSATION[:2], {"role": "user", "content": "Now patch lexer.py"}]
    with pytest.raises(MossError, match=r"no recorded answer for request 2 in .*c.jsonl; nearest is entry 2"):
        replayer.chat({"system": "sys", "messages": changed})
    [d] = [f["divergence"] for n, f in events if n == "llm_error"]
    assert d == {"request": 2, "entry": 2, "field": "messages[2].content", "what": "the last user message",
                 "recorded": "'Now patch parser.py'", "now": "'Now patch lexer.py'",
                 "detail": "messages[2].content differs: recorded 'Now patch parser.py' vs now 'Now patch lexer.py'"}
    with pytest.raises(MossError) as e:
        replayer.chat({"system": "another", "messages": CONVERSATION})
    assert e.value.data["divergence"]["what"] == "the system prompt" and e.value.data["divergence"]["request"] == 3
