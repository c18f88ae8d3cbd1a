"""The alert-rule language of background runs: parse a rule, check log lines against it.

A rule is a string shorthand or a table (see RULE_GRAMMAR):

    "/REGEX/" or "/REGEX/i"      a log line matches the pattern
    "loss > 4" (>, >=, <, <=)    a number logged for the metric crosses the threshold
    "loss is nan"                the metric is logged as nan or inf
    "loss spike [K]"             a value at least K times (default 3) the running mean of
                                 the values before it, once there are min_points of them

with optional severity (info, warning, critical), message, choices (default continue, stop;
a choice starting with stop, kill or terminate stops the run) and once (default true: a
rule alerts once per run).

Checking is bounded whatever the log or the rule says: patterns and metric names come from
config or the model, so they compile with RE2 (moss.tools.saferegex: linear time, never
backtracking), and a log is checked in lines of at most MAX_LINE bytes (`split_lines`), a
longer "line" in pieces. What to do about an alert is policy (the Wild Loop); raising and
recording one is moss.tools.runs.manager.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

from ...errors import MossError
from ...tools import saferegex

__all__ = ["Rule", "parse_rule", "split_lines", "check_choices", "RULE_GRAMMAR", "SEVERITIES", "SOURCES",
           "DEFAULT_CHOICES", "STOP_CHOICE", "MAX_LINE"]

SEVERITIES = ("info", "warning", "critical")
SOURCES = ("rule", "manual", "script", "judge")  # who raised an alert
DEFAULT_CHOICES = ["continue", "stop"]
STOP_CHOICE = re.compile(r"^\s*(stop|kill|terminate)\b", re.I)
MAX_LINE = 64 * 1024  # a longer "line" is checked in pieces

NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)"
OPS = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}
RULE_GRAMMAR = (
    'an alert rule is "/REGEX/", "METRIC > NUMBER" (>, >=, <, <=), "METRIC is nan", "METRIC spike [K]", '
    "or a table {pattern=} | {metric=, op=, threshold=} | {metric=, nan=true} | {metric=, spike=K, "
    "min_points=}, with optional severity (info, warning, critical), message, choices, name, once"
)
DEFAULT_SPIKE = 3.0      # "loss spike": a value >= 3x the running mean of the values before it
DEFAULT_MIN_POINTS = 3   # ... once that mean has at least this many values


class Rule:
    """One alert rule: `check(line)` -> (default message, matched text) or None."""

    def __init__(self, spec: dict, key: str, kind: str):
        self.spec = spec
        self.key = key
        self.kind = kind
        self.severity = spec.get("severity") or ("critical" if kind == "nan" else "warning")
        if self.severity not in SEVERITIES:
            self.severity = "warning"  # as the original normalised it
        self.message = spec.get("message")
        choices = spec.get("choices")
        if choices is None:
            choices = list(DEFAULT_CHOICES)
        if not check_choices(choices):
            raise MossError(f"alert rule {key!r}: choices must be a non-empty list of strings", kind="usage")
        self.choices = choices
        self.once = spec.get("once", True) is not False
        # Patterns and metric names come from config or the model: RE2, never backtracking
        if kind == "pattern":
            self.regex = saferegex.compile(spec["pattern"], ignore_case=bool(spec.get("ignore_case")),
                                           what=f"alert rule {key!r}: bad regex")
        else:
            metric = spec["metric"]
            self.metric = metric
            # RE2 has no lookaround: the name must not follow a word character, and the
            # number must not run on into one (checked in check)
            self.regex = saferegex.compile(
                r"(?:^|\W)" + saferegex.escape(metric) + r"""["']?\s*[=:]?\s*["']?(""" + NUMBER + r")",
                ignore_case=True, what=f"alert rule {key!r}: metric")
            if kind == "threshold":
                self.op = spec.get("op") or ">"
                self.threshold = float(spec["threshold"])
                self.compare = OPS[self.op]
            if kind == "spike":
                self.factor = float(spec["spike"])
                self.min_points = int(spec.get("min_points") or DEFAULT_MIN_POINTS)
                self.count, self.total = 0, 0.0  # the running mean, per run (one Rule per run)

    def check(self, line: str) -> tuple[str, str] | None:
        if self.kind == "pattern":
            m = self.regex.search(line)
            if m:
                return f"log line matches /{self.regex.pattern}/", m.group(0)
            return None
        for m in self.regex.finditer(line):
            after = line[m.end():m.end() + 1]
            if after and (after.isalnum() or after in "._"):
                continue  # "loss=12abc": not a number of that metric
            raw = m.group(1)
            try:
                value = float(raw)
            except ValueError:
                continue
            if self.kind == "nan":
                if math.isnan(value) or math.isinf(value):
                    return f"{self.metric} is {raw} (not a finite number)", raw
            elif self.kind == "spike":
                if math.isnan(value) or math.isinf(value):
                    continue
                mean = self.total / self.count if self.count else 0.0
                hit = self.count >= self.min_points and mean > 0 and value >= self.factor * mean
                self.count += 1
                self.total += value
                if hit:
                    return (f"{self.metric} = {raw} is {value / mean:.1f}x its running mean {mean:.4g} "
                            f"(spike rule: >= {self.factor:g}x)"), raw
            elif not math.isnan(value) and self.compare(value, self.threshold):
                return f"{self.metric} = {raw} {self.op} {self.threshold:g}", raw
        return None


