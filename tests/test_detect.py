"""A local model found by itself: with no provider chosen by flag, config or key, moss asks
the usual loopback ports (Ollama 11434, llama.cpp 8080, LM Studio 1234, vLLM 8000) for an
OpenAI-compatible server, and says which it uses; with none, it stops before any turn."""

from __future__ import annotations

import shutil
import socket
import time

import pytest
from agentmodel import Model
from conftest import FIXTURES
from fakeapi import FakeAPI

from moss.errors import MossError
from moss.llm import detect, resolve_provider

PORTS = [port for _, port, _ in detect.LOCAL_SERVERS]


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def ollama():
    """A fake OpenAI-compatible server on Ollama's port, serving two models."""
    try:
        server = FakeAPI(port=11434, keyless=True, models=["llama3.2:latest", "qwen3-coder:latest"])
    except OSError:
        pytest.skip("port 11434 is taken on this machine (a real Ollama?): cannot stand in for it")
    with server:
        yield server


def test_agent_uses_a_local_server_found_running(project, ollama):
    """The README's first command for a user who only has Ollama running."""
    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    ollama.push(*[Model("provider")] * 20)
    r = project.moss("@agent", "How many variants does Provider have?")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().endswith("13")
    assert "using Ollama at http://127.0.0.1:11434/v1, model llama3.2:latest" in r.stderr
    assert ollama.requests[0].path == "/v1/models"
    chats = [q.body for q in ollama.requests if q.path.endswith("/chat/completions")]
    assert chats and all(b["model"] == "llama3.2:latest" for b in chats)


def test_the_configured_model_is_chosen_among_those_served(project, ollama):
    project.user_file("config.toml", '[llm]\nmodel = "qwen3-coder"\n')
    project.script("hello", 'local p = moss.llm.provider()\nprint(p.name, p.model, p.detected)\n')
    r = project.moss("@hello")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ollama", "qwen3-coder:latest", "Ollama"]


def test_nothing_running_stops_before_any_turn(project):
    busy = [p for p in PORTS if listening(p)]
    if busy:
        pytest.skip(f"something listens on 127.0.0.1:{busy[0]} here, so 'nothing running' cannot be tested")
    start = time.monotonic()
    r = project.moss("@agent", "what does this project do?")
    took = time.monotonic() - start
    assert r.returncode == 2, r.stderr
    assert "Turn" not in r.stderr and "role:" not in r.stderr
    first = r.stderr.strip().splitlines()[0]
    assert "No LLM provider is configured" in first
    for port, name in ((11434, "Ollama"), (8080, "llama.cpp"), (1234, "LM Studio"), (8000, "vLLM")):
        assert f":{port} ({name})" in first
    assert ".lua:" not in r.stderr  # the host's message, not a Lua traceback position
    assert took < 20  # generous: the suite shares its CPUs; see the scan timing test below


def test_scan_is_parallel_and_bounded_even_when_a_port_hangs():
    """A port that accepts and never answers costs at most the probe timeout, in parallel
    with the others: the whole look-around stays well under a second."""
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)
    port = hung.getsockname()[1]
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    try:
        servers = [("a", port, "Hung"), ("b", closed_port, "Closed"), ("c", port, "Hung again")]
        start = time.monotonic()
        assert detect.scan(servers) == []
        assert time.monotonic() - start < 0.9
    finally:
        hung.close()


def test_scan_finds_a_server_and_its_models():
    with FakeAPI(keyless=True, models=["m1", "m2"]) as server:
        found = detect.scan([("vllm", server.port, "vLLM")])
    assert found == [detect.Found("vllm", "vLLM", f"http://127.0.0.1:{server.port}/v1", ["m1", "m2"])]


def fake_scan(*found):
    return lambda: list(found)


def test_resolution_rules_with_detection():
    a = detect.Found("ollama", "Ollama", "http://127.0.0.1:11434/v1", ["llama3.2:latest"])
    b = detect.Found("llamacpp", "llama.cpp", "http://127.0.0.1:8080/v1", ["gemma.gguf"])
    p = resolve_provider({}, {}, {}, detect=fake_scan(a, b))
    assert (p.name, p.model, p.base_url, p.local, p.detected) == (
        "ollama", "llama3.2:latest", "http://127.0.0.1:11434/v1", True, "Ollama")
    assert p.max_tokens_param == "max_tokens" and p.api_key == "no-key"
    # The configured model picks the server that serves it.
    assert resolve_provider({"llm": {"model": "gemma.gguf"}}, {}, {}, detect=fake_scan(a, b)).name == "llamacpp"
    # A key in the environment, a flag or the config wins: no detection at all.
    called = []
    probe = lambda: called.append(1) or [a]  # noqa: E731
    assert resolve_provider({}, {}, {"ANTHROPIC_API_KEY": "fake"}, detect=probe).name == "anthropic"
    assert resolve_provider({"llm": {"provider": "vllm", "model": "m"}}, {}, {}, detect=probe).name == "vllm"
    assert called == []
    # A server without any model says how to get one.
    empty = detect.Found("ollama", "Ollama", "http://127.0.0.1:11434/v1", [])
    with pytest.raises(MossError, match="Ollama answers at .* serves no model: ollama pull"):
        resolve_provider({}, {}, {}, detect=fake_scan(empty))


def test_detection_can_be_turned_off(project):
    project.user_file("config.toml", "[llm]\ndetect = false\n")
    project.script("which", "print(moss.llm.provider().name)\n")
    r = project.moss("@which")
    assert r.returncode == 2
    assert "No LLM provider is configured" in r.stderr and "11434" not in r.stderr


def test_moss_llm_provider_reports_a_configured_provider(project):
    project.script("which", "local p = moss.llm.provider() print(p.name, p.model, p.is_local, p.detected)\n")
    r = project.moss("@which", "--provider", "ollama", "--model", "m")
    assert r.stdout.split() == ["ollama", "m", "true", "nil"]
