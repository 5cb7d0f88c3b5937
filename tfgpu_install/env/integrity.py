"""Are the installed files what their distributions say they installed? (like `rpm -V` / `debsums`)

Each *.dist-info/RECORD (and, in a conda prefix, each conda-meta/*.json `paths_data`) lists
the files its installer wrote, with their size and sha256. For every distribution:

- missing: a listed file that is gone (or is no longer a regular file);
- changed: a listed file whose size differs, or (shared libraries always, every file with
  `full`) whose sha256 differs from the recorded one;
- added: a file inside one of the distribution's own package directories that no RECORD lists
  (bytecode caches excepted: Python writes them).

A RECORD row is hostile input: a path that leaves the env (absolute, `..` past its root) is
reported, never opened. Hashes of unchanged files are remembered in a small cache keyed by
(device, inode, size, mtime, ctime): ctime cannot be set back from user space, so a file that
was replaced or written since is always hashed again. The same cache remembers each parsed
RECORD (keyed by the RECORD's and METADATA's identity) and each package directory found clean
(keyed by the directory's identity: adding, removing or renaming an entry changes its mtime and
ctime), so a second `check` stats instead of parsing and listing again; `check --full` takes
nothing back. A TensorFlow env has ~25,000 files in ~4,000 directories.

What the RECORD itself must be comes from the snapshot (env/builds.py): given `expected` (canonical
name -> (version, content digest)), a distribution of that version whose RECORD digests otherwise
is another build (`other_build`), whatever its files say about themselves; one the snapshot does
not describe is counted as unknown, never as checked. Hashing runs on threads (env/hashing.py);
files an install just wrote from hash-checked wheels are listed by remember_installed in a
separate file that only a check given `trusted_since` (the restore's closing check) takes back.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any, Collection, Iterator, Mapping, NamedTuple, Optional

from tfgpu_install.dirs import writable_only_by_me
from tfgpu_install.env.builds import content_digest
from tfgpu_install.env.hashing import HashProgress, hash_files
from tfgpu_install.env.layout import canonical_name, record_rows, site_packages_dirs

_CACHE_FORMAT = 3  # 2: records and clean directories beside the hashes; 3: each record's content digest
_MAX_META = 64 << 20  # a conda-meta record larger than this is not read


class Expected(NamedTuple):
    rel: str  # env-relative path
    size: Optional[int]
    sha256: Optional[str]  # as the record spells it: "sha256=<base64>" (RECORD) or hex (conda)


@dataclass
class DistFiles:
    """What one distribution's record says it installed."""

    name: str  # canonical name ("numpy"); conda: "conda:<name>"
    version: str
    record: str  # env-relative path of the RECORD / conda-meta file
    files: list[Expected] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)  # env-relative package dirs it owns (for "added")
    outside: list[str] = field(default_factory=list)  # rows that point outside the env
    content: Optional[str] = None  # env/builds.content_digest of its RECORD (pip distributions)


@dataclass(frozen=True)
class DistProblem:
    name: str
    version: str
    record: str
    missing: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()  # "path (size 10, recorded 12)" / "path (sha256 differs)"
    added: tuple[str, ...] = ()
    other_build: bool = False  # its RECORD is not the one the snapshot recorded for this version

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "record": self.record,
                "missing": list(self.missing), "changed": list(self.changed), "added": list(self.added),
                "other_build": self.other_build}


