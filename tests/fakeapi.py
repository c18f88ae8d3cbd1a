"""A fake LLM API server for tests: Anthropic Messages and OpenAI Chat Completions.

A real HTTP server on 127.0.0.1 (stdlib only), so the real anthropic / openai SDKs, their
retries, SSE parsing and timeouts are exercised, also from subprocesses (see `env()`).

    with FakeAPI() as api:
        api.push("hello", error(429, retry_after_ms=1), lambda req: "seen %d messages" % len(req["messages"]))
        ...  # point a client at api.anthropic_url (no /v1) or api.openai_url (with /v1)
        api.requests[0].body["messages"]

A reply is a string (the text), a callable(request_body) -> str or reply dict, or a reply
dict: {"text", "status", "headers", "message", "delay", "chunk_delay", "cut_after",
"stop_reason"}; build them with error(), slow() and cut(). No reply left => 500
"fakeapi: script exhausted".

A reply can also be held back until the test says so, to talk to a client while its model
"thinks" without guessing how long that takes:

    gate = held("$(view .)")
    api.push(gate)               # or a callable reply that returns gate
    gate.wait_reached()          # a request is being held: the client waits for its answer
    ...                          # act, and see the client's reaction while nothing was answered
    assert gate.held             # still nothing sent
    gate.release()               # now the reply goes out

Every request that takes the same Hold waits for the one release(). So that nothing hangs
forever, a held reply goes out anyway after its `timeout` (gate.timed_out then says so), and
when the server stops.

The X-Moss-Label header moss sends with a machine's request ("ROLE/STATE", e.g.
"explorer/evaluator") is readable as body["_moss_label"] (see label_of), so a scripted model
can tell states and roles apart without reading prompts that users are invited to edit.

`FakeAPI(strict=True)` behaves like the strict local OpenAI-compatible servers (llama.cpp's,
and others built on the same template code): a message whose content is a list of blocks
reaches the model as empty text, and `max_completion_tokens` is ignored (only `max_tokens`
limits the reply). Scripted replies then see the body as such a server sees it, while
`requests` keeps what was sent.

`FakeAPI(strict=True, n_ctx=2048)` also has llama.cpp's window: GET /props answers
{"n_ctx": 2048, "default_generation_settings": {"n_ctx": 2048}}, and a chat request whose
prompt (estimate_tokens of each message, plus 4 a message) and `max_tokens` together exceed
n_ctx is refused with a 400, as a server whose context is full would refuse it. POST
/api/show answers Ollama's way (`num_ctx N` in its parameters). `window_asks` counts these
questions (they are not in `requests`).

`api.completed` holds the requests whose reply was sent to its end; `api.disconnected` those
whose client closed the connection before that (a cancelled stream: the write after the
client's close fails); `api.deltas` counts the text deltas streamed so far, over all requests.

GET /v1/models lists `models` (default ["fake-model"]), as local servers do; moss's
local-server detection reads it.

`FakeAPI(tls=(certfile, keyfile))` serves HTTPS with that certificate (the URLs then say
https), to test what a client trusts.

Manual run: python tests/fakeapi.py --port 8765 --script replies.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}


def error(status: int, message: str | None = None, retry_after: float | None = None,
          retry_after_ms: int | None = None, headers: dict | None = None) -> dict:
    """An HTTP error reply (429 with retry headers, 500, 401, 403, ...)."""
    h = dict(headers or {})
    if retry_after is not None:
        h["retry-after"] = str(retry_after)
    if retry_after_ms is not None:
        h["retry-after-ms"] = str(retry_after_ms)
    return {"status": status, "headers": h, "message": message or f"fakeapi: injected {status}"}


def slow(text: str, delay: float = 0.0, chunk_delay: float = 0.0) -> dict:
    """Answer `text` after `delay` seconds (and, when streaming, `chunk_delay` between deltas)."""
    return {"text": text, "delay": delay, "chunk_delay": chunk_delay}


def cut(text: str, after: int = 2) -> dict:
    """Stream `after` deltas of `text`, then close the connection without the final events."""
    return {"text": text, "cut_after": after}


class Hold:
    """A reply the server holds back until `release()` (see the module docstring)."""

    def __init__(self, reply: Any, timeout: float = 60.0):
        self.reply = reply  # a string, a reply dict or a callable(request_body), as for push()
        self.timeout = timeout
        self.timed_out = False  # the safety timeout sent the reply, not the test
        self._released = threading.Event()
        self._reached = threading.Event()
        self._lock = threading.Lock()
        self._waiting = 0

    def release(self) -> None:
        self._released.set()

    @property
    def held(self) -> bool:
        """A request reached this reply and nothing has been sent for it yet."""
        with self._lock:
            return self._waiting > 0

    def wait_reached(self, timeout: float = 20.0) -> bool:
        """Until a request is held here (True), or `timeout` seconds passed (False)."""
        return self._reached.wait(timeout)

    def _hold(self) -> None:
        with self._lock:
            self._waiting += 1
        self._reached.set()
        try:
            if not self._released.wait(self.timeout):
                self.timed_out = True
        finally:
            with self._lock:
                self._waiting -= 1


def held(reply: Any, timeout: float = 60.0) -> Hold:
    """`reply`, held back until the test calls .release() on what this returns."""
    return Hold(reply, timeout)


def estimate_tokens(text: str) -> int:
    return len(text) // 4 + 1


MAX_DELTAS = 2_000  # a reply longer than this many words streams in larger deltas


def chunks(text: str) -> list[str]:
    """Split text into word-sized deltas (at least one, so an empty text still streams). A
    reply of more words (a flood a test sends, megabytes long) comes in at most MAX_DELTAS
    deltas of several words each: word by word, the SDK's parsing of 300,000 events took the
    test 15 s, and what such a test is about is the whole reply, not its deltas."""
    words = re.findall(r"\S+\s*|\s+", text) or [""]
    if len(words) <= MAX_DELTAS:
        return words
    step = -(-len(words) // MAX_DELTAS)
    return ["".join(words[i:i + step]) for i in range(0, len(words), step)]


class Request(NamedTuple):
    path: str
    headers: dict  # lower-cased names
    body: Any


class FakeAPI:
    def __init__(self, keyless: bool = False, api_key: str | None = None, port: int = 0,
                 strict: bool = False, models: list[str] | None = None, host: str = "127.0.0.1",
                 tls: tuple[str, str] | None = None, n_ctx: int | None = None):
        self.keyless, self.api_key, self.strict = keyless, api_key, strict
        self.n_ctx = n_ctx
        self.window_asks = 0
        self.rejected: list[str] = []  # why each over-window request was refused
        self.models = list(models) if models is not None else ["fake-model"]
        self.requests: list[Request] = []
        self.replies: deque = deque()
        self.served = 0  # replies taken from the queue so far
        self.completed: list[Request] = []  # replies sent to their end
        self.disconnected: list[Request] = []  # replies the client hung up on
        self.deltas = 0  # text deltas streamed so far
        self._lock = threading.Lock()
        self._seen_prefixes: set[str] = set()
        self._holds: list[Hold] = []  # released when the server stops
        self._stopping = threading.Event()
        self._hurry = threading.Event()  # set by hurry() and by stop(): chunk delays end
        self._server = ThreadingHTTPServer((host, port), _Handler)
        self._server.daemon_threads = True
        self._server.fake = self  # type: ignore[attr-defined]
        self.scheme = "http"
        if tls is not None:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> "FakeAPI":
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._hurry.set()
        with self._lock:
            holds = list(self._holds)
        for h in holds:
            h.release()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeAPI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers for tests -------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def anthropic_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/v1"

    def env(self, provider: str | None = None) -> dict[str, str]:
        """The variables that point a process's moss at this server: both providers' (moss then
        picks anthropic), or only `provider`'s ("anthropic" or "openai")."""
        both = {"anthropic": {"ANTHROPIC_BASE_URL": self.anthropic_url, "ANTHROPIC_API_KEY": "test-key"},
                "openai": {"OPENAI_BASE_URL": self.openai_url, "OPENAI_API_KEY": "test-key"}}
        if provider is not None:
            return dict(both[provider])
        return {**both["anthropic"], **both["openai"]}

    def push(self, *replies) -> "FakeAPI":
        with self._lock:
            self.replies.extend(replies)
        return self

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def hurry(self) -> None:
        """Stream what is left of every reply without its `chunk_delay`: a test that has seen
        what it needed a slow stream for does not wait out the rest of it."""
        self._hurry.set()

    def chunk_sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._hurry.wait(seconds)

    # -- answering ---------------------------------------------------------------------
    def next_reply(self, body: Any) -> dict:
        with self._lock:
            if not self.replies:
                return {"status": 500, "message": f"fakeapi: script exhausted after {self.served} replies"}
            reply = self.replies.popleft()
            self.served += 1
        if callable(reply):
            reply = reply(body)
        hold = None
        if isinstance(reply, Hold):
            hold, reply = reply, reply.reply
            with self._lock:
                self._holds.append(hold)
            if self._stopping.is_set():
                hold.release()
            if callable(reply):
                reply = reply(body)
        if isinstance(reply, str):
            reply = {"text": reply}
        if callable(reply.get("text")):
            reply = {**reply, "text": reply["text"](body)}
        if hold is not None:
            reply = {**reply, "hold": hold}
        return reply

    def cache_usage(self, body: dict) -> tuple[int, int, int]:
        """Anthropic prompt caching: (input, cache_creation, cache_read) token counts."""
        blocks: list[tuple[str, bool]] = []  # (text, marked) in prompt order
        system = body.get("system") or []
        for b in [{"text": system}] if isinstance(system, str) else system:
            blocks.append(("system:" + b.get("text", ""), bool(b.get("cache_control"))))
        for m in body.get("messages", []):
            content = m.get("content")
            for b in [{"text": content}] if isinstance(content, str) else content or []:
                blocks.append((m.get("role", "") + ":" + str(b.get("text", "")), bool(b.get("cache_control"))))
        sizes = [estimate_tokens(t) for t, _ in blocks]
        total = sum(sizes)
        read = write_end = 0
        with self._lock:
            for i, (_, marked) in enumerate(blocks):
                if not marked:
                    continue
                key = hashlib.sha256(json.dumps([t for t, _ in blocks[: i + 1]]).encode()).hexdigest()
                upto = sum(sizes[: i + 1])
                if key in self._seen_prefixes:
                    read = upto
                write_end = upto
                self._seen_prefixes.add(key)
        write = max(write_end - read, 0)
        return max(total - read - write, 0), write, read

    def openai_cached(self, body: dict) -> tuple[int, int]:
        """(prompt_tokens, cached_tokens): a repeated identical system prompt counts as cached."""
        msgs = body.get("messages", [])
        total = sum(estimate_tokens(_text_of(m.get("content"))) for m in msgs)
        if msgs and msgs[0].get("role") in ("system", "developer"):
            key = "openai:" + _text_of(msgs[0].get("content"))
            with self._lock:
                seen = key in self._seen_prefixes
                self._seen_prefixes.add(key)
            if seen:
                return total, estimate_tokens(_text_of(msgs[0].get("content")))
        return total, 0


