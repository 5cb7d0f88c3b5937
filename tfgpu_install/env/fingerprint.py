"""The env fingerprint: "has anything that verify looked at changed?" (installed
distributions, activation files, CUDA/cuDNN library files). Stdlib, tfgpu_install.files and
tfgpu_install.env.layout only: install's no-op fast path computes it before importing the step machinery."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tfgpu_install.env.layout import site_packages_dirs
from tfgpu_install.files import sha256_file


def env_fingerprint(env: Path) -> str:
    """sha256 over the installed distributions, the activation files and the CUDA/cuDNN
    library files' (path, size, mtime). Cheap: directory listings and a few small files."""
    env = Path(env)
    h = hashlib.sha256()
    for sp in site_packages_dirs(env):
        for d in sorted(p.name for p in sp.glob("*.dist-info")):
            h.update(f"dist:{d}\n".encode())
        for lib in sorted(sp.glob("nvidia/*/lib/*")):
            try:
                st = lib.stat()
            except OSError:
                continue
            h.update(f"lib:{lib.relative_to(env)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    small = ["pyvenv.cfg", "bin/activate", "bin/activate.fish", "bin/activate.csh", "bin/tfgpu-run"]
    small += [str(p.relative_to(env)) for p in sorted(env.glob("etc/conda/*activate.d/*"))]
    for rel in small:
        p = env / rel
        if p.is_file():
            h.update(f"file:{rel}:{sha256_file(p)}\n".encode())
    return h.hexdigest()
