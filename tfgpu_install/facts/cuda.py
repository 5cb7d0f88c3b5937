"""CUDA already on the machine: toolkits, loader-visible libraries, PATH/LD_LIBRARY_PATH entries.

These matter because a stale system libcudnn or ptxas found first breaks a pip-installed
TensorFlow in ways that look like driver faults.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import RunnerError
from tfgpu_install.facts.background import Background
from tfgpu_install.facts.model import CudaInstall, Problem
from tfgpu_install.runner import Completed

# Libraries TensorFlow loads; libcuda is the driver's.
LIBS = ("libcuda", "libcudart", "libcublas", "libcublasLt", "libcudnn", "libnvidia-ml")
_RE_LDCONFIG = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)\s*$")


@dataclass(frozen=True)
class NvccVersion:
    release: str  # "12.2"
    full: Optional[str]  # "12.2.140"


@dataclass(frozen=True)
class LdconfigEntry:
    soname: str  # "libcudnn.so.8"
    flags: str  # "libc6,x86-64"
    path: str


def parse_nvcc_version(text: str) -> Optional[NvccVersion]:
    """`nvcc -V`: "Cuda compilation tools, release 12.2, V12.2.140". Never raises."""
    m = re.search(r"release (\d+\.\d+)(?:, V(\d+\.\d+\.\d+))?", text or "")
    return NvccVersion(m.group(1), m.group(2)) if m else None


def parse_version_json(text: str) -> Optional[str]:
    """<toolkit>/version.json (CUDA >= 11.1): {"cuda": {"version": "12.2.2"}}."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    cuda = doc.get("cuda") if isinstance(doc, dict) else None
    v = cuda.get("version") if isinstance(cuda, dict) else None
    return v if isinstance(v, str) and re.fullmatch(r"\d+(\.\d+)+", v) else None


def parse_version_txt(text: str) -> Optional[str]:
    """<toolkit>/version.txt (CUDA <= 11.0): "CUDA Version 10.2.89"."""
    m = re.search(r"CUDA Version (\d+(?:\.\d+)+)", text or "")
    return m.group(1) if m else None


def parse_ldconfig_p(text: str, libs: tuple[str, ...] = LIBS) -> tuple[LdconfigEntry, ...]:
    """CUDA-related entries of `ldconfig -p`:
    "\\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8"."""
    out = []
    for line in (text or "").splitlines():
        m = _RE_LDCONFIG.match(line)
        if not m:
            continue
        soname = m.group(1)
        base = soname.split(".so", 1)[0]
        if base in libs:
            out.append(LdconfigEntry(soname, m.group(2), m.group(3)))
    return tuple(out)


def soname_version(soname: str) -> Optional[str]:
    """"libcudnn.so.8.9.7" -> "8.9.7"; "libcudart.so" -> None."""
    _, _, tail = soname.partition(".so.")
    return tail if tail and re.fullmatch(r"\d+(\.\d+)*", tail) else None


def _dist_info_runtime(toolkit: Path) -> Optional[str]:
    """Toolkits assembled from NVIDIA's wheels keep dist-info dirs (nvidia_cuda_runtime-13.0.96)."""
    try:
        for d in (toolkit / "dist-info").iterdir():
            m = re.match(r"nvidia_cuda_runtime(?:_cu\d+)?-(\d+\.\d+\.\d+)", d.name)
            if m:
                return m.group(1)
    except OSError:
        pass
    return None


def _toolkit_version(ctx: Context, tk: Path, nvcc_cache: dict[str, Optional[NvccVersion]]) -> tuple[Optional[str], str]:
    for name, parse in (("version.json", parse_version_json), ("version.txt", parse_version_txt)):
        try:
            v = parse((tk / name).read_text(errors="replace"))
        except OSError:
            v = None
        if v:
            return v, name
    nvcc = tk / "bin" / "nvcc"
    if nvcc.exists():
        real = os.path.realpath(nvcc)
        if real not in nvcc_cache:
            try:
                done = ctx.runner.run([str(nvcc), "-V"], desc="nvcc version", timeout=10)
                nvcc_cache[real] = parse_nvcc_version(done.stdout) if done.ok else None
            except RunnerError:
                nvcc_cache[real] = None
        nv = nvcc_cache[real]
        if nv:
            return nv.full or nv.release, "nvcc -V"
    v = _dist_info_runtime(tk)
    if v:
        return v, "dist-info"
    return None, "none"


