"""What an environment holds right now, read from disk without running anything.

Used by snapshots (export, check/drift) and the no-op fast path: reading
*.dist-info and stat()ing library files is milliseconds, spawning pip is not.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from tfgpu_install.env.layout import installed_dists, record_rows, site_packages_dirs
from tfgpu_install.files import sha256_file
from tfgpu_install.snapshot.model import SEEDED, FileRecord, Package

_BLOCK_RE = re.compile(r"^.*>>> tfgpu-install.*$\n.*?^.*<<< tfgpu-install.*$", re.M | re.S)
# Files that carry our activation: marked blocks inside them, or whole files we wrote.
_ACTIVATION_GLOBS = ("bin/activate", "bin/activate.fish", "bin/activate.csh", "bin/tfgpu-run",
                     "etc/conda/activate.d/*", "etc/conda/deactivate.d/*")
# Libraries that decide whether TF finds its GPU: the nvidia-* wheels' and placed cuDNN dirs.
_LIBRARY_GLOBS = ("lib/python3*/site-packages/nvidia/*/lib/*.so*", "lib/cudnn-*/**/*.so*")


@dataclass(frozen=True)
class EnvState:
    path: Path
    python: Optional[str]  # "3.11.7" from pyvenv.cfg / conda-meta
    backend: str  # "venv" | "conda" | "unknown"
    packages: tuple[Package, ...]
    files: tuple[FileRecord, ...]
    activation: dict[str, str]


def site_packages(env: Path) -> Optional[Path]:
    found = site_packages_dirs(env)
    return found[-1] if found else None


def env_python_version(env: Path) -> Optional[str]:
    cfg = Path(env) / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text(errors="replace").splitlines():
            key, _, val = line.partition("=")
            if key.strip() in ("version", "version_info"):
                return val.strip()
    for meta in sorted((Path(env) / "conda-meta").glob("python-3*.json")):
        m = re.match(r"python-(3\.\d+\.\d+)", meta.name)
        if m:
            return m.group(1)
    sp = site_packages(env)
    if sp is not None:
        return sp.parent.name.replace("python", "")
    return None


def backend_of(env: Path) -> str:
    if (Path(env) / "conda-meta").is_dir():
        return "conda"
    if (Path(env) / "pyvenv.cfg").is_file():
        return "venv"
    return "unknown"


def installed_packages(env: Path) -> tuple[Package, ...]:
    sp = site_packages(env)
    if sp is None:
        return ()
    seen = [Package(d.name, d.version) for d in installed_dists(sp).values()]
    seen = [p for p in seen if p.key not in SEEDED]
    return tuple(sorted(seen, key=lambda p: p.key))


def _record_digests(env: Path) -> dict[str, tuple[str, int]]:
    """env-relative path -> (sha256 hex, size) of the library files the nvidia-* wheels list in
    their RECORD: the digests the installer wrote while unpacking the (hash-checked) wheels."""
    import base64

    out: dict[str, tuple[str, int]] = {}
    sp = site_packages(env)
    if sp is None:
        return out
    base = sp.relative_to(env)
    for record in sp.glob("nvidia*.dist-info/RECORD"):
        for row in record_rows(record) or []:
            if len(row) < 3 or not row[1].startswith("sha256=") or not row[2].isdigit() or ".so" not in row[0]:
                continue
            try:
                digest = base64.urlsafe_b64decode(row[1][7:] + "=" * (-len(row[1][7:]) % 4)).hex()
            except ValueError:
                continue
            out[os.path.normpath(str(base / row[0]))] = (digest, int(row[2]))
    return out


def library_files(env: Path, previous: Optional[dict[str, FileRecord]] = None) -> tuple[FileRecord, ...]:
    """sha256 of every library file.

    Hashing the CUDA wheels' 3 GB costs seconds, so: a file whose size and mtime match
    `previous` keeps its recorded hash; a file `previous` knows but that changed is hashed for
    real (that is what `check` is for); a file seen for the first time takes the digest its
    wheel's RECORD gives when the size agrees, else it is hashed."""
    env = Path(env)
    records = _record_digests(env) if previous is None else {}
    out: dict[str, FileRecord] = {}
    for pattern in _LIBRARY_GLOBS:
        for p in env.glob(pattern):
            if p.is_symlink() or not p.is_file():
                continue
            rel = str(p.relative_to(env))
            st = p.stat()
            old = (previous or {}).get(rel)
            known = records.get(os.path.normpath(rel))
            if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
                out[rel] = old
            elif old is None and known is not None and known[1] == st.st_size:
                out[rel] = FileRecord(rel, known[0], st.st_size, st.st_mtime_ns)
            else:
                out[rel] = FileRecord(rel, sha256_file(p), st.st_size, st.st_mtime_ns)
    return tuple(out[k] for k in sorted(out))


def activation_blocks(env: Path) -> dict[str, str]:
    """relative path -> our marked blocks in it (or the whole file when the file is ours)."""
    env = Path(env)
    out: dict[str, str] = {}
    for pattern in _ACTIVATION_GLOBS:
        for p in sorted(env.glob(pattern)):
            if not p.is_file():
                continue
            text = p.read_text(errors="replace")
            blocks = _BLOCK_RE.findall(text)
            if blocks:
                out[str(p.relative_to(env))] = "\n".join(blocks)
            elif "tfgpu" in p.name:
                out[str(p.relative_to(env))] = text
    return out


def capture(env: Path, previous_files: Optional[dict[str, FileRecord]] = None) -> EnvState:
    env = Path(os.path.abspath(str(env)))
    return EnvState(
        path=env,
        python=env_python_version(env),
        backend=backend_of(env),
        packages=installed_packages(env),
        files=library_files(env, previous_files),
        activation=activation_blocks(env),
    )
