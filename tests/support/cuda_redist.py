"""NVIDIA-shaped CUDA redist archives and a manifest for them, holding gcc-built stand-ins
with the real sonames, published on a loopback server (tests/support/httpserver.py).

    publish_cuda_redist(server, workdir, "11.8.0", {"cuda_cudart": ["libcudart.so.11.0"], ...})
        -> {component: archive bytes}; the server then serves /redistrib_11.8.0.json and each
           /<component>/linux-x86_64/<component>-linux-x86_64-<ver>-archive.tar.xz
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Mapping, Optional, Sequence

from tests.support.conda_channel import soname_library


def component_archive(component: str, version: str, sonames: Sequence[str], workdir: Path,
                      extra: Optional[list[tuple[tarfile.TarInfo, Optional[bytes]]]] = None) -> bytes:
    """<component>-linux-x86_64-<ver>-archive/lib/<soname>.<ver> plus the soname link, as NVIDIA ships it."""
    top = f"{component}-linux-x86_64-{version}-archive"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tf:
        for d in (top, f"{top}/lib"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tf.addfile(info)
        for soname in sonames:
            data = soname_library(soname, workdir)
            info = tarfile.TarInfo(f"{top}/lib/{soname}.{version}")
            info.size, info.mode = len(data), 0o755
            tf.addfile(info, io.BytesIO(data))
            link = tarfile.TarInfo(f"{top}/lib/{soname}")
            link.type, link.linkname = tarfile.SYMTYPE, f"{soname}.{version}"
            tf.addfile(link)
        for info, data in extra or []:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def publish_cuda_redist(server: object, workdir: Path, release: str, components: Mapping[str, Sequence[str]],
                        version: str = "11.8.89", corrupt: Sequence[str] = (),
                        extra: Optional[Mapping[str, list[tuple[tarfile.TarInfo, Optional[bytes]]]]] = None
                        ) -> dict[str, bytes]:
    """Publish one archive per component and the manifest; `corrupt`: components whose
    manifest sha256 does not match the bytes served."""
    manifest: dict[str, object] = {"release_label": release, "release_product": "cuda"}
    out = {}
    for comp, sonames in components.items():
        data = component_archive(comp, version, sonames, workdir, (extra or {}).get(comp))
        rel = f"{comp}/linux-x86_64/{comp}-linux-x86_64-{version}-archive.tar.xz"
        server.add("/" + rel, data)  # type: ignore[attr-defined]
        sha = hashlib.sha256(data + (b"x" if comp in corrupt else b"")).hexdigest()
        manifest[comp] = {"name": comp, "license": "test", "version": version,
                          "linux-x86_64": {"relative_path": rel, "sha256": sha, "md5": "0" * 32,
                                           "size": str(len(data))}}
        out[comp] = data
    server.add(f"/redistrib_{release}.json", json.dumps(manifest).encode())  # type: ignore[attr-defined]
    return out
