"""`self uninstall`: everything the tool keeps for itself (state, cache and data dirs, the venv
scripts/install made and its ~/.local/bin link), and with --envs the envs it made (each removed
through its journal, as `envs remove` does); the sizes are shown before anything goes. The user's
own uv cache (shared with their other projects) goes only with --uv-cache. Only what the tool
wrote goes (app/own_files.py): a dir the user pointed it at that holds other things
(TFGPU_DATA_DIR=~/.local/share) keeps them, and itself."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import EnvironmentProblem

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


def _dirs(ctx: Context) -> list[tuple[str, str, Path]]:
    return [("state", "state (journals, snapshots, verification records)", ctx.state_dir),
            ("cache", "cache (downloads, knowledge)", ctx.cache_dir),
            ("data", "data (the tool's venv, envs)", ctx.data_dir)]


def _targets(ctx: Context, req: UninstallRequest, seen: set[tuple[int, int]]) -> list[Target]:
    """What goes, each checked (never /, home or another user's) before any of it is measured: a
    tool dir that is ours whole as one row, else only the entries the tool wrote in it (own_files.py)."""
    from tfgpu_install.app.own_files import ours_whole, own_entries
    from tfgpu_install.env.disksize import disk_usage

    home = Path(ctx.environ.get("HOME") or str(Path.home()))
    found: list[tuple[str, Path]] = []
    link = _launcher(home, ctx.data_dir / "tool")
    if link is not None:
        found.append(("the command's link", link))
    for kind, what, d in _dirs(ctx):
        if not d.is_dir():
            continue
        _refuse_unsafe(d, home)  # a tool dir that is / or holds home is a mistake to name, not to sort
        keeps_envs = kind == "data" and (d / "envs").exists() and not req.envs
        if ours_whole(kind, d) and not keeps_envs:
            found.append((what, d))
        else:
            found += [(f"{kind}: {e.name}" + (" (the tool's own venv)" if e == ctx.data_dir / "tool" else ""), e)
                      for e in own_entries(kind, d)]
    if req.uv_cache:
        uv = uv_cache_dir(ctx.environ, home)
        if uv.exists():
            found.append(("your uv cache (shared with your other uv projects)", uv))
    for _, path in found:
        _refuse_unsafe(path, home)
    return [Target(what, path, 0 if path == link else disk_usage(path, seen)) for what, path in found]


def _remove_path(path: Path) -> None:
    """One entry: a link or file itself, a directory by the fd-based walk (no link in it followed)."""
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)
    elif path.exists():
        shutil.rmtree(path)


def _remove_dir(kind: str, d: Path) -> None:
    """A tool dir that is ours whole: entry by entry (own_files.py), the data dir's envs/ only once
    empty, then the dir itself only once empty (what appeared in it meanwhile stays)."""
    from tfgpu_install.app.own_files import own_entries

    for entry in own_entries(kind, d):
        _remove_path(entry)
    for empty in ([d / "envs"] if kind == "data" else []) + [d]:
        try:
            empty.rmdir()
        except OSError:
            pass


def _remove(ctx: Context, req: UninstallRequest, targets: list[Target], made: list[EnvRow]) -> list[str]:
    """Envs through their journals first, then the paths; returns what was removed."""
    from tfgpu_install.app.env_remove import RemoveRequest, remove_env

    removed: list[str] = []
    if req.envs:
        for r in made:
            remove_env(ctx, RemoveRequest(env=r.path, yes=True), lambda _: None)  # asked already, for all
            removed.append(r.path)
    whole = {d: kind for kind, _, d in _dirs(ctx)}
    for t in targets:
        if t.path in whole and t.path.is_dir() and not t.path.is_symlink():
            _remove_dir(whole[t.path], t.path)
        else:
            _remove_path(t.path)
        removed.append(str(t.path))
    return removed


@dataclass(frozen=True)
class Uninstall:
    """What goes and what stays (asked before anything goes; commands/selfcmd.py words it)."""

    targets: tuple[Target, ...]
    made: tuple[EnvRow, ...]  # the envs this tool made
    kept: tuple[EnvRow, ...]  # the envs that stay
    total: int  # bytes freed
    envs: bool  # --envs: the envs it made go too
    uv_cache: bool  # --uv-cache: the user's uv cache goes too

    @property
    def nothing(self) -> bool:
        """Nothing of this tool's is here."""
        return not self.targets and not self.made


@dataclass(frozen=True)
class Uninstalled:
    """`self uninstall`'s outcome: removed None when nothing was (a dry run, or nothing to remove)."""

    plan: Uninstall
    dry_run: bool
    removed: Optional[tuple[str, ...]] = None


def uninstall(ctx: Context, req: UninstallRequest, ask: Callable[[Uninstall], None]) -> Uninstalled:
    """Remove what the tool keeps for itself (and the envs it made, with --envs); `ask` is called first and
    stops it by raising."""
    from tfgpu_install.app.env_list import env_rows
    from tfgpu_install.app.env_remove import created_by_us
    from tfgpu_install.env.journal import Journal

    seen: set[tuple[int, int]] = set()
    rows = env_rows(ctx)
    made = [r for r in rows if created_by_us(Journal.for_env(ctx, Path(r.path)).entries())]
    targets = _targets(ctx, req, seen)
    # an env inside a dir that goes is already in that dir's size
    outside = [r for r in made if not any(Path(r.path).is_relative_to(t.path) for t in targets)]
    # an env's own bytes: what it shares with uv's cache (kept) is not freed by removing it
    total = sum(t.size for t in targets) + (sum(r.own_bytes for r in outside) if req.envs else 0)
    kept = [r for r in rows if r not in made or not req.envs]
    plan = Uninstall(tuple(targets), tuple(made), tuple(kept), total, req.envs, req.uv_cache)
    if req.dry_run or not (targets or (req.envs and made)):
        return Uninstalled(plan, req.dry_run)
    ask(plan)
    return Uninstalled(plan, req.dry_run, tuple(_remove(ctx, req, targets, made)))
