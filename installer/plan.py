"""From a resolution to the ordered steps an install runs (pure: builds objects, runs nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .resolver_model import Resolution
from .steps.base import Step


@dataclass(frozen=True)
class InstallOptions:
    env: Path  # target environment path
    backend: str = "venv"  # "venv" | "conda"
    name: Optional[str] = None  # conda named env
    python: Optional[str] = None  # interpreter path chosen for the env
    system_ldconfig: bool = False
    shell_rc: Optional[Path] = None
    allow_cpu: bool = False
    cudnn_source: str = "wheel"  # "wheel" | "redist" | "archive"
    cudnn_mirror: Optional[str] = None
    cudnn_archive: Optional[Path] = None
    cudnn_prefix: Optional[Path] = None
    quarantine_stale: bool = False
    index_url: Optional[str] = None  # else PIP_INDEX_URL / UV_INDEX_URL from the environment
    extra: dict[str, str] = field(default_factory=dict)


def build_steps(resolution: Resolution, options: InstallOptions) -> list[Step]:
    """The ordered steps for this resolution: env.create, packages.install, libraries.check,
    [cudnn.*], activation.write, [ldconfig.system], verify.run, snapshot.record."""
    raise NotImplementedError
