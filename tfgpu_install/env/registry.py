"""Which envs this tool made, and which one a command means when none is named: one place
that tells the truth, read by every command without --env and by `envs` (its `*`).

The default env is the one <state>/last-env names, while it is live (its directory there, not
rolled back). That file is written only when an install or upgrade has verified the env (a
run that stopped before its verification, or failed it, leaves it as it was) or by
`envs default PATH`. When the env it names is no longer live (removed, rolled back, a
directory that vanished), the default is the newest live env whose last verification passed;
else there is none (then commands behave as on a machine with no env).

    remember_env(ctx, env)   a verified install/upgrade, or `envs default`: this is the default now
    forget_env(ctx, env)     rollback/remove: it is no longer one of ours
    default_env(ctx)         the env a command means without --env, or None
    live_envs(ctx)           this tool's envs that still exist, newest first
    incomplete(ctx, env)     its last run stopped before it was verified (resume it by running again)
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


def _same(a: Path, b: Path) -> bool:
    return os.path.abspath(str(a)) == os.path.abspath(str(b))


def remember_env(ctx: Context, env: Path) -> None:
    """`env` is the default now: called after an install or upgrade verified it, and by `envs default`."""
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


def _live(ctx: Context, env: Path) -> bool:
    return _exists(env) and not _rolled_back(ctx, env)


def verified_ok(ctx: Context, env: Path) -> bool:
    """The env's last verification passed (its record says so; a damaged record says nothing)."""
    from tfgpu_install.env.verification import BadRecord, read_record

    try:
        record = read_record(ctx, env)
    except BadRecord:
        return False
    return bool(record and record.report and record.report.ok is True)


def incomplete(ctx: Context, env: Path) -> bool:
    """The newest run of this tool on the env stopped before every step was in place (killed, or a
    step failed: verification included). Running the same command again resumes it."""
    from tfgpu_install.env.journal import Journal, unfinished_run

    try:
        return unfinished_run(Journal.for_env(ctx, env).entries())
    except (OSError, ValueError):
        return False


def live_envs(ctx: Context, skip: Optional[Path] = None) -> list[Path]:
    """This tool's envs whose directory is still there and that were not rolled back, newest first."""
    from tfgpu_install.env.state import known_envs

    return [env for env in known_envs(ctx) if not (skip is not None and _same(env, skip)) and _live(ctx, env)]


def _fallback(ctx: Context, skip: Optional[Path]) -> Optional[Path]:
    """When the recorded default is gone: the newest live env whose last verification passed."""
    return next((env for env in live_envs(ctx, skip=skip) if verified_ok(ctx, env)), None)


def default_env(ctx: Context) -> Optional[Path]:
    """The env a command means without --env (the module's rule); None when there is none."""
    last = last_env(ctx)
    if last is not None and _live(ctx, last):
        return last
    return _fallback(ctx, last)


def forget_env(ctx: Context, env: Path) -> Optional[Path]:
    """`env` is no longer one of ours (rolled back, removed): when it was the default, the default
    moves to the newest live env that passed its verification, or there is none. Returns the default."""
    last = last_env(ctx)
    if last is not None and not _same(last, env) and _live(ctx, last):
        return last
    found = _fallback(ctx, env)
    if found is not None:
        remember_env(ctx, found)
        return found
    remove_file(_last_file(ctx))
    return None


__all__ = ["default_env", "forget_env", "incomplete", "last_env", "live_envs", "remember_env", "verified_ok"]
