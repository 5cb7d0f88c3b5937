"""Where things live inside a Python environment (venv or conda prefix), and how package names
compare: the one home for what several layers need to find in an env."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Union

PathLike = Union[str, Path]


def site_packages_dirs(env: PathLike) -> list[Path]:
    """lib/pythonX.Y/site-packages of the env, sorted (normally exactly one)."""
    return sorted(Path(env).glob("lib/python*/site-packages"))


def nvidia_lib_dirs(env: PathLike) -> list[Path]:
    """The env's nvidia/*/lib directories (the CUDA/cuDNN wheels: nvidia/<pkg>/lib for CUDA 11/12,
    nvidia/cu13/lib for CUDA 13), sorted for stable output."""
    return [d for site in site_packages_dirs(env) for d in sorted(site.glob("nvidia/*/lib")) if d.is_dir()]


def dist_info_dirs(env: PathLike) -> list[Path]:
    """Every installed distribution's *.dist-info directory."""
    return [d for site in site_packages_dirs(env) for d in sorted(site.glob("*.dist-info"))]


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name ("Foo_Bar.baz" -> "foo-bar-baz"), without importing packaging."""
    return re.sub(r"[-_.]+", "-", name).lower()


def user_path(given: PathLike) -> Path:
    """A path as the user typed it: "~" expanded, made absolute (not resolved: a symlinked env
    keeps the name the user knows it by)."""
    import os

    return Path(os.path.abspath(os.path.expanduser(str(given))))
