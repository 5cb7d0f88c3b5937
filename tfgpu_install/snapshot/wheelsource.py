"""Where a bundle's wheels come from: one download per wheel per machine (issue #44 item 2).

For each package of the snapshot, in this order, the first that proves to be the recorded build:

1. an existing bundle (`image --bundle DIR`): verified against its manifest first; a wheel whose
   sha256 is one the snapshot lists;
2. the tool's own wheel store (<cache>/wheels/<sha256>/<file>): what earlier bundles downloaded,
   each file hashed again on use;
3. uv's cache: uv keeps each wheel it downloaded unpacked (archive-v0/<id>/, the wheel's own files
   and RECORD). A wheel is packed again from there only when its RECORD is the build the snapshot
   records (its `content`, env/builds.py) and every file it lists hashes to what it says, and no
   other file is there; such a wheel's own sha256 is not the published one, so it is added to the
   bundle's copy of the snapshot (`hashes`) beside the published ones;
4. pip download, of the missing ones only (--require-hashes), kept in the store for the next time.

Nothing is taken on a name: a wheel is used for what its bytes prove. Paths come from listing
directories, never from a document's text.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import sys
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.env.builds import content_digest
from tfgpu_install.env.hashing import hash_files
from tfgpu_install.env.layout import canonical_name
from tfgpu_install.snapshot.model import Package, Snapshot

_WHEEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,250}\.whl$")
_TAG_PART = re.compile(r"^[A-Za-z0-9_.]{1,100}$")
_MAX_RECORD = 64 << 20


@dataclass(frozen=True)
class Wheel:
    package: Package
    path: Path  # where it is now (in the bundle being made)
    sha256: str  # hex
    source: str  # "bundle" | "store" | "uv-cache" | "download"


@dataclass
class Gathered:
    wheels: list[Wheel] = field(default_factory=list)
    fetched_bytes: int = 0  # what pip downloaded for this bundle
    added_hashes: dict[str, str] = field(default_factory=dict)  # canonical name -> sha256 hex (rebuilt wheels)

    def sources(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for w in self.wheels:
            out[w.source] = out.get(w.source, 0) + 1
        return out


def store_dir(ctx: Context) -> Path:
    return ctx.cache_dir / "wheels"


def _hex(h: str) -> Optional[str]:
    return h[7:] if h.startswith("sha256:") and len(h) == 71 else None


def _published(p: Package) -> set[str]:
    return {x for x in (_hex(h) for h in p.hashes) if x}


def _place(src: Path, dest: Path) -> None:
    """A hard link where the filesystem allows (no copy of gigabytes), else a copy."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError:
        shutil.copyfile(src, dest)


def _name_version(filename: str) -> Optional[tuple[str, str]]:
    parts = filename[: -len(".whl")].split("-") if filename.endswith(".whl") else []
    return (canonical_name(parts[0]), parts[1]) if len(parts) >= 5 else None


def _same_version(a: str, b: str) -> bool:
    if a == b:
        return True
    from packaging.version import InvalidVersion, Version

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False


# --- sources: a bundle, the store ----------------------------------------------------------------


def _candidates(dirs: Sequence[Path]) -> dict[tuple[str, str], list[Path]]:
    """(canonical name, version) -> wheel files in these directories (regular files of our user, not links)."""
    out: dict[tuple[str, str], list[Path]] = {}
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for n in names:
            nv = _name_version(n) if _WHEEL_NAME.match(n) else None
            p = d / n
            if nv is None or p.is_symlink() or not p.is_file():
                continue
            out.setdefault(nv, []).append(p)
    return out


def _store_dirs(ctx: Context) -> list[Path]:
    root = store_dir(ctx)
    try:
        return [root / d for d in sorted(os.listdir(root)) if re.fullmatch(r"[0-9a-f]{64}", d)]
    except OSError:
        return []


# --- source: uv's cache --------------------------------------------------------------------------


def uv_archives(ctx: Context) -> list[Path]:
    """uv's unpacked wheels (<uv cache>/archive-v0/*), where `uv cache dir` says uv keeps them."""
    from tfgpu_install.env.tools import find_uv, tool_env

    uv = find_uv(ctx)
    if not uv:
        return []
    done = ctx.runner.run([uv, "cache", "dir"], desc="where uv keeps its cache", env=tool_env(ctx), timeout=60)
    root = Path(done.stdout.strip()) if done.ok and done.stdout.strip().startswith("/") else None
    if root is None:
        return []
    archive = root / "archive-v0"
    try:
        return [archive / d for d in sorted(os.listdir(archive)) if not (archive / d).is_symlink()]
    except OSError:
        return []


