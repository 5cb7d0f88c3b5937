"""cuDNN knowledge as pure helpers: NVIDIA's redist manifests, versions, soname links,
other copies on the library path, and whether a version can serve the TensorFlow build.

Manifest (https://developer.download.nvidia.com/compute/cudnn/redist/redistrib_<ver>.json):
    {"cudnn": {"name", "license", "version": "9.8.0.87",
               "linux-x86_64": {"cuda12": {"relative_path", "sha256", "md5", "size"}, ...}}}
Older manifests put relative_path directly under the platform (one CUDA variant).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from tfgpu_install.context import Context
from tfgpu_install.env.layout import nvidia_lib_dirs
from tfgpu_install.errors import BadInputError, UnsatisfiableError
from tfgpu_install.fetch.redist import PLATFORMS as PLATFORMS  # re-exported: cuDNN steps and tests import them here
from tfgpu_install.fetch.redist import RedistArchive as RedistArchive
from tfgpu_install.fetch.redist import component_entry, select
from tfgpu_install.fetch.redist import manifest_url as manifest_url
from tfgpu_install.fetch.redist import platform_key as platform_key
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.knowledge.model import numbers_in

REDIST_URL = "https://developer.download.nvidia.com/compute/cudnn/redist/"

LIB_RE = re.compile(r"^(libcudnn(?:_[a-z0-9_]+)?)\.so(?:\.(\d+(?:\.\d+)*))?$")


def parse_manifest(text: str, source: str = "manifest") -> JSONObject:
    """The manifest's `cudnn` object, validated enough to be used."""
    return component_entry(text, "cudnn", source)


def select_archive(text: str, platform: str, cuda_major: Optional[str], source: str = "manifest") -> RedistArchive:
    """The archive for this platform and CUDA major, or a BadInputError naming what exists."""
    return select(parse_manifest(text, source), "cudnn", platform,
                  f"cuda{cuda_major}" if cuda_major else None, source)


def parse_index(html: str) -> list[str]:
    """Manifest labels ("9.8.0") linked from a redist directory listing."""
    found = set(re.findall(r'href="(?:[^"]*/)?redistrib_(\d+\.\d+\.\d+)\.json"', html))
    return sorted(found, key=numbers_in)


def manifest_labels(wanted: str) -> list[str]:
    """Manifest labels to try for a version as the knowledge data gives it
    ("8.9.4.25" -> "8.9.4"; "9.3.0" -> itself). A bare "8.9" names no manifest."""
    parts = wanted.split(".")
    return [".".join(parts[:3])] if len(parts) >= 3 else []


def pick_label(wanted: str, available: Iterable[str]) -> Optional[str]:
    """From an index: the exact x.y.z, else the newest with the same major.minor, else
    the newest of the same major that is not older (cuDNN >= 8 is backward compatible
    within a major: a newer minor serves a build made with an older one)."""
    avail = sorted(set(available), key=numbers_in)
    parts = numbers_in(wanted)
    exact = ".".join(wanted.split(".")[:3])
    if exact in avail:
        return exact
    same_minor = [a for a in avail if numbers_in(a)[:2] == parts[:2]]
    if same_minor:
        return same_minor[-1]
    newer = [a for a in avail if numbers_in(a)[:1] == parts[:1] and numbers_in(a)[:2] >= parts[:2]]
    return newer[-1] if newer else None


# --- versions ------------------------------------------------------------------------------


def parse_version_header(text: str) -> Optional[str]:
    """x.y.z from cudnn_version.h (cuDNN >= 8) or cudnn.h (7.x) defines."""
    vals = {}
    for key in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        m = re.search(rf"^\s*#\s*define\s+{key}\s+(\d+)\b", text, re.M)
        if not m:
            return None
        vals[key] = m.group(1)
    return f"{vals['CUDNN_MAJOR']}.{vals['CUDNN_MINOR']}.{vals['CUDNN_PATCHLEVEL']}"


