"""The user's own requirements on top of a TensorFlow env (`install --with/--with-file`, `add`):
read, checked and merged here (plain data); app/additions.py resolves them against the
release's pins with uv before anything changes.

A requirement is a name with an optional version range, extras and markers (PEP 508).
Direct references (`name @ URL`, paths, `-e .`) are refused: they would install code from
wherever the text points, and the snapshot could not pin or hash them. Build a wheel of a
local project and point at it with `--find-links DIR` (PIP_FIND_LINKS/UV_FIND_LINKS)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from tfgpu_install.errors import BadInputError, UsageError

MAX_FILE = 1 << 20  # a requirements file larger than 1 MiB is not one
MAX_REQUIREMENT = 1000
KEY = "added"  # where a snapshot's resolution and a plan's options keep the added requirements
OPTION = "with_requirements"

_HINT = ("give a name with an optional version range, e.g. `--with 'pandas>=2,<3'`; for a local project "
         "build a wheel and add its directory with --find-links (PIP_FIND_LINKS)")


def checked(text: str, where: str = "--with", bad: type = UsageError) -> str:
    """One requirement in its normal form; UsageError (BadInputError for files) when it is not one."""
    from packaging.requirements import InvalidRequirement, Requirement

    shown = text if len(text) <= 80 else text[:80] + "..."
    if len(text) > MAX_REQUIREMENT or "\x00" in text:
        raise bad(f"{where}: requirement too long or not text: {shown!r}", _HINT)
    try:
        req = Requirement(text.strip())
    except InvalidRequirement as exc:
        raise bad(f"{where}: {shown!r} is not a requirement ({exc})", _HINT) from exc
    if req.url:
        raise bad(f"{where}: {req.name} @ ... is a direct reference; only names and version ranges are added",
                  _HINT)
    return str(req)


def name_of(requirement: str) -> str:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(Requirement(requirement).name))


def merged(old: Iterable[str], new: Iterable[str]) -> tuple[str, ...]:
    """old, with each of new replacing the entry of the same name (new ones appended)."""
    out: dict[str, str] = {name_of(r): r for r in old}
    for r in new:
        out.pop(name_of(r), None)
        out[name_of(r)] = r
    return tuple(out.values())


# --- files ---------------------------------------------------------------------------------


def _read(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        raise UsageError(f"--with-file: no file at {path}", "check the path") from None
    except OSError as exc:
        raise BadInputError(f"--with-file: cannot read {path}: {exc.strerror or exc}",
                            "give a regular file you can read (not a link)") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BadInputError(f"--with-file: {path} is not a regular file", "give a requirements file")
        if hasattr(os, "getuid") and st.st_uid not in (os.getuid(), 0):
            raise BadInputError(f"--with-file: {path} belongs to another user (uid {st.st_uid})",
                                "copy it to a file you own after reading it")
        data = os.read(fd, MAX_FILE + 1)
    except OSError as exc:  # /proc/self/mem: a "regular file" that cannot be read
        raise BadInputError(f"--with-file: cannot read {path}: {exc.strerror or exc}",
                            "give a requirements file") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE:
        raise BadInputError(f"--with-file: {path} is larger than {MAX_FILE} bytes", "give a requirements file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInputError(f"--with-file: {path} is not UTF-8 text", "give a requirements file") from None


def _toml(text: str, where: str) -> dict[str, Any]:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - 3.9/3.10
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInputError(f"--with-file: {where}: not TOML ({exc})", "fix the file") from None


def _from_pylock(doc: Mapping[str, Any], where: str,
                 hashes: Optional[dict[str, tuple[str, ...]]] = None) -> list[str]:
    """PEP 751: every [[packages]] entry, pinned to its version, with its files' sha256 hashes."""
    pkgs = doc.get("packages")
    if not isinstance(pkgs, list) or not pkgs:
        raise BadInputError(f"--with-file: {where}: no [[packages]] table", "give a pylock.toml written by a locker")
    out = []
    for i, p in enumerate(pkgs):
        name, version = (p.get("name"), p.get("version")) if isinstance(p, dict) else (None, None)
        if not isinstance(name, str) or not isinstance(version, str) or not re.fullmatch(r"[A-Za-z0-9.+!_-]+", version):
            raise BadInputError(f"--with-file: {where}: packages[{i}] has no name and exact version",
                                "a pylock.toml for --with-file pins each package to a version")
        req = checked(f"{name}=={version}", where, BadInputError)
        out.append(req)
        files = [f for f in [*(p.get("wheels") or []), p.get("sdist") or {}] if isinstance(f, dict)]
        digests = [(f.get("hashes") or {}).get("sha256") if isinstance(f.get("hashes"), dict) else None for f in files]
        found = tuple(f"sha256:{d}" for d in digests if isinstance(d, str) and _HASH.fullmatch(f"sha256:{d}"))
        if found and hashes is not None:
            hashes[name_of(req)] = found
    return out


def _from_pyproject(doc: Mapping[str, Any], where: str) -> list[str]:
    deps = (doc.get("project") or {}).get("dependencies") if isinstance(doc.get("project"), dict) else None
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise BadInputError(f"--with-file: {where}: no [project] dependencies list",
                            "list the project's requirements under [project] dependencies = [...]")
    return [checked(d, where, BadInputError) for d in deps]


