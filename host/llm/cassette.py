"""Deterministic LLM answers: record to a JSONL cassette, replay from it, or follow a script.

Cassette line: {"key": sha256, "request": {system, messages, model, max_tokens, stop,
temperature}, "response": {text, stop_reason, model, provider, usage}}. The request is
provider-independent: `model` is the one the call asked for (null when it relied on the
configured default), so a cassette recorded against one provider replays anywhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Mapping
from typing import Any

from ..errors import MossError

KEY_FIELDS = ("system", "messages", "model", "max_tokens", "stop", "temperature")


def normalise(req: Mapping) -> dict:
    return {k: req.get(k) for k in KEY_FIELDS}


def request_key(req: Mapping) -> str:
    data = json.dumps(normalise(req), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def estimate_tokens(text: str) -> int:
    return len(text) // 4 + 1 if text else 0


def estimate_usage(req: Mapping, text: str) -> dict:
    prompt = (req.get("system") or "") + "".join(_text(m.get("content")) for m in req.get("messages") or [])
    return {"input_tokens": estimate_tokens(prompt), "output_tokens": estimate_tokens(text),
            "cache_read_tokens": 0, "cache_write_tokens": 0}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in content or [] if isinstance(b, (dict, Mapping)))


class Recorder:
    """Appends one line per call; safe to share between threads."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)

    def record(self, req: Mapping, response: Mapping) -> None:
        line = json.dumps({"key": request_key(req), "request": normalise(req), "response": dict(response)},
                          ensure_ascii=False)
        from ..tools.safefs import append_file

        with self._lock:  # one write a line, never through a link (moss's one log writer)
            append_file(self.path, line + "\n")


def _read_jsonl(path: str, what: str) -> list:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise MossError(f"cannot read the {what} {path}: {e.strerror}", kind="config") from None
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            return json.loads(stripped)
        except ValueError as e:
            raise MossError(f"{path}: not valid JSON: {e}", kind="config") from None
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                items.append(json.loads(line))
            except ValueError as e:
                raise MossError(f"{path}:{n}: not valid JSON: {e}", kind="config") from None
    return items


class Replay:
    """Answers from a cassette. The same request recorded twice replays its answers in order.

    A request with no recorded answer raises MossError(kind="llm") naming the first difference
    from the nearest recorded request; its ``data["divergence"]`` says the same as fields
    (``divergence``), and the LLM's ``llm_error`` event carries them, so a caller replaying a
    run in another process (``moss eval --replay``) reads them from the session log."""

    def __init__(self, path: str):
        self.path = path
        self.entries = [e for e in _read_jsonl(path, "cassette") if isinstance(e, dict) and "request" in e]
        self._by_key: dict[str, list[dict]] = {}
        for e in self.entries:
            self._by_key.setdefault(e.get("key") or request_key(e["request"]), []).append(e["response"])
        self._used: dict[str, int] = {}
        self.asked = 0  # requests asked so far, answered or not (the tree's: children share this)
        self._lock = threading.Lock()

    def answer(self, req: Mapping) -> dict:
        key = request_key(req)
        with self._lock:
            self.asked += 1
            n = self.asked
            answers = self._by_key.get(key)
            if answers:
                i = self._used.get(key, 0)
                self._used[key] = i + 1
                return dict(answers[min(i, len(answers) - 1)])
        found = divergence(n, self.entries, normalise(req))
        raise MossError(self._miss_message(found), kind="llm", divergence=found)

    def _miss_message(self, d: dict) -> str:
        head = f"replay: no recorded answer for request {d['request']} in {self.path}"
        if not self.entries:
            return head + " (the cassette is empty)"
        return f"{head}; nearest is entry {d['entry']}: {d['detail']}"


def divergence(n: int, entries: list, now: Mapping) -> dict:
    """How request `n` (1-based), which no entry of `entries` answers, differs from the nearest:
    {request, entry (1-based, 0 when there is none), field (a path such as messages[2].content),
    what (in words: "the system prompt", "the last user message", ...), recorded, now (short
    excerpts around the first differing character), detail (one line)}."""
    if not entries:
        return {"request": n, "entry": 0, "field": "", "what": "the recording has no requests", "recorded": "",
                "now": "", "detail": "the cassette is empty"}
    compared = [_compare(e["request"], now) for e in entries]
    best = min(range(len(compared)), key=lambda i: compared[i][0])
    _, field, a, b = compared[best]
    if field is None:
        return {"request": n, "entry": best + 1, "field": "", "what": "nothing (corrupt key?)", "recorded": "",
                "now": "", "detail": "identical request (corrupt key?)"}
    rec, cur = _show(a, b), _show(b, a)
    return {"request": n, "entry": best + 1, "field": field, "what": _what(field, now), "recorded": rec,
            "now": cur, "detail": f"{field} differs: recorded {rec} vs now {cur}"}


