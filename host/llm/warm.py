"""SDK clients made ahead of the first LLM call, in a background thread, by the provider's wire
API (wire.py).

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

While an SDK imports, the cyclic garbage collector rests, and what the import made is then
left out of later collections (`_pause_gc`, `_resume_gc`): it walked the SDK's objects
again and again as they were made, ~0.1 s of the anthropic SDK's import.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

from ..errors import MossError
from . import wire
from .providers import OFFLINE_APIS

_lock = threading.Lock()
_jobs: dict[tuple, "_Job"] = {}
_busy = 0
settled = threading.Event()
settled.set()
_awaited = threading.Event()  # a call waited in take() for a client still being made
_sent = threading.Event()  # a call handed its request to the SDK (sending())

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
    """A new client for provider `p`, made by its wire API (which imports its SDK on first use)."""
    api = wire.get(p.api)
    _enter()
    paused = _pause_gc(not api.sdk_imported())
    try:
        return api.make_client(p, timeout)
    finally:
        if paused:
            _resume_gc()
        _leave()


_gc_pauses = 0
_gc_was_enabled = False


def _pause_gc(importing: bool) -> bool:
    """Turn the cyclic garbage collector off while an SDK is imported. The import creates
    ~150,000 objects that live as long as the process, and the collector walks them again
    and again while they are made: ~0.1 s of the anthropic SDK's 1.2 s import (its two full
    collections alone 40-60 ms each), on the first request's path. Reference counting frees
    objects as usual meanwhile; only reference cycles wait."""
    global _gc_pauses, _gc_was_enabled
    if not importing:
        return False
    with _lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    return True


def _resume_gc() -> None:
    """After the import: what exists now (the SDK's modules, classes and schemas, moss's own)
    moves to the collector's permanent generation (`gc.freeze`), so that no later collection
    walks it again, and collection resumes. The few cycles that became garbage during the
    import (hundreds of objects) stay; otherwise the first collection after it would walk
    everything the import made, on the first request's path."""
    global _gc_pauses
    with _lock:
        _gc_pauses -= 1
        if _gc_pauses == 0:
            gc.freeze()
            if _gc_was_enabled:
                gc.enable()


def start(p, timeout: float) -> None:
    """Make the client for provider `p` in a daemon thread, unless one is on its way
    (offline providers, script and replay, need none; nor does an unknown wire API: the call
    reports it)."""
    if p.api in OFFLINE_APIS:
        return
    try:
        api = wire.get(p.api)
    except MossError:  # the call says what is wrong
        return
    key = key_of(p, timeout)
    with _lock:
        if key in _jobs:
            return
        job = _jobs[key] = _Job()
    _enter()
    paused = _pause_gc(not api.sdk_imported())

    def run() -> None:
        try:
            job.client = make(p, timeout)
        except Exception:  # the call itself makes one and reports what is wrong
            with _lock:
                if _jobs.get(key) is job:
                    del _jobs[key]
        finally:
            if paused:
                _resume_gc()
            job.done.set()
            _leave()

    try:
        threading.Thread(target=run, name="moss-sdk-warm", daemon=True).start()
    except BaseException:  # no thread: nothing is made ahead, and the collector runs again
        with _lock:
            _jobs.pop(key, None)
        if paused:
            _resume_gc()
        job.done.set()
        _leave()
        raise


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
