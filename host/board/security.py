"""What every request to the board passes, before any route sees it.

A button on the board can start or steer an agent that runs shell commands, and any page open
in the same browser can send requests to 127.0.0.1. So, as ASGI middleware around the app:

- **Host** must be ``127.0.0.1:PORT`` or ``localhost:PORT`` (or the address given with
  ``--host``): a hostile site's name re-pointed at 127.0.0.1 (DNS rebinding) sends its own
  name and is refused (403) before anything is read.
- **The token** (``secrets.token_urlsafe``, printed in the URL) is required on every request:
  a first visit with ``?token=`` gets it as an HttpOnly, SameSite=Strict cookie (named for
  the port: two boards keep their own) and a
  redirect to the same address without it (so it does not linger in the address bar or a
  Referer); afterwards the cookie must match. Without either: 403. The redirect goes to a path
  of the board's own, never ``//host`` or ``/\\host`` (which a browser reads as another site).
- **The browser moss opens** gets a one-time code (``?code=``), never the token: a command line
  is readable by every local user (``ps``). The code is exchanged once for the cookie, within
  CODE_TTL seconds, and only by a connection of the user who runs the board (its socket's owner
  in /proc/net/tcp, where there is one); a used or expired code is refused, and a used one
  presented again is said on stderr.
- **Websocket requests** pass the same Host, token and Origin checks as a POST (no route takes
  one today); a kind of request the guard does not know is refused.
- **State changes only by POST**, and a POST also needs an ``Origin`` that is the board's
  own and the token in the ``X-Moss-Token`` header (the page's htmx sends it); a cross-site
  form or fetch has neither. Other methods: 405.
- Every answer says ``Content-Security-Policy`` (scripts only from the board itself, no
  inline script, nothing from elsewhere, no framing), ``Referrer-Policy: no-referrer``,
  ``X-Content-Type-Options: nosniff`` and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

CODE_TTL = 60.0  # seconds a one-time code for the browser moss opens stays good
COOKIE = "moss_board"  # + "_PORT": a browser sends 127.0.0.1's cookies to every port, so each board its own
HEADER = "x-moss-token"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"referrer-policy", b"no-referrer"),
           (b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-store"),
           (b"x-frame-options", b"DENY")]


def new_token() -> str:
    return secrets.token_urlsafe(32)


def _same(a: str | None, b: str) -> bool:
    return a is not None and secrets.compare_digest(a.encode(), b.encode())


class Guard:
    """The checks above, around `app`. `hosts`: the Host values accepted (host:port)."""

    def __init__(self, app, token: str, hosts: list[str], port: int, clock=time.monotonic):
        self.app = app
        self.token = token
        self.cookie = f"{COOKIE}_{port}"
        self.hosts = {h.lower() for h in hosts}
        self.origins = {"http://" + h for h in self.hosts}
        self.clock = clock
        self._codes: dict[str, float] = {}  # one-time code -> when it expires
        self._spent: set[str] = set()

    def one_time_code(self) -> str:
        """A code for the browser moss opens: good once, for CODE_TTL seconds."""
        code = secrets.token_urlsafe(24)
        self._codes[code] = self.clock() + CODE_TTL
        return code

    async def __call__(self, scope, receive, send):
        kind = scope.get("type")
        if kind == "lifespan":
            return await self.app(scope, receive, send)
        if kind not in ("http", "websocket"):
            return None  # a kind of request this guard does not know reaches nothing
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if kind == "websocket":
            return await self._websocket(scope, receive, send, headers)
        method = scope.get("method", "GET")
        if headers.get("host", "").lower() not in self.hosts:
            return await _deny(send, 403, "refused: this board answers only at its own address "
                                          "(the Host header names another)")
        if method not in ("GET", "HEAD", "POST"):
            return await _deny(send, 405, "refused: only GET and POST")
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if method == "GET" and ("token" in query or "code" in query):
            return await self._enter(scope, send, query)
        if not self._has_cookie(headers):
            return await _deny(send, 403, "refused: no token (open the URL `moss ui` printed)")
        if method == "POST":
            if headers.get("origin") not in self.origins:
                return await _deny(send, 403, "refused: a change must come from the board's own page (Origin)")
            if not _same(headers.get(HEADER), self.token):
                return await _deny(send, 403, "refused: a change needs the token (X-Moss-Token)")

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = dict(message, headers=list(message.get("headers", [])) + HEADERS)
            await send(message)

        return await self.app(scope, receive, send_with_headers)

    def _has_cookie(self, headers: dict) -> bool:
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            pass
        return self.cookie in cookie and _same(cookie[self.cookie].value, self.token)

    async def _enter(self, scope, send, query: dict):
        """A first visit: the printed URL's token, or the opened browser's one-time code, becomes
        the cookie, and the browser goes on to the same page without it."""
        if "code" in query:
            refused = self._spend(scope, query["code"])
            if refused:
                return await _deny(send, 403, refused)
        elif not _same(query["token"], self.token):
            return await _deny(send, 403, "refused: wrong token (use the URL `moss ui` printed)")
        rest = urlencode([(k, v) for k, v in query.items() if k not in ("token", "code")])
        where = own_path(scope.get("path", "/")) + ("?" + rest if rest else "")
        return await _redirect(send, where, self.cookie, self.token)

    def _spend(self, scope, code: str) -> str | None:
        """None when `code` is good (it is then used up), else why it is refused."""
        expires = next((v for k, v in self._codes.items() if _same(code, k)), None)
        if expires is None:
            if any(_same(code, k) for k in self._spent):
                print("moss ui: the browser's one-time code was presented again and refused (a browser "
                      "restoring its tabs, or someone who read it from the process list); if that was not "
                      "you, stop this board (Ctrl-C)", file=sys.stderr, flush=True)
                return "refused: this one-time code was used already (open the URL `moss ui` printed)"
            return "refused: wrong code (open the URL `moss ui` printed)"
        if self.clock() > expires:
            self._codes.pop(code, None)
            self._spent.add(code)
            return "refused: this one-time code expired (open the URL `moss ui` printed)"
        owner = peer_uid(scope)
        if owner is not None and owner != os.geteuid():
            return "refused: the one-time code is for the browser of the user who started `moss ui`"
        del self._codes[code]
        self._spent.add(code)
        return None

    async def _websocket(self, scope, receive, send, headers: dict):
        """A websocket passes what a POST passes (its Host, the cookie, the board's Origin), or
        is closed before it is accepted (the server answers 403)."""
        if headers.get("host", "").lower() in self.hosts and self._has_cookie(headers) \
                and headers.get("origin") in self.origins:
            return await self.app(scope, receive, send)
        message = await receive()
        if message.get("type") == "websocket.connect":
            await send({"type": "websocket.close", "code": 1008})
        return None


def own_path(path: str) -> str:
    """`path` as a page of the board: no leading run of `/` or `\\` (`//host`, `/\\host` are
    another site to a browser), and every character a browser might drop or read as a
    separator (a tab, a backslash) %-encoded."""
    where = "/" + quote(path.lstrip("/\\"), safe="/:@!$&'()*+,;=-._~")
    assert not where.startswith(("//", "/\\"))
    return where


def peer_uid(scope) -> int | None:
    """The uid owning the client's end of a loopback TCP connection (Linux /proc/net/tcp*), or
    None when it cannot be told (another system, another network namespace)."""
    client, server = scope.get("client"), scope.get("server")
    if not client or not server:
        return None
    want = (_hexaddr(client[0], client[1]), _hexaddr(server[0], server[1]))
    if None in want:
        return None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii", errors="replace") as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    if len(cols) > 7 and (cols[1].upper(), cols[2].upper()) == want:
                        return int(cols[7])
        except (OSError, ValueError):
            continue
    return None


def _hexaddr(host: str, port: int) -> str | None:
    """host:port as /proc/net/tcp writes it (each 32-bit word of the address in host order)."""
    import socket
    import struct

    try:
        if ":" in host:
            raw = socket.inet_pton(socket.AF_INET6, host)
        else:
            raw = socket.inet_pton(socket.AF_INET, host)
    except OSError:
        return None
    words = struct.unpack(f"={len(raw) // 4}I", raw)
    return "".join(f"{w:08X}" for w in words) + f":{int(port):04X}"


async def _deny(send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())] + HEADERS})
    await send({"type": "http.response.body", "body": body})


async def _redirect(send, where: str, name: str, token: str) -> None:
    cookie = f"{name}={token}; HttpOnly; SameSite=Strict; Path=/"
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", where.encode("latin-1", "replace")),
                            (b"set-cookie", cookie.encode()), (b"content-length", b"0")] + HEADERS})
    await send({"type": "http.response.body", "body": b""})
