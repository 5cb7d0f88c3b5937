"""Where things live inside a Python environment (venv or conda prefix), and how package names
compare: the one home for what several layers need to find in an env."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

PathLike = Union[str, Path]


def site_packages_dirs(env: PathLike) -> list[Path]:
    """lib/pythonX.Y/site-packages of the env, sorted (normally exactly one)."""
    return sorted(Path(env).glob("lib/python*/site-packages"))


def nvidia_lib_dirs(env: PathLike) -> list[Path]:
    """The env's nvidia/*/lib directories (the CUDA/cuDNN wheels: nvidia/<pkg>/lib for CUDA 11/12,
    nvidia/cu13/lib for CUDA 13), sorted for stable output."""
    return [d for site in site_packages_dirs(env) for d in sorted(site.glob("nvidia/*/lib")) if d.is_dir()]


def dist_info_dirs(env: PathLike) -> list[Path]:
    """Every installed distribution's *.dist-info directory."""
    return [d for site in site_packages_dirs(env) for d in sorted(site.glob("*.dist-info"))]


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name ("Foo_Bar.baz" -> "foo-bar-baz"), without importing packaging."""
    return re.sub(r"[-_.]+", "-", name).lower()


def user_path(given: PathLike) -> Path:
    """A path as the user typed it: "~" expanded, made absolute (not resolved: a symlinked env
    keeps the name the user knows it by)."""
    return Path(os.path.abspath(os.path.expanduser(str(given))))


@dataclass(frozen=True)
class InstalledDist:
    name: str  # as its metadata spells it
    version: str
    requires: tuple[str, ...]  # Requires-Dist, markers included


def installed_dists(site_packages: PathLike) -> dict[str, InstalledDist]:
    """canonical name -> each distribution in one site-packages dir, as importlib.metadata's
    distributions(path=[dir]) would list it, read from the *.dist-info/METADATA headers
    directly: a check runs on every install and re-run, and the module plus its email parser
    cost more than reading a few headers. A dist-info without a Name or Version (torn by a
    kill mid-write) is not listed; legacy *.egg-info entries go through importlib.metadata."""
    sp = Path(site_packages)
    out: dict[str, InstalledDist] = {}
    try:
        names = sorted(os.listdir(sp))
    except OSError:
        return out
    for entry in names:
        dist: Optional[InstalledDist] = None
        if entry.endswith(".dist-info"):
            dist = _read_metadata(sp / entry / "METADATA")
        elif entry.endswith(".egg-info"):
            dist = _egg_info(sp / entry)
        if dist is not None:
            out.setdefault(canonical_name(dist.name), dist)
    return out


def _read_metadata(path: Path) -> Optional[InstalledDist]:
    """Name, Version and Requires-Dist from a core-metadata file's header block (RFC 822 style:
    keys case-insensitive, folded lines continue with whitespace, a blank line ends it)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    fields: list[list[str]] = []
    for line in text.splitlines():
        if not line:
            break  # only an empty line ends the headers: a whitespace-only one continues a folded value
        if line[0] in " \t" and fields:
            fields[-1][1] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.append([key.strip().lower(), value.strip()])
    first = {k: v for k, v in reversed(fields)}  # the first of a repeated single-use key wins
    name, version = first.get("name"), first.get("version")
    if not name or not version:
        return None
    return InstalledDist(name, version, tuple(v for k, v in fields if k == "requires-dist"))


def _egg_info(path: Path) -> Optional[InstalledDist]:
    from importlib.metadata import PathDistribution

    dist = PathDistribution(path)
    meta = dist.metadata
    name = meta["Name"] if meta else None
    if not name or not dist.version:
        return None
    return InstalledDist(name, dist.version, tuple(dist.requires or ()))


def record_rows(record: PathLike) -> Optional[list[list[str]]]:
    """The rows of a dist-info RECORD (path, hash, size), or None when it cannot be read. A RECORD
    without a quote character is split on commas (what the csv module does with it, 5x faster: a
    TensorFlow env's RECORDs hold ~25,000 rows); one with quotes goes through the csv module."""
    import csv

    try:
        text = Path(record).read_text(errors="replace")
        if '"' not in text:
            return [line.split(",") if line else [] for line in text.splitlines()]
        return list(csv.reader(text.splitlines()))
    except (OSError, csv.Error):
        return None
