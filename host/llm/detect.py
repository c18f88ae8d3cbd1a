"""Find a local OpenAI-compatible server when no provider was chosen.

With no `--provider`, no `[llm] provider` and no key in the environment, moss asks the usual
loopback ports whether an OpenAI-compatible server listens there (GET /v1/models), all at
once with short timeouts, and uses the first that answers, in this order:

    Ollama 11434 · llama.cpp 8080 · LM Studio 1234 · vLLM 8000

A closed port refuses at once, so the usual cost is a few milliseconds; a port that accepts
but never answers costs at most TIMEOUT. Only stdlib (http.client, threads): no SDK import.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import NamedTuple

# (preset name, port, what people call it)
LOCAL_SERVERS: tuple[tuple[str, int, str], ...] = (
    ("ollama", 11434, "Ollama"),
    ("llamacpp", 8080, "llama.cpp"),
    ("lmstudio", 1234, "LM Studio"),
    ("vllm", 8000, "vLLM"),
)
HOST = "127.0.0.1"
TIMEOUT = 0.4  # seconds for one probe (connect + answer); they run in parallel


class Found(NamedTuple):
    name: str  # preset name: ollama, llamacpp, lmstudio, vllm
    label: str  # Ollama, llama.cpp, ...
    base_url: str  # http://127.0.0.1:PORT/v1
    models: list[str]  # what GET /v1/models listed, in its order


def tried_text(servers=LOCAL_SERVERS) -> str:
    """`127.0.0.1:11434 (Ollama), :8080 (llama.cpp), ...` for messages."""
    parts = [f":{port} ({label})" for _, port, label in servers]
    return HOST + ", ".join(parts) if parts else "no ports"


def probe(port: int, timeout: float = TIMEOUT, host: str = HOST) -> list[str] | None:
    """The model ids an OpenAI-compatible server on host:port lists, or None when nothing
    answers there like one (refused, timeout, not JSON, no `data` list)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", "/v1/models", headers={"Accept": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return None
        body = json.loads(resp.read(1_000_000) or b"null")
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


def scan(servers=LOCAL_SERVERS, timeout: float = TIMEOUT) -> list[Found]:
    """Every server that answers, in the order of `servers` (probed in parallel)."""
    results: dict[int, list[str] | None] = {}

    def run(port: int) -> None:
        results[port] = probe(port, timeout)

    threads = [threading.Thread(target=run, args=(port,), daemon=True) for _, port, _ in servers]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout + 0.1
    for t in threads:
        t.join(max(deadline - time.monotonic(), 0))
    return [Found(name, label, f"http://{HOST}:{port}/v1", models)
            for name, port, label in servers if (models := results.get(port)) is not None]


def _matches(wanted: str, served: str) -> bool:
    """`llama3.2` is Ollama's `llama3.2:latest`."""
    return served == wanted or served == wanted + ":latest"


def choose(found: list[Found], wanted: str | None) -> tuple[Found, str] | None:
    """The server and model to use: a server that serves the wanted model, else the first
    server with its first model (or the wanted one, when the user named it)."""
    if wanted:
        for f in found:
            for m in f.models:
                if _matches(wanted, m):
                    return f, m
    for f in found:
        if wanted:
            return f, wanted
        if f.models:
            return f, f.models[0]
    return None