@dataclass(frozen=True)
class InstalledCheck:
    problems: tuple[DistProblem, ...]
    dists: int  # distributions checked
    files: int  # files stat()ed
    hashed: int  # files whose sha256 was compared
    full: bool
    builds_checked: int = 0  # distributions whose RECORD was compared with the snapshot's digest
    builds_unknown: tuple[str, ...] = ()  # pip distributions the snapshot gives no digest for (canonical names)
    read_bytes: int = 0  # bytes read to hash (what was not remembered)
    read_files: int = 0  # of `hashed`, the files read (the others: remembered or trusted by identity)

    @property
    def clean(self) -> bool:
        return not self.problems

    def names(self) -> list[str]:
        """Canonical names of the damaged pip distributions (what a repair reinstalls)."""
        return [p.name for p in self.problems if not p.name.startswith("conda:")]

    def lines(self) -> list[str]:
        """For the terminal: names from RECORDs and directory listings are escaped (a file name
        can hold control characters)."""
        out = []
        for p in self.problems:
            who = shown(f"{p.name} {p.version}")
            if p.other_build:
                out.append(f"{who}: another build of this version (its RECORD lists other files or other "
                           "sha256 than the build the snapshot recorded)")
            out += [f"{who}: missing {shown(f)}" for f in p.missing]
            out += [f"{who}: changed {shown(f)}" for f in p.changed]
            out += [f"{who}: added {shown(f)}" for f in p.added]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"clean": self.clean, "full": self.full, "distributions": self.dists, "files": self.files,
                "hashed": self.hashed, "damaged": [p.to_json() for p in self.problems],
                "builds": {"checked": self.builds_checked, "unknown": list(self.builds_unknown)},
                "read_bytes": self.read_bytes, "read_files": self.read_files}



def shown(text: str) -> str:
    """text as it is when printable, else with its control (and undecodable) characters escaped."""
    if text.isprintable():
        return text
    return text.encode("unicode_escape", "backslashreplace").decode("ascii")


def is_library(rel: str) -> bool:
    """A shared library (libcudnn_graph.so.9, _pywrap.so, libfoo.so.1.2): always hashed."""
    name = rel.rsplit("/", 1)[-1]
    return name.endswith(".so") or ".so." in name


def same_digest(expected: str, hexdigest: str) -> bool:
    """expected: a RECORD's `sha256=<urlsafe base64, unpadded>` or conda's hex; hexdigest: ours."""
    if expected.startswith("sha256="):
        return base64.urlsafe_b64encode(bytes.fromhex(hexdigest)).rstrip(b"=").decode() == expected[7:]
    return expected.lower() == hexdigest


def _inside(env: str, base: str, rel: str) -> Optional[str]:
    """env-relative normalised path of `rel` (relative to `base`, itself env-relative), or None
    when it leaves env. The common row (no `.`/`..` part, no `//`) is joined as it is."""
    if not rel or rel.startswith("/") or "\0" in rel:
        return None
    if "./" not in rel and "//" not in rel and not rel.endswith((".", "/")):
        return f"{base}/{rel}" if base else rel
    out = os.path.normpath(os.path.join(base, rel)) if base else os.path.normpath(rel)
    if out in (".", "..") or out.startswith("../") or out.startswith("/"):
        return None
    return out


def _pip_dists(env: Path, memo: Optional["HashCache"] = None, content: bool = True) -> Iterator[DistFiles]:
    """Each dist-info's record. memo: RECORDs parsed before, taken back while their RECORD and
    METADATA are the same files (same identity) as then. content=False (no memo): the files only,
    without the RECORD's content digest (a caller that lists or stats them needs no more)."""
    assert content or memo is None  # what the memo remembers is whole
    envs = str(env)
    for sp in site_packages_dirs(env):
        sps = os.path.relpath(str(sp), envs)  # env-relative: lib/python3.11/site-packages
        try:
            entries = sorted(os.listdir(sp))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith(".dist-info"):
                continue
            rel_record = f"{sps}/{entry}/RECORD"
            key = _identity(str(sp / entry / "RECORD"), str(sp / entry / "METADATA")) if memo else None
            got = memo.records_old.get(rel_record) if memo is not None and key else None
            dist = _remembered(got, rel_record) if got is not None and got[0] == key else None
            if dist is not None and memo is not None and got is not None:
                memo.records_new[rel_record] = got
            elif dist is None:
                dist = _parsed(envs, sp, sps, entry, content)
                if memo is not None:
                    memo.records_parsed += 1
                    if settled(key):
                        memo.records_new[rel_record] = [key, dist.name, dist.version, [list(f) for f in dist.files],
                                                        dist.roots, dist.outside, dist.content]
            yield dist


