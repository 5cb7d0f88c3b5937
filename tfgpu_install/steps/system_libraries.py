"""Step system-libraries.check: before anything is installed for a release whose CUDA comes from the
system (TF 2.0-2.4: CUDA 10.x and 11.0 have no PyPI wheels), the sonames TF's dso loader asks for
(matrix.yaml `sonames`) must be on this machine: in `ldconfig -p` (through the runner) or in a CUDA
toolkit's /usr/local/cuda*/lib64 (under the context's root prefix). Missing ones refuse the install
up front, naming each library and the remedies, instead of a verification failure at the end.

Read-only; first in the plan, so a refusal leaves nothing behind (nothing to undo).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.errors import UnsatisfiableError
from tfgpu_install.steps.base import Step, UndoRecord


def ldconfig_sonames(ctx: Context) -> Optional[dict[str, str]]:
    """soname -> path from `ldconfig -p` (the root prefix's cache when there is one); None when it failed."""
    exe = ctx.runner.which("ldconfig") or "/sbin/ldconfig"
    argv = [exe, "-p"]
    if str(ctx.root) != "/":
        argv += ["-C", str(ctx.sys_path("/etc/ld.so.cache"))]
    res = ctx.runner.run(argv, desc="ldconfig -p", timeout=60)
    if not res.ok:
        return None
    out: dict[str, str] = {}
    for line in res.stdout.splitlines():
        name, sep, path = line.strip().partition(" => ")
        if sep:
            out.setdefault(name.split(" (")[0].strip(), path.strip())
    return out


def toolkit_sonames(ctx: Context) -> dict[str, str]:
    """soname -> path of the libraries in /usr/local/cuda*/lib64 (and targets/*/lib), newest toolkit first."""
    base = ctx.sys_path("/usr/local")
    out: dict[str, str] = {}
    for lib in sorted(base.glob("cuda*/lib64"), reverse=True) + sorted(base.glob("cuda*/targets/*/lib"), reverse=True):
        for f in lib.glob("lib*.so.*"):
            out.setdefault(f.name, str(f))
    return out


class CheckSystemLibraries(Step):
    id = "system-libraries.check"

    def __init__(self, tensorflow: str, cuda: str, sonames: Sequence[str]) -> None:
        self.tensorflow = tensorflow
        self.cuda = cuda
        self.sonames = list(sonames)

    def describe(self) -> str:
        return (f"confirm the system has the CUDA {self.cuda} libraries TF {self.tensorflow} loads "
                "(ldconfig -p, /usr/local/cuda*)")

    def found(self, ctx: Context) -> dict[str, Optional[str]]:
        """soname -> where it is (None: missing)."""
        known = {**toolkit_sonames(ctx), **(ldconfig_sonames(ctx) or {})}
        return {so: known.get(so) for so in self.sonames}

    def check(self, ctx: Context) -> bool:
        return all(self.found(ctx).values())

    def apply(self, ctx: Context) -> UndoRecord:
        found = self.found(ctx)
        missing = [so for so, where in found.items() if where is None]
        if missing:
            raise UnsatisfiableError(
                f"TF {self.tensorflow} loads CUDA {self.cuda} libraries from the system, and this machine lacks "
                f"{len(missing)} of them: {', '.join(missing)} (not in `ldconfig -p` nor /usr/local/cuda*/lib64); "
                f"nothing was installed",
                hint=f"no PyPI wheels exist for CUDA {self.cuda}: use the conda backend (`--backend conda`: "
                f"cudatoolkit={self.cuda} and cuDNN as conda packages), or install the CUDA {self.cuda} toolkit and "
                f"its cuDNN from NVIDIA and run again, or pick a newer release (a profile with tensorflow >=2.5)",
                ref="system-cuda-missing",
            )
        return {"found": {so: str(Path(where)) for so, where in found.items() if where}}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        return None  # read-only step
