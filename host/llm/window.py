"""How many tokens a local server can hold, and how long a reply may be.

A local server's context window is its own setting (llama.cpp `-c`, Ollama `num_ctx`, vLLM
`--max-model-len`), often far smaller than the model's: a request whose prompt and reply
limit exceed it makes the server generate until the window is full, or refuse. moss asks
the server once per session (LLM caches the answer):

    llama.cpp   GET  /props        -> n_ctx (or default_generation_settings.n_ctx)
    Ollama      POST /api/show     -> parameters `num_ctx N`, else model_info *.context_length
    vLLM        GET  /v1/models    -> data[].max_model_len of the model

Only stdlib (http.client), short timeouts; any failure means "unknown".
"""

from __future__ import annotations

import http.client
import json
import re
from urllib.parse import urlsplit

TIMEOUT = 2.0            # seconds for one question to the server
LOCAL_MAX_OUTPUT = 1024  # reply cap for a local server unless [llm] max_output_tokens says otherwise
MIN_REPLY = 16           # the least a reply may ask for, even of a window the prompt fills
CHARS_PER_TOKEN = 4      # as compaction counts (lib/machine/compact.lua); PER_MESSAGE adds a margin
PER_MESSAGE = 8          # tokens a chat template adds around each message


def _ask(url: str, method: str = "GET", body: dict | None = None, timeout: float = TIMEOUT):
    """The JSON a server answers at `url`, or None (refused, error status, not JSON)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn.request(method, parts.path or "/", body=data, headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            return None
        return json.loads(resp.read(4_000_000) or b"null")
    except (OSError, ValueError, http.client.HTTPException):
        return None
    finally:
        conn.close()


def _tokens(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value > 0 else None


def _root(base_url: str) -> str:
    """http://host:port/v1 -> http://host:port (where /props and /api/show live)."""
    return re.sub(r"/v1/?$", "", base_url.rstrip("/"))


def llamacpp(base_url: str, model: str | None = None) -> int | None:
    props = _ask(_root(base_url) + "/props")
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    return _tokens(props.get("n_ctx")) or (_tokens(settings.get("n_ctx")) if isinstance(settings, dict) else None)


def ollama(base_url: str, model: str | None = None) -> int | None:
    if not model:
        return None
    show = _ask(_root(base_url) + "/api/show", "POST", {"model": model})
    if not isinstance(show, dict):
        return None
    m = re.search(r"(?m)^\s*num_ctx\s+(\d+)\s*$", str(show.get("parameters") or ""))
    if m:
        return _tokens(int(m.group(1)))
    info = show.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if str(key).endswith(".context_length") and _tokens(value):
                return _tokens(value)
    return None


def vllm(base_url: str, model: str | None = None) -> int | None:
    listing = _ask(base_url.rstrip("/") + "/models")
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return None
    rows = [d for d in data if isinstance(d, dict)]
    for d in rows:
        if d.get("id") == model and _tokens(d.get("max_model_len")):
            return _tokens(d["max_model_len"])
    lens = [_tokens(d.get("max_model_len")) for d in rows]
    return next((n for n in lens if n), None)


# Which question each kind of server answers. A server of another name (an OPENAI_BASE_URL
# at a local server) is asked llama.cpp's question only: GET /props is unknown elsewhere and
# costs a 404 at most.
ASK = {"llamacpp": (llamacpp,), "ollama": (ollama,), "vllm": (vllm,)}
ANY = (llamacpp,)


def server_window(name: str, base_url: str | None, model: str | None) -> int | None:
    """The context window (tokens) the server at base_url says it has, or None."""
    if not base_url:
        return None
    for ask in ASK.get(name, ANY):
        n = ask(base_url, model)
        if n:
            return n
    return None


def is_loopback(base_url: str | None) -> bool:
    host = (urlsplit(base_url or "").hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def prompt_tokens(req: dict) -> int:
    """An estimate of a normalised request's prompt, in tokens (4 characters a token, plus the
    chat template's own per message)."""
    chars = len(req.get("system") or "")
    for m in req["messages"]:
        c = m["content"]
        chars += len(c) if isinstance(c, str) else sum(len(str(b.get("text", ""))) for b in c)
    return chars // CHARS_PER_TOKEN + PER_MESSAGE * (len(req["messages"]) + 1)
