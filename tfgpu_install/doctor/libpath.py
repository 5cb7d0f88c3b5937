"""What the dynamic loader would find: CUDA/cuDNN libraries in the library path, their SONAMEs
(read from the ELF file itself, not guessed from the name), dangling symlinks and toolkit roots.

Pure file reading through paths the caller maps under the Context's root prefix.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from tfgpu_install.fetch.elf import read_soname

# Libraries whose stale or broken copies break TensorFlow's GPU start.
_WATCHED = re.compile(
    r"^lib(cudnn\w*|cudart|cublas|cublasLt|cufft|curand|cusolver|cusparse|cuda|nvidia-ml)\.so(\.[\d.]+)?$")
_VERSION_IN_NAME = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")
_TOOLKIT_DIR = re.compile(r"^cuda(?:-(\d+(?:\.\d+)*))?$")


@dataclass(frozen=True)
class LibFile:
    dir: str  # the directory as the user sees it (without the root prefix)
    name: str  # file name, e.g. "libcudnn.so.8.9.7"
    soname: Optional[str]  # from the ELF, e.g. "libcudnn.so.8"
    version: Optional[str]  # from the file name, e.g. "8.9.7"
    target: Optional[str] = None  # symlink target as written
    dangling: bool = False

    @property
    def path(self) -> str:
        return f"{self.dir.rstrip('/')}/{self.name}"

    @property
    def major(self) -> Optional[str]:
        for text in (self.soname, self.name):
            m = _VERSION_IN_NAME.search(text or "")
            if m:
                return m.group(1).split(".")[0]
        return None


def resolve_in_root(root: Path, path: str, limit: int = 40) -> str:
    """`path` with every symlink followed as if `root` were "/": absolute link targets stay inside
    the root (os.path.realpath would leave it). Returns the user-visible path."""
    parts = [p for p in path.split("/") if p]
    out: list[str] = []
    hops = 0
    while parts:
        name = parts.pop(0)
        if name in (".", ""):
            continue
        if name == "..":
            if out:
                out.pop()
            continue
        real = root.joinpath(*out, name)
        if real.is_symlink() and hops < limit:
            hops += 1
            target = os.readlink(real)
            if target.startswith("/"):
                out = []
            parts = [p for p in target.split("/") if p] + parts
            continue
        out.append(name)
    return "/" + "/".join(out)


def scan_dir(real_dir: Path, shown_dir: str, exists: Optional[Callable[[Path], bool]] = None) -> list[LibFile]:
    """CUDA/cuDNN libraries in one directory (symlinks included, dangling ones flagged).
    `exists` decides whether a symlink's target exists (the caller maps it under its root)."""
    exists = exists or (lambda p: p.exists())
    out: list[LibFile] = []
    try:
        names = sorted(os.listdir(real_dir))
    except OSError:
        return out
    for name in names:
        if not _WATCHED.match(name):
            continue
        p = real_dir / name
        m = _VERSION_IN_NAME.search(name)
        version = m.group(1) if m else None
        if p.is_symlink():
            target = os.readlink(p)
            if not exists(p):
                out.append(LibFile(shown_dir, name, None, version, target=target, dangling=True))
                continue
            out.append(LibFile(shown_dir, name, read_soname(p), version, target=target))
        elif p.is_file():
            out.append(LibFile(shown_dir, name, read_soname(p), version))
    return out


def toolkit_of(path: str) -> Optional[str]:
    """The CUDA toolkit root a path lies in ("/usr/local/cuda-12.2/bin" -> "/usr/local/cuda-12.2")."""
    parts = path.rstrip("/").split("/")
    for i in range(len(parts) - 1, -1, -1):
        if _TOOLKIT_DIR.match(parts[i]):
            return "/".join(parts[: i + 1]) or "/"
    return None


def parse_toolkit_version_file(text: str) -> Optional[str]:
    """version.json ({"cuda": {"version": "12.2.140"}}) or version.txt ("CUDA Version 11.8.89")."""
    m = re.search(r'"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"(\d+\.\d+(?:\.\d+)?)"', text, re.S)
    if not m:
        m = re.search(r"CUDA Version (\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None