def _parsed(envs: str, sp: Path, sps: str, entry: str, content: bool = True) -> DistFiles:
    """One dist-info's METADATA and RECORD, read (content: with the RECORD's content digest)."""
    from tfgpu_install.env.layout import _read_metadata

    meta = _read_metadata(sp / entry / "METADATA")
    rel_record = f"{sps}/{entry}/RECORD"
    name = canonical_name(meta.name) if meta else entry[: -len(".dist-info")]
    dist = DistFiles(name, meta.version if meta else "?", rel_record)
    rows = record_rows(sp / entry / "RECORD")
    if rows is None:
        dist.files.append(Expected(rel_record, None, None))  # the RECORD itself is missing
        return dist
    dist.content = content_digest(rows) if content else None
    tops: set[str] = set()
    add = dist.files.append
    for row in rows:
        path = row[0] if row else ""
        if not path or path.endswith(".pyc"):
            continue  # bytecode is Python's to write and rewrite (debsums skips it too)
        rel = _inside(envs, sps, path)
        if rel is None:
            dist.outside.append(path[:200])
            continue
        n = len(row)
        add(Expected(rel, int(row[2]) if n > 2 and row[2].isdigit() else None,
                     row[1] if n > 1 and row[1].startswith("sha256=") else None))
        top, sep, _ = path.partition("/")
        if sep:
            tops.add(top)
    dist.roots = sorted(f"{sps}/{t}" for t in tops if t not in ("..", ".", "")
                        and not t.endswith((".dist-info", ".data")))
    return dist


def _conda_dists(env: Path) -> Iterator[DistFiles]:
    meta_dir = env / "conda-meta"
    try:
        names = sorted(n for n in os.listdir(meta_dir) if n.endswith(".json"))
    except OSError:
        return
    envs = str(env)
    for n in names:
        p = meta_dir / n
        try:
            if p.stat().st_size > _MAX_META:
                continue
            doc: Any = json.loads(p.read_text(errors="replace"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
            continue
        dist = DistFiles(f"conda:{doc['name']}", str(doc.get("version", "")), f"conda-meta/{n}")
        pd = doc.get("paths_data")
        paths = pd.get("paths") if isinstance(pd, dict) else None
        if isinstance(paths, list):
            for item in paths:
                if not isinstance(item, dict) or not isinstance(item.get("_path"), str):
                    continue
                rel = _inside(envs, "", item["_path"])
                if rel is None:
                    dist.outside.append(item["_path"][:200])
                    continue
                if item.get("path_type") in ("softlink", "directory", "pyc_file") or item["_path"].endswith(".pyc"):
                    continue  # links and dirs are not files; bytecode is compiled (or not) at link time
                # A file with a prefix placeholder is rewritten at link time: presence only.
                rewritten = bool(item.get("prefix_placeholder"))
                size = item.get("size_in_bytes")
                digest = item.get("sha256")
                dist.files.append(Expected(
                    rel,
                    size if isinstance(size, int) and not rewritten else None,
                    digest if isinstance(digest, str) and len(digest) == 64 and not rewritten else None,
                ))
        elif isinstance(doc.get("files"), list):
            for f in doc["files"]:
                rel = _inside(envs, "", f) if isinstance(f, str) else None
                if rel is not None:
                    dist.files.append(Expected(rel, None, None))
        yield dist


class HashCache:
    """sha256 of files already hashed, keyed by what changes when a file is written or replaced."""

    def __init__(self, path: Optional[Path]) -> None:
        self.path = path
        self.old: dict[str, list[Any]] = {}
        self.new: dict[str, list[Any]] = {}
        # RECORD (env-relative) -> [key, name, version, files, roots, outside, content]; dir -> [key, subdirs]
        self.records_old: dict[str, list[Any]] = {}
        self.records_new: dict[str, list[Any]] = {}
        self.dirs_old: dict[str, list[Any]] = {}
        self.dirs_new: dict[str, list[Any]] = {}
        self.records_parsed = 0  # RECORDs parsed in this run (not remembered)
        self.trusted: dict[str, list[Any]] = {}  # what this run's install wrote (see written_since)
        if path is None:
            return
        try:
            with open(path, encoding="utf-8") as f:
                if not writable_only_by_me(os.fstat(f.fileno())):
                    return  # another user could have written it: a cache, so simply not believed
                doc = json.loads(f.read(64 << 20))
        except (OSError, ValueError):
            return
        if not isinstance(doc, dict) or doc.get("format") != _CACHE_FORMAT:
            return
        self.old = _entries(doc.get("files"), 2)
        self.records_old = _entries(doc.get("records"), 7)
        self.dirs_old = _entries(doc.get("dirs"), 2)

    @staticmethod
    def key(st: os.stat_result) -> str:
        return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"

    def known(self, rel: str, st: os.stat_result, remembered: bool = True) -> Optional[str]:
        """The digest remembered for this file as it is now (same identity), else None. Not
        `remembered` (--full): only what this run's install wrote from hash-checked wheels (trusted)."""
        key = self.key(st)
        got = self.old.get(rel) if remembered else self.trusted.get(rel)
        if got is not None and got[0] == key and isinstance(got[1], str):
            self.new[rel] = [key, got[1]]
            return got[1]
        return None

    def remember(self, rel: str, st: os.stat_result, digest: str) -> None:
        self.new[rel] = [self.key(st), digest]

    def save(self) -> None:
        if self.path is None or (self.new, self.records_new, self.dirs_new) == (
                self.old, self.records_old, self.dirs_old):
            return
        from tfgpu_install.files import atomic_write

        doc = {"format": _CACHE_FORMAT, "files": self.new, "records": self.records_new, "dirs": self.dirs_new}
        try:
            atomic_write(self.path, json.dumps(doc, separators=(",", ":")), mode=0o600)
        except OSError:
            pass  # a cache: losing it costs time, never a wrong answer


def _entries(value: Any, width: int) -> dict[str, list[Any]]:
    """A cache section as {str: list of `width` items}; anything else is dropped."""
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, list) and len(v) == width}


