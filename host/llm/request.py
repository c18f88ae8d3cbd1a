"""Check and normalise a chat{...} request coming from a script."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import MossError

FIELDS = {"messages", "system", "model", "provider", "max_tokens", "stop", "temperature", "prompt", "label", "quiet"}
ROLES = ("user", "assistant", "system")


def _usage(msg: str) -> MossError:
    return MossError(f"llm.chat: {msg}", kind="usage")


def _as_list(value: Any, what: str) -> list:
    """A list, or a Lua-style table converted to {1: a, 2: b}."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (dict, Mapping)) and all(isinstance(k, int) for k in value):
        if sorted(value) != list(range(1, len(value) + 1)):
            raise _usage(f"{what} must be a list (keys 1..n), got keys {sorted(value)}")
        return [value[k] for k in sorted(value)]
    raise _usage(f"{what} must be a list, got {type(value).__name__}")


def _content(value: Any, where: str):
    if isinstance(value, str):
        return value
    if value is None:
        raise _usage(f"{where} is missing")
    blocks = _as_list(value, where)
    out = []
    for i, b in enumerate(blocks):
        if isinstance(b, str):
            b = {"type": "text", "text": b}
        if not isinstance(b, (dict, Mapping)):  # dict first: isinstance on an ABC costs ~1 µs
            raise _usage(f"{where}[{i}] must be a string or a block table like {{type='text', text='...'}}")
        out.append(dict(b))
    return out


def normalise_request(request: Any, default_max_tokens: int) -> dict:
    if not isinstance(request, (dict, Mapping)):
        raise _usage(f"expects a table like {{messages={{...}}, system='...'}}, got {type(request).__name__}")
    unknown = set(request) - FIELDS
    if unknown:
        raise _usage(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}; known: {', '.join(sorted(FIELDS))}")
    system_parts = [request["system"]] if request.get("system") else []
    if system_parts and not isinstance(system_parts[0], str):
        raise _usage("system must be a string")
    messages = _messages(request, system_parts)
    max_tokens = _max_tokens(request.get("max_tokens") or default_max_tokens)
    stop = request.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    elif stop is not None:
        stop = [str(s) for s in _as_list(stop, "stop")] or None
    temperature = request.get("temperature")
    if temperature is not None and not isinstance(temperature, (int, float)):
        raise _usage(f"temperature must be a number, got {temperature!r}")
    label = request.get("label")
    if label is not None and not (isinstance(label, str) and label.isprintable() and len(label) <= 200):
        raise _usage(f"label must be a short printable string, got {label!r}")
    if request.get("quiet") is not None and not isinstance(request.get("quiet"), bool):
        raise _usage(f"quiet must be true or false, got {request.get('quiet')!r}")
    return {"system": "\n\n".join(system_parts) or None, "label": label or None, "messages": messages,
            "model": request.get("model") or None,
            "provider": request.get("provider") or None, "max_tokens": max_tokens, "stop": stop,
            "temperature": temperature}


def _messages(request: Mapping, system_parts: list[str]) -> list[dict]:
    """The turns, `prompt` last as a user turn; a system turn's text goes to `system_parts`
    (both APIs take the system prompt apart from the turns)."""
    raw = request.get("messages")
    messages_in = _as_list(raw, "messages") if raw is not None else []
    if request.get("prompt") is not None:
        messages_in.append({"role": "user", "content": request["prompt"]})
    messages = []
    for i, m in enumerate(messages_in):
        if not isinstance(m, (dict, Mapping)):
            raise _usage(f"messages[{i}] must be a table {{role=..., content=...}}")
        role = m.get("role")
        if role not in ROLES:
            raise _usage(f"messages[{i}].role must be 'user' or 'assistant', got {role!r}")
        content = _content(m.get("content"), f"messages[{i}].content")
        if role == "system":
            system_parts.append(content if isinstance(content, str) else
                                "".join(b.get("text", "") for b in content))
        else:
            messages.append({"role": role, "content": content})
    if not messages:
        raise _usage("needs at least one user message (messages={role='user', content='...'} or prompt='...')")
    return messages


def _max_tokens(max_tokens: Any) -> int:
    if isinstance(max_tokens, float) and max_tokens.is_integer():
        max_tokens = int(max_tokens)  # Lua numbers may arrive as floats
    if not isinstance(max_tokens, int) or max_tokens <= 0:
        raise _usage(f"max_tokens must be a positive integer, got {max_tokens!r}")
    return max_tokens
