"""`gpu-check --pack DIR`: the offline GPU-check pack (scripts/gpu-check.sh --pack) as a command.

The script travels with the tool: a checkout's scripts/gpu-check.sh, or the installed wheel's
tfgpu_install/share/scripts/gpu-check.sh (users no longer dig for it in site-packages). The pack is
what a machine with no network needs to run the check: the script, the tool's wheel and its
dependencies, at most 64 MiB.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import tfgpu_install
from tfgpu_install.context import Context
from tfgpu_install.env.layout import user_path
from tfgpu_install.errors import DownloadError, EnvironmentProblem, UsageError

PACK_TIMEOUT = 1800.0  # six Pythons' dependency downloads on a slow link


@dataclass(frozen=True)
class PackRequest:
    pack: str


@dataclass(frozen=True)
class Pack:
    """The pack as made (commands/gpucheck.py renders it)."""

    path: Path
    size: int  # bytes, every file in it
    wheels: tuple[str, ...]  # the file names under wheels/
    script: Path  # the gpu-check.sh it was made with
    run: str  # the command that runs it on the GPU machine


def pack_script() -> Path:
    """gpu-check.sh: the installed package's share/ copy first, then the checkout's."""
    package = Path(tfgpu_install.__file__).resolve().parent
    for cand in (package / "share" / "scripts" / "gpu-check.sh", package.parent / "scripts" / "gpu-check.sh"):
        if cand.is_file():
            return cand
    raise EnvironmentProblem(f"scripts/gpu-check.sh is not in {package / 'share'} nor beside the package",
                             hint="reinstall tfgpu-install: its wheel carries the GPU-check scripts")


def _is_pack(path: Path) -> bool:
    return (path / "ARCH").is_file() or (path / "gpu-check.sh").is_file()


def check_target(path: Path) -> None:
    """Refuse, before anything is built, a DIR that is a file or a directory of other things."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{path} is a file, not a directory", hint="name a new or empty directory for the pack")
    if path.is_dir() and any(path.iterdir()) and not _is_pack(path):
        raise UsageError(f"{path} is not empty and holds no pack", hint="name a new or empty directory (or a "
                         "pack made earlier, to refresh it)")


def _python() -> Optional[str]:
    """The interpreter the script builds with: ours when it has pip (a uv tool venv has none)."""
    return sys.executable if importlib.util.find_spec("pip") is not None else None


def pack(ctx: Context, req: PackRequest) -> Pack:
    target = user_path(req.pack)
    check_target(target)
    script = pack_script()
    env = dict(ctx.environ)
    py = _python()
    if py:
        env["PYTHON"] = py
    done = ctx.runner.run(["bash", str(script), "--pack", str(target)], desc="building the GPU-check pack",
                          env=env, timeout=PACK_TIMEOUT, mutating=True)
    if not done.ok:
        last = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        why = last.removeprefix("gpu-check: ")
        if "download" in why:
            raise DownloadError(f"the GPU-check pack was not made: {why}",
                                hint="the pack needs the package index (PyPI or your mirror): run it where pip "
                                "can download, then carry the directory")
        raise EnvironmentProblem(f"the GPU-check pack was not made: {why}", hint="see the script's output above; "
                                 f"run `bash {script} --pack {target}` by hand for all of it")
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    wheels = tuple(sorted(p.name for p in (target / "wheels").glob("*.whl")))
    return Pack(target, size, wheels, script, f"{target}/gpu-check.sh --offline {target}")
