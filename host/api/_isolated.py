"""Isolated children (`moss.spawn{..., isolate = true}`): what host/api/agents.py does with a
child's own copy of the tree, on top of host/tools/worktree/.

- at the spawn: the parent's tree is laid out as the copy (links or reflinks); the child's
  context works in the copy (`ctx.workdir`), and its sandbox shows the copy at the project's
  path. While the copy is completed in its own thread, the parent's tree is captured in its
  shadow store (so the copy's starting point borrows its objects and stores nothing);
- when the child ends: its change (patch, changed paths) joins its result, and the patch is
  kept in `.moss/agent/patches/ID.patch` for `moss sessions show` and the board;
- `merge`: the parent's decision. A snapshot first (so the parent's rollback covers the
  merge), the locks of every path it writes, the three-way merge, the copy removed;
- `discard`: the copy removed.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import MossError

def patch_path(root: Path, cid: str) -> Path:
    from ..storage import agent_dir

    return agent_dir(root) / "patches" / f"{cid}.patch"


def make(ctx, cid: str, cap: str, resume: bool, wanted: bool):
    """The copy child `cid` works in: a new one, or (resuming) the one an earlier run left;
    None for a child that shares its parent's tree."""
    from ..tools.worktree import Worktree

    tree = ctx.tree
    known = tree.children.get(cid) if tree is not None else None
    if known is not None and known.worktree is not None:
        return known.worktree
    if resume:
        wt = Worktree.adopt(Path(ctx.root), cid, may_write=cap in ("edit", "full"))
        if wt is None and wanted:
            # its copy is gone (merged, discarded or cleaned): the child never touches the
            # parent's tree in its place; it works nowhere, and any file it reaches fails
            wt = Worktree.gone(Path(ctx.root), cid)
        return wt
    if not wanted:
        return None
    from .shadow import new_shadow

    sh = new_shadow(ctx)  # (checked now: a bad [shadow] table fails the spawn, not the copy)

    def prime() -> Path:
        """In the copy's own thread: the parent's tree captured in its shadow store, so the
        copy's starting point finds its files' objects there and stores none of its own."""
        label = f"before isolated child {cid}"
        ctx.log("snapshot", {"id": sh.snapshot(label, session=ctx.tree_id), "label": label})
        return sh.git_dir / "objects"

    wt = Worktree.create(project=Path(ctx.root), source=Path(ctx.workdir), child=cid, parent=ctx.session_id,
                         may_write=cap in ("edit", "full"), prime=prime)
    made = wt.record.get("copy") or {}
    ctx.log("child_isolated", {"child": cid, "strategy": made.get("strategy"), "files": made.get("files"),
                               "bytes": made.get("bytes"), "seconds": wt.record.get("seconds"),
                               "skipped": wt.record.get("skipped") or [], "home": str(wt.home)})
    return wt


def finish(parent_ctx, child, result: dict) -> dict:
    """`result` with the child's change: `isolated`, `patch`, `patch_cut`, `patch_stat`,
    `changed` (or `patch_error`). Also kept for the parent's log (`child.change`)."""
    wt = child.worktree
    if wt is None:
        return result
    result = dict(result)
    result["isolated"] = True
    if wt.state != "working":
        result["merge_state"] = wt.state
        return result
    try:
        got = wt.changes()
    except MossError as e:
        result["patch_error"] = e.message
        return result
    child.change = got
    from .. import storage

    try:
        if got["patch"]:
            storage.write_atomic(patch_path(parent_ctx.root, child.id), got["patch"])
    except (OSError, MossError):
        pass  # the result carries the patch all the same
    result.update(patch=got["patch"], patch_cut=got["patch_cut"], patch_stat=got["patch_stat"],
                  changed=got["changed"])
    return result


def end_fields(child) -> dict:
    """What the parent's `child_end` record says of an isolated child's change."""
    if child.worktree is None:
        return {}
    got = getattr(child, "change", None) or {}
    return {"isolated": True, "changed": got.get("changed"), "patch_stat": got.get("patch_stat")}


def merge(ctx, child) -> dict:
    """Merge a finished child's change into this agent's tree; {applied, conflicts, snapshot}."""
    from ..tools.locks import Target
    from ..tools.sandbox import require_write
    from ..tools.worktree import merge as merging
    from .locks import hold, lock_timeout
    from .shadow import _shadow

    wt = _usable(child, "merge")
    require_write(ctx.access, f"merging child {child.id}'s change (it writes files)")
    from ..tools.worktree import wait_ready

    wait_ready(ctx.workdir, ctx.cancelled)  # the copy whole before the merge reads it
    got = getattr(child, "change", None) or wt.changes()
    paths = [c["path"] for c in got["changes"] if not merging.refused(c["path"])]
    with hold(ctx, [Target(p) for p in paths], lock_timeout(ctx), "merge"):
        sh = _shadow(ctx)
        wid = sh.begin_write(f"merge child {child.id}", session=ctx.tree_id)
        ctx.log("snapshot", {"id": wid, "label": f"before merging child {child.id}"})
        try:
            result = wt.merge(Path(ctx.workdir), got)
        finally:
            end = sh.end_write(wid)
            ctx.log("write", {"id": end["id"], "changed": end["changed"], "not_captured": end["not_captured"]})
    result["snapshot"] = wid
    ctx.log("child_merge", {"child": child.id, "applied": result["applied"], "conflicts": result["conflicts"],
                            "snapshot": wid})
    return result


def discard(ctx, child) -> dict:
    wt = _usable(child, "discard")
    freed = wt.discard()
    ctx.log("child_discard", {"child": child.id, "bytes": freed})
    return {"discarded": True, "bytes": freed}


def _usable(child, what: str):
    wt = child.worktree
    if wt is None:
        raise MossError(f"child {child.id} shares this agent's tree: there is no copy to {what} "
                        f"(spawn it with isolate = true)", kind="usage")
    if wt.state != "working":
        raise MossError(f"child {child.id}'s copy was already {wt.state}", kind="usage")
    return wt
