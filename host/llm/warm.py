"""SDK clients made ahead of the first LLM call, in a background thread.

Importing the anthropic SDK takes over a second (the openai SDK about half that), and
creating a client another 50-70 ms (httpcore, an SSL context). Until then the first
request cannot be sent. When a script resolves its provider ahead of its first call
(`moss.llm.provider()`, which the agent does before its first turn), `LLM.prepare` calls
`start`, which imports that SDK and creates the client in a daemon thread while the script
sets its session up (Lua and fsync run without the GIL meanwhile). `LLM._client` then
`take`s the prepared client (waiting for it when it is still being made) instead of making
its own; a client is handed over only when everything it was made from (API, endpoint, key,
timeout) is what the call uses, and only once. A script that never asks for its provider
imports no SDK early.

`settled` is set while no SDK import is under way: genai-prices' preload
(host/llm/pricing.py) waits for it, so the two imports do not share the GIL while the first
request is still waiting for its SDK.
"""

from __future__ import annotations

import threading
from typing import Any

_lock = threading.Lock()
_jobs: dict[tuple, "_Job"] = {}
_busy = 0
settled = threading.Event()
settled.set()

SDK_APIS = ("anthropic", "openai")


class _Job:
    def __init__(self) -> None:
        self.done = threading.Event()
        self.client: Any = None


def key_of(p, timeout: float) -> tuple:
    return (p.api, p.base_url, p.api_key, float(timeout))


def _enter() -> None:
    global _busy
    with _lock:
        _busy += 1
        settled.clear()


def _leave() -> None:
    global _busy
    with _lock:
        _busy -= 1
        if _busy == 0:
            settled.set()


def make(p, timeout: float):
    """A new SDK client for provider `p` (imports the SDK on first use)."""
    _enter()
    try:
        if p.api == "anthropic":
            from . import anthropic_client as mod
        else:
            from . import openai_client as mod
        return mod.make_client(p, timeout)
    finally:
        _leave()


def start(p, timeout: float) -> None:
    """Make the client for provider `p` in a daemon thread, unless one is on its way
    (offline providers, script and replay, need none)."""
    if p.api not in SDK_APIS:
        return
    key = key_of(p, timeout)
    with _lock:
        if key in _jobs:
            return
        job = _jobs[key] = _Job()
    _enter()

    def run() -> None:
        try:
            job.client = make(p, timeout)
        except Exception:  # the call itself makes one and reports what is wrong
            with _lock:
                if _jobs.get(key) is job:
                    del _jobs[key]
        finally:
            job.done.set()
            _leave()

    threading.Thread(target=run, name="moss-sdk-warm", daemon=True).start()


def take(p, timeout: float, wait: float = 60.0):
    """The client prepared for exactly (p.api, p.base_url, p.api_key, timeout), once; None when
    none was (or it failed). Waits for one still being made."""
    key = key_of(p, timeout)
    with _lock:
        job = _jobs.get(key)
    if job is None:
        return None
    job.done.wait(wait)
    with _lock:
        if _jobs.get(key) is not job or job.client is None:
            return None
        del _jobs[key]
    return job.client
