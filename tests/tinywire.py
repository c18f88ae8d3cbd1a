"""A third wire API for tests, and the server that speaks it: moss meets a kind of model server
it does not ship, through the seam a package would use (host/llm/wire.py, docs/llm.md#wire-apis).

Its wire format is its own, nothing like Anthropic's or OpenAI's:

    POST {base_url}/generate   {"model", "system", "turns": [[role, text], ...], "limit", "stop"}
                               header X-Tiny-Key: the key; X-Moss-Label passed through
    ->  application/x-ndjson   {"piece": "..."} per piece of the reply, then
                               {"end": "done" | "limit" | "stop", "used": [prompt tokens, reply tokens]}
    GET  {base_url}/models     {"models": ["tiny-1", ...]}

The client side is this module, loaded by moss as the wire API a package registers (the tests
install it with a `moss.wire_apis` entry point); it uses only the standard library (its
"SDK" is http.client). The server side is `TinyServer`, a real HTTP server on 127.0.0.1 with
scripted replies: a string, or `Fault(status)` (answered with that status), or `Cut(text)`
(the pieces, then the connection closes without an "end" line).
"""

from __future__ import annotations

import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from moss.llm.retry import Cancelled, Failure

SDK = None  # nothing beyond the standard library to import
ENDS = {"done": "end_turn", "limit": "max_tokens", "stop": "stop_sequence"}


# ---------------------------------------------------------------------------- the wire API

class Client:
    def __init__(self, base_url: str, key: str | None, timeout: float):
        parts = urlsplit(base_url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port, parts.path.rstrip("/")
        self.key, self.timeout = key, timeout

    def request(self, method: str, path: str, body: dict | None = None, headers: dict | None = None):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, self.path + path, body=data,
                     headers={"Content-Type": "application/json", "X-Tiny-Key": self.key or "", **(headers or {})})
        return conn, conn.getresponse()

    def close(self) -> None:
        pass


def make_client(provider, timeout: float) -> Client:
    return Client(provider.base_url, provider.api_key, timeout)


def _text(content) -> str:
    return content if isinstance(content, str) else "".join(str(b.get("text", "")) for b in content)


def send(client: Client, provider, req: dict, stream, prompt_cache: bool = True, cancelled=None) -> dict:
    body = {"model": provider.model, "system": req.get("system") or "", "limit": req["max_tokens"],
            "turns": [[m["role"], _text(m["content"])] for m in req["messages"]], "stop": req.get("stop") or []}
    headers = {"X-Moss-Label": req["label"]} if req.get("label") else {}
    try:
        conn, resp = client.request("POST", "/generate", body, headers)
    except OSError as e:
        raise Failure("connection", str(e), retryable=True) from None
    pieces: list[str] = []
    try:
        if resp.status != 200:
            raise Failure("status", resp.read().decode("utf-8", "replace") or resp.reason, status=resp.status,
                          retryable=resp.status >= 500 or resp.status == 429)
        for raw in resp:
            if cancelled is not None and cancelled():
                raise Cancelled(True, "".join(pieces), None)
            line = json.loads(raw)
            if "piece" in line:
                pieces.append(line["piece"])
                if stream is not None:
                    stream(line["piece"])
            elif "end" in line:
                used_in, used_out = line["used"]
                return {"text": "".join(pieces), "stop_reason": ENDS.get(line["end"], line["end"]),
                        "model": provider.model, "usage": {"input_tokens": used_in, "output_tokens": used_out,
                                                           "cache_read_tokens": 0, "cache_write_tokens": 0}}
        raise Failure("cut", "the reply ended without its end line", retryable=True)
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise Failure("cut", f"the reply broke off: {e}", retryable=True) from None
    finally:
        conn.close()


def list_models(provider, timeout: float) -> list[str]:
    conn, resp = make_client(provider, timeout).request("GET", "/models")
    try:
        return list(json.loads(resp.read())["models"])
    finally:
        conn.close()


# ---------------------------------------------------------------------------- the server

class Fault:
    def __init__(self, status: int):
        self.status = status


class Cut:
    def __init__(self, text: str):
        self.text = text


def pieces_of(text: str) -> list[str]:
    return [text[i:i + 5] for i in range(0, len(text), 5)]


class TinyServer:
    """The tiny API on 127.0.0.1: `push` replies, read `requests` ({"path", "body", "headers"})."""

    def __init__(self):
        self.replies: list = []
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_a):
                pass

            def do_GET(self):
                self._json(200, {"models": ["tiny-1", "tiny-2"]}) if self.path.endswith("/models") else \
                    self._json(404, {"error": "no such path"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                    reply = server.replies.pop(0) if server.replies else Fault(500)
                if isinstance(reply, Fault):
                    return self._json(reply.status, {"error": f"tiny fault {reply.status}"})
                text = reply.text if isinstance(reply, Cut) else reply
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.end_headers()
                for piece in pieces_of(text):
                    self.wfile.write(json.dumps({"piece": piece}).encode() + b"\n")
                if not isinstance(reply, Cut):
                    used = [sum(len(t) for _, t in body["turns"]) // 4, len(pieces_of(text))]
                    self.wfile.write(json.dumps({"end": "done", "used": used}).encode() + b"\n")
                self.close_connection = True

            def _json(self, status: int, obj: dict):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/tiny"

    def push(self, *replies) -> None:
        with self.lock:
            self.replies.extend(replies)

    def __enter__(self) -> "TinyServer":
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *_exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
