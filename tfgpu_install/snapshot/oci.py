"""An OCI image layout written directly (no daemon, no registry): the base image's layers from a
local OCI layout, plus one layer made from a directory tree, with the image config's Env and Cmd
set. Readers: podman/buildah/skopeo (`oci:DIR:TAG`), umoci, containerd's importers.

The base layout is untrusted input: index.json and manifests are read bounded, every blob is
named only by a checked sha256 digest (never a path from the document), and its bytes are
hashed while they are copied. Layers are written deterministically (sorted, mtime 0, root)."""

from __future__ import annotations

import errno
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from tfgpu_install.errors import BadInputError

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
INDEX = "application/vnd.oci.image.index.v1+json"
DIGEST = re.compile(r"^sha256:([0-9a-f]{64})$")
MAX_JSON = 4 << 20
REF = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Blob:
    digest: str
    size: int
    media_type: str

    def descriptor(self) -> dict[str, Any]:
        return {"mediaType": self.media_type, "digest": self.digest, "size": self.size}


def _bad(what: str) -> BadInputError:
    return BadInputError(f"base image layout: {what}", "give an OCI layout made by `skopeo copy ... oci:DIR:TAG` "
                         "or `umoci`", ref="bad-oci-layout")


def _blob_path(layout: Path, digest: object) -> Path:
    m = DIGEST.match(digest) if isinstance(digest, str) else None
    if m is None:
        raise _bad(f"{str(digest)[:80]!r} is not a sha256 digest")
    return layout / "blobs" / "sha256" / m.group(1)


def _read_json(path: Path, what: str) -> Any:
    try:
        if path.is_symlink() or not path.is_file():
            raise _bad(f"{what} is missing or not a file")
        with open(path, "rb") as fh:
            data = fh.read(MAX_JSON + 1)
    except OSError as exc:
        raise _bad(f"cannot read {what}: {exc.strerror or exc}") from None
    if len(data) > MAX_JSON:
        raise _bad(f"{what} is larger than {MAX_JSON} bytes")
    try:
        return json.loads(data)
    except ValueError:
        raise _bad(f"{what} is not JSON") from None


def _checked_blob(layout: Path, digest: object, what: str) -> Any:
    path = _blob_path(layout, digest)
    doc = _read_json(path, what)
    if "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest() != digest:
        raise _bad(f"{what} does not match its digest")
    return doc


@dataclass(frozen=True)
class BaseImage:
    layout: Path
    config: dict[str, Any]
    layers: tuple[Blob, ...]


def read_base(layout: Path, ref: Optional[str] = None) -> BaseImage:
    """The image `ref` (its org.opencontainers.image.ref.name; the only one when ref is None)."""
    index = _read_json(layout / "index.json", "index.json")
    manifests = index.get("manifests") if isinstance(index, dict) else None
    if not isinstance(manifests, list) or not manifests:
        raise _bad("index.json lists no manifests")
    chosen = [m for m in manifests if isinstance(m, dict) and (
        ref is None or (m.get("annotations") or {}).get("org.opencontainers.image.ref.name") == ref)]
    if len(chosen) != 1:
        raise _bad(f"{'no' if not chosen else 'more than one'} image named {ref!r} in index.json")
    manifest = _checked_blob(layout, chosen[0].get("digest"), "the manifest")
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise _bad("the manifest has no config")
    config = _checked_blob(layout, manifest["config"].get("digest"), "the image config")
    layers = []
    for item in manifest.get("layers") or []:
        if not isinstance(item, dict) or not isinstance(item.get("size"), int):
            raise _bad("a layer descriptor is damaged")
        _blob_path(layout, item.get("digest"))
        layers.append(Blob(str(item["digest"]), int(item["size"]), str(item.get("mediaType") or LAYER)))
    _check_config(config, len(layers))
    return BaseImage(layout, config, tuple(layers))


