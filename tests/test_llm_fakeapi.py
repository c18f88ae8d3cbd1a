"""The fake API server itself: what the other LLM tests rely on."""

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path


from fakeapi import FakeAPI, cut, error

FAKEAPI = Path(__file__).with_name("fakeapi.py")


def post(url, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_missing_key_is_401_unless_keyless():
    body = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    with FakeAPI() as api:
        api.push("hello")
        status, _, text = post(api.anthropic_url + "/v1/messages", body)
        assert status == 401 and json.loads(text)["error"]["type"] == "authentication_error"
        status, _, text = post(api.anthropic_url + "/v1/messages", body, {"x-api-key": "k"})
        assert status == 200 and json.loads(text)["content"][0]["text"] == "hello"
    with FakeAPI(keyless=True) as api:
        api.push("hi")
        assert post(api.openai_url + "/chat/completions", body)[0] == 200


def test_requests_are_recorded_and_exhaustion_is_a_500():
    with FakeAPI() as api:
        status, _, text = post(api.openai_url + "/chat/completions", {"messages": []},
                               {"authorization": "Bearer test-key"})
        assert status == 500 and "fakeapi: script exhausted" in text
        assert api.requests[0].path == "/v1/chat/completions"
        assert api.requests[0].headers["authorization"] == "Bearer test-key"
        assert api.requests[0].body == {"messages": []}


def test_fault_headers_and_cut_stream_shape():
    with FakeAPI() as api:
        api.push(error(429, retry_after=2, retry_after_ms=5), cut("a b c d", after=2))
        status, headers, _ = post(api.anthropic_url + "/v1/messages", {}, {"x-api-key": "k"})
        assert status == 429 and headers["retry-after"] == "2" and headers["retry-after-ms"] == "5"
        status, _, text = post(api.anthropic_url + "/v1/messages", {"stream": True, "messages": []},
                               {"x-api-key": "k"})
        assert status == 200
        events = [line[7:] for line in text.splitlines() if line.startswith("event: ")]
        assert events == ["message_start", "content_block_start", "ping", "content_block_delta",
                          "content_block_delta"]  # and then the connection closed


def test_openai_stream_shape():
    with FakeAPI() as api:
        api.push("x y")
        _, _, text = post(api.openai_url + "/chat/completions",
                          {"stream": True, "stream_options": {"include_usage": True}, "messages": []},
                          {"authorization": "Bearer k"})
        data = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
        assert data[-1] == "[DONE]"
        chunks = [json.loads(d) for d in data[:-1]]
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"]) == "x y"
        assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 1


def test_command_line_server(tmp_path):
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["from the command line"]))
    proc = subprocess.Popen([sys.executable, str(FAKEAPI), "--script", str(script)],
                            stdout=subprocess.PIPE, text=True)
    try:
        exports = dict(proc.stdout.readline().strip()[len("export "):].split("=", 1) for _ in range(4))
        _, _, text = post(exports["OPENAI_BASE_URL"] + "/chat/completions", {"messages": []},
                          {"authorization": "Bearer test-key"})
        assert json.loads(text)["choices"][0]["message"]["content"] == "from the command line"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