def _dist_info(unpacked: Path) -> Optional[Path]:
    try:
        found = [unpacked / n for n in os.listdir(unpacked) if n.endswith(".dist-info")]
    except OSError:
        return None
    return found[0] if len(found) == 1 and found[0].is_dir() and not found[0].is_symlink() else None


def _installed_path(row: str, data_dir: str) -> Optional[str]:
    """Where an installer puts a wheel's file, as its RECORD (site-packages-relative) spells it:
    `.data/purelib|platlib/X` -> X, `.data/data/X` -> ../../../X, `.data/scripts` -> a launcher in
    bin/. None for what cannot be said here (headers: their place depends on the installer)."""
    if not row.startswith(data_dir + "/"):
        return row
    kind, _, rest = row[len(data_dir) + 1:].partition("/")
    if kind in ("purelib", "platlib"):
        return rest
    if kind == "data":
        return "../../../" + rest
    if kind == "scripts":
        return "../../../bin/" + rest
    return None


def _mapped_digest(rows: list[list[str]], data_dir: str) -> Optional[str]:
    """The content digest (env/builds.py) a wheel's own RECORD rows give once installed."""
    mapped = []
    for row in rows:
        if not row or not row[0]:
            continue
        path = _installed_path(row[0], data_dir)
        if path is None:
            return None
        mapped.append([path, *row[1:]])
    return content_digest(mapped)


def unpacked_content(unpacked: Path, info: Path) -> Optional[tuple[str, list[list[str]]]]:
    """(content digest as installed, RECORD rows) of an unpacked wheel, from its own RECORD; None
    when it cannot be read or holds what cannot be mapped (headers)."""
    from tfgpu_install.env.layout import record_rows

    try:
        if (info / "RECORD").stat().st_size > _MAX_RECORD:
            return None
    except OSError:
        return None
    rows = record_rows(info / "RECORD")
    if rows is None:
        return None
    digest = _mapped_digest(rows, info.name[: -len(".dist-info")] + ".data")
    return (digest, rows) if digest else None


def wheel_content(path: Path) -> Optional[str]:
    """The content digest of a wheel file whose every member is what its RECORD says (sha256 and
    size) and which holds nothing else; None otherwise. Members are read only up to their RECORD
    size (a zip bomb stops there)."""
    import csv
    import hashlib

    try:
        with zipfile.ZipFile(path) as zf:
            infos = [i for i in zf.infolist() if not i.is_dir()]
            records = [i for i in infos if i.filename.count("/") == 1 and i.filename.endswith(".dist-info/RECORD")]
            if len(records) != 1 or records[0].file_size > _MAX_RECORD:
                return None
            rows = [r for r in csv.reader(zf.read(records[0]).decode("utf-8", "replace").splitlines()) if r]
            listed = {r[0]: r for r in rows}
            if sorted(i.filename for i in infos) != sorted(listed):
                return None
            for info in infos:
                row = listed[info.filename]
                if len(row) < 3 or not row[1]:
                    if info is not records[0]:
                        return None
                    continue
                if not row[1].startswith("sha256=") or not row[2].isdigit() or int(row[2]) != info.file_size:
                    return None
                h = hashlib.sha256()
                left = int(row[2]) + 1
                with zf.open(info) as fh:
                    while left > 0:
                        chunk = fh.read(min(1 << 20, left))
                        if not chunk:
                            break
                        left -= len(chunk)
                        h.update(chunk)
                want = base64.urlsafe_b64decode(row[1][7:] + "=" * (-len(row[1][7:]) % 4)).hex()
                if left != 1 or h.hexdigest() != want:
                    return None
    except (OSError, zipfile.BadZipFile, ValueError, KeyError, csv.Error, RuntimeError):
        return None
    return _mapped_digest(rows, records[0].filename.split("/")[0][: -len(".dist-info")] + ".data")


def _listed(unpacked: Path, rows: list[list[str]]) -> Optional[dict[str, tuple[str, Optional[int]]]]:
    """{path: (RECORD hash, size)} when every file the RECORD lists is a regular file there of that
    size and nothing else is there (no link either); None otherwise. The hashes are checked by pack()."""
    listed: dict[str, tuple[str, Optional[int]]] = {}
    for row in rows:
        rel = row[0] if row else ""
        if not rel or rel.startswith("/") or ".." in rel.split("/"):
            return None
        digest = row[1] if len(row) > 1 else ""
        if digest and not digest.startswith("sha256="):
            return None
        listed[rel] = (digest, int(row[2]) if len(row) > 2 and row[2].isdigit() else None)
    present = []
    for dirpath, dirnames, filenames in os.walk(unpacked):
        if any(os.path.islink(os.path.join(dirpath, d)) for d in dirnames):
            return None
        present += [os.path.relpath(os.path.join(dirpath, n), unpacked) for n in filenames]
    if sorted(present) != sorted(listed):
        return None
    for rel, (_, size) in listed.items():
        p = unpacked / rel
        if p.is_symlink() or not p.is_file() or (size is not None and p.stat().st_size != size):
            return None
    return listed


