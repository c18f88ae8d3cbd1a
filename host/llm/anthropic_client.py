"""One attempt of a call through the anthropic SDK (Messages API), streamed or not: the wire
API called "anthropic" (wire.py says what a wire API provides)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

from .retry import Cancelled, Failure, reraise
from .wire import models_of, read_canned

CACHE = {"type": "ephemeral"}

SDK = "anthropic"
# What a zygote does ahead for it (host/zygote.py), after importing this module and the SDK.
PRELOAD = ("moss.llm.anthropic_client:_first_request_imports", "moss.llm.tls:context",
           "moss.llm.anthropic_client:_first_response_types")


def make_client(provider, timeout: float):
    import anthropic  # lazy: importing the SDK costs a noticeable part of start-up

    from . import tls

    # the SDK's own HTTP client, its defaults kept, with the process's TLS context (tls.py)
    http = anthropic.DefaultHttpxClient(verify=tls.context(), timeout=timeout)
    client = anthropic.Anthropic(api_key=provider.api_key, base_url=provider.base_url, timeout=timeout,
                                 max_retries=0, http_client=http)  # moss retries itself and reports every attempt
    _first_request_imports()
    return client


def _first_request_imports() -> None:
    """What the SDK imports on its first request, imported with the client instead (made
    ahead, host/llm/warm.py): OpenTelemetry's propagators, which it loads from entry points
    (~15 ms) to put trace headers on requests. A failure is left for the SDK to meet (and
    log) on that request, as it would without this."""
    try:
        import opentelemetry.propagate  # noqa: F401
    except Exception:
        pass


# One reply of each shape `send` reads, for `_first_response_types`: a message, and the events of a
# streamed one.
_WARM_MESSAGE: dict[str, Any] = {
    "id": "msg_warm", "type": "message", "role": "assistant", "model": "warm", "content": [],
    "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
_WARM_EVENTS = (
    ("message_start", {"type": "message_start", "message": _WARM_MESSAGE}),
    ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ("ping", {"type": "ping"}),
    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                             "delta": {"type": "text_delta", "text": "ok"}}),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                       "usage": {"output_tokens": 1}}),
    ("message_stop", {"type": "message_stop"}),
)


def _first_response_types() -> list[dict]:
    """What the SDK builds on its first response, built ahead by a zygote for every process it
    forks (host/zygote.py): the validators of its response types, which pydantic makes on first
    use (~30 ms of CPU). One plain and one streamed call go through `send` to canned replies
    served by httpx2's MockTransport, inside this process (no connection; a placeholder key). Returns what
    `send` made of them; anything that fails is left for the first real response to meet."""
    import json

    import anthropic
    import httpx2

    def reply(request):
        if json.loads(request.content).get("stream"):
            body = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in _WARM_EVENTS)
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)
        return httpx2.Response(200, json={**_WARM_MESSAGE, "content": [{"type": "text", "text": "ok"}],
                                          "stop_reason": "end_turn"})

    http = httpx2.Client(transport=httpx2.MockTransport(reply), trust_env=False)
    client = anthropic.Anthropic(api_key="warm", base_url="http://moss.invalid", max_retries=0, http_client=http)
    provider = SimpleNamespace(model="warm")
    return read_canned(client, send, provider)


def list_models(provider, timeout: float) -> list[str]:
    """The model ids the server serves (a GET; nothing is generated): `moss doctor`."""
    return models_of(make_client(provider, timeout))


def _blocks(content, cache: bool) -> list:
    blocks: list[dict[str, Any]] = ([{"type": "text", "text": content}] if isinstance(content, str)
                                    else [dict(b) for b in content])
    if cache and blocks:
        blocks[-1]["cache_control"] = CACHE
    return blocks


def _marks(content, prompt_cache: bool):
    """Blocks a script marked `cache = true` become cache breakpoints (when caching is on)."""
    if isinstance(content, str):
        return content
    out = []
    for b in content:
        b = dict(b)
        if b.pop("cache", False) and prompt_cache:
            b["cache_control"] = CACHE
        out.append(b)
    return out


def build_params(req: dict, model: str, prompt_cache: bool) -> dict:
    messages = [{**m, "content": _marks(m["content"], prompt_cache)} for m in req["messages"]]
    if prompt_cache and len(messages) > 1 and messages[0]["role"] == "user":
        # The conversation's first user turn is stable across turns: cache up to it too.
        messages[0]["content"] = _blocks(messages[0]["content"], True)
    params = {"model": model, "max_tokens": req["max_tokens"], "messages": messages}
    if req.get("system"):
        params["system"] = _blocks(req["system"], prompt_cache)
    if req.get("stop"):
        params["stop_sequences"] = list(req["stop"])
    if req.get("label"):
        # Which part of a machine asks (e.g. "evaluator"): a header, so the prompt's bytes (and
        # its cache) stay the same; proxies, logs and test servers can tell turns apart.
        params["extra_headers"] = {"X-Moss-Label": req["label"]}
    if req.get("temperature") is not None:
        # The SDK dropped its temperature argument (current models refuse one); older ones take it.
        params["extra_body"] = {"temperature": req["temperature"]}
    return params


def _usage(u) -> dict:
    return {"input_tokens": getattr(u, "input_tokens", 0) or 0, "output_tokens": getattr(u, "output_tokens", 0) or 0,
            "cache_read_tokens": getattr(u, "cache_read_input_tokens", 0) or 0,
            "cache_write_tokens": getattr(u, "cache_creation_input_tokens", 0) or 0}


def send(client, provider, req: dict, stream: Callable[[str], None] | None, prompt_cache: bool = True,
         cancelled: Callable[[], bool] | None = None) -> dict:
    """-> {"text", "stop_reason", "model", "usage"}; raises Failure for a failed attempt."""
    params = build_params(req, provider.model, prompt_cache)
    started = False
    try:
        if stream is None:
            msg = client.messages.create(**params)
            text = "".join(b.text for b in msg.content if getattr(b, "type", None) == "text")
            return {"text": text, "stop_reason": msg.stop_reason or "end_turn", "model": msg.model or provider.model,
                    "usage": _usage(msg.usage)}
        events = client.messages.create(**params, stream=True)
        started = True
        parts: list[str] = []
        usage: dict = {}
        stop_reason, model, finished = None, provider.model, False
        with events:  # closed on the way out, also when cancelled: the server sees the disconnect
            for ev in events:
                if cancelled is not None and cancelled():
                    raise Cancelled(True, "".join(parts), usage or None)
                kind = ev.type
                if kind == "message_start":
                    model = ev.message.model or model
                    usage = _usage(ev.message.usage)
                elif kind == "content_block_delta" and getattr(ev.delta, "type", None) == "text_delta":
                    parts.append(ev.delta.text)
                    stream(ev.delta.text)
                elif kind == "message_delta":
                    stop_reason = ev.delta.stop_reason or stop_reason
                    # message_delta carries the final counts; cache fields only when non-null.
                    for key, value in _usage(ev.usage).items():
                        if value:
                            usage[key] = value
                elif kind == "message_stop":
                    finished = True
        if not finished:
            # The SDK hands back partial text when the stream just ends: that is not an answer.
            raise Failure("cut", "the stream ended before message_stop", retryable=True)
        return {"text": "".join(parts), "stop_reason": stop_reason or "end_turn", "model": model, "usage": usage}
    except Exception as exc:
        reraise(exc, streaming=started)