def label_of(body: dict) -> str | None:
    """"ROLE/STATE" of the machine turn that sent this request (its X-Moss-Label header)."""
    return body.get("_moss_label")


def state_of(body: dict) -> str:
    """The machine state that asked (planner, explorer, evaluator, agent, thinking, ...)."""
    return (label_of(body) or "agent").rpartition("/")[2]


def role_of(body: dict) -> str | None:
    """The role of the session that asked (explorer, auditor, refactorer, ...)."""
    label = label_of(body) or ""
    return label.rpartition("/")[0] or None


def last_user_text(body: dict) -> str:
    """The text of the last user message in an Anthropic or OpenAI request body."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return _text_of(users[-1].get("content")) if users else ""


def system_text(body: dict) -> str:
    """The system prompt of an Anthropic (`system`) or OpenAI (first message) request body."""
    if "system" in body:
        return _text_of([{"text": body["system"]}] if isinstance(body["system"], str) else body["system"])
    msgs = body.get("messages", [])
    return _text_of(msgs[0].get("content")) if msgs and msgs[0].get("role") in ("system", "developer") else ""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def strict_view(body: dict) -> dict:
    """The request as a strict local server understands it: block lists read as empty text,
    max_completion_tokens unknown (so ignored)."""
    seen = {k: v for k, v in body.items() if k != "max_completion_tokens"}
    seen["messages"] = [{**m, "content": m.get("content") if isinstance(m.get("content"), str) else ""}
                        for m in body.get("messages", []) if isinstance(m, dict)]
    return seen


def prompt_tokens(body: dict) -> int:
    """A chat request's prompt as the window check counts it."""
    return sum(estimate_tokens(_text_of(m.get("content"))) + 4 for m in body.get("messages", [])
               if isinstance(m, dict))