def _wheel_filename(info: Path, version: str) -> Optional[str]:
    """The wheel's file name from its dist-info's name and its WHEEL file's Tag lines."""
    try:
        text = (info / "WHEEL").read_text(errors="replace")[:65536]
    except OSError:
        return None
    tags = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.lower().startswith("tag:")]
    parts = [t.split("-") for t in tags]
    if not parts or any(len(p) != 3 or not all(_TAG_PART.match(x) for x in p) for p in parts):
        return None
    py, abi, plat = (".".join(dict.fromkeys(p[i] for p in parts)) for i in range(3))
    dist = info.name[: -len(".dist-info")].rsplit("-", 1)[0]
    name = f"{dist}-{version}-{py}-{abi}-{plat}.whl"
    return name if _WHEEL_NAME.match(name) else None


def pack(unpacked: Path, listed: dict[str, tuple[str, Optional[int]]], dest: Path) -> bool:
    """A wheel (zip) of the unpacked files, RECORD last, each file hashed as it is read (one read):
    False (and no file) when one is not what the RECORD says."""
    import hashlib

    order = sorted(listed, key=lambda r: (r.endswith(".dist-info/RECORD"), r))
    try:
        with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            for rel in order:
                src = unpacked / rel
                info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = (src.stat().st_mode & 0o777 | 0o100000) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                h = hashlib.sha256()
                with open(src, "rb") as fin, zf.open(info, "w", force_zip64=True) as fout:
                    for chunk in iter(lambda: fin.read(1 << 20), b""):
                        h.update(chunk)
                        fout.write(chunk)
                want = listed[rel][0]
                if want and base64.urlsafe_b64decode(want[7:] + "=" * (-len(want[7:]) % 4)) != h.digest():
                    raise ValueError(rel)
    except (OSError, ValueError):
        dest.unlink(missing_ok=True)
        return False
    return True


@dataclass(frozen=True)
class _Unpacked:
    package: Package
    path: Path
    listed: dict[str, tuple[str, Optional[int]]]
    filename: str

    @property
    def size(self) -> int:
        return sum(size or 0 for _, size in self.listed.values())


def _uv_candidate(p: Package, archives: dict[tuple[str, str], list[Path]]) -> Optional[_Unpacked]:
    """An unpacked wheel in uv's cache whose RECORD is the package's recorded build and whose files
    are those the RECORD lists (their hashes are checked while packing), or None."""
    if not p.content:
        return None  # nothing to prove the unpacked files against
    for unpacked in _matching(archives, p):
        info = _dist_info(unpacked)
        got = unpacked_content(unpacked, info) if info is not None else None
        if info is None or got is None or got[0] != p.content:
            continue
        listed = _listed(unpacked, got[1])
        name = _wheel_filename(info, p.version)
        if listed is not None and name is not None:
            return _Unpacked(p, unpacked, listed, name)
    return None


def _rebuild(found: _Unpacked, dest_dir: Path) -> Optional[Wheel]:
    out = dest_dir / found.filename
    if not pack(found.path, found.listed, out):
        return None
    digest = str(hash_files([(str(out), out.stat().st_size)], threads=1)[0])
    return Wheel(found.package, out, digest, "uv-cache")


def _matching(archives: dict[tuple[str, str], list[Path]], p: Package) -> list[Path]:
    return [u for (name, version), found in archives.items() if name == p.key and _same_version(version, p.version)
            for u in found]


def _index_archives(dirs: Sequence[Path]) -> dict[tuple[str, str], list[Path]]:
    out: dict[tuple[str, str], list[Path]] = {}
    for d in dirs:
        info = _dist_info(d)
        if info is None:
            continue
        name, _, version = info.name[: -len(".dist-info")].rpartition("-")
        if name and version:
            out.setdefault((canonical_name(name), version), []).append(d)
    return out


# --- gathering -----------------------------------------------------------------------------------


