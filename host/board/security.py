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
  Referer); afterwards the cookie must match. Without either: 403.
- **State changes only by POST**, and a POST also needs an ``Origin`` that is the board's
  own and the token in the ``X-Moss-Token`` header (the page's htmx sends it); a cross-site
  form or fetch has neither. Other methods: 405.
- Every answer says ``Content-Security-Policy`` (scripts only from the board itself, no
  inline script, nothing from elsewhere, no framing), ``Referrer-Policy: no-referrer``,
  ``X-Content-Type-Options: nosniff`` and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

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

    def __init__(self, app, token: str, hosts: list[str], port: int):
        self.app = app
        self.token = token
        self.cookie = f"{COOKIE}_{port}"
        self.hosts = {h.lower() for h in hosts}
        self.origins = {"http://" + h for h in self.hosts}

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        method = scope.get("method", "GET")
        if headers.get("host", "").lower() not in self.hosts:
            return await _deny(send, 403, "refused: this board answers only at its own address "
                                          "(the Host header names another)")
        if method not in ("GET", "HEAD", "POST"):
            return await _deny(send, 405, "refused: only GET and POST")
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            pass
        has_cookie = self.cookie in cookie and _same(cookie[self.cookie].value, self.token)
        if method == "GET" and "token" in query:
            if not _same(query["token"], self.token):
                return await _deny(send, 403, "refused: wrong token (use the URL `moss ui` printed)")
            rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
            where = "/" + scope.get("path", "/").lstrip("/")  # never //elsewhere: a redirect stays here
            where += "?" + rest if rest else ""
            return await _redirect(send, where, self.cookie, self.token)
        if not has_cookie:
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
