"""One attempt of a call through the openai SDK (Chat Completions), streamed or not: the wire
API called "openai" (wire.py says what a wire API provides).

Serves OpenAI itself and every OpenAI-compatible preset (Ollama, llama.cpp, vLLM, ...).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

from . import window
from .models import is_openai_reasoning
from .retry import Cancelled, Failure, reraise
from .wire import models_of, read_canned

FINISH = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal", "tool_calls": "tool_use",
          "function_call": "tool_use"}

SDK = "openai"
# What a zygote does ahead for it (host/zygote.py), after importing this module and the SDK.
PRELOAD = ("moss.llm.tls:context", "moss.llm.openai_client:_first_response_types")


def make_client(provider, timeout: float):
    import openai  # lazy: importing the SDK costs a noticeable part of start-up

    from . import tls

    # the SDK's own HTTP client, its defaults kept, with the process's TLS context (tls.py)
    http = openai.DefaultHttpxClient(verify=tls.context(), timeout=timeout)
    return openai.OpenAI(api_key=provider.api_key, base_url=provider.base_url, timeout=timeout,
                         max_retries=0, http_client=http)  # moss retries itself and reports every attempt


# One reply of each shape `send` reads, for `_first_response_types`: a completion, and the chunks
# of a streamed one.
_WARM_BASE = {"id": "chatcmpl-warm", "created": 0, "model": "warm"}
_WARM_USAGE = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2,
               "prompt_tokens_details": {"cached_tokens": 0}}
_WARM_CHUNKS = tuple({**_WARM_BASE, "object": "chat.completion.chunk", **c} for c in (
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}, "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": _WARM_USAGE},
))


def _first_response_types() -> list[dict]:
    """What the SDK builds on its first response, built ahead by a zygote for every process it
    forks (host/zygote.py): the validators of its response types, which pydantic makes on first
    use. One plain and one streamed call go through `send` to canned replies served by httpx2's
    MockTransport, inside this process (no connection; a placeholder key). Returns what `send` made of
    them; anything that fails is left for the first real response to meet."""
    import json

    import httpx2
    import openai

    def reply(request):
        if json.loads(request.content).get("stream"):
            body = "".join(f"data: {json.dumps(c)}\n\n" for c in _WARM_CHUNKS) + "data: [DONE]\n\n"
            return httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)
        return httpx2.Response(200, json={**_WARM_BASE, "object": "chat.completion", "usage": _WARM_USAGE,
                                          "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                                                       "finish_reason": "stop"}]})

    http = httpx2.Client(transport=httpx2.MockTransport(reply), trust_env=False)
    client = openai.OpenAI(api_key="warm", base_url="http://moss.invalid", max_retries=0, http_client=http)
    provider = SimpleNamespace(model="warm", max_tokens_param="max_tokens")
    return read_canned(client, send, provider)


def list_models(provider, timeout: float) -> list[str]:
    """The model ids the server serves (a GET; nothing is generated): `moss doctor`."""
    return models_of(make_client(provider, timeout))


def server_window(provider) -> int | None:
    """The context window a local OpenAI-compatible server (llama.cpp, Ollama, vLLM) says it
    holds (window.py); None when it does not say."""
    return window.server_window(provider.name, provider.base_url, provider.model)


def _content(content):
    """Chat Completions content as a plain string whenever it is text.

    Strict OpenAI-compatible servers (llama.cpp's, and others on the same chat-template
    code) read only string content and drop a list of blocks, leaving the model blind.
    Blocks buy nothing on this API: prefix caching is automatic, so the `cache` marks a
    script sets (meaningful on the Anthropic API) are simply dropped. Content with a
    non-text block (an image) stays a list: there is no string form for it."""
    if isinstance(content, str):
        return content
    if all(b.get("type", "text") == "text" for b in content):
        return "".join(str(b.get("text", "")) for b in content)
    return [{"type": "text", "text": b.get("text", "")} if b.get("type", "text") == "text" else
            {k: v for k, v in b.items() if k not in ("cache_control", "cache")} for b in content]


def build_params(req: dict, provider) -> dict:
    messages = [{"role": "system", "content": req["system"]}] if req.get("system") else []
    messages += [{"role": m["role"], "content": _content(m["content"])} for m in req["messages"]]
    params = {"model": provider.model, "messages": messages, provider.max_tokens_param: req["max_tokens"]}
    # Reasoning models refuse `stop`: the text is cut at the stop sequence here instead.
    if req.get("stop") and not is_openai_reasoning(provider.model):
        params["stop"] = list(req["stop"])
    if req.get("label"):
        # Which part of a machine asks (e.g. "evaluator"): a header, so the prompt's bytes (and
        # its cache) stay the same; proxies, logs and test servers can tell turns apart.
        params["extra_headers"] = {"X-Moss-Label": req["label"]}
    if req.get("temperature") is not None:  # already dropped for models that refuse it
        params["temperature"] = req["temperature"]
    return params


def _usage(u) -> dict | None:
    if u is None:
        return None
    details = getattr(u, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    written = (getattr(details, "cache_write_tokens", 0) or 0) if details is not None else 0
    # prompt_tokens counts cached and cache-written tokens too; moss reports them apart.
    return {"input_tokens": max((u.prompt_tokens or 0) - cached - written, 0),
            "output_tokens": u.completion_tokens or 0, "cache_read_tokens": cached, "cache_write_tokens": written}


def _reason(choice, stop) -> str:
    finish = choice.finish_reason or "stop"
    # vLLM says which stop string matched; the OpenAI API itself reports a stop sequence as "stop".
    if finish == "stop" and stop and getattr(choice, "stop_reason", None) in stop:
        return "stop_sequence"
    return FINISH.get(finish, finish)


def _apply_stop(text: str, reason: str, stop) -> tuple[str, str]:
    """Servers that ignore `stop` (or models that may not get it): cut the text ourselves."""
    hits = [text.find(s) for s in stop or [] if s and s in text]
    if hits:
        return text[: min(hits)], "stop_sequence"
    return text, reason


def send(client, provider, req: dict, stream: Callable[[str], None] | None, prompt_cache: bool = True,
         cancelled: Callable[[], bool] | None = None) -> dict:
    """-> {"text", "stop_reason", "model", "usage" (None when the server reported none)}."""
    params = build_params(req, provider)
    started = False
    try:
        if stream is None:
            resp = client.chat.completions.create(**params)
            if not resp.choices:
                raise Failure("status", "the server answered without any choice", retryable=True)
            choice = resp.choices[0]
            text, reason = _apply_stop(choice.message.content or "", _reason(choice, req.get("stop")),
                                       req.get("stop"))
            return {"text": text, "stop_reason": reason, "model": resp.model or provider.model,
                    "usage": _usage(resp.usage)}
        chunks = client.chat.completions.create(**params, stream=True, stream_options={"include_usage": True})
        started = True
        parts: list[str] = []
        usage, finish, model = None, None, provider.model
        with chunks:  # closed on the way out, also when cancelled: the server sees the disconnect
            for chunk in chunks:
                if cancelled is not None and cancelled():
                    raise Cancelled(True, "".join(parts), usage)
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices or []:
                    if choice.index != 0:
                        continue
                    delta = choice.delta.content if choice.delta is not None else None
                    if delta:
                        parts.append(delta)
                        stream(delta)
                    if choice.finish_reason:
                        finish = _reason(choice, req.get("stop"))
        if finish is None:
            raise Failure("cut", "the stream ended without a finish_reason", retryable=True)
        text, reason = _apply_stop("".join(parts), finish, req.get("stop"))
        return {"text": text, "stop_reason": reason, "model": model, "usage": usage}
    except Exception as exc:
        reraise(exc, streaming=started)
