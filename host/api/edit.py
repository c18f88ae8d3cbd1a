"""moss.edit: symbol-level and exact-text edits, previewed or applied all-or-nothing.

`apply` takes the locks of its targets by itself (host/api/locks.py: symbol or file locks,
then the short write lock of each file), so agents running at once never lose an edit."""

from __future__ import annotations

import os

from ..errors import MossError
from .registry import primitive


def _specs(specs):
    if isinstance(specs, dict):
        specs = [specs]
    if not isinstance(specs, list) or not specs:
        raise MossError("moss.edit takes an edit {target=, action=, ...} or a list of them", kind="usage")
    return specs


@primitive
def preview(ctx, specs):
    from ..tools.edit import preview as _preview

    return _preview(ctx.workdir, _specs(specs))


@primitive
def apply(ctx, specs):
    from ..tools.edit import apply as _apply
    from ..tools.sandbox import require_write
    from ..tools.worktree import wait_ready
    from .locks import for_edit

    specs = _specs(specs)
    require_write(ctx.access, "editing files")
    wait_ready(ctx.workdir, ctx.cancelled)
    with for_edit(ctx, specs):
        hold = os.environ.get("MOSS_TEST_EDIT_HOLD")
        if hold:  # test-only: widen the read-apply-write window (see tests/test_spawn.py)
            result = _apply_slowly(ctx.workdir, specs, float(hold))
        else:
            result = _apply(ctx.workdir, specs)
    ctx.log("edit", {"files": result.get("files"), "specs": len(specs)})
    return result


def _apply_slowly(root, specs, seconds: float) -> dict:
    import time

    from ..tools import edit as tool
    from ..tools.edit.report import batch_result
    from ..tools.edit.write import commit

    plan = tool._plan(root, specs)
    time.sleep(seconds)
    commit(plan.changed())
    return batch_result(plan)
