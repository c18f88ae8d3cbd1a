"""The LLM primitive: one `chat` call = budget check, provider, attempts, usage, cost, log events."""

from __future__ import annotations

import os
import re
import threading
import time
from typing import Any, Callable, Mapping

from ..errors import MossError
from . import cassette
from .models import rejects_temperature
from . import models, pricing, warm, wire
from . import window as window_mod
from .providers import OFFLINE_APIS, Provider, resolve_provider
from .request import normalise_request
from .retry import Cancelled, Failure, backoff, final_error, MAX_SERVER_WAIT
from .usage import Budgets, Session, empty_usage

DEFAULT_TIMEOUT = 300.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_TOKENS = 16384  # a ceiling, not a cost: reasoning models think inside it


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text) -> str:
    """A reply's text as valid Unicode. JSON may carry a lone surrogate ("\\ud800"), which no
    UTF-8 log line, checkpoint or Lua string can hold: it becomes U+FFFD."""
    text = "" if text is None else str(text)
    return _LONE_SURROGATE.sub("\ufffd", text) if _LONE_SURROGATE.search(text) else text


def _num(value, cast, what: str):
    try:
        return cast(value)
    except (TypeError, ValueError):
        raise MossError(f"{what} must be a number, got {value!r}", kind="config") from None


def timeout_of(config: Mapping | None, options: Mapping | None) -> float:
    """The request timeout: --timeout, else [llm] timeout, else DEFAULT_TIMEOUT."""
    options = {k: v for k, v in (options or {}).items() if v is not None}
    cfg = (config or {}).get("llm") or {}
    return _num(options.get("timeout", cfg.get("timeout", DEFAULT_TIMEOUT)), float, "[llm] timeout")


def _tokens_setting(cfg: Mapping, key: str) -> int | None:
    """[llm] KEY as a whole number of tokens above 0, or None when unset."""
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MossError(f"[llm] {key} must be a whole number of tokens, got {value!r}", kind="config")
    return value


def _scan(*args, **kwargs):
    """detect.scan, imported only when a local server is looked for (http.client, email: ~20 ms)."""
    from .detect import scan

    return scan(*args, **kwargs)