# A file or directory changed this recently may change again within the same timestamp tick (the
# kernel's clock for mtime/ctime advances in milliseconds) without its identity changing: such an
# identity is used for this run but not remembered (git's "racily clean" rule).
_SETTLED_NS = 2_000_000_000


def _identity(*paths: str) -> Optional[str]:
    """The cache key of these files together, or None when one cannot be stat()ed. The key ends in
    "~" when one of them changed in the last 2 s: usable now, not to be remembered (see settled)."""
    try:
        stats = [os.stat(p) for p in paths]
    except OSError:
        return None
    racy = max(st.st_ctime_ns for st in stats) > time.time_ns() - _SETTLED_NS
    return "|".join(HashCache.key(st) for st in stats) + ("~" if racy else "")


def settled(key: Optional[str]) -> bool:
    return bool(key) and not str(key).endswith("~")


def _remembered(got: list[Any], rel_record: str) -> Optional[DistFiles]:
    """A remembered RECORD back as DistFiles, or None when the entry is not of the shape we write."""
    try:
        _, name, version, files, roots, outside, content = got
        expected = [Expected(str(r), s if isinstance(s, int) else None, h if isinstance(h, str) else None)
                    for r, s, h in files]
        return DistFiles(str(name), str(version), rel_record, expected, [str(r) for r in roots],
                         [str(o) for o in outside], content if isinstance(content, str) else None)
    except (TypeError, ValueError):
        return None


def listed_by_dir(listed: set[str]) -> dict[str, set[str]]:
    """The listed files as {env-relative dir: {file names}}: what _added compares each directory with."""
    out: dict[str, set[str]] = {}
    for rel in listed:
        head, _, name = rel.rpartition("/")
        out.setdefault(head, set()).add(name)
    return out


