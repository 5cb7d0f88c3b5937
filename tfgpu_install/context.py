"""The Context: built once in main(), passed everywhere, never changed (a frozen dataclass;
a variant is made with dataclasses.replace, e.g. the install's context with a progress bar). It
carries no results: a step gets what it needs as arguments (steps/base.py: `needs`).

It carries everything the core reads from the world: the runner, the process environment,
the root prefix, home, the tool's own dirs, the profiles dir, stdin. Nothing else reads
os.environ or Path.home() directly, so a test can point the whole tool at a temp root
(TFGPU_ROOT) and temp state/cache/data dirs.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping, Optional, TextIO

from tfgpu_install.dirs import home_of, user_dirs
from tfgpu_install.runner import Runner, SubprocessRunner

# Called by long steps to report progress: (what, done, total or None).
ProgressFn = Callable[[str, float, Optional[float]], None]


def _no_progress(what: str, done: float, total: Optional[float]) -> None:
    return None


def shows_progress(ctx: "Context") -> bool:
    """Someone watches this run's progress (a live display or a log: never --json)."""
    return ctx.progress is not _no_progress and bool(getattr(ctx.progress, "enabled", True))


@dataclass
class Hooks:
    """The one test-only seam: fault injection and test speed knobs. Inert unless a test sets them:
    on a context it holds, or before the context is built through ARMED_HOOKS (nothing in the
    package sets that and no environment variable reaches it; the test suite's
    tests/support/faults.py does, in-process or in a CLI process it starts).
    Mutable on purpose: a test arms a fault, runs, and disarms it on the same context."""

    kill_at: Optional[str] = None  # "<step-id>:before|middle|after|undo": SIGKILL there
    stop_at: Optional[str] = None  # SIGSTOP there (concurrency and Ctrl-C tests)
    fail_at: Optional[str] = None  # "<step-id>:<where>:enospc|eacces|erofs|eio": raise that OSError there
    download_backoff: float = 0.5  # seconds before the first download retry


# Hooks every context built from now on starts with (a copy); None in real use.
ARMED_HOOKS: Optional[Hooks] = None


@dataclass(frozen=True)
class Context:
    runner: Runner
    environ: Mapping[str, str]
    root: Path  # prefix for system paths (/proc, /sys, /etc, /usr/local); "/" for real use
    home: Path
    state_dir: Path  # journals, locks, snapshots
    cache_dir: Path  # downloads keyed by sha256
    data_dir: Path  # default location of created envs
    overrides: Mapping[str, str] = field(default_factory=dict)  # TFGPU_OVERRIDE_* without prefix, lower-case
    progress: ProgressFn = _no_progress
    debug: bool = False
    profiles_dir: Optional[Path] = None  # TFGPU_PROFILES_DIR: another knowledge dir (a site's data; tests)
    stdin: Optional[TextIO] = None  # where questions are answered; None: the process's stdin
    hooks: Hooks = field(default_factory=Hooks)

    def input(self) -> TextIO:
        return self.stdin if self.stdin is not None else sys.stdin

    def sys_path(self, path: str) -> Path:
        """A system path (absolute, e.g. '/proc/driver/nvidia/version') under the root prefix."""
        return self.root / path.lstrip("/") if str(self.root) != "/" else Path(path)

    def env(self, name: str, default: Optional[str] = None) -> Optional[str]:
        return self.environ.get(name, default)


def build_context(
    environ: Optional[Mapping[str, str]] = None,
    runner: Optional[Runner] = None,
    debug: bool = False,
) -> Context:
    """The one place that reads the process environment."""
    env = dict(os.environ if environ is None else environ)
    home = home_of(env)
    root = Path(env.get("TFGPU_ROOT", "/"))
    state, cache, data = user_dirs(env, home)
    overrides = {
        k[len("TFGPU_OVERRIDE_"):].lower(): v for k, v in env.items() if k.startswith("TFGPU_OVERRIDE_")
    }
    hooks = replace(ARMED_HOOKS) if ARMED_HOOKS is not None else Hooks()
    profiles = env.get("TFGPU_PROFILES_DIR")
    return Context(
        runner=runner if runner is not None else SubprocessRunner(path=env.get("PATH")),
        environ=env,
        root=root,
        home=home,
        state_dir=state,
        cache_dir=cache,
        data_dir=data,
        overrides=overrides,
        debug=debug,
        profiles_dir=Path(profiles) if profiles else None,
        hooks=hooks,
    )
