"""Step cudnn.check (the default `wheel` source): the nvidia-cudnn wheel the packages step
installed holds libcudnn.so.<major> whose SONAME matches and whose version serves the TF build.
Nothing to change: check() is honest, apply() fails loudly with what is wrong.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import StepFailed
from tfgpu_install.steps.base import Step, UndoRecord

if TYPE_CHECKING:
    from tfgpu_install.steps.cudnn.want import Want


def wheel_lib(env: Path) -> Optional[Path]:
    libs = sorted(env.glob("lib/python*/site-packages/nvidia/cudnn/lib"))
    return libs[0] if libs else None


def wheel_version(env: Path) -> Optional[str]:
    """The nvidia-cudnn wheel's version: its header, else its dist-info name."""
    from tfgpu_install.fetch.cudnn_redist import parse_version_header

    for h in sorted(env.glob("lib/python*/site-packages/nvidia/cudnn/include/cudnn_version.h")):
        v = parse_version_header(h.read_text(errors="replace"))
        if v:
            return v
    for d in sorted(env.glob("lib/python*/site-packages/nvidia_cudnn_cu*-*.dist-info")):
        return d.name.split("-")[1].removesuffix(".dist-info")
    return None


def wheel_problems(env: Path, built_with: Optional[str], tensorflow: str) -> list[str]:
    from tfgpu_install.errors import TfgpuError
    from tfgpu_install.fetch.cudnn_redist import LIB_RE, check_serves
    from tfgpu_install.fetch.elf import read_soname

    lib = wheel_lib(env)
    if lib is None:
        return [f"no nvidia/cudnn/lib in {env} (the nvidia-cudnn wheel is not installed)"]
    problems = []
    names = sorted(n for n in os.listdir(lib) if LIB_RE.match(n))
    if not any(n.startswith("libcudnn.so.") for n in names):
        problems.append(f"{lib} holds no libcudnn.so.<major>")
    for n in names:
        p = lib / n
        so = read_soname(p)
        if so is None:
            problems.append(f"{p} is not an ELF shared library with a SONAME")
        elif so != n and not (lib / so).exists():
            problems.append(f"{p} has SONAME {so}, which is missing from {lib}")
    try:
        check_serves(wheel_version(env), built_with, tensorflow, str(lib))
    except TfgpuError as err:
        problems.append(err.message)
    return problems


class CheckCudnnWheel(Step):
    """Nothing to change: the packages step installed the wheel. Honest check, loud apply."""

    id = "cudnn.check"

    def __init__(self, want: Want) -> None:
        self.want = want

    def describe(self) -> str:
        return "check the nvidia-cudnn wheel's libraries (sonames, version)"

    def check(self, ctx: Context) -> bool:
        return not wheel_problems(self.want.env, self.want.built_with, self.want.tensorflow)

    def apply(self, ctx: Context) -> UndoRecord:
        problems = wheel_problems(self.want.env, self.want.built_with, self.want.tensorflow)
        if problems:
            raise StepFailed(
                "the cuDNN wheel is not usable: " + "; ".join(problems),
                "reinstall it (run the install again), or use --cudnn-source redist",
                ref="cudnn-wheel-broken",
            )
        return {}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        return None
