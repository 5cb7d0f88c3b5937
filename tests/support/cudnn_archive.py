"""Real cuDNN stand-ins: small ELF shared libraries built with gcc (real SONAMEs, a real
`cudnnGetVersion` symbol), a cudnn_version.h, packed the way NVIDIA packs its redist
archives (cudnn-linux-x86_64-<ver>_cuda12-archive/{include,lib}/...), plus a manifest
in NVIDIA's redistrib_<version>.json format.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Optional

LIBS = ("libcudnn", "libcudnn_ops")
_BUILT: dict[tuple[str, str], bytes] = {}  # (lib, version) -> ELF bytes: gcc once per session


def version_code(version: str) -> int:
    major, minor, patch = (int(x) for x in version.split(".")[:3])
    # cuDNN 9 encodes major*10000 + minor*100 + patch; 8.x used major*1000 + minor*100 + patch.
    return major * (10000 if major >= 9 else 1000) + minor * 100 + patch


def build_so(lib: str, version: str, workdir: Path) -> bytes:
    """ELF bytes of `<lib>.so.<x.y.z>` with SONAME `<lib>.so.<major>`."""
    key = (lib, version)
    if key not in _BUILT:
        major = version.split(".")[0]
        src = workdir / f"{lib}-{version}.c"
        out = workdir / f"{lib}-{version}.so"
        src.write_text(f"int cudnnGetVersion(void) {{ return {version_code(version)}; }}\n")
        subprocess.run(
            ["gcc", "-shared", "-fPIC", f"-Wl,-soname,{lib}.so.{major}", "-o", str(out), str(src)],
            check=True,
            capture_output=True,
        )
        _BUILT[key] = out.read_bytes()
    return _BUILT[key]


def version_header(version: str) -> str:
    major, minor, patch = version.split(".")[:3]
    return (
        "#ifndef CUDNN_VERSION_H_\n#define CUDNN_VERSION_H_\n\n"
        f"#define CUDNN_MAJOR {major}\n#define CUDNN_MINOR {minor}\n#define CUDNN_PATCHLEVEL {patch}\n\n"
        "#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n\n#endif\n"
    )


def install_libs(lib_dir: Path, version: str, workdir: Path, links: bool = True) -> list[Path]:
    """Put real libs (and, with links, the .so.<major> and .so links) into lib_dir."""
    lib_dir.mkdir(parents=True, exist_ok=True)
    major = version.split(".")[0]
    real = []
    for lib in LIBS:
        p = lib_dir / f"{lib}.so.{version}"
        p.write_bytes(build_so(lib, version, workdir))
        real.append(p)
        if links:
            os.symlink(p.name, lib_dir / f"{lib}.so.{major}")
            os.symlink(f"{lib}.so.{major}", lib_dir / f"{lib}.so")
    return real


def archive_name(full_version: str, cuda: str = "12", platform: str = "linux-x86_64") -> str:
    return f"cudnn-{platform}-{full_version}_cuda{cuda}-archive"


def build_archive(
    workdir: Path,
    full_version: str = "9.1.0.70",
    *,
    cuda: str = "12",
    fmt: str = "tar.xz",
    links: bool = True,
    truncate: Optional[int] = None,
    pad: int = 0,
) -> Path:
    """An archive in NVIDIA's redist layout. `truncate`: keep only that many bytes;
    `pad`: add that many incompressible bytes (share/pad.bin) for tests that cut mid-stream."""
    workdir.mkdir(parents=True, exist_ok=True)
    version = ".".join(full_version.split(".")[:3])
    top = archive_name(full_version, cuda)
    tree = workdir / f"tree-{full_version}-{fmt}-{links}"
    if tree.exists():
        shutil.rmtree(tree)
    (tree / top / "include").mkdir(parents=True)
    (tree / top / "include" / "cudnn_version.h").write_text(version_header(version))
    (tree / top / "LICENSE").write_text("stand-in for tests\n")
    install_libs(tree / top / "lib", version, workdir, links=links)
    if pad:
        (tree / top / "share").mkdir()
        (tree / top / "share" / "pad.bin").write_bytes(os.urandom(pad))
    out = workdir / f"{top}.{fmt}"
    if fmt == "zip":
        with zipfile.ZipFile(out, "w") as zf:
            for p in sorted((tree / top).rglob("*")):
                rel = str(p.relative_to(tree))
                if p.is_symlink():
                    info = zipfile.ZipInfo(rel)
                    info.external_attr = (0o120777 << 16)
                    zf.writestr(info, os.readlink(p))
                elif p.is_file():
                    zf.write(p, rel)
    else:
        mode = {"tar.xz": "w:xz", "tar.gz": "w:gz", "tar": "w"}[fmt]
        with tarfile.open(out, mode) as tf:
            tf.add(tree / top, arcname=top)
    if truncate is not None:
        data = out.read_bytes()
        out.write_bytes(data[:truncate])
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(full_version: str, archives: dict[str, dict[str, Path]], nested: bool = True) -> str:
    """redistrib_<version>.json text. archives: platform -> {"cuda12": path}. `nested=False`
    writes the older form (the platform entry holds relative_path directly; first variant)."""
    cudnn: dict[str, object] = {
        "name": "NVIDIA CUDA Deep Neural Network library",
        "license": "cudnn",
        "license_path": "cudnn/LICENSE.txt",
        "version": full_version,
    }
    for platform, variants in archives.items():
        entries = {
            variant: {
                "relative_path": f"cudnn/{platform}/{path.name}",
                "sha256": sha256(path),
                "md5": hashlib.md5(path.read_bytes()).hexdigest(),
                "size": str(path.stat().st_size),
            }
            for variant, path in variants.items()
        }
        cudnn[platform] = entries if nested else next(iter(entries.values()))
    doc = {
        "release_date": "2024-01-01",
        "release_label": ".".join(full_version.split(".")[:3]),
        "release_product": "cudnn",
        "cudnn": cudnn,
    }
    return json.dumps(doc, indent=4)


def publish(server: object, archive: Path, full_version: str, platform: str = "linux-x86_64",
            cuda: str = "12", nested: bool = True, **fault: object) -> str:
    """Serve a manifest and the archive on a tests.support.httpserver.LoopbackServer; the mirror URL."""
    label = ".".join(full_version.split(".")[:3])
    text = manifest(full_version, {platform: {f"cuda{cuda}": archive}}, nested=nested)
    server.add(f"/redistrib_{label}.json", text.encode())  # type: ignore[attr-defined]
    server.add(f"/cudnn/{platform}/{archive.name}", archive.read_bytes(), **fault)  # type: ignore[attr-defined]
    return server.url("/")  # type: ignore[attr-defined,no-any-return]


def tar_bytes(members: list[tuple[tarfile.TarInfo, Optional[bytes]]], mode: str = "w:gz") -> bytes:
    """A tar built member by member (for hostile archives: any header, no root needed)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return buf.getvalue()