_SHORT_THRESHOLD = re.compile(r"^\s*([\w./-]+)\s*(>=|<=|>|<)\s*(" + NUMBER + r")\s*$", re.I)
_SHORT_NAN = re.compile(r"^\s*(?:([\w./-]+)\s+is\s+nan|nan\(\s*([\w./-]+)\s*\))\s*$", re.I)
_SHORT_REGEX = re.compile(r"^/(.*)/(i?)$", re.S)
_SHORT_SPIKE = re.compile(r"^\s*([\w./-]+)\s+spikes?(?:\s+(?:x\s*)?(\d+(?:\.\d*)?|\.\d+)\s*x?)?\s*$", re.I)


def parse_rule(spec: Any) -> Rule:
    """A Rule from a string shorthand or a table; MossError(kind="usage") otherwise."""
    if isinstance(spec, str):
        return parse_rule(_shorthand(spec))
    if not isinstance(spec, dict):
        raise MossError(f"bad alert rule {spec!r}: {RULE_GRAMMAR}", kind="usage")
    known = {"pattern", "ignore_case", "metric", "op", "threshold", "nan", "spike", "min_points", "severity",
             "message", "choices", "name", "once"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise MossError(f"alert rule: unknown field(s) {', '.join(unknown)}; {RULE_GRAMMAR}", kind="usage")
    spec = dict(spec)
    if spec.get("pattern") is not None:
        if not isinstance(spec["pattern"], str) or not spec["pattern"]:
            raise MossError("alert rule: pattern must be a non-empty regex string", kind="usage")
        return Rule(spec, str(spec.get("name") or f"/{spec['pattern']}/"), "pattern")
    metric = spec.get("metric")
    if not isinstance(metric, str) or not metric.strip():
        raise MossError(f"bad alert rule {spec!r}: {RULE_GRAMMAR}", kind="usage")
    if spec.get("nan"):
        return Rule(spec, str(spec.get("name") or f"{metric} is nan"), "nan")
    if spec.get("spike") is not None:
        return _spike_rule(spec, metric)
    return _threshold_rule(spec, metric)


def _shorthand(spec: str) -> dict:
    """The table a string rule stands for: /regex/[i], `loss is nan`, `loss spikes 3x`, `loss > 2`."""
    text = spec.strip()
    m = _SHORT_REGEX.match(text)
    if m:
        return {"pattern": m.group(1), "ignore_case": bool(m.group(2)), "name": text}
    m = _SHORT_NAN.match(text)
    if m:
        return {"metric": m.group(1) or m.group(2), "nan": True, "name": text}
    m = _SHORT_SPIKE.match(text)
    if m:
        return {"metric": m.group(1), "spike": float(m.group(2) or DEFAULT_SPIKE), "name": text}
    m = _SHORT_THRESHOLD.match(text)
    if m:
        return {"metric": m.group(1), "op": m.group(2), "threshold": float(m.group(3)), "name": text}
    raise MossError(f"bad alert rule {spec!r}: {RULE_GRAMMAR}", kind="usage")


def _spike_rule(spec: dict, metric: str) -> Rule:
    try:
        spec["spike"] = float(spec["spike"])
        spec["min_points"] = int(spec.get("min_points") or DEFAULT_MIN_POINTS)
    except (TypeError, ValueError):
        raise MossError(f"alert rule for {metric!r}: spike and min_points must be numbers", kind="usage") from None
    if not spec["spike"] > 1 or spec["min_points"] < 1:
        raise MossError(f"alert rule for {metric!r}: spike must be a factor above 1 (e.g. 3) and min_points "
                        "at least 1", kind="usage")
    return Rule(spec, str(spec.get("name") or f"{metric} spike {spec['spike']:g}"), "spike")


def _threshold_rule(spec: dict, metric: str) -> Rule:
    if spec.get("threshold") is None:
        raise MossError(f"alert rule for {metric!r} needs threshold= (or nan=true); {RULE_GRAMMAR}", kind="usage")
    op = spec.get("op") or ">"
    if op not in OPS:
        raise MossError(f"alert rule for {metric!r}: op must be one of {', '.join(OPS)}", kind="usage")
    try:
        spec["threshold"] = float(spec["threshold"])
    except (TypeError, ValueError):
        raise MossError(f"alert rule for {metric!r}: threshold must be a number", kind="usage") from None
    spec["op"] = op
    return Rule(spec, str(spec.get("name") or f"{metric} {op} {spec['threshold']:g}"), "threshold")


def check_choices(choices) -> TypeGuard[list[str]]:
    """Whether `choices` is what an alert offers: a non-empty list of non-blank strings."""
    return isinstance(choices, list) and bool(choices) and all(isinstance(c, str) and c.strip() for c in choices)


def split_lines(partial: bytes, data: bytes, final: bool) -> tuple[list[bytes], bytes]:
    """The complete lines of `partial + data` and what is left of an unfinished last line.
    A rest longer than MAX_LINE is checked as a line of its own, so no line a rule sees is
    longer than that (plus one read); `final` (the run ended) checks the rest too."""
    lines = (partial + data).split(b"\n")
    rest = lines.pop()
    if len(rest) > MAX_LINE or (final and rest):
        lines.append(rest)
        rest = b""
    return lines, rest
