"""Step cudnn.quarantine (--quarantine-stale): move other cuDNN versions on the env's library
path aside into <state>/quarantine/<env>/<original absolute path>; undo moves them back.

The quarantine layout mirrors the original paths, so even a run killed mid-way can be put
back from the files alone. Copies inside the env (pip wheels, conda packages) are listed but
never moved: their package manager owns them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.guard.jsondoc import objects
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint
from tfgpu_install.steps.cudnn.wheel import wheel_lib

if TYPE_CHECKING:
    from tfgpu_install.steps.cudnn.want import Want


class QuarantineStale(Step):
    id = "cudnn.quarantine"

    def __init__(self, want: Want) -> None:
        self.want = want

    def describe(self) -> str:
        return "move other cuDNN versions on the env's library path aside (--quarantine-stale)"

    def base(self, ctx: Context) -> Path:
        from tfgpu_install.env.state import env_key

        return ctx.state_dir / "quarantine" / env_key(self.want.env)

    def _keep(self, ctx: Context) -> tuple[Path, Optional[str]]:
        """The copy this install uses and its version. Before it is in place (a dry run),
        the version it will have: what was fetched, else what the plan asks for."""
        from tfgpu_install.fetch.cudnn_redist import scan_dir

        want = self.want
        if want.source == "wheel":
            lib = wheel_lib(want.env) or want.env / "lib" / "(nvidia-cudnn wheel)"
            expected = want.version
        else:
            link = want.link()
            lib = link / "lib" if link is not None else Path(str(want.prefix)) / "lib"
            rec = want.record(ctx)
            expected = str(rec["version"]) if rec and rec.get("version") else want.version
        copy = scan_dir(lib, "keep") if lib.is_dir() else None
        return lib, (copy.version if copy and copy.version else expected)

    def stale(self, ctx: Context) -> list[Any]:
        from tfgpu_install.fetch.cudnn_redist import find_copies, stale_copies

        keep, version = self._keep(ctx)
        extra = [keep] if keep.is_dir() else []
        return stale_copies(find_copies(ctx, self.want.env, extra=extra), keep, version)

    def movable(self, ctx: Context) -> list[Any]:
        """Stale copies we may move: none inside the env itself, whose pip wheels and conda
        packages own their files (moving them would break the package manager's record;
        the activation puts the placed copy first on the path anyway)."""
        env = os.path.realpath(self.want.env)
        return [c for c in self.stale(ctx) if not os.path.realpath(c.directory).startswith(env + os.sep)]

    def _files(self, ctx: Context) -> list[Path]:
        return [c.directory / f for c in self.movable(ctx) for f in c.files]

    def touches(self, ctx: Context) -> list[str]:
        return [str(p) for p in self._files(ctx)]

    def check(self, ctx: Context) -> bool:
        return not self.movable(ctx)

    def apply(self, ctx: Context) -> UndoRecord:
        stale = self.movable(ctx)
        blocked = sorted({str(c.directory) for c in stale if not os.access(c.directory, os.W_OK)})
        if blocked:
            raise EnvironmentProblem(
                f"cannot move stale cuDNN copies out of {', '.join(blocked)}: no write permission",
                "run the install with sudo, or move those libcudnn* files away yourself",
                ref="quarantine-no-permission",
            )
        base = self.base(ctx)
        moved: list[dict[str, str]] = []
        for c in stale:
            for name in c.files:
                src = c.directory / name
                dst = base / str(src).lstrip("/")
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(src), str(dst))  # a rename where it can; keeps links as links
                moved.append({"from": str(src), "to": str(dst), "version": c.version or "?"})
                if len(moved) == 1:
                    checkpoint(ctx, self.id, "middle")
        return {"moved": moved, "base": str(base)}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        base = Path(str(record.get("base") or self.base(ctx)))
        pairs = [(Path(str(m["from"])), Path(str(m["to"]))) for m in objects(record, "moved")]
        if record.get("partial") or not pairs:
            # Killed mid-way: the layout itself says where each file came from.
            pairs = [(Path("/") / p.relative_to(base), p) for p in _walk_files(base)]
        for src, dst in reversed(pairs):
            if not (dst.exists() or dst.is_symlink()):
                continue
            if src.exists() or src.is_symlink():
                if _same(src, dst):
                    dst.unlink()  # already put back (by the executor's backups)
                    continue
                raise EnvironmentProblem(
                    f"cannot put {dst} back: {src} exists again and differs",
                    "compare the two and remove one, then run rollback again",
                    ref="quarantine-conflict",
                )
            src.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(dst), str(src))
        _prune(base)


def _walk_files(base: Path) -> list[Path]:
    out = []
    for dirpath, _dirs, files in os.walk(base):
        out += [Path(dirpath) / f for f in files]
    # os.walk lists symlinks to dirs under dirs; links to files are in files already.
    for dirpath, dirs, _files in os.walk(base):
        out += [Path(dirpath) / d for d in dirs if (Path(dirpath) / d).is_symlink()]
    return sorted(out)


def _same(a: Path, b: Path) -> bool:
    if a.is_symlink() or b.is_symlink():
        return a.is_symlink() and b.is_symlink() and os.readlink(a) == os.readlink(b)
    from tfgpu_install.files import sha256_file

    return sha256_file(a) == sha256_file(b)


def _prune(base: Path) -> None:
    """Remove the empty folders the quarantine left (never a file)."""
    if not base.is_dir():
        return
    for dirpath, _dirs, _files in sorted(os.walk(base), key=lambda t: -len(t[0])):
        try:
            os.rmdir(dirpath)
        except OSError:
            pass
