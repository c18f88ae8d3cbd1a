"""SDK clients made ahead of the first LLM call, in a background thread.

Importing the anthropic SDK takes over a second (the openai SDK about half that), and
creating a client another 50-70 ms (httpcore, an SSL context). Until then the first
request cannot be sent. `start(...)`, called by `moss @NAME` as soon as its config is
known (host/run.py), resolves the provider the way the LLM primitive will (no network:
local-server detection is left to the real call), imports that SDK and creates the
client in a daemon thread, while the Lua runtime boots and the session is set up, which
mostly runs without the GIL. `LLM._client` then `take`s the prepared client (waiting for it
when it is still being made) instead of making its own; a client is handed over only when
everything it was made from (API, endpoint, key, timeout) is what the call would use, so a
guess that turns out wrong is a client nobody uses, never a different one.

`settled` is set while no SDK import is under way: genai-prices' preload
(host/llm/pricing.py) waits for it, so the two imports do not share the GIL while the first
request is still waiting for its SDK.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Mapping

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


def make(p, timeout: float):
    """A new SDK client for provider `p` (imports the SDK on first use)."""
    with busy():
        if p.api == "anthropic":
            from . import anthropic_client as mod
        else:
            from . import openai_client as mod
        return mod.make_client(p, timeout)


class busy:
    """While an SDK is being imported or a client made: `settled` is clear."""

    def __enter__(self):
        global _busy
        with _lock:
            _busy += 1
            settled.clear()

    def __exit__(self, *exc):
        global _busy
        with _lock:
            _busy -= 1
            if _busy == 0:
                settled.set()


def start(resolve: Callable[[], Any], timeout: Callable[[], float]) -> None:
    """Prepare, in a daemon thread, the client the first LLM call will want.

    resolve() returns the default Provider (it must not touch the network) and timeout()
    the request timeout; either may raise, and then nothing is prepared (the real call
    reports the problem). Offline providers (script, replay) and local-server detection
    need no SDK ahead of time."""
    job = _Job()

    def run() -> None:
        key = None
        try:
            with busy():
                p = resolve()
                if p is None or p.api not in SDK_APIS:
                    return
                t = float(timeout())
                key = key_of(p, t)
                with _lock:
                    if key in _jobs:
                        return
                    _jobs[key] = job
                job.client = make(p, t)
        except Exception:
            with _lock:
                if key is not None and _jobs.get(key) is job:
                    del _jobs[key]
        finally:
            job.done.set()

    threading.Thread(target=run, name="moss-sdk-warm", daemon=True).start()


def take(p, timeout: float, wait: float = 30.0):
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


def prepare_for(config: Mapping, options: Mapping, env: Mapping, project_keys, project_trusted: bool) -> None:
    """start() for the LLM a script run with this config and these options would build."""
    def resolve():
        from .providers import resolve_provider

        return resolve_provider(config, options, env, project_keys=project_keys, project_trusted=project_trusted,
                                detect=None)

    def timeout():
        from .chat import timeout_of

        return timeout_of(config, options)

    start(resolve, timeout)