def _listing(d: str) -> Optional[tuple[set[str], list[str]]]:
    """(file names, subdirectory names but __pycache__) of one directory; None if it cannot be listed."""
    names: set[str] = set()
    subdirs: list[str] = []
    try:
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    if e.name != "__pycache__":
                        subdirs.append(e.name)
                else:
                    names.add(e.name)
    except OSError:
        return None
    return names, subdirs


def _added(env: str, roots: list[str], listed: dict[str, set[str]], memo: Optional[HashCache] = None,
           reuse: bool = False) -> list[str]:
    """Files under `roots` that no record lists: per directory, its file names minus the listed ones.
    memo: directories found clean are remembered with their subdirectories; with `reuse` (every
    record is as it was then) one whose identity is unchanged is not listed again: no entry was
    added, removed or renamed in it since (that changes its mtime and ctime)."""
    out: list[str] = []
    cut = len(env) + 1
    stack = [os.path.join(env, r) for r in roots]
    empty: set[str] = set()
    while stack:
        d = stack.pop()
        rel_dir = d[cut:]
        key = _identity(d) if memo is not None else None
        got = memo.dirs_old.get(rel_dir) if memo is not None and reuse and key else None
        if memo is not None and got is not None and got[0] == key and isinstance(got[1], list):
            memo.dirs_new[rel_dir] = got
            stack += [f"{d}/{sub}" for sub in got[1] if isinstance(sub, str) and "/" not in sub and sub != ".."]
            continue
        listing = _listing(d)
        if listing is None:
            continue
        names, subdirs = listing
        stack += [f"{d}/{sub}" for sub in subdirs]
        extra = [f"{rel_dir}/{n}" for n in names - listed.get(rel_dir, empty) if not n.endswith(".pyc")]
        out += extra
        if memo is not None and settled(key) and not extra:
            memo.dirs_new[rel_dir] = [key, subdirs]
    return sorted(out)


_WRITTEN_FORMAT = 1


def _record_digest(f: Expected, st: os.stat_result) -> Optional[str]:
    """The hex digest the RECORD gives for a regular file of the recorded size, else None."""
    if f.sha256 is None or not f.sha256.startswith("sha256=") or not S_ISREG(st.st_mode) or st.st_size != f.size:
        return None
    try:
        raw = base64.urlsafe_b64decode(f.sha256[7:] + "=" * (-len(f.sha256[7:]) % 4))
    except ValueError:
        return None
    return raw.hex() if len(raw) == 32 else None


def remember_installed(env: Path, cache: Path, since_ns: Optional[int] = None, verified: Collection[str] = (),
                       written: Optional[Path] = None) -> int:
    """Right after the installer wrote the env: remember each shared library's digest as its
    RECORD gives it, keyed by the file's identity now (inode, size, mtime, ctime), so the next check
    stats instead of reading gigabytes. A file replaced or written later has another ctime and is
    hashed for real. Returns how many were remembered.

    since_ns (the wall clock before the installer ran): only files the installer wrote then (their
    ctime, and their RECORD's, is not older; a hard link from uv's cache sets it too) are taken from
    the RECORD. `verified` (canonical names installed from wheels whose sha256 the installer checked)
    and `written`: every file of those is listed there, for a check given trusted_since (the
    restore's closing check: what it did not write, it reads)."""
    env = Path(os.path.abspath(str(env)))
    prefix = str(env) + "/"
    hashes = HashCache(cache)
    listed: dict[str, list[Any]] = {}
    n = 0
    for dist in _pip_dists(env, content=False):
        fresh = since_ns is not None and _ctime(prefix + dist.record) >= since_ns
        trust = fresh and dist.name in verified and written is not None
        for f in dist.files:
            lib = is_library(f.rel)
            if not (lib or trust):
                continue
            try:
                st = os.stat(prefix + f.rel)
            except OSError:
                continue
            key = HashCache.key(st)
            known = hashes.old.get(f.rel)
            digest = _record_digest(f, st) if since_ns is None or (fresh and st.st_ctime_ns >= since_ns) else None
            if trust and digest is not None:
                listed[f.rel] = [key, digest]
            if not lib:
                continue
            if known is not None and known[0] == key:
                hashes.new[f.rel] = known  # hashed before as it is now: that digest stands
            elif digest is not None:
                hashes.new[f.rel] = [key, digest]
                n += 1
    hashes.save()
    if written is not None:
        _write_private(written, {"format": _WRITTEN_FORMAT, "since_ns": since_ns or 0, "files": listed})
    return n


