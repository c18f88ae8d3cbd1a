"""Wire APIs: how moss speaks to one kind of model server, chosen by name (a provider's `api`).

A wire API is a module. It is registered under a name, as a dotted module path, and
imported the first time a provider whose `api` names it makes a client; nothing else
about it is written anywhere in moss. The two moss ships, `anthropic` (the Messages API,
anthropic_client.py) and `openai` (Chat Completions, openai_client.py), are registered
below the way a third is: a package of your own adds one with an entry point

    [project.entry-points."moss.wire_apis"]
    mywire = "my_package.mywire"          # a module that provides what `WireAPI` lists

and `[llm.providers.NAME] api = "mywire"` then sends that provider's calls through it
(docs/llm.md#wire-apis). Only installed packages register: no config key names a module, so
a project's .moss/ can choose among the wire APIs you installed but never add one, and the
working directory (which `python -m` puts on the module path) is not searched.

What moss does around a wire API is the same for all of them: retries and their messages
(a `send` raises retry.Failure for a failed attempt), usage totals and prices, budgets,
record and replay, the log's events, the client made ahead in the background (warm.py), a
zygote's preloading (host/zygote.py).
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from typing import Any, Callable, Protocol

from ..errors import MossError

ENTRY_POINTS = "moss.wire_apis"


class WireAPI(Protocol):
    """What a wire API module provides. The functions are looked up on the module at each
    call (so a test may replace one); the constants and the last two are optional.

    SDK: the top-level module its client imports (None: it needs none): the garbage
    collector rests while it is imported (warm.py), and a zygote imports it ahead.
    PRELOAD: more of what a zygote does ahead for it: "module" to import, "module:function"
    to call (host/zygote.py), e.g. building the SDK's reply types once.
    make_client(provider, timeout): a client for `provider` (host/llm/providers.Provider:
    base_url, api_key, model, ...) whose requests time out after `timeout` seconds.
    send(client, provider, req, stream, prompt_cache, cancelled): one attempt of a call.
    `req` is checked and capped already: {"system", "messages": [{"role", "content"}],
    "max_tokens", "stop", "temperature", "label"}. `stream(text)` gets each piece of the
    reply as it arrives (None: do not stream); `cancelled()` true: stop reading and raise
    retry.Cancelled. Returns {"text", "stop_reason" ("end_turn", "max_tokens",
    "stop_sequence", ...), "model", "usage": {"input_tokens", "output_tokens",
    "cache_read_tokens", "cache_write_tokens"} or None (then estimated)}; raises
    retry.Failure for a failed attempt (retried when `retryable`; reason "cut" for a reply
    that broke off).
    list_models(provider, timeout): the model ids the server serves (`moss doctor`).
    server_window(provider): the context window a local server says it holds, or None.
    """

    SDK: str | None

    def make_client(self, provider: Any, timeout: float) -> Any: ...

    def send(self, client: Any, provider: Any, req: dict, stream: Callable[[str], None] | None,
             prompt_cache: bool = True, cancelled: Callable[[], bool] | None = None) -> dict: ...


class Wire:
    """A registered wire API: its module, with defaults for what the module leaves out."""

    def __init__(self, name: str, path: str, module: Any):
        self.name, self.path, self.module = name, path, module

    @property
    def sdk(self) -> str | None:
        return getattr(self.module, "SDK", None)

    def sdk_imported(self) -> bool:
        return self.sdk is None or self.sdk in sys.modules

    def make_client(self, provider, timeout: float):
        return self.module.make_client(provider, timeout)

    def send(self, client, provider, req: dict, stream: Callable[[str], None] | None, prompt_cache: bool = True,
             cancelled: Callable[[], bool] | None = None) -> dict:
        return self.module.send(client, provider, req, stream, prompt_cache, cancelled)

    @property
    def lists_models(self) -> bool:
        return callable(getattr(self.module, "list_models", None))

    def list_models(self, provider, timeout: float) -> list[str]:
        if not self.lists_models:
            raise MossError(f"the {self.name} wire API ({self.path}) cannot list models", kind="llm")
        return list(self.module.list_models(provider, timeout))

    def server_window(self, provider) -> int | None:
        fn = getattr(self.module, "server_window", None)
        return fn(provider) if fn is not None else None

    def preload(self) -> tuple[str, ...]:
        """What a zygote does ahead for this API: its module, its SDK, its PRELOAD."""
        return tuple(dict.fromkeys((self.path, *((self.sdk,) if self.sdk else ()),
                                    *getattr(self.module, "PRELOAD", ()))))


_lock = threading.Lock()
_paths: dict[str, str] = {}       # name -> module path, in the order registered
_wires: dict[str, Wire] = {}      # name -> the loaded wire API
_scanned = False                  # entry points read
_scan_lock = threading.Lock()


def register(name: str, module: str) -> None:
    """Make the module at dotted path `module` the wire API called `name` (imported when
    first used). A name registered already keeps its first module."""
    if not isinstance(name, str) or not name or not isinstance(module, str) or not module:
        raise ValueError(f"register(name, module): two non-empty strings, got {name!r}, {module!r}")
    with _lock:
        _paths.setdefault(name, module)


register("anthropic", "moss.llm.anthropic_client")
register("openai", "moss.llm.openai_client")
BUILTIN = tuple(_paths)


def _scan() -> None:
    """Register what installed packages declare in the `moss.wire_apis` entry point group,
    once. Distributions found in the working directory are left out: `python -m moss`
    puts it first on the module path, and a repository is not an installed package."""
    global _scanned
    with _scan_lock:
        if _scanned:
            return
        from importlib import metadata

        here = os.getcwd()
        path = [p for p in sys.path if p and os.path.abspath(p) != here]
        for dist in metadata.distributions(path=path):
            for ep in dist.entry_points:
                if ep.group == ENTRY_POINTS:
                    register(ep.name, ep.value)
        _scanned = True


def names() -> tuple[str, ...]:
    """Every registered wire API's name (those of installed packages too)."""
    _scan()
    return tuple(_paths)