def gather(ctx: Context, snap: Snapshot, dest: Path, *, bundles: Sequence[Path] = (),
           verified: Optional[dict[str, str]] = None, download: Any = None) -> Gathered:
    """Every package's wheel into `dest` (a new directory), from the sources above; `download`
    (packages) -> None fetches the rest into `dest` (pip). verified: {path: sha256 hex} of bundle
    files already checked against their manifest (not read again). Returns where each came from."""
    dest.mkdir(parents=True, exist_ok=True)
    out = Gathered()
    missing: list[Package] = []
    known = _candidates([*bundles, *_store_dirs(ctx)])
    digests = dict(verified or {})
    archives: Optional[dict[tuple[str, str], list[Path]]] = None
    candidates: list[_Unpacked] = []
    for p in snap.packages:
        wheel = _from_files(p, known, dest, digests)
        found = None
        if wheel is None and p.content:
            if archives is None:
                archives = _index_archives(uv_archives(ctx))
            found = _uv_candidate(p, archives)
        if found is not None:
            candidates.append(found)
        elif wheel is None:
            missing.append(p)
        else:
            out.wheels.append(wheel)
    # packed on as many threads as CPUs, the largest first (deflate and sha256 release the GIL)
    from concurrent.futures import ThreadPoolExecutor

    from tfgpu_install.env.hashing import workers

    candidates.sort(key=lambda c: -c.size)
    with ThreadPoolExecutor(max_workers=workers(), thread_name_prefix="tfgpu-pack") as pool:
        built = list(pool.map(lambda c: _rebuild(c, dest), candidates))
    for c, wheel in zip(candidates, built):
        if wheel is None:
            missing.append(c.package)  # a file was not what its RECORD says: not this build
        else:
            out.wheels.append(wheel)
    for wheel in out.wheels:
        if wheel.sha256 not in _published(wheel.package):
            out.added_hashes[wheel.package.key] = wheel.sha256
    if missing:
        before = {n for n in os.listdir(dest)}
        download(missing)
        for n in sorted(set(os.listdir(dest)) - before):
            path = dest / n
            out.fetched_bytes += path.stat().st_size
            nv = _name_version(n)
            fetched = next((m for m in missing if nv and m.key == nv[0] and _same_version(nv[1], m.version)), None)
            if fetched is not None:
                digest = str(hash_files([(str(path), path.stat().st_size)])[0])
                out.wheels.append(Wheel(fetched, path, digest, "download"))
                if digest in _published(fetched):
                    _keep(ctx, path, digest)
    return out


def _from_files(p: Package, known: dict[tuple[str, str], list[Path]], dest: Path,
                digests: dict[str, str]) -> Optional[Wheel]:
    """A wheel from a bundle or the store whose bytes hash to one the snapshot lists, else one (a
    wheel packed again from uv's cache by an earlier bundle) whose every file is the recorded build."""
    published = _published(p)
    paths = [path for (name, version), found in known.items()
             if name == p.key and _same_version(version, p.version) for path in found]
    rebuilt = []
    for path in paths:
        got = digests.get(str(path)) or hash_files([(str(path), path.stat().st_size)])[0]
        if not isinstance(got, str):
            continue
        if got in published:
            return _taken(p, path, dest, got)
        rebuilt.append((path, got))
    for path, got in rebuilt:
        if p.content and wheel_content(path) == p.content:
            return _taken(p, path, dest, got)
    return None


def _taken(p: Package, path: Path, dest: Path, digest: str) -> Wheel:
    _place(path, dest / path.name)
    source = "store" if path.parent.parent.name == "wheels" and path.parent.name == digest else "bundle"
    return Wheel(p, dest / path.name, digest, source)


def _keep(ctx: Context, wheel: Path, digest: str) -> None:
    """A downloaded wheel into the store (a hard link where it can be), for the next bundle or image."""
    target = store_dir(ctx) / digest / wheel.name
    if target.exists():
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
        _place(wheel, tmp)
        os.replace(tmp, target)
    except OSError:
        pass  # a saving: the next bundle downloads it again


def with_added_hashes(snap: Snapshot, added: dict[str, str]) -> Snapshot:
    """The snapshot as the bundle carries it: each rebuilt wheel's sha256 beside the published ones."""
    if not added:
        return snap
    return replace(snap, packages=tuple(
        replace(p, hashes=(*p.hashes, f"sha256:{added[p.key]}")) if p.key in added else p for p in snap.packages))


def pip_download_argv(requirements: Path, dest: Path, python: str, platforms: Sequence[str],
                      index_url: Optional[str]) -> list[str]:
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-input", "-q",
            "--no-deps", "--require-hashes", "--only-binary=:all:", "--implementation", "cp",
            "--python-version", python, "-r", str(requirements), "-d", str(dest)]
    for tag in platforms:
        argv += ["--platform", tag]
    if index_url:
        argv += ["--index-url", index_url]
    return argv


def summary(g: Gathered) -> dict[str, Any]:
    return {"sources": g.sources(), "fetched_bytes": g.fetched_bytes, "rebuilt": sorted(g.added_hashes)}


__all__ = ["Gathered", "Wheel", "gather", "pack", "pip_download_argv", "store_dir", "summary", "unpacked_content",
           "with_added_hashes"]
