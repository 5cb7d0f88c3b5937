"""NVIDIA's redistributable manifests, for any component: cuDNN
(https://developer.download.nvidia.com/compute/cudnn/redist/) and the CUDA toolkit's parts
(https://developer.download.nvidia.com/compute/cuda/redist/). Pure parsing and selection.

    redistrib_<label>.json: {"release_label": ..., "<component>": {"name", "license", "version",
        "<platform>": {"relative_path", "sha256", "md5", "size"}            (CUDA, old cuDNN)
                   | {"cuda12": {"relative_path", ...}, "cuda11": {...}}}}   (cuDNN: per CUDA major)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Mapping, Optional

from tfgpu_install.errors import BadInputError
from tfgpu_install.guard.jsondoc import JSONObject, JSONValue

CUDA_REDIST_URL = "https://developer.download.nvidia.com/compute/cuda/redist/"
# Linux machine names -> NVIDIA's platform keys (sbsa: server ARM; aarch64 there means Jetson).
PLATFORMS = {"x86_64": "linux-x86_64", "aarch64": "linux-sbsa", "ppc64le": "linux-ppc64le"}


@dataclass(frozen=True)
class RedistArchive:
    version: str  # the component's version ("9.8.0.87", "11.8.89")
    platform: str  # "linux-x86_64"
    variant: Optional[str]  # "cuda12"; None where a platform has one archive
    relative_path: str
    sha256: str
    size: Optional[int]
    source: str  # the manifest URL or file it came from
    component: str = "cudnn"

    def url(self, base: str) -> str:
        return base.rstrip("/") + "/" + self.relative_path.lstrip("/")

    def to_json(self) -> JSONObject:
        return {
            "component": self.component,
            "version": self.version,
            "platform": self.platform,
            "variant": self.variant,
            "relative_path": self.relative_path,
            "sha256": self.sha256,
            "size": self.size,
            "source": self.source,
        }


def platform_key(machine: str) -> str:
    return PLATFORMS.get(machine, f"linux-{machine}")


def manifest_url(base: str, label: str) -> str:
    return base.rstrip("/") + f"/redistrib_{label}.json"


def bad_manifest(source: str, what: str, component: str = "cudnn") -> BadInputError:
    flag = "--cudnn-mirror" if component == "cudnn" else "--cuda-mirror"
    return BadInputError(
        f"{source}: {what}",
        f"the mirror must serve NVIDIA's redistrib_<version>.json unchanged; check {flag}",
        ref="bad-cudnn-manifest" if component == "cudnn" else "bad-cuda-manifest",
    )


def component_entry(text: str, component: str, source: str) -> JSONObject:
    """The manifest's entry for `component`, validated enough to be used."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise bad_manifest(source, f"not JSON ({exc})", component) from exc
    if not isinstance(doc, dict) or not isinstance(doc.get(component), dict):
        raise bad_manifest(source, f"no \"{component}\" entry", component)
    entry = doc[component]
    if not isinstance(entry.get("version"), str):
        raise bad_manifest(source, f"{component}.version missing", component)
    return dict(entry)


def select(entry: Mapping[str, JSONValue], component: str, platform: str, variant: Optional[str],
           source: str) -> RedistArchive:
    """The archive of `entry` (component_entry) for this platform (and CUDA variant where the
    manifest nests one per CUDA major), or a BadInputError naming what exists."""
    version = str(entry["version"])
    platforms = sorted(k for k, v in entry.items() if isinstance(v, dict))
    node = entry.get(platform)
    if not isinstance(node, dict):
        raise BadInputError(
            f"{component} {version} has no archive for {platform} in {source} "
            f"(it lists: {', '.join(platforms) or 'none'})",
            "this release is not published for this machine; pick another version or source",
            ref=f"{'cudnn' if component == 'cudnn' else 'redist'}-no-platform",
        )
    chosen: Optional[str] = None
    if "relative_path" not in node:  # nested: one entry per CUDA major
        variants = sorted(k for k, v in node.items() if isinstance(v, dict))
        want = variant if variant else (variants[0] if len(variants) == 1 else None)
        if want not in variants:
            raise BadInputError(
                f"{component} {version} for {platform} has no {want or 'single'} build in {source} "
                f"(it has: {', '.join(variants) or 'none'})",
                "the TensorFlow build needs one built for its CUDA major; pick another version",
                ref=f"{'cudnn' if component == 'cudnn' else 'redist'}-no-variant",
            )
        chosen = want
        node = node[want]
    try:
        rel, sha = str(node["relative_path"]), str(node["sha256"]).lower()
    except KeyError as exc:
        raise bad_manifest(source, f"{platform} entry lacks {exc}", component) from exc
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise bad_manifest(source, f"{platform} sha256 is not a sha256: {sha!r}", component)
    if rel.startswith("/") or ".." in rel.split("/"):
        raise bad_manifest(source, f"{platform} relative_path leaves the mirror: {rel!r}", component)
    size = node.get("size")
    return RedistArchive(version=version, platform=platform, variant=chosen, relative_path=rel, sha256=sha,
                         size=int(size) if size not in (None, "") else None, source=source, component=component)