def version_from_name(name: str) -> Optional[str]:
    """The version a file or archive name spells: libcudnn.so.9.1.0 -> 9.1.0, libcudnn.so.9 -> 9,
    cudnn-linux-x86_64-9.1.0.70_cuda12-archive.tar.xz -> 9.1.0.70,
    cudnn-11.8-linux-x64-v8.6.0.163.tgz -> 8.6.0.163."""
    m = LIB_RE.match(name)
    if m:
        return m.group(2)
    m = re.search(r"cudnn-[a-z0-9_]+-[a-z0-9_]+-(\d+\.\d+\.\d+(?:\.\d+)?)_cuda", name)
    if m:
        return m.group(1)
    m = re.search(r"cudnn-.*-v(\d+\.\d+\.\d+(?:\.\d+)?)", name)
    return m.group(1) if m else None


def tree_version(root: Path) -> tuple[Optional[str], str]:
    """(version, where it was read) for an extracted cuDNN tree: the header first, then
    the longest version a library file name spells."""
    for rel in ("include/cudnn_version.h", "include/cudnn.h", "cudnn_version.h"):
        p = root / rel
        if p.is_file():
            v = parse_version_header(p.read_text(errors="replace"))
            if v:
                return v, str(p)
    return dir_version(root / "lib"), "file names"


def dir_version(lib_dir: Path) -> Optional[str]:
    best: Optional[str] = None
    try:
        names = os.listdir(lib_dir)
    except OSError:
        return None
    for name in names:
        m = LIB_RE.match(name)
        if m and m.group(2) and (best is None or len(m.group(2)) > len(best)):
            best = m.group(2)
    return best


def check_serves(found: Optional[str], built_with: Optional[str], tensorflow: str, where: str) -> None:
    """Refuse a cuDNN the TF build cannot load: another major, or an older minor than the
    build's (cuDNN >= 7 minors are only backward compatible)."""
    if not built_with:
        return
    if not found:
        raise BadInputError(
            f"cannot tell which cuDNN version {where} holds (no cudnn_version.h, no versioned library)",
            f"TensorFlow {tensorflow} needs cuDNN {built_with.split('.')[0]}.x; use NVIDIA's archive as published",
            ref="cudnn-version-unknown",
        )
    f, b = numbers_in(found), numbers_in(built_with)
    if f[:1] != b[:1] or f[:2] < b[:2]:
        raise UnsatisfiableError(
            f"cuDNN {found} from {where} cannot serve TensorFlow {tensorflow}, which was built "
            f"against cuDNN {built_with}",
            f"it needs cuDNN {b[0]}.x at version {'.'.join(map(str, b[:2]))} or newer within "
            f"major {b[0]}: choose such an archive (or --cudnn-source wheel)",
            ref="cudnn-incompatible",
        )


# --- soname links --------------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    name: str  # file name in the lib dir ("libcudnn.so.9")
    target: str  # what it should point to ("libcudnn.so.9.1.0")


def wanted_links(lib_dir: Path) -> tuple[list[Link], list[str]]:
    """The links the loader and linker expect for every real library in lib_dir
    (<soname> -> real file; lib.so -> soname), and problems that links cannot fix."""
    from tfgpu_install.fetch.elf import read_soname

    links: list[Link] = []
    problems: list[str] = []
    for name in sorted(os.listdir(lib_dir)):
        p = lib_dir / name
        m = LIB_RE.match(name)
        if not m or p.is_symlink() or not p.is_file():
            continue
        soname = read_soname(p)
        if soname is None:
            problems.append(f"{p} has no ELF SONAME (not a shared library?)")
            continue
        if not soname.startswith(m.group(1) + ".so"):
            problems.append(f"{p} carries SONAME {soname}, which does not match its name")
            continue
        if soname != name:
            links.append(Link(soname, name))
        dev = f"{m.group(1)}.so"
        if dev not in (name, soname):
            links.append(Link(dev, soname))
    return links, problems


def link_problems(lib_dir: Path) -> list[str]:
    """Everything wrong with lib_dir's links (empty: the loader finds each soname)."""
    links, problems = wanted_links(lib_dir)
    for link in links:
        p = lib_dir / link.name
        if not p.is_symlink():
            problems.append(f"{p} is missing (should link to {link.target})")
        elif os.readlink(p) != link.target:
            problems.append(f"{p} points to {os.readlink(p)}, not {link.target}")
    matches = (LIB_RE.match(n) for n in _names(lib_dir))
    if not any(m is not None and m.group(1) == "libcudnn" for m in matches):
        problems.append(f"{lib_dir} holds no libcudnn library")
    return problems