def _apply_limits(text: str, body: dict, stop_key: str) -> tuple[str, str, str | None]:
    """Honour stop sequences and max_tokens like a model: -> (text, reason, stop_sequence)."""
    stops = body.get(stop_key) or []
    stops = [stops] if isinstance(stops, str) else stops
    hits = [(text.find(s), s) for s in stops if s and s in text]
    if hits:
        pos, seq = min(hits)
        return text[:pos], "stop_sequence", seq
    limit = body.get("max_tokens") or body.get("max_completion_tokens")
    if limit and estimate_tokens(text) > limit:
        return text[: limit * 4], "max_tokens", None
    return text, "end_turn", None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one request per connection; streams end when we close

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    @property
    def fake(self) -> FakeAPI:
        return self.server.fake  # type: ignore[attr-defined]

    def do_GET(self) -> None:
        try:
            if self.path.rstrip("/") == "/props" and self.fake.n_ctx:
                with self.fake._lock:
                    self.fake.window_asks += 1
                n = self.fake.n_ctx
                return self._json(200, {"n_ctx": n, "default_generation_settings": {"n_ctx": n}})
            if self.path.rstrip("/").endswith("/models"):
                with self.fake._lock:
                    self.fake.requests.append(Request(self.path, {k.lower(): v for k, v in self.headers.items()},
                                                      None))
                if "anthropic-version" in {k.lower() for k in self.headers.keys()}:
                    return self._json(200, {"data": [
                        {"id": m, "type": "model", "display_name": m, "created_at": "2026-01-01T00:00:00Z"}
                        for m in self.fake.models], "has_more": False,
                        "first_id": self.fake.models[0] if self.fake.models else None,
                        "last_id": self.fake.models[-1] if self.fake.models else None})
                return self._json(200, {"object": "list", "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "fakeapi"} for m in self.fake.models]})
            self._error(404, f"fakeapi: no route for GET {self.path}", "openai")
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            pass

    def do_POST(self) -> None:
        self._request: Request | None = None
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            # the client gave up (a timeout, a cancelled stream): nothing to answer
            if self._request is not None:
                with self.fake._lock:
                    self.fake.disconnected.append(self._request)
            return
        if self._request is not None:
            with self.fake._lock:
                self.fake.completed.append(self._request)

    def _post(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        headers = {k.lower(): v for k, v in self.headers.items()}
        if self.path.rstrip("/") == "/api/show":  # Ollama's window question
            with self.fake._lock:
                self.fake.window_asks += 1
            if not self.fake.n_ctx:
                return self._error(404, "fakeapi: no /api/show", "openai")
            return self._json(200, {"parameters": f"num_ctx {self.fake.n_ctx}", "model_info": {}})
        if isinstance(body, dict) and "x-moss-label" in headers:
            body["_moss_label"] = headers["x-moss-label"]
        fake = self.fake
        self._request = Request(self.path, headers, body)
        with fake._lock:
            fake.requests.append(self._request)
        flavour = "anthropic" if self.path.rstrip("/").endswith("/v1/messages") else \
            "openai" if self.path.rstrip("/").endswith("/chat/completions") else None
        if flavour is None:
            return self._error(404, f"fakeapi: no route for POST {self.path}", "openai")
        key = headers.get("x-api-key") or re.sub(r"^Bearer\s+", "", headers.get("authorization", ""))
        if not fake.keyless and (not key or (fake.api_key and key != fake.api_key)):
            return self._error(401, "fakeapi: missing or invalid API key", flavour)
        if fake.strict and flavour == "openai" and isinstance(body, dict):
            body = strict_view(body)
            if fake.n_ctx:
                need = prompt_tokens(body) + int(body.get("max_tokens") or fake.n_ctx)
                if need > fake.n_ctx:
                    why = (f"fakeapi: the request needs {need} tokens (prompt {prompt_tokens(body)} + max_tokens "
                           f"{body.get('max_tokens')}), more than the context window of {fake.n_ctx}")
                    with fake._lock:
                        fake.rejected.append(why)
                    return self._error(400, why, flavour)
        reply = fake.next_reply(body)
        if reply.get("hold") is not None:
            reply["hold"]._hold()
        fake.sleep(reply.get("delay", 0))
        if reply.get("status", 200) >= 400:
            return self._error(reply["status"], reply.get("message", "error"), flavour, reply.get("headers"))
        text = str(reply.get("text", ""))
        if flavour == "anthropic":
            self._anthropic(body, text, reply)
        else:
            self._openai(body, text, reply)

    # -- plumbing ----------------------------------------------------------------------
    def _json(self, status: int, obj: Any, headers: dict | None = None) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, flavour: str, headers: dict | None = None) -> None:
        etype = ERROR_TYPES.get(status, "api_error")
        if flavour == "anthropic":
            obj = {"type": "error", "error": {"type": etype, "message": message}}
        else:
            obj = {"error": {"message": message, "type": etype, "code": status}}
        self._json(status, obj, headers)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def _sse(self, data: Any, event: str | None = None) -> None:
        head = f"event: {event}\n" if event else ""
        payload = data if isinstance(data, str) else json.dumps(data)
        self.wfile.write(f"{head}data: {payload}\n\n".encode())
        self.wfile.flush()

    def _deltas(self, text: str, reply: dict):
        """Yield the deltas to send; stops early (returns False) for a cut stream."""
        parts = chunks(text)
        cut_after = reply.get("cut_after")
        for i, part in enumerate(parts):
            if cut_after is not None and i >= cut_after:
                return
            if i:
                self.fake.chunk_sleep(reply.get("chunk_delay", 0))
            yield part
            with self.fake._lock:
                self.fake.deltas += 1

    # -- Anthropic Messages ------------------------------------------------------------
    def _anthropic(self, body: dict, text: str, reply: dict) -> None:
        text, reason, seq = _apply_limits(text, body, "stop_sequences")
        reason = reply.get("stop_reason", reason)
        fresh, write, read = self.fake.cache_usage(body)
        out = estimate_tokens(text)
        usage = {"input_tokens": fresh, "output_tokens": out,
                 "cache_creation_input_tokens": write, "cache_read_input_tokens": read}
        msg = {"id": f"msg_fake{len(self.fake.requests)}", "type": "message", "role": "assistant",
               "model": body.get("model", "fake-model"), "content": [], "stop_reason": None,
               "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
        if not body.get("stream"):
            msg.update(content=[{"type": "text", "text": text}], stop_reason=reason, stop_sequence=seq, usage=usage)
            return self._json(200, msg)
        self._start_stream()
        self._sse({"type": "message_start", "message": msg}, "message_start")
        self._sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                  "content_block_start")
        self._sse({"type": "ping"}, "ping")
        for part in self._deltas(text, reply):
            self._sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}},
                      "content_block_delta")
        if reply.get("cut_after") is not None:
            return  # connection closes: no content_block_stop, message_delta or message_stop
        self._sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self._sse({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": seq},
                   "usage": {"output_tokens": out}}, "message_delta")
        self._sse({"type": "message_stop"}, "message_stop")

    # -- OpenAI Chat Completions -------------------------------------------------------
    def _openai(self, body: dict, text: str, reply: dict) -> None:
        text, reason, _ = _apply_limits(text, body, "stop")
        reason = reply.get("stop_reason", reason)
        finish = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}.get(reason, reason)
        prompt, cached = self.fake.openai_cached(body)
        out = estimate_tokens(text)
        usage = {"prompt_tokens": prompt, "completion_tokens": out, "total_tokens": prompt + out,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        base = {"id": f"chatcmpl-fake{len(self.fake.requests)}", "created": int(time.time()),
                "model": body.get("model", "fake-model")}
        if not body.get("stream"):
            return self._json(200, {**base, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}]})
        chunk = {**base, "object": "chat.completion.chunk"}
        self._start_stream()
        self._sse({**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                         "finish_reason": None}]})
        for part in self._deltas(text, reply):
            self._sse({**chunk, "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]})
        if reply.get("cut_after") is not None:
            return  # connection closes: no finish_reason, no usage, no [DONE]
        self._sse({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            self._sse({**chunk, "choices": [], "usage": usage})
        self._sse("[DONE]")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Fake Anthropic/OpenAI API server for manual runs.")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--script", help="JSON list of replies: strings or reply objects ({\"status\": 429, ...})")
    ap.add_argument("--keyless", action="store_true", help="accept requests without an API key")
    ap.add_argument("--n-ctx", type=int, help="with --strict: serve /props with this window and refuse "
                                              "requests that exceed it")
    ap.add_argument("--strict", action="store_true", help="behave like a strict local server (string content, "
                                                          "max_tokens only)")
    args = ap.parse_args(argv)
    api = FakeAPI(keyless=args.keyless, port=args.port, strict=args.strict, n_ctx=args.n_ctx)
    if args.script:
        with open(args.script, encoding="utf-8") as f:
            api.push(*json.load(f))
    api.start()
    for k, v in api.env().items():
        print(f"export {k}={v}")
    print(f"# serving {len(api.replies)} scripted replies; Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        api.stop()


if __name__ == "__main__":
    main()
