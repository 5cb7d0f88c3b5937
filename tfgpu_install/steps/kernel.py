"""Step kernel.register: a Jupyter kernel spec for the env (`tfgpu-install kernel install`).

The kernel is launched through the env's bin/tfgpu-run, which sets LD_LIBRARY_PATH (and PATH
for ptxas) the way activation does: Jupyter starts kernels without sourcing bin/activate, the
classic "GPU works in the shell, not in the notebook". The spec's metadata names the env, so
`kernel remove`, `envs remove` and rollback remove only the kernels this tool wrote for it.
Undo removes the kernel dir (and puts back a spec of ours that was there before)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Mapping, Optional

from tfgpu_install.context import Context
from tfgpu_install.env.ownership import dir_identity
from tfgpu_install.env.ownership import problem as ownership_problem
from tfgpu_install.files import atomic_write
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint

SPEC = "kernel.json"
OWNER = "tfgpu_install"  # the metadata key that marks a spec as ours


def kernel_spec(env: Path, display_name: str) -> JSONObject:
    env = Path(env)
    return {
        "argv": [str(env / "bin" / "tfgpu-run"), str(env / "bin" / "python"), "-m", "ipykernel_launcher",
                 "-f", "{connection_file}"],
        "display_name": display_name,
        "language": "python",
        "interrupt_mode": "signal",
        "metadata": {OWNER: {"env": str(env)}, "debugger": True},
    }


def owner_env(spec_file: Path) -> Optional[str]:
    """The env a kernel spec of ours was written for; None for anyone else's (or a damaged file)."""
    try:
        if spec_file.is_symlink() or spec_file.stat().st_size > 65536:
            return None
        doc = json.loads(spec_file.read_text())
    except (OSError, ValueError):
        return None
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    mine = meta.get(OWNER) if isinstance(meta, dict) else None
    env = mine.get("env") if isinstance(mine, dict) else None
    return env if isinstance(env, str) else None


class RegisterKernel(Step):
    id = "kernel.register"

    def __init__(self, env: Path, kernel_dir: Path, display_name: str) -> None:
        self.env = Path(env)
        self.kernel_dir = Path(kernel_dir)
        self.display_name = display_name

    def describe(self) -> str:
        return f"register the Jupyter kernel {self.kernel_dir.name!r} ({self.kernel_dir})"

    def to_plan(self) -> dict[str, str]:
        return {"env": str(self.env), "kernel_dir": str(self.kernel_dir), "display_name": self.display_name}

    @classmethod
    def from_plan(cls, data: Mapping[str, str]) -> "RegisterKernel":
        return cls(Path(str(data["env"])), Path(str(data["kernel_dir"])), str(data["display_name"]))

    def _text(self) -> str:
        return json.dumps(kernel_spec(self.env, self.display_name), indent=1) + "\n"

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.kernel_dir / SPEC)]

    def check(self, ctx: Context) -> bool:
        try:
            return (self.kernel_dir / SPEC).read_text() == self._text()
        except OSError:
            return False

    def apply(self, ctx: Context) -> UndoRecord:
        if not self.kernel_dir.is_absolute():
            raise ValueError(f"kernel dir {self.kernel_dir} is not absolute")  # app/kernel.py makes it so
        created = not self.kernel_dir.exists()
        self.kernel_dir.mkdir(parents=True, exist_ok=True)
        checkpoint(ctx, self.id, "middle")
        atomic_write(self.kernel_dir / SPEC, self._text(), mode=0o644)
        return {"kernel_dir": str(self.kernel_dir), "created": created,
                "identity": dir_identity(self.kernel_dir) if created else None}

    def owns(self, ctx: Context, path: Path) -> bool:
        """A killed apply's kernel.json is removed only while it is the spec we write (for this env)."""
        return Path(path) != self.kernel_dir / SPEC or owner_env(Path(path)) == str(self.env)

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        """The executor puts back a kernel.json that was there before; the dir this step made goes,
        only while it is that dir (env/ownership.py: device, inode, real path) holding our spec for
        this env. The user's own kernel dir of that name (made after `kernel remove`, or their spec
        in ours) is never removed; nor is a path journaled relative (older versions), which would
        mean another directory from wherever rollback runs."""
        kdir = self.kernel_dir
        if not kdir.is_absolute() or kdir.is_symlink() or not record.get("created", True):
            return
        ident = record.get("identity")
        if isinstance(ident, dict) and ownership_problem(kdir, ident) is not None:
            return
        owner = owner_env(kdir / SPEC)
        if owner == str(self.env):
            remove_kernel_dir(kdir)
        elif owner is None and not (kdir / SPEC).exists() and not (kdir / SPEC).is_symlink():
            try:
                kdir.rmdir()  # killed between mkdir and the spec: only while it is empty
            except OSError:
                pass


def remove_kernel_dir(kernel_dir: Path) -> None:
    """A kernel dir of ours: the spec and what Jupyter put beside it (logos); never a link."""
    if kernel_dir.is_symlink():
        kernel_dir.unlink()
    elif kernel_dir.is_dir():
        shutil.rmtree(kernel_dir, ignore_errors=True)