def _names(d: Path) -> list[str]:
    try:
        return os.listdir(d)
    except OSError:
        return []


# --- other copies on the library path ------------------------------------------------------


@dataclass(frozen=True)
class CudnnCopy:
    directory: Path
    version: Optional[str]  # longest version the names or a sibling header spell
    files: tuple[str, ...]  # libcudnn* names in that dir (files and links)
    source: str  # why we looked there: "LD_LIBRARY_PATH", "env", "CUDA toolkit", "ldconfig cache"

    def to_json(self) -> JSONObject:
        return {"directory": str(self.directory), "version": self.version, "files": list(self.files),
                "source": self.source}


def parse_ldconfig_p(text: str) -> list[Path]:
    """Directories holding libcudnn* in `ldconfig -p` output."""
    dirs: list[Path] = []
    for line in text.splitlines():
        m = re.match(r"\s*(libcudnn\S*)\s+\(.*\)\s+=>\s+(\S+)", line)
        if m:
            d = Path(m.group(2)).parent
            if d not in dirs:
                dirs.append(d)
    return dirs


def env_lib_dirs(env: Path) -> list[Path]:
    return [env / "lib", env / "lib64", *nvidia_lib_dirs(env)]


def library_dirs(ctx: Context, env: Path, extra: Iterable[Path] = ()) -> list[tuple[Path, str]]:
    """Every directory the env's loader may take a libcudnn from, with why it counts."""
    out: list[tuple[Path, str]] = []

    def add(d: Path, why: str) -> None:
        if d not in [x for x, _ in out]:
            out.append((d, why))

    for part in (ctx.env("LD_LIBRARY_PATH") or "").split(":"):
        if part:
            add(Path(part), "LD_LIBRARY_PATH")
    for d in extra:
        add(d, "activation")
    for d in env_lib_dirs(env):
        add(d, "env")
    local = ctx.sys_path("/usr/local")
    for cuda in sorted(local.glob("cuda*")):
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"):
            add(cuda / sub, "CUDA toolkit")
    for d in _ldconfig_dirs(ctx):
        add(d, "ldconfig cache")
    return out


def _ldconfig_dirs(ctx: Context) -> list[Path]:
    exe = ctx.runner.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None
    )
    if exe is None:
        return []
    argv = [exe, "-p"]
    if str(ctx.root) != "/":  # a test root carries its own cache
        cache = ctx.sys_path("/etc/ld.so.cache")
        if not cache.is_file():
            return []
        argv = [exe, "-C", str(cache), "-p"]
    done = ctx.runner.run(argv, desc="list the loader cache", timeout=30)
    return parse_ldconfig_p(done.stdout) if done.ok else []


def scan_dir(directory: Path, source: str) -> Optional[CudnnCopy]:
    files = tuple(sorted(n for n in _names(directory) if LIB_RE.match(n)))
    if not files:
        return None
    version = dir_version(directory)
    header = directory.parent / "include" / "cudnn_version.h"
    if header.is_file():
        version = parse_version_header(header.read_text(errors="replace")) or version
    return CudnnCopy(directory, version, files, source)


def find_copies(ctx: Context, env: Path, extra: Iterable[Path] = ()) -> list[CudnnCopy]:
    copies = []
    seen: set[str] = set()
    for d, why in library_dirs(ctx, env, extra):
        key = os.path.realpath(d)
        if key in seen:
            continue
        seen.add(key)
        c = scan_dir(d, why)
        if c:
            copies.append(c)
    return copies


def stale_copies(copies: Iterable[CudnnCopy], keep: Path, version: Optional[str]) -> list[CudnnCopy]:
    """Copies other than the one at `keep` that are not this very version: an older
    libcudnn earlier on the path loads instead of ours."""
    keep_real = os.path.realpath(keep)
    out = []
    for c in copies:
        if os.path.realpath(c.directory) == keep_real:
            continue
        if version and c.version and _same_version(c.version, version):
            continue
        out.append(c)
    return out


def _same_version(a: str, b: str) -> bool:
    n = min(len(numbers_in(a)), len(numbers_in(b)), 3)
    return numbers_in(a)[:n] == numbers_in(b)[:n] and n >= 3
