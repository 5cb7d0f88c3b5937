"""`self uninstall`: everything the tool keeps for itself (state, cache and data dirs, the venv
scripts/install made and its ~/.local/bin link), and with --envs the envs it made (each removed
through its journal, as `envs remove` does); the sizes are shown before anything goes. The user's
own uv cache (shared with their other projects) goes only with --uv-cache."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.report import Block, Heading, Result, Text, human_bytes, table

if TYPE_CHECKING:
    from tfgpu_install.app.env_list import EnvRow


@dataclass(frozen=True)
class UninstallRequest:
    envs: bool = False  # also every env the tool made
    uv_cache: bool = False  # also the user's uv cache
    yes: bool = False
    dry_run: bool = False


@dataclass(frozen=True)
class Target:
    what: str
    path: Path
    size: int


def uv_cache_dir(environ: Any, home: Path) -> Path:
    """Where uv keeps its cache for this user (UV_CACHE_DIR, else the XDG cache dir's uv/)."""
    given = environ.get("UV_CACHE_DIR", "")
    if given:
        return Path(given)
    xdg = environ.get("XDG_CACHE_HOME", "")
    return (Path(xdg) if os.path.isabs(xdg) else home / ".cache") / "uv"


def _refuse_unsafe(path: Path, home: Path) -> None:
    """Only a directory (or link) this user owns, never /, home or a dir above home."""
    resolved = Path(os.path.abspath(str(path)))
    if resolved == Path("/") or Path(os.path.abspath(str(home))).is_relative_to(resolved):
        raise EnvironmentProblem(f"refusing to remove {path}: it is / or holds your home directory",
                                 "point TFGPU_STATE_DIR / TFGPU_CACHE_DIR / TFGPU_DATA_DIR (or UV_CACHE_DIR) "
                                 "at a directory of its own")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if st.st_uid != os.getuid():
        raise EnvironmentProblem(f"refusing to remove {path}: it belongs to another user", "remove it as that user")


def _launcher(home: Path, tool_venv: Path) -> Optional[Path]:
    """~/.local/bin/tfgpu-install when it is scripts/install's link into the tool's venv."""
    link = home / ".local" / "bin" / "tfgpu-install"
    try:
        target = os.readlink(link)
    except OSError:
        return None
    return link if Path(target).is_relative_to(tool_venv) else None


def _targets(ctx: Context, req: UninstallRequest, seen: set[tuple[int, int]]) -> list[Target]:
    """What goes, each checked (never /, home or another user's) before any of it is measured."""
    from tfgpu_install.env.disksize import disk_usage

    home = Path(ctx.environ.get("HOME") or str(Path.home()))
    tool_venv = ctx.data_dir / "tool"
    envs_dir = ctx.data_dir / "envs"
    found: list[tuple[str, Path]] = []
    link = _launcher(home, tool_venv)
    if link is not None:
        found.append(("the command's link", link))
    found += [(what, path) for what, path in (("state (journals, snapshots, verification records)", ctx.state_dir),
                                              ("cache (downloads, knowledge)", ctx.cache_dir)) if path.exists()]
    if ctx.data_dir.exists():
        if req.envs or not envs_dir.exists():
            found.append(("data (the tool's venv, envs)", ctx.data_dir))
        else:  # the envs stay: the rest of the data dir goes
            found += [("data" + (" (the tool's own venv)" if child == tool_venv else ""), child)
                      for child in sorted(ctx.data_dir.iterdir()) if child != envs_dir]
    if req.uv_cache:
        uv = uv_cache_dir(ctx.environ, home)
        if uv.exists():
            found.append(("your uv cache (shared with your other uv projects)", uv))
    for _, path in found:
        _refuse_unsafe(path, home)
    return [Target(what, path, 0 if path == link else disk_usage(path, seen)) for what, path in found]


def _plan_blocks(req: UninstallRequest, targets: list[Target], made: list[EnvRow], kept: list[EnvRow],
                 total: int) -> list[Block]:
    """What goes and what stays, shown before the confirmation."""
    blocks: list[Block] = [Heading(f"uninstall tfgpu-install: {human_bytes(total)} to free")]
    listed = [(t.what, str(t.path), human_bytes(t.size) if t.size else "-") for t in targets]
    if req.envs:
        listed += [("env (through its journal)", r.path, human_bytes(r.size_bytes)) for r in made]
    blocks.append(table("what goes", ("what", "path", "size"), listed))
    if kept:
        blocks.append(Text(f"kept: {len(kept)} env(s), {human_bytes(sum(r.size_bytes for r in kept))} "
                           + ("(not made by tfgpu-install)" if req.envs else "(pass --envs to remove them too)"),
                           "warn"))
    if not req.uv_cache:
        blocks.append(Text("kept: your uv cache (pass --uv-cache to remove it too)", "dim"))
    return blocks


def _remove(ctx: Context, req: UninstallRequest, targets: list[Target], made: list[EnvRow]) -> list[str]:
    """Envs through their journals first, then the paths; returns what was removed."""
    from tfgpu_install.app.env_remove import RemoveRequest, remove_env

    removed: list[str] = []
    if req.envs:
        for r in made:
            remove_env(ctx, RemoveRequest(env=r.path, yes=True))
            removed.append(r.path)
    for t in targets:
        if t.path.is_symlink() or t.path.is_file():
            t.path.unlink(missing_ok=True)
        elif t.path.exists():
            shutil.rmtree(t.path)
        removed.append(str(t.path))
    return removed


def _data(req: UninstallRequest, targets: list[Target], made: list[EnvRow], kept: list[EnvRow],
          total: int) -> dict[str, Any]:
    return {
        "dry_run": req.dry_run, "total_bytes": total,
        "remove": [{"what": t.what, "path": str(t.path), "size_bytes": t.size} for t in targets],
        "envs": [r.path for r in made] if req.envs else [], "kept_envs": [r.path for r in kept],
    }


def uninstall(ctx: Context, req: UninstallRequest) -> Result:
    from tfgpu_install.app.env_list import env_rows
    from tfgpu_install.app.env_remove import created_by_us
    from tfgpu_install.env.journal import Journal

    seen: set[tuple[int, int]] = set()
    rows = env_rows(ctx)
    made = [r for r in rows if created_by_us(Journal.for_env(ctx, Path(r.path)).entries())]
    targets = _targets(ctx, req, seen)
    # an env inside a dir that goes is already in that dir's size
    outside = [r for r in made if not any(Path(r.path).is_relative_to(t.path) for t in targets)]
    total = sum(t.size for t in targets) + (sum(r.size_bytes for r in outside) if req.envs else 0)
    kept = [r for r in rows if r not in made or not req.envs]
    blocks = _plan_blocks(req, targets, made, kept, total)
    data = _data(req, targets, made, kept, total)
    if req.dry_run or not (targets or (req.envs and made)):
        if not targets and not made:
            blocks = [Text("nothing of tfgpu-install's is here", "ok")]
        return Result(data={**data, "removed": []}, blocks=blocks)
    from tfgpu_install.app.confirm import confirm

    confirm(ctx, req.yes, blocks)
    removed = _remove(ctx, req, targets, made)
    done: list[Block] = [
        Text(f"tfgpu-install uninstalled: {len(removed)} path(s) removed, {human_bytes(total)} freed", "ok"),
        Text("installed with pip, pipx or `uv tool`? remove the package itself the same way "
             "(`pipx uninstall tfgpu-install`, `uv tool uninstall tfgpu-install`)", "dim"),
    ]
    return Result(data={**data, "removed": removed}, blocks=done)
