"""Which environment a command means: --env, else the last one installed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from tfgpu_install.context import Context
from tfgpu_install.envlayout import user_path
from tfgpu_install.errors import UsageError
from tfgpu_install.files import atomic_write

if TYPE_CHECKING:
    from tfgpu_install.resolver.model import Choice


def _last_file(ctx: Context) -> Path:
    return ctx.state_dir / "last-env"


def remember_env(ctx: Context, env: Path) -> None:
    """Called by install after it starts changing an env."""
    atomic_write(_last_file(ctx), os.path.abspath(str(env)) + "\n")


def last_env(ctx: Context) -> Optional[Path]:
    try:
        text = _last_file(ctx).read_text().strip()
    except OSError:
        return None
    return Path(text) if text else None


def target_env(ctx: Context, given: Optional[str]) -> Path:
    if given:
        return user_path(given)
    last = last_env(ctx)
    if last is None:
        raise UsageError(
            "no environment given and none installed yet",
            "pass --env PATH, or install one first: tfgpu-install --profile stable",
        )
    return last


def env_name(choice: "Choice") -> str:
    """The default environment's name: the combination, e.g. tf2.17.1-cu12.3-py3.11."""
    cuda = f"cu{choice.cuda}" if choice.cuda else "cpu"
    return f"tf{choice.tensorflow}-{cuda}-py{choice.python}"


def default_env_path(ctx: Context, choice: "Choice") -> Path:
    """Where install (and a restore without --env) puts the env for a combination."""
    return ctx.data_dir / "envs" / env_name(choice)


def forget_default(ctx: Context, env: Path) -> bool:
    """The env is gone (envs remove): it stops being the default; True when it was."""
    last = last_env(ctx)
    if last is None or os.path.abspath(str(last)) != os.path.abspath(str(env)):
        return False
    _last_file(ctx).unlink(missing_ok=True)
    return True
