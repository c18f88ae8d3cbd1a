"""moss.edit: symbol-level and exact-text edits, previewed or applied all-or-nothing."""

from __future__ import annotations


def functions(ctx):
    def _specs(specs):
        if isinstance(specs, dict):
            specs = [specs]
        if not isinstance(specs, list) or not specs:
            raise ValueError("moss.edit takes an edit {target=, action=, ...} or a list of them")
        return specs

    def preview(specs):
        from ..tools.edit import preview as _preview

        return _preview(ctx.root, _specs(specs))

    def apply(specs):
        from ..tools.edit import apply as _apply

        from ..tools.sandbox import require_write

        specs = _specs(specs)
        require_write(ctx.access, "editing files")
        result = _apply(ctx.root, specs)
        ctx.log("edit", {"files": result.get("files"), "specs": len(specs)})
        return result

    return {"edit.preview": preview, "edit.apply": apply}
