"""A local conda channel of small packages, written the way conda-build lays them out, so the
conda backend's engine (py-rattler) solves and installs for real, offline, from file://.

    chan = build_channel(dest, [CondaPkg("cudatoolkit", "11.2.2", libs=["libcudart.so.11.0", ...]), ...])
    chan.url                   file:///.../channel   (pass as --conda-channel)
    chan.packages              {filename: repodata record}

Each package is a .tar.bz2 holding info/index.json, info/paths.json and its files. The
libraries are real ELF shared objects built by gcc with the SONAME they are named by (a
file lib/<soname>.<build> and the soname as a symlink to it, as NVIDIA's packages ship them),
so the loader opens them through tfgpu-run. The test writes repodata.json itself (conda-index
needs conda).
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

_SO_CACHE: dict[str, bytes] = {}


@dataclass(frozen=True)
class CondaPkg:
    name: str
    version: str
    libs: tuple[str, ...] = ()  # sonames: lib/<soname> (a link) -> lib/<soname>.0 (the ELF file)
    depends: tuple[str, ...] = ()
    build: str = "h0_0"
    extra_files: dict[str, bytes] = field(default_factory=dict)
    # Hostile shapes (tests of the vetting): paths.json entries naming other paths than the
    # tar members, and symlinks with any target.
    listed_paths: tuple[str, ...] = ()
    symlinks: dict[str, str] = field(default_factory=dict)

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}-{self.build}.tar.bz2"


@dataclass
class Channel:
    root: Path
    packages: dict[str, dict[str, object]]

    @property
    def url(self) -> str:
        return self.root.as_uri()


def soname_library(soname: str, workdir: Path) -> bytes:
    """ELF bytes of a shared library whose SONAME is `soname` (gcc once per soname per session)."""
    if soname not in _SO_CACHE:
        workdir.mkdir(parents=True, exist_ok=True)
        stem = soname.replace(".", "_")
        src, out = workdir / f"{stem}.c", workdir / f"{stem}.so"
        src.write_text(f"int {stem}_stub(void) {{ return 1; }}\n")
        subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(out), str(src)],
                       check=True, capture_output=True)
        _SO_CACHE[soname] = out.read_bytes()
    return _SO_CACHE[soname]


def _tar_package(pkg: CondaPkg, subdir: str, workdir: Path) -> bytes:
    files: dict[str, bytes] = dict(pkg.extra_files)
    links: dict[str, str] = {}
    for soname in pkg.libs:
        files[f"lib/{soname}.0"] = soname_library(soname, workdir)
        links[f"lib/{soname}"] = f"{soname}.0"
    links.update(pkg.symlinks)
    index = {"name": pkg.name, "version": pkg.version, "build": pkg.build, "build_number": 0,
             "depends": list(pkg.depends), "subdir": subdir, "license": "test-only"}
    entries = [{"_path": p, "path_type": "hardlink", "sha256": hashlib.sha256(b).hexdigest(),
                "size_in_bytes": len(b)} for p, b in sorted(files.items())]
    entries += [{"_path": p, "path_type": "softlink"} for p in sorted(links)]
    entries += [{"_path": p, "path_type": "hardlink", "sha256": hashlib.sha256(b"").hexdigest(), "size_in_bytes": 0}
                for p in pkg.listed_paths]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:bz2") as tf:
        def add(name: str, data: bytes, mode: int = 0o644) -> None:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tf.addfile(info, io.BytesIO(data))

        add("info/index.json", json.dumps(index).encode())
        add("info/paths.json", json.dumps({"paths": entries, "paths_version": 1}).encode())
        for path, data in sorted(files.items()):
            add(path, data, 0o755 if path.startswith("lib/") else 0o644)
        for path, target in sorted(links.items()):
            info = tarfile.TarInfo(path)
            info.type, info.linkname, info.mtime = tarfile.SYMTYPE, target, 0
            tf.addfile(info)
    return buf.getvalue()


def build_channel(dest: Path, pkgs: Sequence[CondaPkg], subdir: str = "linux-64",
                  workdir: Optional[Path] = None) -> Channel:
    root = dest
    (root / subdir).mkdir(parents=True, exist_ok=True)
    (root / "noarch").mkdir(parents=True, exist_ok=True)
    records: dict[str, dict[str, object]] = {}
    for pkg in pkgs:
        data = _tar_package(pkg, subdir, workdir or dest.parent / "so-build")
        (root / subdir / pkg.filename).write_bytes(data)
        records[pkg.filename] = {
            "name": pkg.name, "version": pkg.version, "build": pkg.build, "build_number": 0,
            "depends": list(pkg.depends), "subdir": subdir, "license": "test-only",
            "md5": hashlib.md5(data).hexdigest(), "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data), "timestamp": 1700000000000,
        }
    for sd, recs in ((subdir, records), ("noarch", {})):
        (root / sd / "repodata.json").write_text(json.dumps(
            {"info": {"subdir": sd}, "packages": recs, "packages.conda": {}, "repodata_version": 1}))
    return Channel(root, records)


CUDA11_LIBS = ("libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11", "libcufft.so.10", "libcurand.so.10",
               "libcusolver.so.11", "libcusparse.so.11")
CUDA101_LIBS = ("libcudart.so.10.1", "libcublas.so.10", "libcufft.so.10", "libcurand.so.10", "libcusolver.so.10",
                "libcusparse.so.10")


def cuda_channel(dest: Path) -> Channel:
    """Stand-ins for conda-forge's cudatoolkit 11.2.2 / 10.1.243 and cudnn 8.1.0.77 / 7.6.5.32,
    with the sonames profiles/conda.yaml lists, and the dependency cudnn has on cudatoolkit."""
    return build_channel(dest, [
        CondaPkg("cudatoolkit", "11.2.2", CUDA11_LIBS),
        CondaPkg("cudatoolkit", "10.1.243", CUDA101_LIBS),
        CondaPkg("cudnn", "8.1.0.77", ("libcudnn.so.8",), ("cudatoolkit >=11.2,<12",)),
        CondaPkg("cudnn", "7.6.5.32", ("libcudnn.so.7",), ("cudatoolkit >=10.1,<10.2",), build="h1_0"),
    ])
