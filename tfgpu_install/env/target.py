"""The environment an install targets (venv or conda), and its Python version read from its files
(pyvenv.cfg, conda-meta), not by running it: a no-op re-run costs a stat or two."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tfgpu_install.env.layout import site_packages_dirs
from tfgpu_install.guard.jsondoc import JSONObject

BACKENDS = ("venv", "conda")
CONDA_TOOLS = ("mamba", "conda", "micromamba")
RATTLER = "rattler"  # the embedded engine (py-rattler) when no conda tool is installed


@dataclass(frozen=True)
class TargetEnv:
    """The environment an install targets. `python` is the env's own interpreter."""

    path: Path
    backend: str  # "venv" | "conda"
    python: Path
    name: Optional[str] = None  # conda named env (-n NAME); path is then envs_dir/NAME

    @classmethod
    def at(cls, path: Path, backend: str = "venv", name: Optional[str] = None) -> "TargetEnv":
        path = Path(os.path.abspath(str(path)))
        return cls(path=path, backend=backend, python=path / "bin" / "python", name=name)

    def bin_dir(self) -> Path:
        return self.path / "bin"

    def site_packages(self) -> Path:
        """lib/pythonX.Y/site-packages (the first one when, oddly, there are several).
        Before the env exists: the path it will have, guessed from the interpreter link name."""
        found = site_packages_dirs(self.path)
        if found:
            return found[0]
        ver = env_python_version(self) or "3"
        return self.path / "lib" / f"python{'.'.join(ver.split('.')[:2])}" / "site-packages"

    def to_json(self) -> JSONObject:
        return {"path": str(self.path), "backend": self.backend, "python": str(self.python), "name": self.name}


# --- reading an env's Python version without running it ----------------------------------


def _pyvenv_version(cfg: Path) -> Optional[str]:
    try:
        text = cfg.read_text(errors="replace")
    except OSError:
        return None
    # stdlib venv writes "version = 3.11.7"; uv writes "version_info = 3.11.7".
    m = re.search(r"^\s*version(?:_info)?\s*=\s*(\d+\.\d+(?:\.\d+)?)", text, re.M)
    return m.group(1) if m else None


def _conda_meta_version(meta: Path) -> Optional[str]:
    # conda records each installed package as conda-meta/<name>-<version>-<build>.json
    for p in sorted(meta.glob("python-[0-9]*.json")):
        m = re.match(r"python-(\d+\.\d+(?:\.\d+)?)", p.name)
        if m:
            return m.group(1)
    return None


def env_python_version(env: TargetEnv) -> Optional[str]:
    """The env's Python version from its files ("3.11.7"), or None when it is not an env."""
    if env.backend == "conda" and (env.path / "conda-meta").is_dir():
        return _conda_meta_version(env.path / "conda-meta") or _pyvenv_version(env.path / "pyvenv.cfg")
    return _pyvenv_version(env.path / "pyvenv.cfg")


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])
