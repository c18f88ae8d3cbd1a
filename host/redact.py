"""Credentials out of what moss writes down: session logs keep what happened, not secrets.

Two nets: the values of secret-looking environment variables this process holds (an API
key is caught even when it has no recognisable shape), and the shapes of well-known
credentials (provider keys, tokens, private keys, `password=...` assignments).
"""

from __future__ import annotations

import os
import re

MASK = "[REDACTED]"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)", re.I)
_SHAPES = re.compile(
    r"""(
        sk-(?:ant-)?[A-Za-z0-9_-]{16,}                 # Anthropic / OpenAI style keys
      | (?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}       # GitHub tokens
      | github_pat_[A-Za-z0-9_]{20,}
      | xox[abprs]-[A-Za-z0-9-]{10,}                   # Slack
      | AKIA[0-9A-Z]{16}                               # AWS access key id
      | AIza[0-9A-Za-z_-]{30,}                         # Google API key
      | glpat-[A-Za-z0-9_-]{20,}                       # GitLab
      | hf_[A-Za-z0-9]{30,}                            # Hugging Face
      | -----BEGIN[ A-Z]*PRIVATE\ KEY-----[\s\S]*?(?:-----END[ A-Z]*PRIVATE\ KEY-----|\Z)
    )""",
    re.X,
)
# `Authorization: Bearer x`, `api_key = "x"`, `PASSWORD=x`: keep the name, hide the value.
_ASSIGNED = re.compile(
    r"""(?P<name>\b(?:bearer|authorization|[A-Za-z0-9_.-]*(?:api[_-]?key|token|secret|password|passwd))\b
         ["']?\s*[:=]?\s*(?:bearer\s+)?["']?)(?P<value>[^\s"',;]{8,})""",
    re.X | re.I,
)


def _env_secrets(env=os.environ) -> list[str]:
    values = {v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 8}
    return sorted(values, key=len, reverse=True)


_cache: tuple[int, list[str]] | None = None


def _known() -> list[str]:
    global _cache
    key = hash(frozenset(os.environ.items()))
    if _cache is None or _cache[0] != key:
        _cache = (key, _env_secrets())
    return _cache[1]


def text(s: str) -> str:
    """`s` with anything that looks like a credential replaced by [REDACTED]."""
    for value in _known():
        if value in s:
            s = s.replace(value, MASK)
    s = _SHAPES.sub(MASK, s)
    return _ASSIGNED.sub(lambda m: m.group("name") + (MASK if m.group("value") != MASK else m.group("value")), s)


def value(v):
    """Redact every string inside a JSON-like value (dict keys are names, left alone)."""
    if isinstance(v, str):
        return text(v)
    if isinstance(v, dict):
        return {k: value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [value(x) for x in v]
    return v
