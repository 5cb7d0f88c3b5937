"""What the machine walk produces and shares between its layer checks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from tfgpu_install.context import Context
from tfgpu_install.doctor.envcheck import EnvFiles, ImportProbe
from tfgpu_install.doctor.envpackages import EnvPackages
from tfgpu_install.doctor.gpuknowledge import KernelRows
from tfgpu_install.doctor.libpath import resolve_in_root
from tfgpu_install.doctor.rules import RuleSet
from tfgpu_install.facts import gpu as smi
from tfgpu_install.knowledge.model import numbers_in

OK, WARN, BROKEN, ABSENT, SKIP = "ok", "warn", "broken", "absent", "skip"
SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu")
WSL_LIB = "/usr/lib/wsl/lib"


@dataclass(frozen=True)
class Check:
    layer: str  # a layer id of errors.yaml
    name: str
    status: str  # ok | warn | broken | absent | skip
    summary: str  # what was seen
    cause: str = ""  # why it is a problem
    fix: str = ""  # the exact fix
    evidence: tuple[str, ...] = ()
    rule: Optional[str] = None  # errors.yaml rule that named it (log-based checks)

    def to_json(self) -> dict[str, object]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


@dataclass
class Walk:
    """State shared by the layer checks of one run (gathered once)."""

    ctx: Context
    rules: RuleSet
    env: Optional[str]
    wsl: bool = False
    container: bool = False
    reading: Optional[smi.SmiReading] = None
    gpus: tuple[smi.SmiGpu, ...] = ()  # --query-gpu rows (compute capability, UUID) or the table's
    smi_path: Optional[str] = None
    modules: frozenset[str] = frozenset()
    pci_nvidia: bool = False
    env_files: Optional[EnvFiles] = None
    probe: Optional[ImportProbe] = None
    kernels: Optional[KernelRows] = None  # profiles/kernels.yaml floors and known failures
    packages: Optional[EnvPackages] = None  # drift since known-good, pip check (read once)
    checks: list[Check] = field(default_factory=list)

    def exists(self, path: str) -> bool:
        return self.ctx.sys_path(path).exists()

    def read(self, path: str) -> Optional[str]:
        try:
            return self.ctx.sys_path(path).read_text(errors="replace")
        except OSError:
            return None


@dataclass(frozen=True)
class ChainReport:
    checks: tuple[Check, ...]
    broken: Optional[Check]
    no_gpu: bool  # no NVIDIA GPU and no driver at all: a calm "nothing to diagnose"
    wsl: bool
    container: bool
    layers: tuple[Any, ...] = ()  # doctor --env: verify_layers.LayerVerdict per layer of verify's table

    @property
    def warnings(self) -> tuple[Check, ...]:
        return tuple(c for c in self.checks if c.status == WARN)

def split_path(var: Optional[str]) -> list[str]:
    return [p for p in (var or "").split(":") if p]


def real_path(w: Walk, path: str) -> str:
    """A user path resolved through symlinks inside the root prefix, shown without the prefix."""
    return resolve_in_root(w.ctx.sys_path("/"), path)


def version_tuple(v: str) -> tuple[int, ...]:
    """The first three numbers of a version or a name ("cuda-12.2" -> (12, 2))."""
    return numbers_in(v)[:3]