def _ctime(path: str) -> int:
    try:
        return os.stat(path).st_ctime_ns
    except OSError:
        return -1


def _write_private(path: Path, doc: dict[str, Any]) -> None:
    from tfgpu_install.files import atomic_write

    try:
        atomic_write(path, json.dumps(doc, separators=(",", ":")), mode=0o600)
    except OSError:
        pass  # a saving: without it the closing check reads the files


def written_since(path: Optional[Path], since_ns: int) -> dict[str, list[Any]]:
    """What remember_installed listed in `path` as written from hash-checked wheels by an install
    that started at or after since_ns: {env-relative path: [identity, sha256 hex]}. A file another
    user could write, or of another shape, gives nothing (every file is read then)."""
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            if not writable_only_by_me(os.fstat(f.fileno())):
                return {}
            doc = json.loads(f.read(256 << 20))
    except (OSError, ValueError):
        return {}
    if (not isinstance(doc, dict) or doc.get("format") != _WRITTEN_FORMAT or not isinstance(doc.get("since_ns"), int)
            or doc["since_ns"] < since_ns):
        return {}
    return _entries(doc.get("files"), 2)


def recorded_files(env: Path) -> list[str]:
    """Every file the env's records list (absolute paths), as check_installed reads them: what
    scripts/bench.py stats and sha256sums beside `check`."""
    prefix = os.path.abspath(str(env)) + "/"
    return [prefix + rel for rel in recorded_relative(env)]


def recorded_relative(env: Path) -> list[str]:
    """recorded_files, env-relative (what install's no-op answer stats). The check's memo is not
    used: loading it took longer than parsing the RECORDs again."""
    env = Path(os.path.abspath(str(env)))
    return [f.rel for d in [*_pip_dists(env, content=False), *_conda_dists(env)] for f in d.files]


def builds(env: Path, cache: Optional[Path] = None) -> dict[str, tuple[str, str]]:
    """canonical name -> (version, content digest) of each pip distribution in the env whose RECORD
    could be read: what a snapshot records as what each distribution's files must be. cache: the
    file check's memo, whose parsed RECORDs are taken back while they are the same files."""
    env = Path(os.path.abspath(str(env)))
    memo = HashCache(cache) if cache is not None else None
    return {d.name: (d.version, d.content) for d in _pip_dists(env, memo) if d.content is not None}


@dataclass
class _Seen:
    """One distribution's findings while the check runs (each item with its RECORD row's index)."""

    missing: list[str] = field(default_factory=list)
    changed: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class _Job:
    dist: int
    row: int
    f: Expected
    path: str
    st: os.stat_result


def _stat_dist(prefix: str, dist: DistFiles, full: bool, seen: _Seen) -> list[tuple[int, Expected, str,
                                                                                      os.stat_result]]:
    """stat() each file of one distribution: missing and resized ones go to `seen`; returns the
    files whose sha256 must be compared (row index, row, path, stat)."""
    out = []
    for i, f in enumerate(dist.files):
        full_path = prefix + f.rel
        try:
            st = os.stat(full_path)
        except OSError:
            seen.missing.append(f.rel)
            continue
        if not S_ISREG(st.st_mode):
            seen.missing.append(f.rel)
            continue
        if f.size is not None and st.st_size != f.size:
            seen.changed.append((i, f"{f.rel} (size {st.st_size}, recorded {f.size})"))
            continue
        if f.sha256 is not None and (full or f.rel.endswith(".so") or ".so." in f.rel):
            out.append((i, f, full_path, st))
    return out


