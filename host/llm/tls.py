"""The TLS context the SDKs' HTTP clients check servers' certificates with, made once per process.

Left to itself, each SDK client makes its own: reading the CA bundle is ~50 ms of CPU, a quarter
of what a forked eval attempt spends in all (bench/m_fork.py). Here it is made once, by httpx2
(the HTTP library both SDKs use) exactly as it makes one for a client that passes no `verify`:
from SSL_CERT_FILE, else SSL_CERT_DIR, else the system's CA bundle. It is kept per value of those
two variables, so a process whose variables differ from those it was made under (a zygote's
forked process, a test) gets one of its own. A zygote makes it before it forks (host/zygote.py),
so its processes share it.
"""

from __future__ import annotations

import os
import threading
from typing import Any

_lock = threading.Lock()
_made: dict[tuple[str | None, str | None], Any] = {}


def context():
    """The `ssl.SSLContext` an SDK client verifies with, for this process's SSL_CERT_* now."""
    key = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    with _lock:
        ctx = _made.get(key)
        if ctx is None:
            import httpx2

            ctx = _made[key] = httpx2.create_ssl_context()
        return ctx
