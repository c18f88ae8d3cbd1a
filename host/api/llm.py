"""moss.llm: chat with the configured provider; usage, cost and budgets per session."""

from __future__ import annotations

import sys
from typing import Any, Callable

from ..errors import MossError
from .registry import primitive


def _service(ctx):
    svc = ctx.services.get("llm")
    if svc is None:
        from ..errors import ConfigError
        from ..llm import LLM

        if not isinstance(ctx.config.get("llm", {}), dict):
            raise ConfigError("[llm] in the config must be a table, e.g. [llm] provider = \"anthropic\"")

        if ctx.parent_llm is not None:  # a child agent: the tree's budget and clients
            svc = ctx.services["llm"] = ctx.parent_llm.child(on_event=ctx.log)
            ctx.services["llm_stream"] = _Tee(None)  # nothing on the screen; its live file only
            return svc
        verbose = bool(ctx.options.get("verbose"))
        stream: Callable[[str], None] | None = _stderr_stream if (verbose or sys.stderr.isatty()) else None
        if ctx.options.get("include_partial"):
            stream = _PartialStream(also=stream)
        svc = LLM(ctx.config, ctx.options, env=ctx.env, on_event=ctx.log, stream=stream,
                  project_keys=ctx.project_keys, project_trusted=ctx.project_trusted, announce=_announce)
        ctx.services["llm"] = svc
        ctx.services["llm_stream"] = _Tee(stream)
    return svc


def _announce(text: str) -> None:
    from .. import ui

    ui.note(text, "yellow")


class _Tee:
    """Where a session's own reply streams: the screen's stream (stderr, stream-json partials;
    None when neither) and the live file of the reply being streamed (host/live.py, what
    `moss ui` shows growing), which moss.llm.chat sets for each call that is not quiet."""

    def __init__(self, screen: Callable[[str], None] | None) -> None:
        self.screen = screen
        self.live: Any = None  # host.live.LiveReply

    def __call__(self, delta: str) -> None:
        live = self.live
        if live is not None:
            live.feed(delta)
        if self.screen is not None:
            self.screen(delta)


class _PartialStream:
    """--include-partial: each streamed delta as a {"type": "partial", "text": ...} line on
    stdout (the stream-json format, docs/events.md), labelled with the request's label."""

    def __init__(self, also: Callable[[str], None] | None = None) -> None:
        self.also = also
        self.label: str | None = None  # the label of the request being streamed (set by moss.llm.chat)

    def __call__(self, delta: str) -> None:
        import json

        if delta:
            event = {"type": "partial", "text": delta}
            if self.label:
                event["label"] = self.label
            sys.stdout.write(json.dumps(event, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        if self.also is not None:
            self.also(delta)


class _StderrStream:
    """The model's text on stderr as it streams; `wrote` says whether any went there since
    moss.llm.chat last cleared it (then the chat ends the line)."""

    def __init__(self) -> None:
        self.wrote = False

    def __call__(self, delta: str) -> None:
        from .. import ui

        if ui.live_feed(delta):  # a live status line (moss.ui.live) counts the deltas instead
            return
        self.wrote = True
        sys.stderr.write(ui.sanitize(delta))  # the model's text must not drive the terminal
        sys.stderr.flush()


_stderr_stream = _StderrStream()


def _chat_listening(ctx, svc, request, quiet: bool = False):
    """svc.chat in a worker thread while this (the Lua) thread keeps reading the session's
    inbox, so a message is handled before the model answers; a handler that asks to
    interrupt ends the wait (kind "stopped") and cancels the call: its stream is closed (the
    server stops generating; nothing of the partial reply is counted, shown or kept)."""
    import threading

    from ..errors import MossError

    box: dict = {}
    cancel = threading.Event()

    def work():
        try:
            box["result"] = svc.chat(request, quiet=quiet, cancel=cancel)
        except BaseException as e:  # handed to the waiting thread
            box["error"] = e

    worker = threading.Thread(target=work, name="moss-llm", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(0.1)
        if worker.is_alive() and ctx.user_interrupt():
            cancel.set()
            raise MossError("stopped by the user while waiting for the model", kind="stopped")
    if "error" in box:
        raise box["error"]
    return box["result"]


def _answers_at_once(svc, request) -> bool:
    """An offline provider (--script, --replay) answers without waiting: no thread to listen to
    the inbox meanwhile (starting one cost more than the whole answer)."""
    if request.get("provider") or request.get("model"):
        return False
    try:
        return svc.provider().api in ("script", "replay")
    except Exception:
        return False  # svc.chat says what is wrong


@primitive
def chat(ctx, request):
    if not isinstance(request, dict):
        raise MossError("moss.llm.chat takes a table: {messages=..., system=..., ...}", kind="usage")
    svc = _service(ctx)
    tee = ctx.services.get("llm_stream")
    screen = tee.screen if isinstance(tee, _Tee) else svc.stream
    if isinstance(screen, _PartialStream):
        label = request.get("label")
        screen.label = label if isinstance(label, str) else None
    # a call made while the user's message is handled (its classification, an aside) is
    # not the session's reply: nothing of it is streamed to the screen or the live file
    box = ctx.services.get("inbox")
    quiet = bool(request.get("quiet")) or bool(box is not None and box.busy)
    live = None
    if not quiet:
        _stderr_stream.wrote = False
        if isinstance(tee, _Tee):
            from ..live import LiveReply

            # a bound session's reply streams to its live file (host/live.py), screen or not
            live = tee.live = LiveReply(ctx.root, ctx.session_id) if ctx.session_id else None
            svc.stream = tee if (live is not None or tee.screen is not None) else None
    listen = getattr(ctx, "inbox_poll", None) and not _answers_at_once(svc, request)
    try:
        result = _chat_listening(ctx, svc, request, quiet) if listen else svc.chat(request, quiet=quiet)
    finally:
        if live is not None:
            tee.live = None
            live.end()
    if not quiet and _stderr_stream.wrote and not result.get("text", "").endswith("\n"):
        sys.stderr.write("\n")  # the streamed text ends its line
    return result


@primitive
def usage(ctx):
    svc = ctx.services.get("llm")
    if svc is None:
        return {"input_tokens": 0, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0,
                "cost_usd": 0.0, "calls": 0}
    return svc.usage


@primitive
def provider(ctx):
    """Resolve the provider now (a local server is looked for when none is configured), so a
    script fails before its first turn rather than in it."""
    svc = _service(ctx)
    p = svc.provider()
    svc.prepare(p)  # its SDK client is made in the background meanwhile (host/llm/warm.py)
    return {"name": p.name, "model": p.model, "base_url": p.base_url, "is_local": bool(p.local),
            "detected": p.detected, "context_window": svc.window(p)}


@primitive
def budget(ctx):
    svc = ctx.services.get("llm")
    return svc.budget_reason() if svc else None
