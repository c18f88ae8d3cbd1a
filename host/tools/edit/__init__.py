"""Edits: symbol-level, exact-text and whole-file changes, previewed or applied as one batch.

A spec is a plain dict (it usually comes from Lua):

    {"target": "src/llm.rs/Provider", "action": "delete"}
    {"target": "src/llm.rs/Provider", "action": "replace", "content": "<new code>"}
    {"target": "src/llm.rs/Provider", "action": "insert", "position": "before"|"after",
     "content": "<code>"}
    {"target": "README.md", "action": "text", "old": "exact old text", "content": "new"}
    {"target": "notes/new.md", "action": "create", "content": "..."}
    {"target": "path", "action": "append"|"prepend", "content": "..."}

`preview(root, specs)` computes the result without touching the disk; `apply(root, specs)`
computes the same and then writes it. Both return

    {"files": [changed paths], "diff": "<unified diff of every changed file>",
     "changes": [{"path", "diff", "added", "removed", "target", "action"}, ...],
     "syntax_warning": "src/x.rs: parse error near line N"}   # only when an edit broke a parse

and `preview` adds `surfaces`: per changed file, the public items the batch removed, changed
or added (moss.tools.surface.compare).

Targets. `path/Symbol[/Child]`: the path part is the longest prefix naming an existing file
(exactly, relative to the root: no fuzzy matching for edits), confined to the root by
`confine` (no `..` escape, no absolute path elsewhere, no symlink leading out, nothing in
`.git`). The rest is a symbol path as `view` shows it (`Provider/default_model`,
`Agent/run`). A bare file path with `replace` overwrites the file, with `delete` removes it,
with `insert` before/after means prepend/append. `text` on a symbol target searches only
inside that symbol.

Rules (chosen to be the least surprising for a model that just read `view` output):
- delete removes the symbol's whole lines, doc comments and attributes/decorators included,
  and then the blank lines it leaves: between two neighbours the larger of the two gaps is
  kept; at the start or end of a block or file the gap on the open side goes away.
- replace covers the item from the first leading part the new content itself begins with:
  content starting with a doc comment replaces doc comment + attributes + item; content
  starting with an attribute/decorator (`#[`, `@`) keeps the doc comment and replaces
  attributes + item; otherwise doc comment and attributes are kept and only the item is
  replaced. (To drop a decorator or doc comment, restate the head without it, or use
  `text`.) A trailing `,`/`;` that followed the item (struct field, enum variant) is kept.
- insert puts the content on its own lines (position defaults to "after"): before = above
  the symbol's doc comment and attributes, after = below its last line. The new item is
  separated from the symbol by as many blank lines as separate the symbol from its
  neighbouring symbol of the same sort (function/method, field, variant, ...) on that side,
  else on the other side; with no such neighbour, by 1 blank line (2 for top-level Python,
  0 for fields and variants).
- content for replace/insert is re-indented as a block: its common indentation is removed
  and the symbol's indentation put in front of every non-blank line. When the first line
  has no indentation but the others are indented as if copied from the file (deeper than
  the symbol, or a closing `}`/`end` at the symbol's level), the first line is taken to have
  lost its indentation. Multi-line string literals are re-indented too: use `text` to avoid.
- text: `old` must occur exactly once (else "not_found" naming the closest line, or
  "ambiguous" with the count and lines); content is inserted verbatim; "" deletes.
- create refuses an existing path (kind "conflict") and adds a final newline;
  append/prepend add the content on lines of its own.
- Several specs on one file apply in order, each to the result of the previous one.
- Line endings (a file whose every newline is CRLF stays CRLF), the trailing-newline
  convention and the file mode are preserved. Binary, non-UTF-8 and >2 MB files are refused.

apply() is all or nothing: every spec is computed in memory first (a failing spec raises
MossError naming its number and target, and nothing is written); the files are checked
unchanged on disk since they were read (kind "conflict"); then each is written through a
temp file and os.replace, and a failed write restores the files already written.

Every read and write goes through moss.tools.safefs from a held descriptor of the project
root, on the path `confine` resolved (a link inside the project that stays inside is followed
once, there): a folder swapped for a link after the check (another process, a background run)
fails the edit with a line naming the link, and nothing is read or written outside the
project. A file is replaced by a temp file made with O_EXCL and renamed within the same
folder descriptor.

This module is the batch (`preview`, `apply`); the rest, one job per module: a spec's shape
(`spec.py`), the files a batch touches and which one a target names (`files.py`), whole-file,
symbol and exact-text edits (`wholefile.py`, `symbol.py`, `text.py`), the line and
indentation helpers symbol edits lay text out with (`layout.py`), what a batch reports: its
diffs and syntax warning (`report.py`), and writing with its rollback (`write.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ...errors import MossError
from .. import surface
from .files import MAX_BYTES, File, Plan, locate_file
from .report import batch_result, change_entry
from .spec import Spec, parse_spec
from .symbol import symbol_edit
from .wholefile import create, file_edit
from .write import commit

__all__ = ["preview", "apply", "MAX_BYTES"]


def preview(root: Path, specs: list[dict]) -> dict:
    """What `apply` would do, without writing anything; and, for the approval policy, what it
    changes in each file's public surface (`surfaces`: moss.tools.surface.compare)."""
    plan = _plan(root, specs)
    return {**batch_result(plan), "surfaces": [surface.compare(f.rel, f.initial, f.text) for f in plan.changed()]}


def apply(root: Path, specs: list[dict]) -> dict:
    """Apply every spec or none (see the module doc); returns what `preview` returns."""
    plan = _plan(root, specs)
    commit(plan.changed())
    return batch_result(plan)


def _plan(root: Path, specs) -> Plan:
    """Run every spec in memory, in order; raise on the first one that fails."""
    if isinstance(specs, Mapping):
        specs = [specs]
    if not specs:
        raise MossError("no edits given: pass a list of {target, action, ...} specs",
                        kind="usage")
    plan = Plan(root)
    for number, raw in enumerate(specs, 1):
        try:
            spec = parse_spec(number, raw)
            f = locate_file(plan, spec)
            before = f.text
            _run_spec(f, spec)
        except MossError as e:
            raise _in_spec(e, number, len(specs), raw) from e
        plan.changes.append(change_entry(f, before, spec))
    return plan


def _in_spec(err: MossError, number: int, total: int, raw) -> MossError:
    target = raw.get("target") if isinstance(raw, Mapping) else None
    action = raw.get("action") if isinstance(raw, Mapping) else None
    where = f"edit {number} of {total}"
    if target is not None:
        where += f" ({action} {target})"
    data = {**err.data, "spec": number, "target": target}
    return MossError(f"{where}: {err.message}\nNo file was changed.", kind=err.kind, **data)


def _run_spec(f: File, spec: Spec) -> None:
    if spec.action == "create":
        create(f, spec)
    elif spec.symbol:
        symbol_edit(f, spec.symbol, spec)
    else:
        file_edit(f, spec)