def first_difference(recorded: Mapping, now: Mapping) -> tuple[tuple, str]:
    """(closeness score, "messages[2].content differs: recorded '...' vs now '...'")."""
    score, field, a, b = _compare(recorded, now)
    if field is None:
        return score, "identical request (corrupt key?)"
    return score, f"{field} differs: recorded {_show(a, b)} vs now {_show(b, a)}"


def _compare(recorded: Mapping, now: Mapping) -> tuple[tuple, str | None, Any, Any]:
    """(closeness score, path of the first difference or None, recorded value, value now)."""
    differing = [f for f in KEY_FIELDS if recorded.get(f) != now.get(f)]
    if not differing:
        return (0, 0), None, None, None
    field = differing[0]
    path, a, b = _descend(field, recorded.get(field), now.get(field))
    # Nearer: fewer differing fields, then a longer common beginning.
    ja, jb = (json.dumps([r.get(f) for f in KEY_FIELDS], sort_keys=True) for r in (recorded, now))
    common = next((i for i, (x, y) in enumerate(zip(ja, jb)) if x != y), min(len(ja), len(jb)))
    return (len(differing), -common), path, a, b


_FIELD_WORDS = {"system": "the system prompt", "model": "the model asked for", "max_tokens": "the reply limit",
                "stop": "the stop sequences", "temperature": "the temperature",
                "messages length": "the number of messages"}


def _what(path: str, now: Mapping) -> str:
    """A differing request field in words: "the system prompt", "the last user message", ..."""
    head = path.split("[", 1)[0].split(".", 1)[0]
    if path == "messages length" or head != "messages":
        return _FIELD_WORDS.get(path, _FIELD_WORDS.get(head, head))
    m = re.match(r"messages\[(\d+)\]", path)
    msgs = now.get("messages") or []
    if not m or not isinstance(msgs, list):
        return "the messages"
    i = int(m.group(1))
    role = msgs[i].get("role") if i < len(msgs) and isinstance(msgs[i], Mapping) else None
    who = f"{role} message" if role else "message"
    return f"the last {who}" if i == len(msgs) - 1 else f"message {i + 1} ({who})"


def _descend(path: str, a: Any, b: Any) -> tuple[str, Any, Any]:
    if isinstance(a, list) and isinstance(b, list):
        for i in range(min(len(a), len(b))):
            if a[i] != b[i]:
                return _descend(f"{path}[{i}]", a[i], b[i])
        return f"{path} length", len(a), len(b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                return _descend(f"{path}.{k}", a.get(k), b.get(k))
    return path, a, b


def _show(value: Any, other: Any, width: int = 60) -> str:
    if not isinstance(value, str) or not isinstance(other, str):
        return repr(value)
    i = next((n for n, (x, y) in enumerate(zip(value, other)) if x != y), min(len(value), len(other)))
    start = max(0, i - 20)
    snippet = value[start:start + width]
    return ("..." if start else "") + repr(snippet) + ("..." if start + width < len(value) else "")


class Script:
    """Answers a fixed list of responses in order: JSON list (or JSONL) of strings or {"text": ...}."""

    def __init__(self, path: str):
        self.path = path
        self.items = _read_jsonl(path, "script")
        if not isinstance(self.items, list):
            raise MossError(f"{path}: a script is a JSON list of strings or {{\"text\": ...}} objects", kind="config")
        self._next = 0
        self._lock = threading.Lock()

    def answer(self, req: Mapping) -> dict:
        with self._lock:
            n = self._next
            if n >= len(self.items):
                raise MossError(f"script exhausted after {len(self.items)} responses ({self.path}): "
                                f"the agent asked for one more", kind="llm")
            self._next += 1
        item = self.items[n]
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, Mapping) or not isinstance(item.get("text"), str):
            raise MossError(f"{self.path}: response {n + 1} must be a string or an object with a \"text\" string",
                            kind="config")
        return dict(item)
