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

`settled` is set while no SDK import is under way. genai-prices' preload
(host/llm/pricing.py) waits for it (`quiet`), and, when a call was waiting for its client,
until that call has handed its request to the SDK (`sending`): its import (~0.1 s of Python)
then overlaps the model's answer instead of sharing the GIL with the SDK's import or with the
first request's own lazy work.
"""

from __future__ import annotations

import threading
import time
from typing import Any

_lock = threading.Lock()
_jobs: dict[tuple, "_Job"] = {}
_busy = 0
settled = threading.Event()
settled.set()
_awaited = threading.Event()  # a call waited in take() for a client still being made
_sent = threading.Event()  # a call handed its request to the SDK (sending())

SDK_APIS = ("anthropic", "openai")
# How long a call handed to the SDK takes to be on the wire (connect, headers, body: a few ms,
# during which a thread importing genai-prices would take the GIL at every syscall).
WRITE_TIME = 0.05


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
    if not job.done.is_set():
        _awaited.set()
    job.done.wait(wait)
    with _lock:
        if _jobs.get(key) is not job or job.client is None:
            return None
        del _jobs[key]
    return job.client


def sending() -> None:
    """A call is handing its request to the SDK (LLM._attempts, just before sending)."""
    _sent.set()


def quiet(timeout: float = 30.0) -> None:
    """Return once no SDK import is under way and, when a call was waiting for its client,
    once that call has handed its request to the SDK: background work that can wait
    (genai-prices' preload) then runs while the model answers, instead of sharing the GIL
    with what the first request waits for."""
    settled.wait(timeout)
    if _awaited.is_set() and _sent.wait(timeout):
        time.sleep(WRITE_TIME)
