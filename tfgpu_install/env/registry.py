"""Which envs this tool made, and which one a command means when none is named: one place
that tells the truth.

The default env is the one install last started changing (<state>/last-env) while it still
exists; after a rollback, a remove, or a directory that vanished, it is the newest env this
tool still has (journaled or verified, not rolled back, its directory there); else none.

    remember_env(ctx, env)   install: this is the default env now
    forget_env(ctx, env)     rollback/remove: it is no longer one of ours
    default_env(ctx)         the env a command means without --env, or None
    live_envs(ctx)           this tool's envs that still exist, newest first
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.files import atomic_write, remove_file


def _last_file(ctx: Context) -> Path:
    return ctx.state_dir / "last-env"


def _exists(env: Path) -> bool:
    return env.is_dir() and ((env / "bin" / "python").exists() or (env / "conda-meta").is_dir())


def remember_env(ctx: Context, env: Path) -> None:
    """Called by install after it starts changing an env."""
    atomic_write(_last_file(ctx), os.path.abspath(str(env)) + "\n")


def last_env(ctx: Context) -> Optional[Path]:
    """What <state>/last-env names, whether or not it still exists (see default_env). A file
    someone else could have written is refused (guard.trust), never followed."""
    from tfgpu_install.guard.trust import require

    require(_last_file(ctx), ctx.state_dir, "the env registry")
    try:
        text = _last_file(ctx).read_text(errors="replace").strip()
    except OSError:
        return None
    return Path(text) if text and os.path.isabs(text) and "\n" not in text else None


def _rolled_back(ctx: Context, env: Path) -> bool:
    """A full rollback is the journal's last word on this env (no run since)."""
    from tfgpu_install.env.journal import Journal, current_epoch

    try:
        entries = Journal.for_env(ctx, env).entries()
    except (OSError, ValueError):
        return False
    full = any(e.event == "rolled-back" and not e.data.get("to") for e in entries)
    return full and not any(e.event == "run" for e in current_epoch(entries))


def live_envs(ctx: Context, skip: Optional[Path] = None) -> list[Path]:
    """This tool's envs whose directory is still there and that were not rolled back, newest first."""
    from tfgpu_install.env.state import known_envs

    out = []
    for env in known_envs(ctx):
        if skip is not None and os.path.abspath(str(env)) == os.path.abspath(str(skip)):
            continue
        if _exists(env) and not _rolled_back(ctx, env):
            out.append(env)
    return out


def default_env(ctx: Context) -> Optional[Path]:
    """The env a command means without --env: the last one installed while it exists, else the
    newest live one, else None (then commands behave as on a machine with no env)."""
    last = last_env(ctx)
    if last is not None and _exists(last) and not _rolled_back(ctx, last):
        return last
    found = live_envs(ctx, skip=last)
    return found[0] if found else None


def forget_env(ctx: Context, env: Path) -> Optional[Path]:
    """`env` is no longer one of ours (rolled back, removed): the default moves to the newest
    env that still exists, or there is none. Returns the new default."""
    last = last_env(ctx)
    gone = os.path.abspath(str(env))
    if last is not None and os.path.abspath(str(last)) != gone and _exists(last):
        return last
    found = live_envs(ctx, skip=env)
    if found:
        remember_env(ctx, found[0])
        return found[0]
    remove_file(_last_file(ctx))
    return None


__all__ = ["default_env", "forget_env", "last_env", "live_envs", "remember_env"]
