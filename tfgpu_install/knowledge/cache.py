"""The on-disk knowledge cache: validated Knowledge as JSON with a checksum, never code.

The cache used to be a pickle: anyone who could write the cache dir could run code in the
next tfgpu-install, and a pickle naming a module this version lacks crashed the loader.
JSON only ever builds dicts, lists, strings and numbers; decode() then rebuilds each frozen
dataclass from the fields it declares, checking every value's type. Any doubt (unreadable,
not JSON, wrong checksum, other format or field shape, an unknown or missing field, a wrong
type, another profiles dir) returns None and the caller re-parses the YAML.

File: one header line {"format", "shape", "crc32", "size"} then the payload. The checksum is
zlib's crc32: it catches a torn or damaged file; hashlib (OpenSSL) would cost more to import
than the whole cached load (~3 ms), and no unkeyed hash stops a deliberate edit anyway; the
strict decode is what keeps an edited cache harmless.
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union, get_args, get_origin, get_type_hints

from tfgpu_install.knowledge.model import (
    ArchRow,
    Defect,
    DriverRow,
    FloorRow,
    GpuRow,
    Knowledge,
    KnownFailure,
    MinorCompatRow,
    Policy,
    PtxasRow,
    Release,
)

FORMAT = "knowledge-json-v1"
_CLASSES = (Knowledge, Release, Defect, DriverRow, MinorCompatRow, GpuRow, Policy, ArchRow, PtxasRow, FloorRow,
            KnownFailure)
# The dataclasses' fields: a cache written for another shape of them is not used.
SHAPE = ",".join(f"{cls.__name__}.{f.name}" for cls in _CLASSES for f in fields(cls))


class _Doubt(Exception):
    """The cache does not hold what this version would write: rebuild it."""


def encode(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, Path):
        return str(value)
    return value


Decoder = Callable[[Any], Any]
_DECODERS: dict[Any, Decoder] = {}


def decode(kind: Any, data: Any) -> Any:
    """`data` as a value of type `kind` (a dataclass, tuple[X, ...], dict[str, X], Optional[X],
    str, int, bool, Path); _Doubt at the first thing that does not fit."""
    return _decoder(kind)(data)


def _decoder(kind: Any) -> Decoder:
    """One function per type, built once: the cached load must stay a few milliseconds."""
    if kind not in _DECODERS:
        _DECODERS[kind] = _build(kind)
    return _DECODERS[kind]


def _build(kind: Any) -> Decoder:
    origin = get_origin(kind)
    if origin is Union:
        inner = [a for a in get_args(kind) if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported type {kind}")
        some = _decoder(inner[0])
        return lambda data: None if data is None else some(data)
    if origin is tuple and get_args(kind)[0] is str:  # the commonest shape, checked in one pass
        return lambda data: tuple(data) if type(data) is list and all(type(v) is str for v in data) \
            else _doubt("expected a list of strings")
    if origin is tuple:
        item = _decoder(get_args(kind)[0])
        return lambda data: tuple([item(v) for v in _expect(data, list)])
    if origin is dict:
        value = _decoder(get_args(kind)[1])
        return lambda data: {k: value(v) for k, v in _expect(data, dict).items()}
    if kind in _CLASSES:
        return _build_class(kind)
    if kind is Path:
        return lambda data: Path(_expect(data, str))
    if kind in (bool, int, str):
        # type() and not isinstance(): bool is an int, and an int where a bool belongs is doubt too.
        return lambda data: data if type(data) is kind else _doubt(f"expected {kind.__name__}")
    raise TypeError(f"unsupported type {kind}")


def _build_class(cls: type) -> Decoder:
    hints = get_type_hints(cls)
    names = set(hints)
    parts: dict[str, Decoder] = {}

    def decode_class(data: Any) -> Any:
        # Every field, none unknown or missing (write() stores them all). The instance is
        # filled like pickle does (no __init__: these frozen dataclasses have no __post_init__),
        # which halves the load.
        if type(data) is not dict or data.keys() != names:
            raise _Doubt(f"not a {cls.__name__}: unknown or missing fields")
        obj: Any = object.__new__(cls)
        obj.__dict__.update({name: parts[name](v) for name, v in data.items()})
        return obj

    # Filled after registering: Knowledge refers to Release, which refers to Defect.
    _DECODERS[cls] = decode_class
    parts.update({name: _decoder(hint) for name, hint in hints.items()})
    return decode_class


def _expect(data: Any, kind: type) -> Any:
    return data if isinstance(data, kind) else _doubt(f"expected a {kind.__name__}")


def _doubt(why: str) -> Any:
    raise _Doubt(why)


def read(path: Path, directory: Path, root: Optional[Path] = None) -> Optional[Knowledge]:
    """The cached Knowledge for `directory`, or None when there is any doubt about the file;
    ENVIRONMENT (exit 6) when another user could have written it (tfgpu_install/guard/trust.py; root:
    the cache dir)."""
    from tfgpu_install.guard.trust import require

    require(path, root or path.parent, "the knowledge cache")
    try:
        raw = path.read_bytes()
        head, _, payload = raw.partition(b"\n")
        header = json.loads(head)
        if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("shape") != SHAPE:
            return None
        if header.get("size") != len(payload) or header.get("crc32") != zlib.crc32(payload):
            return None
        kn = decode(Knowledge, json.loads(payload))
    except (OSError, ValueError, RecursionError, _Doubt):
        return None
    return kn if isinstance(kn, Knowledge) and kn.directory == directory else None


def write(path: Path, kn: Knowledge) -> None:
    """Atomic (temp file + rename): a reader sees the old cache or the whole new one.
    A read-only or full cache dir only costs speed, so OSError is swallowed."""
    payload = json.dumps(encode(kn), separators=(",", ":"), sort_keys=True).encode()
    header = json.dumps({"format": FORMAT, "shape": SHAPE, "crc32": zlib.crc32(payload), "size": len(payload)})
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(header.encode() + b"\n" + payload)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass
