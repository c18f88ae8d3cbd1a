"""The ownership journal: which write of which session changed which paths, before and after.

``.moss/shadow.git/moss-journal.jsonl`` gets one line per ``begin_write``, ended write and
restore; a session's rollback reads it to put back only that session's changes and to name
the paths someone else changed since (conflicts).
"""

from __future__ import annotations

import json
import time

from .model import (MB, WRITES_REF, _STORE, _Capture, _dec, _differences, _dumps, _enc, _show,
                    _uncaptured_detail)
from .store import Store

_JOURNAL_LIMIT = 1024 * MB


class Journaling(Store):
    """Reading and appending the ownership journal, and closing open writes into it."""

    def _close(self, wid: str, post: "_Capture", auto: bool) -> dict:
        """End the open write ``wid`` with capture ``post``; append and return its record."""
        begin = self._open.pop(wid)
        pre = self._load(wid)
        post_id = post.commit or self._commit(post, WRITES_REF,
                                              f"after {begin.get('label', '')}", "write",
                                              begin.get("session"))
        paths = {p: [_enc(a), _enc(b)] for p, (a, b) in
                 _differences(pre.entries, post.entries).items()}
        rec = {"op": "write", "id": wid, "post": post_id, "session": begin.get("session"),
               "label": begin.get("label", ""), "begin": begin["begin"], "end": post.seq,
               "t0": begin.get("t0"), "t1": round(time.time(), 3), "paths": paths}
        if auto:
            rec["auto"] = True
        self._append(rec)
        return rec

    def _find_end(self, wid: str) -> dict | None:
        if wid in self._open:
            return None
        for r in reversed(self._journal()):
            if r.get("op") == "write" and r.get("id") == wid:
                return r
        return None

    def _journal(self) -> list[dict]:
        try:
            lines = self._tree.read_text(f"{_STORE}/moss-journal.jsonl", _JOURNAL_LIMIT).splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue                # a torn last line from a killed process
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def _append(self, rec: dict) -> None:
        # mend: a line torn by a killed process ends before this one
        self._tree.append(f"{_STORE}/moss-journal.jsonl", (_dumps(rec) + "\n").encode(),
                          create_dirs=False, mend=True)


def _session_plan(journal: list[dict], session: str, since: int, cur: dict
                  ) -> tuple[dict, list[dict]]:
    """What a session's rollback to the capture with sequence number ``since`` puts
    back (path -> entry before the session's first change to it), and the conflicts."""
    writes = [r for r in journal if r.get("op") in ("write", "restore")
              and isinstance(r.get("paths"), dict)]
    writes.sort(key=lambda r: r.get("begin", 0))
    first: dict[str, dict] = {}
    last: dict[str, dict] = {}
    others: dict[str, list[dict]] = {}
    for r in writes:
        if r.get("session") == session:
            if r.get("begin", 0) >= since:      # a write whose start is ``since`` counts
                for p in r["paths"]:
                    first.setdefault(p, r)
                    last[p] = r
        elif r.get("end", 0) > since:
            for p in r["paths"]:
                others.setdefault(p, []).append(r)
    plan: dict[str, tuple | None] = {}
    conflicts: list[dict] = []
    for p, r1 in sorted(first.items()):
        later = [r for r in others.get(p, ()) if r.get("end", 0) > r1.get("begin", 0)]
        pre = _dec(r1["paths"][p][0])
        shown = _show(p, pre or _dec(last[p]["paths"][p][1]))
        if later:
            by = max(later, key=lambda r: r.get("end", 0))
            who = by.get("session")
            conflicts.append({"path": shown, "session": who, "reason": (
                f"session {who} changed it after this session did" if who else
                "a script with no session changed it after this session did")})
            continue
        if cur.get(p) != _dec(last[p]["paths"][p][1]):
            conflicts.append({"path": shown, "session": None, "reason":
                              "it changed after this session's last write to it (by hand, "
                              "or by a command outside a recorded write)"})
            continue
        plan[p] = pre
    return plan, conflicts


def _end_summary(rec: dict) -> dict:
    changed, lost = [], []
    for p, (a, b) in sorted(rec.get("paths", {}).items()):
        a, b = _dec(a), _dec(b)
        changed.append(_show(p, b or a))
        if a is not None and a[0] == "u":
            lost.append({"path": _show(p, a), "reason": a[1], "detail":
                         "a rollback cannot bring back what was there before: "
                         + _uncaptured_detail(a, None)})
        elif b is not None and b[0] == "u":
            lost.append({"path": _show(p, b), "reason": b[1], "detail":
                         "a rollback will keep what is there now: "
                         + _uncaptured_detail(b, None)})
    return {"id": rec["id"], "post": rec.get("post"), "changed": changed,
            "not_captured": lost}