def _check_config(config: Any, layers: int) -> None:
    """The base image config's fields this tool reads or extends, of the types the OCI image spec
    gives them (checked before any bundle work: a list for `config` was an internal error after it)."""
    if not isinstance(config, dict):
        raise _bad("the image config is not a mapping")
    cfg = config.get("config")
    if cfg is not None:
        if not isinstance(cfg, dict):
            raise _bad("the image config's 'config' is not a mapping")
        for key in ("Env", "Cmd", "Entrypoint"):
            if cfg.get(key) is not None and not _strings(cfg[key]):
                raise _bad(f"the image config's config.{key} is not a list of strings")
        labels = cfg.get("Labels")
        if labels is not None and not (isinstance(labels, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in labels.items())):
            raise _bad("the image config's config.Labels is not a mapping of strings")
    history = config.get("history")
    if history is not None and not (isinstance(history, list) and all(isinstance(h, dict) for h in history)):
        raise _bad("the image config's 'history' is not a list of mappings")
    rootfs = config.get("rootfs")
    if rootfs is not None:
        diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
        if not isinstance(diff_ids, list) or not all(isinstance(d, str) and DIGEST.match(d) for d in diff_ids):
            raise _bad("the image config's 'rootfs' is not a mapping with a list of sha256 diff_ids")
        if len(diff_ids) != layers:
            raise _bad(f"the image config lists {len(diff_ids)} layer diff_ids, its manifest {layers} layers")
    for key in ("architecture", "os"):
        if config.get(key) is not None and not isinstance(config[key], str):
            raise _bad(f"the image config's '{key}' is not a string")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _open_blob(layout: Path, blob: Blob) -> int:
    """The blob file, opened without following a link, which must be a regular file of the size its
    descriptor gives (a link to /dev/zero or a FIFO would be read for ever)."""
    path = _blob_path(layout, blob.digest)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = "a link (blobs must be files)" if exc.errno == errno.ELOOP else (exc.strerror or str(exc))
        raise _bad(f"cannot read layer {blob.digest[:19]}...: {why}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size != blob.size:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(st.st_mode) else \
            f"{st.st_size} bytes, its descriptor says {blob.size}"
        raise _bad(f"layer {blob.digest[:19]}...: {what}")
    return fd


def _copy_blob(src_layout: Path, blob: Blob, dest_layout: Path) -> None:
    dst = _blob_path(dest_layout, blob.digest)
    h = hashlib.sha256()
    fd = _open_blob(src_layout, blob)
    left = blob.size
    try:
        with os.fdopen(fd, "rb") as fin, open(dst, "wb") as fout:
            while left > 0:  # never more than the descriptor's size, whatever the file does meanwhile
                chunk = fin.read(min(1 << 20, left))
                if not chunk:
                    break
                left -= len(chunk)
                h.update(chunk)
                fout.write(chunk)
    except OSError as exc:
        dst.unlink(missing_ok=True)
        raise _bad(f"cannot copy layer {blob.digest[:19]}: {exc.strerror or exc}") from None
    if left or "sha256:" + h.hexdigest() != blob.digest:
        dst.unlink(missing_ok=True)
        raise _bad(f"layer {blob.digest[:19]}... does not match its digest")


def _write_blob(layout: Path, data: bytes, media_type: str) -> Blob:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = _blob_path(layout, digest)
    path.write_bytes(data)
    return Blob(digest, len(data), media_type)


def layer_from_tree(root: Path, layout: Path) -> tuple[Blob, str]:
    """A gzip'd tar of everything under root (paths relative to it), deterministic; returns the
    blob and the diff_id (sha256 of the uncompressed tar)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                path = Path(dirpath) / name
                rel = path.relative_to(root).as_posix()
                info = tar.gettarinfo(str(path), arcname=rel)
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0
                if info.isreg():
                    with open(path, "rb") as fh:
                        tar.addfile(info, fh)
                elif info.isdir() or info.issym():
                    tar.addfile(info)
    data = raw.getvalue()
    diff_id = "sha256:" + hashlib.sha256(data).hexdigest()
    gz = io.BytesIO()
    with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0) as fh:
        fh.write(data)
    return _write_blob(layout, gz.getvalue(), LAYER), diff_id


def write_image(out: Path, base: BaseImage, tree: Path, env: dict[str, str], cmd: Sequence[str],
                tag: str, created_by: str, labels: Optional[dict[str, str]] = None) -> dict[str, Any]:
    """out: a new OCI layout holding base + one layer of `tree`, tagged `tag`. Returns the manifest."""
    if not REF.match(tag):
        raise BadInputError(f"image tag {tag!r} is not a plain name", "use letters, digits, '.', '_', '-'")
    (out / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    for blob in base.layers:
        _copy_blob(base.layout, blob, out)
    layer, diff_id = layer_from_tree(tree, out)
    config = json.loads(json.dumps(base.config))  # a deep copy of plain data
    cfg = config.setdefault("config", {})
    old_env = [e for e in cfg.get("Env") or [] if isinstance(e, str) and e.split("=", 1)[0] not in env]
    if not any(e.startswith("PATH=") for e in old_env) and "PATH" not in env:
        old_env.insert(0, f"PATH={DEFAULT_PATH}")  # what a runtime assumes for a config without one
    cfg["Env"] = old_env + [f"{k}={v}" for k, v in env.items()]
    cfg["Cmd"] = list(cmd)
    cfg.pop("Entrypoint", None)
    cfg["Labels"] = {**(cfg.get("Labels") or {}), **(labels or {})}
    rootfs = config.setdefault("rootfs", {"type": "layers", "diff_ids": []})
    rootfs["diff_ids"] = list(rootfs.get("diff_ids") or []) + [diff_id]
    config.setdefault("history", []).append({"created": "1970-01-01T00:00:00Z", "created_by": created_by})
    config.setdefault("architecture", "amd64")
    config.setdefault("os", "linux")
    cblob = _write_blob(out, json.dumps(config, sort_keys=True).encode(), CONFIG)
    manifest = {"schemaVersion": 2, "mediaType": MANIFEST, "config": cblob.descriptor(),
                "layers": [b.descriptor() for b in (*base.layers, layer)]}
    mblob = _write_blob(out, json.dumps(manifest, sort_keys=True).encode(), MANIFEST)
    index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": [
        {**mblob.descriptor(), "annotations": {"org.opencontainers.image.ref.name": tag}}]}
    (out / "index.json").write_text(json.dumps(index, indent=1) + "\n")
    (out / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}) + "\n")
    return manifest


def copy_tree(src: Path, dst: Path) -> None:
    """Regular files and dirs only (links and devices in our own staging are not expected)."""
    for dirpath, _dirnames, filenames in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            p = Path(dirpath) / name
            if stat.S_ISREG(p.lstat().st_mode):
                shutil.copy2(p, dst / rel / name)
