"""Offline bundles: every wheel a snapshot needs, hash-checked, for a machine without internet.

Layout of DIR (written to a build dir beside it and renamed into place, so a failed or
killed bundle leaves nothing that looks complete; a killed one's build dir is removed by the
next bundle or image beside it: snapshot/partial.py):

    DIR/snapshot.yaml       the snapshot
    DIR/requirements.txt    its pins with --hash lines (what pip downloaded)
    DIR/wheels/*.whl        one wheel per package, for the snapshot's Python and platform
    DIR/manifest.json       sha256 of each file above (checked before an offline restore)

The wheels come from what this machine has already (another bundle, the tool's wheel store, uv's
cache: snapshot/wheelsource.py), each proven to be the recorded build; only the rest is fetched,
by the pip of the tool's own interpreter (independent of any env), with --require-hashes and
--platform/--python-version set to the snapshot's, so a bundle made on one machine installs on
the snapshot's kind of machine.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.env.layout import canonical_name
from tfgpu_install.errors import BadInputError, DownloadError, UsageError
from tfgpu_install.files import atomic_write, sha256_file
from tfgpu_install.guard.shellquote import command
from tfgpu_install.snapshot.model import Package, Snapshot, dumps, now_iso

MANIFEST = "manifest.json"
SNAPSHOT = "snapshot.yaml"
WHEELS = "wheels"
FORMAT = 1


# The legacy manylinux names and the glibc each stands for (PEP 600).
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}


def platform_tags(snap: Snapshot) -> list[str]:
    """pip --platform values: every manylinux_2_N the snapshot host's glibc runs, newest first, and the
    legacy aliases. pip does not expand `manylinux_2_36` to the older ones itself: given only that, a
    manylinux_2_28 wheel (numpy 2, many others) is "not found"."""
    arch = snap.host.arch or "x86_64"
    m = re.match(r"2\.(\d+)", snap.host.glibc or "")
    minor = max(int(m.group(1)), 5) if m else 17
    tags = []
    for n in range(minor, 4, -1):
        tags.append(f"manylinux_2_{n}_{arch}")
        if n in _LEGACY:
            tags.append(f"{_LEGACY[n]}_{arch}")
    return tags


def _python(snap: Snapshot) -> str:
    from tfgpu_install.snapshot.contract import choice_of

    py = choice_of(snap).python
    if not re.match(r"3\.\d+$", py):
        raise BadInputError(f"snapshot {snap.id} does not say which Python its env used",
                            "export the snapshot again from the env")
    return py


def wheel_name_version(filename: str) -> Optional[tuple[str, str]]:
    parts = filename[: -len(".whl")].split("-") if filename.endswith(".whl") else []
    return (canonical_name(parts[0]), parts[1]) if len(parts) >= 5 else None


def wheel_problems(snap: Snapshot, wheels: dict[str, str]) -> list[str]:
    """What is missing or does not match: wheels maps a wheel file name to its sha256 hex."""
    found: dict[tuple[str, str], str] = {}
    for fname, digest in wheels.items():
        nv = wheel_name_version(fname)
        if nv:
            found[nv] = digest
    problems = []
    wanted = {(p.key, p.version) for p in snap.packages} | {(p.key, _norm_version(p.version)) for p in snap.packages}
    for fname in sorted(wheels):
        nv = wheel_name_version(fname)
        if nv is None or (nv not in wanted and (nv[0], _norm_version(nv[1])) not in wanted):
            problems.append(f"an extra wheel {fname} that the snapshot does not list")
    for p in snap.packages:
        got = found.get((p.key, p.version)) or found.get((p.key, _norm_version(p.version)))
        if got is None:
            problems.append(f"no wheel for {p.requirement()}")
        elif p.hashes and f"sha256:{got}" not in p.hashes:
            problems.append(f"{p.requirement()}: the wheel's sha256 {got[:16]}... is not one the snapshot lists")
    return problems


def _norm_version(v: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(v))
    except InvalidVersion:
        return v


def make(ctx: Context, snap: Snapshot, out: Path, index_url: Optional[str] = None,
         sources: Sequence[Path] = ()) -> dict[str, Any]:
    """The bundle of `snap` in `out`. Its wheels come from `sources` (other bundles, each verified
    against its manifest first), the tool's wheel store, uv's cache, and only then pip download
    (snapshot/wheelsource.py); the manifest's `made_from` says which, and how many bytes were fetched."""
    from tfgpu_install.snapshot import wheelsource
    from tfgpu_install.snapshot.exports import requirements_txt
    from tfgpu_install.snapshot.partial import building

    unhashed = [p.requirement() for p in snap.packages if not p.hashes]
    if unhashed:
        raise BadInputError(
            f"snapshot {snap.id} has no hashes for: {', '.join(unhashed[:8])}; a bundle is hash-checked",
            "export the snapshot again with hashes (`tfgpu-install snapshot export`, without --no-hashes)",
            ref="snapshot-unhashed",
        )
    out = Path(os.path.abspath(out))
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"{out} exists and is not empty", "give -o a new or empty directory", ref="bundle-exists")
    py = _python(snap)
    verified: dict[str, str] = {}
    for src in sources:  # a damaged or altered bundle is refused before anything is written
        _, m = verify(src)
        verified.update({str(Path(src) / k): v for k, v in m["files"].items() if k.startswith(WHEELS + "/")})
    with building(out) as tmp:
        got = wheelsource.gather(ctx, snap, tmp / WHEELS, bundles=[Path(s) / WHEELS for s in sources],
                                 verified=verified,
                                 download=lambda missing: _download(ctx, snap, missing, tmp, py, index_url))
        bsnap = wheelsource.with_added_hashes(snap, got.added_hashes)
        atomic_write(tmp / SNAPSHOT, dumps(bsnap))
        atomic_write(tmp / "requirements.txt", requirements_txt(bsnap))
        files = {f"{WHEELS}/{w.path.name}": w.sha256 for w in got.wheels}
        files.update({n: sha256_file(tmp / n) for n in (SNAPSHOT, "requirements.txt")})
        for n in sorted(set(os.listdir(tmp / WHEELS)) - {w.path.name for w in got.wheels}):
            files[f"{WHEELS}/{n}"] = sha256_file(tmp / WHEELS / n)  # what pip fetched besides: judged below
        bad = wheel_problems(bsnap, {Path(k).name: v for k, v in files.items() if k.startswith(WHEELS + "/")})
        if bad:
            raise DownloadError("the downloaded wheels do not match the snapshot: " + "; ".join(bad[:5]),
                                "make the bundle from the index the snapshot was exported from (--index-url)",
                                ref="bundle-mismatch")
        manifest = {"format": FORMAT, "snapshot_id": snap.id, "created": now_iso(), "python": py,
                    "platforms": platform_tags(snap), "files": dict(sorted(files.items())),
                    "made_from": wheelsource.summary(got)}
        atomic_write(tmp / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        if out.is_dir():
            out.rmdir()  # empty (checked above); rename needs it gone
        os.replace(tmp, out)
    return manifest


_SOURCE_WORDS = {"bundle": "from the bundle given", "store": "from the tool's wheel store",
                 "uv-cache": "packed again from uv's cache (every file checked against the recorded build)",
                 "download": "downloaded"}


def sources_line(made: dict[str, Any]) -> str:
    """Where a bundle's wheels came from, for a person: '3 downloaded (1.2 MiB), 12 from the store'."""
    from tfgpu_install.report import human_bytes

    raw = made.get("sources")
    sources: dict[str, Any] = raw if isinstance(raw, dict) else {}
    parts = [f"{n} {_SOURCE_WORDS.get(k, k)}" + (f" ({human_bytes(made.get('fetched_bytes') or 0)})"
                                                 if k == "download" else "") for k, n in sorted(sources.items())]
    return "wheels: " + (", ".join(parts) if parts else "none") + (
        "; nothing fetched" if not made.get("fetched_bytes") else "")


def _download(ctx: Context, snap: Snapshot, missing: Sequence[Package], tmp: Path, py: str,
              index_url: Optional[str]) -> None:
    """pip download of the packages no local source had, hash-checked, into tmp/wheels."""
    from dataclasses import replace

    from tfgpu_install.env.tools import last_lines, tool_env
    from tfgpu_install.snapshot import wheelsource
    from tfgpu_install.snapshot.exports import requirements_txt

    reqs = tmp / ".download.txt"  # not part of the bundle: removed after
    atomic_write(reqs, requirements_txt(replace(snap, packages=tuple(missing))))
    argv = wheelsource.pip_download_argv(reqs, tmp / WHEELS, py, platform_tags(snap), index_url)
    done = ctx.runner.run(argv, desc=f"download {len(missing)} wheels for the bundle", env=tool_env(ctx),
                          timeout=3600)
    reqs.unlink()
    if not done.ok:
        text = done.stderr + done.stdout
        if "No module named pip" in text:
            raise DownloadError("the tool's own Python has no pip, which bundles are downloaded with",
                                f"install pip for {sys.executable} "
                                f"(`{command(ctx, sys.executable, '-m', 'ensurepip')}`)",
                                ref="pip-missing")
        raise DownloadError(f"pip could not download the snapshot's wheels: {last_lines(text, 6)}",
                            "check the index is reachable (--index-url, PIP_INDEX_URL) and has wheels for "
                            f"Python {py} on {', '.join(platform_tags(snap))}", ref="bundle-download")


_MANIFEST_NAME = re.compile(r"(snapshot\.yaml|requirements\.txt|wheels/[A-Za-z0-9][A-Za-z0-9._+-]{0,250}\.whl)")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _strict_files(files: Any) -> dict[str, str]:
    """The manifest's {relative name: sha256}: names only of the shapes a bundle holds (no path
    from the manifest's text can leave the bundle), digests 64 lowercase hex; ValueError if not."""
    if not isinstance(files, dict):
        raise ValueError("'files' is not a mapping")
    for name, digest in files.items():
        if not isinstance(name, str) or not _MANIFEST_NAME.fullmatch(name):
            raise ValueError(f"a file name that is not a bundle's: {str(name)[:80]!r}")
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise ValueError(f"{name}: not a sha256 digest: {str(digest)[:80]!r}")
    return dict(files)


def verify(bundle: Path) -> tuple[Snapshot, dict[str, Any]]:
    """Check every file against the manifest; returns the bundle's snapshot and manifest."""
    from tfgpu_install.snapshot.model import load

    bundle = Path(bundle)
    try:
        from tfgpu_install.guard.bounded import read_text

        manifest = json.loads(read_text(str(bundle / MANIFEST), "bundle manifest"))
        files = _strict_files(manifest["files"])
    except FileNotFoundError:
        raise BadInputError(f"{bundle} is not a bundle (no {MANIFEST})",
                            "make one with `tfgpu-install snapshot bundle FILE -o DIR`", ref="not-a-bundle") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BadInputError(f"{bundle / MANIFEST} is damaged: {exc}", "make the bundle again",
                            ref="not-a-bundle") from exc
    bad = []
    # Every file must be one the manifest lists: an unlisted wheel would be on the offline install's
    # find-links. (Directories are walked without following links.)
    listed = set(files) | {MANIFEST}
    for root, dirs, names in os.walk(bundle):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            rel = os.path.relpath(os.path.join(root, name), bundle)
            if rel not in listed:
                bad.append(f"{rel}: not in the manifest")
    for rel, digest in sorted(files.items()):
        p = bundle / rel
        if ".." in Path(rel).parts or not p.is_file():
            bad.append(f"{rel}: missing")
        elif sha256_file(p) != digest:
            bad.append(f"{rel}: sha256 differs from the manifest")
    if bad:
        raise DownloadError(f"the bundle {bundle} is damaged or was altered: " + "; ".join(bad[:5]),
                            "copy the bundle again from where it was made, or make a new one", ref="bundle-corrupt")
    snap = load(bundle / SNAPSHOT)
    if snap.id != manifest.get("snapshot_id"):
        raise DownloadError(f"the bundle's snapshot is {snap.id}, its manifest names {manifest.get('snapshot_id')}",
                            "make the bundle again", ref="bundle-corrupt")
    problems = wheel_problems(snap, {Path(k).name: v for k, v in files.items() if k.startswith(WHEELS + "/")})
    if problems:
        raise DownloadError("the bundle does not hold the snapshot's wheels: " + "; ".join(problems[:5]),
                            "make the bundle again", ref="bundle-incomplete")
    return snap, manifest


def wheels_dir(bundle: Path) -> Path:
    return Path(bundle) / WHEELS


__all__ = ["make", "verify", "wheels_dir", "platform_tags", "wheel_problems"]