def _other_build(dist: DistFiles, expected: Optional[Mapping[str, tuple[str, str]]]) -> Optional[bool]:
    """True: the snapshot records another build of this version; False: the same; None: unknown."""
    want = expected.get(dist.name) if expected is not None and not dist.name.startswith("conda:") else None
    if want is None or want[0] != dist.version:
        return None
    return dist.content != want[1]


def check_installed(env: Path, full: bool = False, cache: Optional[Path] = None, *,
                    expected: Optional[Mapping[str, tuple[str, str]]] = None,
                    trusted: Optional[Mapping[str, list[Any]]] = None,
                    progress: Optional[HashProgress] = None, threads: Optional[int] = None) -> InstalledCheck:
    """Every distribution's files against its record. `cache`: where remembered hashes live.
    expected: canonical name -> (version, content digest) from the snapshot (None: it has none).
    trusted (with full): written_since()'s files, taken back by identity instead of read again.
    progress: (files, bytes) hashed so far, of how many; threads: env/hashing.workers() by default."""
    env = Path(os.path.abspath(str(env)))
    envs = str(env)
    hashes = HashCache(cache)
    if full:  # --full takes nothing back (every RECORD read, every directory listed); what it read stays for later
        hashes.records_old, hashes.dirs_old = {}, {}
        hashes.trusted = dict(trusted or {})
    memo = hashes
    pip = list(_pip_dists(env, memo))
    conda = list(_conda_dists(env))
    dists = pip + conda
    listed = listed_by_dir({f.rel for d in dists for f in d.files})
    # Clean directories are taken back only while every record is what it was (conda's are not remembered).
    reuse = memo is not None and memo.records_parsed == 0 and not conda
    prefix = envs + "/"
    seen = [_Seen() for _ in dists]
    jobs: list[_Job] = []
    n_files = n_hashed = 0
    for d, dist in enumerate(dists):
        n_files += len(dist.files)
        for i, f, full_path, st in _stat_dist(prefix, dist, full, seen[d]):
            n_hashed += 1
            digest = hashes.known(f.rel, st, remembered=not full)
            if digest is None:
                jobs.append(_Job(d, i, f, full_path, st))
            elif f.sha256 is not None and not same_digest(f.sha256, digest):
                seen[d].changed.append((i, f"{f.rel} (sha256 differs from the record)"))
    results = hash_files([(j.path, j.st.st_size) for j in jobs], threads, progress)
    for job, got in zip(jobs, results):
        if isinstance(got, OSError):
            seen[job.dist].changed.append((job.row, f"{job.f.rel} (unreadable: {got.strerror or got})"))
            continue
        hashes.remember(job.f.rel, job.st, got)
        if job.f.sha256 is not None and not same_digest(job.f.sha256, got):
            seen[job.dist].changed.append((job.row, f"{job.f.rel} (sha256 differs from the record)"))
    problems: list[DistProblem] = []
    claimed: set[str] = set()
    n_builds = 0
    unknown: list[str] = []
    for d, dist in enumerate(dists):
        other = _other_build(dist, expected)
        if other is None and not dist.name.startswith("conda:"):
            unknown.append(dist.name)
        n_builds += other is not None
        changed = [f"{o} (outside the env: not checked)" for o in dist.outside]
        changed += [text for _, text in sorted(seen[d].changed)]
        roots = [r for r in dist.roots if r not in claimed]
        claimed.update(roots)
        added = _added(envs, roots, listed, memo, reuse) if roots else []
        if seen[d].missing or changed or added or other:
            problems.append(DistProblem(dist.name, dist.version, dist.record, tuple(seen[d].missing), tuple(changed),
                                        tuple(added), other_build=bool(other)))
    hashes.save()
    return InstalledCheck(tuple(problems), len(dists), n_files, n_hashed, full, n_builds, tuple(sorted(unknown)),
                          sum(j.st.st_size for j in jobs), len(jobs))


__all__ = ["DistProblem", "InstalledCheck", "builds", "check_installed", "is_library", "recorded_files",
           "remember_installed", "written_since"]
