"""moss.fs: file reads and writes confined to the project root, checked against the access level."""

from __future__ import annotations

from ..errors import MossError

MAX_READ = 2_000_000


def functions(ctx):
    def read(path):
        from ..tools.confine import confine
        from ..tools.resolve import require_regular

        p = confine(ctx.root, path, must_exist=True)
        if p.is_dir():
            raise MossError(f"{path} is a directory (use moss.code.view)", kind="usage")
        require_regular(p, str(path), "moss.fs.read reads regular files only")
        size = p.stat().st_size
        if size > MAX_READ:
            raise MossError(f"{path} is {size:,} bytes; moss.fs.read reads at most {MAX_READ:,}", kind="usage")
        data = p.read_bytes()
        if b"\0" in data[:8192]:
            raise MossError(f"{path} looks binary; not read", kind="usage")
        return data.decode("utf-8", errors="replace")

    def write(path, text):
        from ..tools import safefs
        from ..tools.confine import confine
        from ..tools.resolve import require_regular
        from ..tools.sandbox import require_write

        require_write(ctx.access, f"writing {path}")
        p = confine(ctx.root, path, writing=True)
        # The root or a folder is no file to write: writing "through" it would put a temp
        # file next to it, outside the project when it is the root.
        if p == ctx.root.resolve() or p.is_dir():
            raise MossError(f"moss.fs.write needs a file path; {str(path)!r} is "
                            f"{'the project root' if p == ctx.root.resolve() else 'a directory'}",
                            kind="usage")
        require_regular(p, str(path), "moss.fs.write replaces regular files only")
        # through the held project root: missing folders are made and the file replaced
        # without following a link that appeared since confine looked (kind "denied")
        real_root = ctx.root.resolve()
        safefs.tree(real_root).write_atomic(p.relative_to(real_root), str(text), sync_dir=False, new_mode=None)
        ctx.log("fs_write", {"path": str(p.relative_to(ctx.root)), "bytes": len(str(text).encode())})
        return True

    def exists(path):
        from ..tools.confine import confine

        try:
            return confine(ctx.root, path).exists()
        except MossError:
            return False

    return {"fs.read": read, "fs.write": write, "fs.exists": exists}
