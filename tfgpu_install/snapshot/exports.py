"""Snapshot exports that other tools read: requirements.txt with hashes, conda's
environment.yml, and PEP 751 pylock.toml (written by uv from the same pins).

FORMATS is the one table of export formats: `snapshot export --format` offers its names,
its help lists their summaries, and app/snapshot.py writes through each one's `render`.
To add a format: one row here (and its renderer); nothing else names the formats."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Callable, Optional

from tfgpu_install.context import Context
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.snapshot.model import Snapshot


@dataclass(frozen=True)
class ExportFormat:
    name: str
    summary: str
    # (ctx, snapshot, index_url) -> the file's text; None: the native snapshot document
    # (written by the snapshot store, or to -o FILE).
    render: Optional[Callable[[Context, Snapshot, Optional[str]], str]]
    look_up_hashes: bool = True  # build the snapshot with published hashes first


def requirements_txt(snap: Snapshot) -> str:
    """pip's --require-hashes format: every line pinned with == and at least one --hash, built from
    checked values only (snapshot/pins.py): a field's text never becomes a line of its own."""
    from tfgpu_install.snapshot.contract import choice_of
    from tfgpu_install.snapshot.pins import hashes, pin, shown_version

    snap_id = re.sub(r"[^A-Za-z0-9._-]", "_", snap.id)[:200]
    lines = [
        f"# tfgpu-install snapshot {snap_id}: TensorFlow {shown_version(choice_of(snap).tensorflow)}, "
        f"Python {shown_version(snap.env.python)}",
        "# install with: pip install --require-hashes -r THIS_FILE",
    ]
    pinned = [(pin(p), hashes(p)) for p in snap.packages]
    missing = [line for line, hs in pinned if not hs]
    if missing:
        lines.append("# WARNING: no hash known for: " + ", ".join(missing) + " (pip --require-hashes will refuse)")
    for line, hs in pinned:
        if hs:
            lines.append(line + " \\")
            options = [f"    --hash={h}" for h in hs]
            lines.extend(h + " \\" for h in options[:-1])
            lines.append(options[-1])
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


_LIB_FILE = re.compile(r"\.so(\.\d+)*$")


def library_dirs(snap: Snapshot) -> list[str]:
    """The env-relative directories of the library files the snapshot records (the nvidia-*
    wheels' lib dirs, a placed cuDNN): what the activation puts on LD_LIBRARY_PATH."""
    dirs = {f.path.rsplit("/", 1)[0] for f in snap.files if "/" in f.path and _LIB_FILE.search(f.path)}
    return sorted(d for d in dirs if not d.startswith("/") and ".." not in d.split("/"))


def _conda_pins(snap: Snapshot) -> list[str]:
    """A conda env's own packages as exact `name=version=build` specs (python comes first)."""
    out = []
    for r in snap.env.conda_packages or ():
        if not r.name or r.name in ("python", "pip"):
            continue
        spec = "=".join(x for x in (r.name, r.version, r.build) if x)
        if re.fullmatch(r"[A-Za-z0-9_.\-]+(=[A-Za-z0-9_.+\-]+){0,2}", spec):
            out.append(spec)
    return out


def conda_environment(snap: Snapshot, name: str = "") -> JSONObject:
    """conda's environment.yml: Python (exact) and the env's own conda packages from conda, the
    Python packages from pip (as pip installed them), and `variables:` with LD_LIBRARY_PATH.

    conda does not expand variables in `variables:` (conda/conda#12645), so the library paths
    are absolute paths under the exported env's prefix, and the file names that `prefix:`:
    `conda env create -f FILE` makes the env there, where the paths hold."""
    from tfgpu_install.guard.envpath import env_path_problem
    from tfgpu_install.snapshot.contract import choice_of
    from tfgpu_install.snapshot.pins import pin, shown_version

    c = choice_of(snap)
    py = snap.env.python or c.python or "3"
    if not re.fullmatch(r"3(\.\d+){1,2}", py):
        py = "3"
    tf = shown_version(c.tensorflow)
    env_name = name or (f"tf-{tf}" if tf != "unknown" else "tfgpu")
    # conda hands the pip section to pip as a requirements file: one checked pin per line
    pip_pins = [pin(p) for p in snap.packages if p.key not in ("pip", "setuptools", "wheel")]
    doc: JSONObject = {
        "name": env_name,
        "channels": ["conda-forge"],
        "dependencies": [f"python={py}", "pip", *_conda_pins(snap), {"pip": pip_pins}],
    }
    prefix = str(snap.env.path or "")
    libs = library_dirs(snap)
    # `prefix:` says where conda makes the env: only an absolute, normal path the env-path policy takes
    plain = prefix.startswith("/") and os.path.normpath(prefix) == prefix.rstrip("/") and \
        env_path_problem(prefix) is None
    if plain and libs:
        doc["prefix"] = prefix
        doc["variables"] = {"LD_LIBRARY_PATH": ":".join(f"{prefix.rstrip('/')}/{d}" for d in libs)}
    return doc


def conda_environment_yml(snap: Snapshot, name: str = "") -> str:
    import yaml

    head = "# tfgpu-install snapshot export; create with: conda env create -f THIS_FILE\n"
    if snap.env.path:
        head += "# `variables:` holds absolute library paths under `prefix:` (conda does not expand variables)\n"
    return head + yaml.safe_dump(conda_environment(snap, name), sort_keys=False)


def _pylock(ctx: Context, snap: Snapshot, index_url: Optional[str]) -> str:
    from tfgpu_install.snapshot.pylock import compile_lock

    return compile_lock(ctx, snap.packages, str(snap.env.python or "3"), index_url=index_url,
                        glibc=snap.host.glibc, arch=snap.host.arch).text


FORMATS: dict[str, ExportFormat] = {f.name: f for f in (
    ExportFormat("tfgpu", "the native snapshot (restore with `snapshot restore`)", None),
    ExportFormat("requirements", "requirements.txt with --hash lines (pip --require-hashes)",
                 lambda ctx, snap, index: requirements_txt(snap)),
    ExportFormat("conda", "conda's environment.yml: pinned conda and pip sections, LD_LIBRARY_PATH in variables",
                 lambda ctx, snap, index: conda_environment_yml(snap)),
    # uv writes the lock (with the hashes) itself: one index lookup is enough.
    ExportFormat("pylock", "PEP 751 pylock.toml, written by uv", _pylock, look_up_hashes=False),
)}