class LLM:
    def __init__(self, config: Mapping | None, options: Mapping | None, env: Mapping = os.environ,
                 on_event: Callable[[str, dict], None] | None = None,
                 stream: Callable[[str], None] | None = None, *,
                 project_keys: frozenset | set = frozenset(), project_trusted: bool = True,
                 announce: Callable[[str], None] | None = None):
        """project_keys/project_trusted: which config keys the project set, and whether it is
        trusted (see resolve_provider). announce: told, once per endpoint, before the first
        request to a base URL other than the provider's own."""
        self.config = dict(config or {})
        self.project_keys = frozenset(project_keys)
        self.project_trusted = project_trusted
        self.announce = announce
        self._announced: set[str] = set()
        self.options = {k: v for k, v in (options or {}).items() if v is not None}
        self.env = env
        self.on_event = on_event
        self.stream = stream
        cfg = self.config.get("llm") or {}
        self.timeout = timeout_of(self.config, self.options)
        self.max_retries = _num(cfg.get("max_retries", DEFAULT_MAX_RETRIES), int, "[llm] max_retries")
        self.default_max_tokens = _num(cfg.get("max_tokens", DEFAULT_MAX_TOKENS), int, "[llm] max_tokens")
        self.max_output_tokens = _tokens_setting(cfg, "max_output_tokens")
        self.context_window = _tokens_setting(cfg, "context_window")
        self._windows: dict[tuple, int | None] = {}  # (base_url, model) -> what the server said, per session
        self.prompt_cache = bool(cfg.get("prompt_cache", True))
        self.detect_local = cfg.get("detect", True) is not False  # [llm] detect = false: never probe ports
        self.session = Session(Budgets(self.config, self.options))
        self._lock = threading.Lock()
        self._clients: dict[tuple, Any] = {}
        self._providers: dict[tuple, Provider] = {}
        self._offline: dict[str, Any] = {}
        self._warned: set[str] = set()
        record = self.options.get("record")
        self._recorder = cassette.Recorder(record) if record else None

    def child(self, on_event: Callable[[str, dict], None] | None = None) -> "LLM":
        """The LLM service of a child agent: its own usage totals and log events, but the
        budget of the whole tree, and this object's SDK clients, providers, offline scripts
        and recorder (an SDK client costs 60-90 ms to create; one per provider is shared by
        every thread). No streaming: children run side by side."""
        kid = LLM.__new__(LLM)
        kid.__dict__.update(self.__dict__)
        kid.on_event = on_event
        kid.stream = None
        kid.session = Session(self.session.budgets, parent=self.session)
        return kid

    # -- public ------------------------------------------------------------------------
    @property
    def usage(self) -> dict:
        return self.session.snapshot()

    def budget_reason(self) -> str | None:
        return self.session.budget_reason()

    def provider(self, name: str | None = None, model: str | None = None) -> Provider:
        """The provider a call would use; raises MossError(kind="config") when none is configured.
        With nothing configured, a local server found running is used (detect.py), and the
        announce callback is told which."""
        key = (name, model)
        with self._lock:
            if key not in self._providers:
                self._providers[key] = p = resolve_provider(
                    self.config, self.options, self.env, name, model, project_keys=self.project_keys,
                    project_trusted=self.project_trusted, detect=_scan if self.detect_local else None)
                if p.detected and self.announce is not None:
                    self.announce(f"using {p.detected} at {p.base_url}, model {p.model} (found running; "
                                  f"choose another with --provider/--model or [llm] provider/model)")
            return self._providers[key]

    def prepare(self, p: Provider) -> None:
        """Start making p's SDK client in a background thread (warm.py), unless it exists or
        is on its way: a script that resolves its provider before its first turn
        (moss.llm.provider) gets the SDK's import (~1 s) done while it sets up."""
        if p.api in OFFLINE_APIS:
            return
        with self._lock:
            if (p.api, p.base_url, p.api_key) in self._clients:
                return
        warm.start(p, self.timeout)
        pricing.preload()  # after the SDK's import: genai-prices' (~0.1-0.3 s) then overlaps the model's answer

    def window(self, p: Provider) -> int | None:
        """p's context window in tokens: [llm] context_window, else what a local server says
        it holds (asked once per session through its wire API: an OpenAI-compatible one asks
        as window.py says), else the model's known window."""
        if self.context_window is not None:
            return self.context_window
        if p.api not in OFFLINE_APIS and (p.local or window_mod.is_loopback(p.base_url)):
            key = (p.base_url, p.model)
            with self._lock:
                known = key in self._windows
                n = self._windows.get(key)
            if not known:
                n = wire.get(p.api).server_window(p)
                with self._lock:
                    self._windows[key] = n
            if n:
                return n
        return models.context_window(p.model)

    def _capped(self, p: Provider, req: dict) -> tuple[dict, int | None]:
        """The request with its reply limit capped: at most [llm] max_output_tokens (a local
        server: LOCAL_MAX_OUTPUT unless that is set), and what the window leaves beside the
        prompt (window.prompt_tokens). Returns (request, window or None)."""
        limit = req["max_tokens"]
        local = p.local or window_mod.is_loopback(p.base_url)
        cap = self.max_output_tokens or (window_mod.LOCAL_MAX_OUTPUT if local else None)
        if cap:
            limit = min(limit, cap)
        size = self.window(p)
        if size:
            # a prompt that (nearly) fills the window still goes, with a token floor: the
            # server's own answer then says what is wrong (compaction keeps this rare)
            room = max(size - window_mod.prompt_tokens(req), window_mod.MIN_REPLY)
            limit = min(limit, room)
        return ({**req, "max_tokens": limit} if limit != req["max_tokens"] else req), size

    def check(self) -> Provider:
        """Resolve the default provider now (for a CLI that wants to fail fast, exit 2)."""
        return self.provider()

    def chat(self, request: Mapping, *, quiet: bool = False, cancel: threading.Event | None = None) -> dict:
        """One call. quiet: its text is not streamed (an inbox classification, an aside: not
        the session's own reply). cancel: set by another thread to end the call where it is;
        a streamed reply's connection is closed at its next event and the call raises kind
        "stopped" without counting any usage (the server reported no final counts)."""
        req = normalise_request(request, self.default_max_tokens)
        stream = None if quiet else self.stream
        try:
            self.session.check()  # a spent budget stops the call before anything is sent
        except MossError as e:
            self._emit("llm_error", provider=req["provider"], model=req["model"], kind=e.kind, message=e.message,
                       status=None, attempts=0, duration=0.0)
            raise
        p = self.provider(req["provider"], req["model"])
        fields = {"provider": p.name, "model": p.model}
        sent, window = (req, None) if p.api in OFFLINE_APIS else self._capped(p, req)
        detail = {"system": req["system"], "messages_sent": req["messages"]} if self.options.get("verbose") else {}
        if p.base_url_source:
            detail["base_url_source"] = p.base_url_source
        if window:
            detail["window"] = window
        self._emit("llm_request", **fields, base_url=p.base_url, messages=len(req["messages"]),
                   chars=sum(_chars(m["content"]) for m in req["messages"]) + len(req["system"] or ""),
                   max_tokens=sent["max_tokens"], stream=stream is not None, **detail)
        self._announce(p)
        start = time.monotonic()
        attempts = 1
        try:
            if p.api in OFFLINE_APIS:
                pricing.preload()
                reply = self._offline_answer(p, req, stream)
            else:
                reply, attempts = self._attempts(p, self._adapt(p, sent), fields, stream, cancel)
        except Cancelled as c:
            stopped = MossError("the call was cancelled: the user spoke while the model answered", kind="stopped")
            usage = None
            if c.streamed:  # what the server generated before the stream was closed is counted, once
                raw = dict(c.usage or cassette.estimate_usage(req, c.text))
                raw["output_tokens"] = max(int(raw.get("output_tokens") or 0),
                                           cassette.estimate_usage({}, c.text)["output_tokens"])
                usage = self._account(p, req, {"text": c.text, "usage": raw})
            self._emit("llm_error", **fields, kind=stopped.kind, message=stopped.message, status=None,
                       attempts=attempts, duration=round(time.monotonic() - start, 3),
                       **({"usage": usage, "chars": len(c.text)} if usage is not None else {}))
            raise stopped from None
        except MossError as e:
            extra = {"divergence": e.data["divergence"]} if e.data.get("divergence") else {}
            self._emit("llm_error", **fields, kind=e.kind, message=e.message,
                       status=e.data.get("status"), attempts=e.data.get("attempts", attempts),
                       duration=round(time.monotonic() - start, 3), **extra)
            raise
        reply = {**reply, "text": valid_text(reply.get("text"))}
        usage = self._account(p, req, reply)
        result = {"text": reply["text"], "stop_reason": reply.get("stop_reason") or "end_turn",
                  "model": reply.get("model") or p.model or p.name, "provider": p.name, "usage": usage}
        if self._recorder is not None:
            self._recorder.record(req, {k: result[k] for k in ("text", "stop_reason", "model", "provider", "usage")})
        result["max_tokens"] = sent["max_tokens"]  # the reply limit sent (after the caps)
        # the reply's length, not its text: the caller logs the text once (the runner's
        # `response`), so a session log holds each reply one time, not twice
        self._emit("llm_response", **fields, stop_reason=result["stop_reason"], usage=usage, attempts=attempts,
                   duration=round(time.monotonic() - start, 3), chars=len(result["text"]))
        return result

    # -- internals ---------------------------------------------------------------------
    def _announce(self, p: Provider) -> None:
        """Say where requests (and which key) go when it is not the provider's own endpoint."""
        if not p.base_url or not p.base_url_source:
            return
        with self._lock:
            if p.base_url in self._announced:
                return
            self._announced.add(p.base_url)
        sends = f", with ${p.key_env}" if p.key_env and p.api_key not in (None, "no-key") else ""
        if self.announce is not None:
            self.announce(f"LLM requests go to {p.base_url} (set by {p.base_url_source}){sends}")

    def _emit(self, event: str, **fields) -> None:
        if self.on_event is not None:
            self.on_event(event, fields)

    def _client(self, p: Provider):
        key = (p.api, p.base_url, p.api_key)
        with self._lock:
            if key not in self._clients:
                # made ahead in the background by prepare() (warm.py) when the script asked; else now
                self._clients[key] = warm.take(p, self.timeout) or warm.make(p, self.timeout)
            return self._clients[key]

    def _attempts(self, p: Provider, req: dict, fields: dict, stream: Callable[[str], None] | None = None,
                  cancel: threading.Event | None = None) -> tuple[dict, int]:
        api = wire.get(p.api)  # light: a wire API imports its SDK when it makes its first client
        client = self._client(p)
        pricing.preload()  # the first cost is needed when the answer is back (once; a no-op after)
        attempt = retries = 0
        cut_retried = False
        cancelled = cancel.is_set if cancel is not None else None
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled()
            attempt += 1
            self._emit("llm_attempt", **fields, attempt=attempt, max_attempts=self.max_retries + 1)
            streamed = [0]
            sink = None
            if stream is not None:
                def sink(delta: str, _n=streamed, _out=stream) -> None:
                    if cancelled is not None and cancelled():
                        return  # nothing of a cancelled reply reaches the screen (send() stops at its next event)
                    _n[0] += len(delta)
                    _out(delta)
            t0 = time.monotonic()
            warm.sending()  # genai-prices' preload may start now (warm.quiet)
            try:
                return api.send(client, p, req, sink, self.prompt_cache, cancelled), attempt
            except Failure as f:
                if f.reason == "cut":  # a cut stream is retried once, as a whole
                    again = not cut_retried and self.max_retries > 0
                    cut_retried = True
                else:
                    again = f.retryable and retries < self.max_retries
                    retries += again
                if not again:
                    raise final_error(f, p, attempt, self.timeout) from f
                delay = f.retry_after if f.retry_after is not None else backoff(max(retries, 1))
                if delay > MAX_SERVER_WAIT:
                    raise MossError(f"{p.label} asks to wait {delay:.0f} s before retrying ({f.status}: "
                                    f"{f.message}); giving up instead.", kind="llm", status=f.status,
                                    attempts=attempt) from f
                self._emit("llm_retry", **fields, attempt=attempt, reason=f.reason, status=f.status,
                           error=f.message, delay=round(delay, 3), duration=round(time.monotonic() - t0, 3),
                           streamed_chars=streamed[0])
                if cancel is not None:
                    cancel.wait(delay)
                else:
                    time.sleep(delay)

    def _adapt(self, p: Provider, req: dict) -> dict:
        """Leave out what the model would refuse with a 400 (and say so once)."""
        if req.get("temperature") is not None and rejects_temperature(p.model):
            self._warn_once(p, f"temperature:{p.model}", f"model {p.model!r} does not accept a temperature; "
                                                          f"it is left out of the request")
            return {**req, "temperature": None}
        return req

    def _warn_once(self, p: Provider, key: str, message: str) -> None:
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        self._emit("llm_warning", provider=p.name, model=p.model, message=message)

    def _offline_answer(self, p: Provider, req: dict, stream: Callable[[str], None] | None = None) -> dict:
        with self._lock:
            source = self._offline.get(p.api)
            if source is None:
                path = self.options.get(p.api)
                if not path:
                    flag = "--replay FILE" if p.api == "replay" else "--script FILE"
                    raise MossError(f"provider {p.api!r} needs a file: {flag}", kind="config")
                source = self._offline[p.api] = (cassette.Replay if p.api == "replay" else cassette.Script)(path)
        reply = source.answer(req)
        if stream is not None and reply.get("text"):
            stream(reply["text"])
        reply.setdefault("model", p.model or p.api)
        return reply

    def _account(self, p: Provider, req: dict, reply: dict) -> dict:
        usage = empty_usage()
        raw = reply.get("usage")
        if not raw:
            raw = cassette.estimate_usage(req, reply["text"])  # script, or a server that reports none
        for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            usage[k] = int(raw.get(k) or 0)
        model = reply.get("model") or p.model
        if p.local and p.api not in OFFLINE_APIS and pricing.override_for(model or "", self.config) is None:
            usage["cost_usd"] = 0.0  # your own hardware, whatever a cloud would charge for that model
        else:
            usage["cost_usd"] = pricing.cost_of(usage, model, self.config, p.name)
        if usage["cost_usd"] is None and self.session.budgets.max_cost is not None:
            self._warn_once(p, f"price:{model}", f"no price known for model {model!r}: the cost budget cannot "
                                                 f"count it. Add [llm.pricing.\"{model}\"] input = ..., "
                                                 f"output = ... (USD per million tokens).")
        self.session.add(usage)
        return usage


def _chars(content) -> int:
    """The characters of a message's text (a list of blocks: their texts; never a repr of the
    list, which cost O(prompt) on every call)."""
    if isinstance(content, str):
        return len(content)
    return sum(len(b["text"]) if isinstance(b.get("text"), str) else len(str(b)) for b in content)
