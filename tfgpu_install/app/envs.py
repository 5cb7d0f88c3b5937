"""Which environment a command means: --env, else the default env (tfgpu_install/env/registry.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from tfgpu_install.context import Context
from tfgpu_install.env.layout import user_path
from tfgpu_install.env.registry import default_env, last_env, remember_env
from tfgpu_install.errors import EnvironmentProblem

if TYPE_CHECKING:
    from tfgpu_install.resolver.model import Choice


def target_env(ctx: Context, given: Optional[str]) -> Path:
    """--env as given, else the default env (env/registry.py); none at all is "no such env" (exit 6)."""
    if given:
        return user_path(given)
    found = default_env(ctx)
    if found is None:
        raise no_env_error()
    return found


def no_env_error(env: Optional[Path] = None) -> EnvironmentProblem:
    """The one answer to "no such env" (exit 6, ref env-not-found, as verify says it), whichever command asked."""
    if env is None:
        return EnvironmentProblem("no environment given and none installed",
                                  "install one first: tfgpu-install --profile stable (or pass --env PATH)",
                                  ref="env-not-found")
    return EnvironmentProblem(f"no environment at {env}",
                              "pass --env PATH of an env made by tfgpu-install; "
                              "`tfgpu-install status` shows the default one", ref="env-not-found")


def existing_env(ctx: Context, given: Optional[str]) -> Path:
    """target_env, and it must exist (a directory: what is in it is each command's question)."""
    env = target_env(ctx, given)
    if not env.is_dir():
        raise no_env_error(env)
    return env


def env_name(choice: "Choice") -> str:
    """The default environment's name: the combination, e.g. tf2.17.1-cu12.3-py3.11."""
    cuda = f"cu{choice.cuda}" if choice.cuda else "cpu"
    return f"tf{choice.tensorflow}-{cuda}-py{choice.python}"


def default_env_path(ctx: Context, choice: "Choice") -> Path:
    """Where install (and a restore without --env) puts the env for a combination: a name made
    of validated version numbers only, directly under <data>/envs (a snapshot's text never
    picks a path: anything else is BAD_INPUT)."""
    from tfgpu_install.guard.envpath import default_env_under

    return default_env_under(ctx.data_dir / "envs", env_name(choice),
                             (choice.tensorflow, choice.cuda or "0", choice.python))


__all__ = ["default_env", "default_env_path", "env_name", "existing_env", "last_env", "no_env_error",
           "remember_env", "target_env"]