def known(name) -> bool:
    if not isinstance(name, str):
        return False
    if name not in _paths:
        _scan()
    return name in _paths


def unknown_message(name) -> str:
    return (f"unknown wire API {name!r}: known are {', '.join(names())} (anthropic: the Messages API, "
            f"openai: Chat Completions); a package adds one through the {ENTRY_POINTS!r} entry point "
            f"(docs/llm.md#wire-apis)")


def get(name: str) -> Wire:
    """The wire API called `name`, its module imported; MossError(kind="config") for a name
    nothing registered, or a module that cannot be imported or lacks make_client or send."""
    wire = _wires.get(name)
    if wire is not None:
        return wire
    if not known(name):
        raise MossError(unknown_message(name), kind="config")
    path = _paths[name]
    try:
        module = importlib.import_module(path)
    except Exception as e:
        raise MossError(f"the {name} wire API ({path}) cannot be imported: {type(e).__name__}: {e}",
                        kind="config") from e
    missing = [f for f in ("make_client", "send") if not callable(getattr(module, f, None))]
    if missing:
        raise MossError(f"the {name} wire API ({path}) has no {' or '.join(missing)} (docs/llm.md#wire-apis)",
                        kind="config")
    with _lock:
        return _wires.setdefault(name, Wire(name, path, module))


def read_canned(client, send, provider) -> list[dict]:
    """One plain and one streamed call through a wire API's `send`, on a `client` whose
    transport serves canned replies inside this process: what a zygote runs before it forks
    so that an SDK's reply types are built once (`_first_response_types` of anthropic_client
    and openai_client). What `send` returned; [] when a call failed (the first real reply
    then meets the same failure, as it would without this). Closes the client."""
    req = {"messages": [{"role": "user", "content": "warm"}], "max_tokens": 1}
    try:
        return [send(client, provider, req, None), send(client, provider, req, lambda _: None)]
    except Exception:  # see above
        return []
    finally:
        client.close()


def models_of(client) -> list[str]:
    """The model ids an SDK client's `models.list()` gives (the anthropic and openai SDKs
    alike); closes the client."""
    try:
        return [m.id for m in getattr(client.models.list(), "data", None) or []]
    finally:
        client.close()
