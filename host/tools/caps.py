"""Output capping: keep the head and the tail of a long text, say what was cut.

Every tool that returns text to an agent passes it through `cap` so a single call can
never flood a context window. The marker names the cut in characters and in lines of the
original text, so the reader knows how to ask for the missing part (`view path:A-B`).
"""

from __future__ import annotations

# Share of the budget given to the head; the rest goes to the tail.
_HEAD_SHARE = 0.6
# Room kept for the marker line itself.
_MARKER_ROOM = 100


def marker(amount: int, unit: str, detail: str = "") -> str:
    """`… [12,345 characters cut: lines 120-480 of 900] …` (or `… [N bytes cut] …`)."""
    return f"… [{amount:,} {unit} cut{': ' + detail if detail else ''}] …"


def join(head: str, tail: str, amount: int, unit: str, detail: str = "") -> str:
    """head + the marker on a line of its own + tail."""
    m = marker(amount, unit, detail)
    if head and not head.endswith("\n"):
        m = "\n" + m
    if tail:
        m += "\n"
    return head + m + tail


def _line_of(text: str, offset: int) -> int:
    """1-based line number of the character at `offset`."""
    return text.count("\n", 0, offset) + 1


def cap(text: str, max_chars: int, head_share: float = _HEAD_SHARE) -> str:
    """Return `text` unchanged if it fits in `max_chars`, else its head and tail.

    The cut is made on line boundaries when whole lines fit, and a marker such as
    ``… [12,345 characters cut: lines 120-480 of 900] …`` replaces the middle. The
    result is never longer than `max_chars` (for any `max_chars` of 1 or more).
    `max_chars` of 0 or less (or None) means no cap. `head_share` is the head's part of
    what is kept (a command's output gives its tail, where errors land, as much room).
    """
    if not max_chars or max_chars <= 0 or len(text) <= max_chars:
        return text
    budget = max_chars - _MARKER_ROOM
    if budget < 20:  # too small for a useful head and tail
        return text[:max_chars]

    total_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    head_budget = int(budget * head_share)
    tail_budget = budget - head_budget

    # Head: the longest prefix of whole lines within head_budget, else a plain slice.
    head_end = text.rfind("\n", 0, head_budget) + 1
    if head_end <= 0:
        head_end = head_budget
    # Tail: the longest suffix of whole lines within tail_budget, else a plain slice.
    tail_floor = len(text) - tail_budget
    tail_start = text.find("\n", tail_floor - 1 if tail_floor > 0 else 0)
    if tail_start == -1 or tail_start + 1 >= len(text) or tail_start + 1 < tail_floor:
        tail_start = tail_floor
    else:
        tail_start += 1
    tail_start = max(tail_start, head_end)

    cut = tail_start - head_end
    first = _line_of(text, head_end)
    last = _line_of(text, max(tail_start - 1, head_end))
    lines = f"line {first}" if first == last else f"lines {first}-{last}"
    out = join(text[:head_end], text[tail_start:], cut, "characters", f"{lines} of {total_lines:,}")
    if len(out) > max_chars:  # pathological marker length; fall back to a hard cut
        return text[:max_chars]
    return out
