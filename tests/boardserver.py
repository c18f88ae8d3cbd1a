"""A real `moss ui` for tests: started as its user starts it, its printed URL read back."""

from __future__ import annotations

import contextlib
import http.client
import re
import select
import time
from urllib.parse import urlsplit

URL = re.compile(r"moss ui: (http://[0-9.]+:(\d+)/\?token=([A-Za-z0-9_-]+))")


@contextlib.contextmanager
def board(project, *args, timeout: float = 30, env: dict | None = None, open_flag: str = "--no-open"):
    """Yields (url, port, token) of `moss ui --no-open` serving `project`; stops it after."""
    p = project.popen("ui", *([open_flag] if open_flag else []), *args, env=env)
    try:
        seen, deadline = "", time.monotonic() + timeout
        m = None
        while time.monotonic() < deadline and m is None:
            ready, _, _ = select.select([p.stdout], [], [], 0.2)
            if ready:
                line = p.stdout.readline()
                if not line:
                    break
                seen += line
                m = URL.search(seen)
        assert m, f"moss ui printed no URL: {seen!r} {p.stderr.read() if p.poll() is not None else ''}"
        yield m.group(1), int(m.group(2)), m.group(3)
    finally:
        p.terminate()
        try:
            p.wait(timeout=10)
        except Exception:
            p.kill()
            p.wait()


def request(port: int, method: str, path: str, *, host: str | None = None, headers: dict | None = None,
            body: str | None = None, read: bool = True, addr: str = "127.0.0.1"):
    """One raw HTTP request (any Host and Origin a hostile page could send): (status, headers, text)."""
    c = http.client.HTTPConnection(addr, port, timeout=30)
    h = {"Host": host or f"127.0.0.1:{port}", **(headers or {})}
    if body is not None:
        h.setdefault("Content-Type", "application/x-www-form-urlencoded")
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    text = r.read().decode("utf-8", "replace") if read else ""
    out = (r.status, {k.lower(): v for k, v in r.getheaders()}, text)
    c.close()
    return out


def path_of(url: str) -> str:
    u = urlsplit(url)
    return u.path + ("?" + u.query if u.query else "")


def stream_until(port: int, path: str, token: str, wanted: str, timeout: float = 30) -> str:
    """What the SSE stream at `path` sent until `wanted` appeared in it (or `timeout` passed)."""
    import socket

    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: moss_board_{port}={token}\r\n"
              f"Accept: text/event-stream\r\n\r\n".encode())
    seen, deadline = b"", time.monotonic() + timeout
    try:
        while wanted.encode() not in seen and time.monotonic() < deadline:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        s.close()
    return dechunk(seen).decode("utf-8", "replace")


def dechunk(raw: bytes) -> bytes:
    """The body of a chunked HTTP response as read so far (its headers and chunk sizes gone)."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    if b"chunked" not in head.lower():
        return rest
    out = b""
    while rest:
        size_line, sep, rest = rest.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        rest = rest[size + 2:]
    return out