_HASH_OPTION = re.compile(r"\s+--hash[= ](\S+)")
_HASH = re.compile(r"sha256:[0-9a-f]{64}|sha384:[0-9a-f]{96}|sha512:[0-9a-f]{128}")


def _from_requirements(text: str, where: str, hashes: Optional[dict[str, tuple[str, ...]]] = None) -> list[str]:
    """The file's requirements; a line's `--hash=ALGO:HEX` options go into `hashes` (name -> the
    hashes its file must have: the install checks them, as pip would)."""
    out = []
    joined = re.sub(r"\\\r?\n", " ", text)
    for n, raw in enumerate(joined.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        pins = _HASH_OPTION.findall(" " + line)
        line = _HASH_OPTION.sub("", " " + line).strip()
        bad = [h for h in pins if not _HASH.fullmatch(h.lower())]
        if bad:
            raise BadInputError(f"--with-file: {where}:{n}: {bad[0][:80]!r} is not a hash",
                                "write --hash=sha256:<64 hex digits> (pip's form)", ref="with-file-hash")
        if not line:
            continue
        if line.startswith("-"):
            raise BadInputError(
                f"--with-file: {where}:{n}: options such as {line.split()[0]!r} are not read",
                "list plain requirements; give indexes with --index-url / PIP_INDEX_URL and "
                "local wheels with PIP_FIND_LINKS", ref="with-file-option")
        req = checked(line, f"{where}:{n}", BadInputError)
        out.append(req)
        if pins and hashes is not None:
            hashes[name_of(req)] = tuple(dict.fromkeys(h.lower() for h in pins))
    return out


def read_file(path: Path, hashes: Optional[dict[str, tuple[str, ...]]] = None) -> list[str]:
    """The requirements a requirements.txt, pylock.toml (PEP 751) or pyproject.toml lists."""
    text = _read(path)
    name = path.name
    if name == "pyproject.toml":
        reqs = _from_pyproject(_toml(text, name), name)
    elif re.fullmatch(r"pylock(\.[^.]+)?\.toml", name):
        reqs = _from_pylock(_toml(text, name), name, hashes)
    else:
        reqs = _from_requirements(text, name, hashes)
    if not reqs:
        raise BadInputError(f"--with-file: {path} lists no requirements", "add requirements to it, or leave it out")
    return reqs


def gather(given: Sequence[str], files: Sequence[str]) -> tuple[str, ...]:
    """--with REQ... and --with-file FILE..., checked, merged (a later one of a name wins)."""
    return gather_pinned(given, files)[0]


def gather_pinned(given: Sequence[str], files: Sequence[str]) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """gather, and the hashes the files pin (name -> hashes; a later requirement of a name without
    hashes drops them: the hashes belong to the line that gave them)."""
    reqs = [checked(r) for r in given]
    hashes: dict[str, tuple[str, ...]] = {}
    for f in files:
        found: dict[str, tuple[str, ...]] = {}
        got = read_file(Path(os.path.expanduser(f)), found)
        for r in got:
            hashes.pop(name_of(r), None)
        hashes.update(found)
        reqs += got
    final = merged((), reqs)
    names = {name_of(r) for r in final}
    return final, {n: h for n, h in hashes.items() if n in names}


# --- where they are recorded ------------------------------------------------------------------


def from_record(data: Optional[Mapping[str, Any]], key: str = KEY) -> tuple[str, ...]:
    """The added requirements a snapshot's resolution (key "added") or a plan's options
    (key "with_requirements") holds; () when none. Each is checked again: records are input."""
    raw = (data or {}).get(key)
    return recorded(raw) if isinstance(raw, list) else ()


def recorded(raw: Iterable[object]) -> tuple[str, ...]:
    """Recorded requirements (a snapshot's `added`, a plan's), each checked again: records are input."""
    out = []
    for r in raw:
        if isinstance(r, str):
            try:
                out.append(checked(r, "recorded requirement", BadInputError))
            except BadInputError:
                continue  # a damaged entry is dropped, never installed
    return tuple(out)


def snapshot_block(requirements: Sequence[str]) -> dict[str, list[str]]:
    """What a snapshot's resolution carries: {"added": [...]} (nothing when there are none)."""
    return {KEY: list(requirements)} if requirements else {}


def with_pins(ctx: Any, requirements: Sequence[str], earlier: Mapping[str, Sequence[str]], new: Sequence[str],
              pinned: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    """The hashes the additions keep: the earlier ones for names not given again, then the new
    ones, for the names still added. They are checked per requirement by uv (pip checks hashes
    only for a complete lock): without uv, refused before anything changes."""
    given = {name_of(r) for r in new}
    names = {name_of(r) for r in requirements}
    out = {n: tuple(h) for n, h in earlier.items() if n not in given}
    out.update({n: tuple(h) for n, h in pinned.items()})
    out = {n: h for n, h in out.items() if n in names and h}
    if out:
        from tfgpu_install.env.tools import find_uv

        if find_uv(ctx) is None:
            from tfgpu_install.errors import EnvironmentProblem

            raise EnvironmentProblem(
                f"{', '.join(sorted(out))}: pinned with --hash, which this tool checks through uv, "
                "and uv was not found",
                "reinstall tfgpu-install (it depends on the `uv` package), or unset TFGPU_NO_UV", ref="uv-missing")
    return out
