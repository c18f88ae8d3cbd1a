"""What went wrong with one attempt, whether to try again, and the message a user sees.

SDK exceptions are recognised by class name (both SDKs share the names), so neither SDK
has to be imported here.
"""

from __future__ import annotations

import time
from typing import NoReturn

from ..errors import MossError

MAX_SERVER_WAIT = 60.0  # a retry-after longer than this is reported instead of waited out


class Failure(Exception):
    """One failed attempt.

    reason: "status" (HTTP error), "timeout", "connection", "cut" (a stream ended or broke
    before its final event).
    """

    def __init__(self, reason: str, message: str, status: int | None = None,
                 retry_after: float | None = None, retryable: bool = False):
        super().__init__(message)
        self.reason, self.message, self.status = reason, message, status
        self.retry_after, self.retryable = retry_after, retryable


class Cancelled(BaseException):
    """The caller cancelled the call (the user paused or stopped the session while it was in
    flight): the stream is closed where it is read, and the reply, partial, is dropped. A
    BaseException, so no SDK error handler takes it for a failed attempt.

    streamed: the reply had begun (the server generated, and bills, that much); text: what
    of it arrived; usage: the counts the server reported so far (None: none)."""

    def __init__(self, streamed: bool = False, text: str = "", usage: dict | None = None):
        super().__init__("cancelled")
        self.streamed, self.text, self.usage = streamed, text, usage


def backoff(retry: int) -> float:
    """The SDKs' own schedule: 0.5 s, 1 s, 2 s ... at most 8 s, with jitter."""
    import random

    return min(0.5 * 2 ** (retry - 1), 8.0) * random.uniform(0.75, 1.0)


def parse_retry_after(headers) -> float | None:
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(float(ms) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value:
        try:
            return max(float(value), 0.0)
        except ValueError:
            import email.utils

            try:
                when = email.utils.parsedate_to_datetime(value)
                return max(when.timestamp() - time.time(), 0.0)
            except (TypeError, ValueError):
                pass
    return None


def _names(exc: BaseException) -> set[str]:
    return {c.__name__ for c in type(exc).__mro__}


def _api_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(getattr(exc, "message", None) or exc)


def _cause(exc: BaseException) -> str:
    seen = exc
    while (nxt := seen.__cause__ or seen.__context__) is not None:
        seen = nxt
    text = str(seen) or type(seen).__name__
    return text if seen is not exc else type(exc).__name__


def reraise(exc: BaseException, streaming: bool) -> NoReturn:
    """Raise `exc` as a Failure when it is an API failure (it may already be one); else as is."""
    if isinstance(exc, Failure):
        raise exc
    failure = classify(exc, streaming)
    if failure is None:
        raise exc
    raise failure from exc


def classify(exc: BaseException, streaming: bool) -> Failure | None:
    """Turn an SDK / httpx2 exception into a Failure; None for anything else (a bug, a cancel).

    `streaming`: the response had started; any break now is a cut stream.
    """
    names = _names(exc)
    if "APIStatusError" in names:
        status = getattr(exc, "status_code", None)
        if streaming or status == 200:  # an `event: error` in the middle of a stream
            return Failure("cut", f"the stream reported an error: {_api_message(exc)}", retryable=True)
        retry_after = parse_retry_after(getattr(getattr(exc, "response", None), "headers", None))
        retryable = status in (408, 409, 429) or (status or 0) >= 500
        return Failure("status", _api_message(exc), status=status, retry_after=retry_after, retryable=retryable)
    if "APITimeoutError" in names or "TimeoutException" in names:
        return Failure("timeout", "timed out", retryable=True)
    if streaming and names & {"APIConnectionError", "TransportError", "APIError"}:
        return Failure("cut", f"the stream broke off: {_cause(exc)}", retryable=True)
    if names & {"APIConnectionError", "TransportError"}:
        return Failure("connection", _cause(exc), retryable=True)
    if "APIError" in names:  # e.g. an OpenAI error object inside a 200 response
        return Failure("status", _api_message(exc), retryable=False)
    return None


def final_error(f: Failure, provider, attempts: int, timeout: float) -> MossError:
    """The MossError for a failure that is not (or no longer) retried."""
    who = provider.label
    tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
    data = {"provider": provider.name, "model": provider.model, "status": f.status, "attempts": attempts}
    if f.reason == "timeout":
        return MossError(f"no answer from {who} within {timeout:g} s ({tries}). Allow longer with "
                         f"--timeout SECONDS or [llm] timeout in the config.", kind="timeout", **data)
    if f.reason == "connection":
        return MossError(f"cannot reach {provider.base_url} : is the server running? ({f.message}; {tries})",
                         kind="llm", **data)
    if f.reason == "cut":
        return MossError(f"the answer from {who} was cut off before it finished ({f.message}; {tries}). "
                         f"The connection or the server is unreliable; try again.", kind="llm", **data)
    status = f.status
    if status in (401, 403):
        var = provider.key_env or "the API key"
        what = "rejected the API key" if status == 401 else "refused access (forbidden)"
        hint = (f"check {var}" if provider.key_env else
                f"the server wants a key: set [llm.providers.{provider.name}] api_key_env = \"VAR\" and export VAR")
        return MossError(f"{who} {what} ({status}): {f.message}. {hint[0].upper() + hint[1:]}.",
                         kind="config", **data)
    if status == 429:
        return MossError(f"{who} is rate limiting (429) after {tries}: {f.message}. Wait and retry, or raise "
                         f"[llm] max_retries.", kind="llm", **data)
    if status and status >= 500:
        return MossError(f"{who} failed with a server error ({status}) on all {tries}: {f.message}. "
                         f"The service may be down; try again later.", kind="llm", **data)
    if status == 404:
        return MossError(f"{who} answered 404: {f.message}. Check the model name ({provider.model!r}) and "
                         f"the base URL.", kind="llm", **data)
    return MossError(f"{who} rejected the request ({status}): {f.message}", kind="llm", **data)