def gather_cuda(ctx: Context) -> tuple[tuple[CudaInstall, ...], list[Problem]]:
    problems: list[Problem] = []
    nvcc_cache: dict[str, Optional[NvccVersion]] = {}
    # The loader's view is asked first, on its own thread: it runs while the toolkits' nvcc answer.
    ldconfig = ctx.runner.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if ctx.sys_path(p).exists()), None
    )
    loader = Background(partial(ctx.runner.run, [ldconfig, "-p"], desc="libraries the loader sees", timeout=10)
                        ) if ldconfig else None
    candidates = _toolkit_dirs(ctx)
    # nvcc on PATH outside every toolkit (a wrapper, another install) is asked beside them
    nvcc = ctx.runner.which("nvcc")
    real = os.path.realpath(nvcc) if nvcc else ""
    apart = None
    if nvcc and real not in {os.path.realpath(tk / "bin" / "nvcc") for tk in candidates}:
        apart = Background(partial(ctx.runner.run, [nvcc, "-V"], desc="nvcc version", timeout=10))
    found = _toolkits(ctx, candidates, nvcc_cache, problems)
    if nvcc and real not in nvcc_cache:  # nvcc on PATH (may be a wrapper or outside /usr/local)
        found.append(_nvcc_apart(ctx, nvcc, apart))
    found += _loader_libraries(loader, problems)
    found += _variable_entries(ctx)
    return tuple(found), problems


def _toolkit_dirs(ctx: Context) -> list[Path]:
    """Toolkits under /usr/local (and /opt/cuda on Arch)."""
    candidates: list[Path] = []
    for base in ("/usr/local", "/opt"):
        try:
            candidates += sorted(p for p in ctx.sys_path(base).iterdir() if re.fullmatch(r"cuda(-[\d.]+)?", p.name))
        except OSError:
            pass
    return candidates


def _toolkits(ctx: Context, candidates: list[Path], nvcc_cache: dict[str, Optional[NvccVersion]],
              problems: list[Problem]) -> list[CudaInstall]:
    found = []
    for tk in candidates:
        if not tk.is_dir():
            continue
        version, source = _toolkit_version(ctx, tk, nvcc_cache)
        note = f" -> {os.path.realpath(tk)}" if tk.is_symlink() else ""
        found.append(CudaInstall("toolkit", str(tk), version, source, name=(tk.name + note)))
        if version is None:
            problems.append(Problem("cuda_installs", f"{tk}: a CUDA directory without a readable version"))
    return found


def _nvcc_apart(ctx: Context, nvcc: str, apart: Optional[Background[Completed]]) -> CudaInstall:
    try:
        done = apart.result() if apart is not None else ctx.runner.run([nvcc, "-V"], desc="nvcc version", timeout=10)
        nv = parse_nvcc_version(done.stdout) if done.ok else None
    except RunnerError:
        nv = None
    return CudaInstall("nvcc", nvcc, (nv.full or nv.release) if nv else None, "nvcc -V", name="nvcc")


def _loader_libraries(loader: Optional[Background[Completed]], problems: list[Problem]) -> list[CudaInstall]:
    """What the dynamic loader sees (`ldconfig -p`)."""
    if loader is None:
        problems.append(Problem("cuda_installs", "ldconfig not found: loader-visible CUDA libraries unknown"))
        return []
    try:
        done = loader.result()
        entries = parse_ldconfig_p(done.stdout) if done.ok else ()
    except RunnerError as exc:
        entries = ()
        problems.append(Problem("cuda_installs", f"ldconfig -p failed: {exc}"))
    return [CudaInstall("library", e.path, soname_version(e.soname), "ldconfig -p", name=e.soname) for e in entries]


def _variable_entries(ctx: Context) -> list[CudaInstall]:
    """CUDA directories named in PATH and LD_LIBRARY_PATH."""
    found = []
    for var, kind in (("PATH", "path-entry"), ("LD_LIBRARY_PATH", "ld-library-path-entry")):
        for entry in (ctx.environ.get(var) or "").split(os.pathsep):
            if entry and re.search(r"cuda|cudnn", entry, re.I):
                m = re.search(r"cuda-(\d+\.\d+)", entry)
                found.append(CudaInstall(kind, entry, m.group(1) if m else None, var))
    return found
