"""`snapshot image SNAP -o DIR [--base IMAGE] [--oci --base-layout DIR[:TAG]]`: a container
image of a snapshot's environment.

DIR/Dockerfile + DIR/bundle (the offline bundle: wheels with hashes, made by `snapshot bundle`)
+ DIR/gpucheck (the layered check) is a build context for podman/docker/buildah. With --oci,
DIR/oci is also an OCI image layout written directly (no daemon): the base image's layers from
a local OCI layout (`skopeo copy docker://python:3.11-slim oci:base:latest`) plus one layer with
the snapshot's packages, installed here by pip with --require-hashes from the bundle for the
snapshot's Python and platform. Every check runs before the first change; DIR appears whole or
not at all (built beside it and renamed)."""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import StepFailed, UsageError
from tfgpu_install.files import atomic_write
from tfgpu_install.guard.jsondoc import JSONObject

if TYPE_CHECKING:
    from tfgpu_install.snapshot.image import ImageSpec


@dataclass(frozen=True)
class ImageRequest:
    file: str
    output: str
    base: Optional[str] = None  # FROM image for the Dockerfile
    oci: bool = False
    base_layout: Optional[str] = None  # DIR or DIR:TAG of a local OCI layout (with --oci)
    tag: str = "latest"
    index_url: Optional[str] = None
    bundle: Optional[str] = None  # an existing bundle to take the wheels from (--bundle DIR)


@dataclass(frozen=True)
class OciLayout:
    """DIR/oci, the image written directly (--oci)."""

    path: Path
    layers: int  # in the image
    base_layers: int  # of those, the base image's


@dataclass(frozen=True)
class Image:
    """The build context as written (commands/snapshot.py renders it)."""

    path: Path
    snapshot: str  # its id
    spec: ImageSpec  # the base, the TensorFlow, the image's env and its check
    wheels: int  # in DIR/bundle
    made_from: Optional[JSONObject]  # the bundle manifest's: where its wheels came from
    tag: str
    oci: Optional[OciLayout]  # None: a build context only


def _layout_ref(text: str) -> tuple[Path, Optional[str]]:
    path, sep, tag = text.rpartition(":") if ":" in Path(text).name else (text, "", "")
    return Path(os.path.expanduser(path)).absolute(), (tag or None) if sep else None


def image(ctx: Context, req: ImageRequest) -> Image:
    from tfgpu_install.snapshot import bundle, oci
    from tfgpu_install.snapshot import image as img
    from tfgpu_install.snapshot import model as snap_mod
    from tfgpu_install.verify.host import CHECK_SCRIPT

    _, snap = snap_mod.find(ctx.state_dir, req.file)
    spec = img.spec_for(snap, req.base)
    out = Path(os.path.abspath(os.path.expanduser(req.output)))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} exists and is not empty", "give -o a new or empty directory", ref="image-exists")
    base = None
    if req.oci:
        if not req.base_layout:
            raise UsageError("--oci needs the base image as a local OCI layout (--base-layout DIR[:TAG])",
                             f"e.g. `skopeo copy docker://{spec.base} oci:base:latest`, then "
                             "--base-layout base:latest")
        layout, tag = _layout_ref(req.base_layout)
        base = oci.read_base(layout, tag)
    if not oci.REF.match(req.tag):
        raise UsageError(f"--tag {req.tag!r} is not a plain name", "use letters, digits, '.', '_', '-'")
    from tfgpu_install.snapshot.partial import building

    # verified against its manifest by bundle.make before anything is built (a bad one: nothing left)
    sources = [Path(os.path.abspath(os.path.expanduser(req.bundle)))] if req.bundle else []

    # The build dir (and the layer's staging tree inside it) is locked while this runs: a killed run's
    # is removed by the next one beside DIR (snapshot/partial.py).
    with building(out) as tmp:
        stage = tmp / ".stage"
        manifest = bundle.make(ctx, snap, tmp / "bundle", index_url=req.index_url, sources=sources)
        checks = tmp / "gpucheck"
        checks.mkdir()
        for f in sorted(CHECK_SCRIPT.parent.glob("*.py")):
            shutil.copy2(f, checks / f.name)
        atomic_write(tmp / "Dockerfile", img.dockerfile(spec, snap.id))
        made: Optional[OciLayout] = None
        if base is not None:
            site = stage / img.SITE.lstrip("/")
            _pip_target(ctx, tmp / "bundle", site, spec.python, bundle.platform_tags(snap))
            oci.copy_tree(checks, stage / img.CHECK.lstrip("/").rsplit("/", 1)[0])
            m = oci.write_image(tmp / "oci", base, stage, spec.env(), spec.verify_argv(), req.tag,
                                created_by=f"tfgpu-install snapshot image {snap.id}",
                                labels={"org.tfgpu-install.snapshot": snap.id,
                                        "org.tfgpu-install.tensorflow": spec.tensorflow})
            made = OciLayout(out / "oci", len(m["layers"]), len(base.layers))
        shutil.rmtree(stage, ignore_errors=True)
        if out.is_dir():
            out.rmdir()
        os.replace(tmp, out)
    return Image(out, snap.id, spec, len(manifest["files"]) - 2, manifest.get("made_from"), req.tag, made)


def _pip_target(ctx: Context, bundle_dir: Path, site: Path, python: str, platforms: list[str]) -> None:
    """The bundle's wheels into `site` for the image's Python and platform: offline, hash-checked."""
    from tfgpu_install.env.tools import last_lines, tool_env

    argv = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q",
            "--no-index", "--require-hashes", "--no-deps", "--only-binary=:all:", "--no-compile",
            "--find-links", str(bundle_dir / "wheels"), "--target", str(site), "--implementation", "cp",
            "--python-version", python, "-r", str(bundle_dir / "requirements.txt")]
    for tag in platforms:
        argv += ["--platform", tag]
    done = ctx.runner.run(argv, desc="install the snapshot's wheels into the image layer", env=tool_env(ctx),
                          timeout=3600, mutating=True)
    if not done.ok:
        raise StepFailed(f"pip could not install the bundle into the image layer: {last_lines(done.stderr, 6)}",
                         "check the bundle (`tfgpu-install snapshot bundle`) and run again")
