"""The GPU code a shared library carries, read from the headers of its CUDA fat binaries (pure parsing of
a seekable file; knowledge/wheelfacts.py hands it a library inside a wheel read by HTTP range requests).

Where it is: the ELF section `.nv_fatbin` (found by name through the section headers) holds one fat binary
per compilation unit, back to back (8-byte aligned). Each starts with a 16-byte header
    u32 magic 0xBA55ED50, u16 version, u16 header size, u64 size of the entries that follow
and each entry with its own header
    u16 kind (1: PTX, 2: ELF = SASS), u16, u32 header size, u64 payload size, ..., u32 arch at +28 (86 = sm_86)
Only these headers are read; payloads are skipped (seeked over). `nvcc -gencode arch=compute_75,code=sm_75`
gives one kind-2 entry for 75; `code=compute_120` one kind-1 entry for 120.

A GPU runs every kernel of the library only when every fat binary has code for it, so the lists are what
every fat binary carries (they are alike in TensorFlow's libraries; `uneven` says when they were not).
Hostile input is bounded: section and entry counts, header sizes, and every offset checked against the
sizes; a malformed file gives FatbinError, never a loop or an unbounded read.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO, Optional

MAGIC = 0xBA55ED50
SECTION = ".nv_fatbin"
KIND_PTX, KIND_SASS = 1, 2
MAX_SECTIONS = 1 << 16
MAX_CONTAINERS = 1 << 16
MAX_ENTRIES = 512  # per fat binary: one per architecture and kind (TensorFlow's have 6)
MAX_STRTAB = 1 << 20


class FatbinError(Exception):
    """Not an ELF file this reader understands, or a fat binary section that does not parse."""


@dataclass(frozen=True)
class FatbinFacts:
    containers: int  # fat binaries read
    sass: tuple[str, ...]  # compute capabilities with SASS in every one ("7.5", "8.6", "12.0")
    ptx: tuple[str, ...]  # compute capabilities with PTX in every one
    uneven: bool = False  # some fat binaries carry code for other architectures than the rest


def _read(fh: BinaryIO, offset: int, size: int) -> bytes:
    fh.seek(offset)
    data = fh.read(size)
    if len(data) != size:
        raise FatbinError(f"truncated: wanted {size} bytes at {offset}, got {len(data)}")
    return data


def section(fh: BinaryIO, file_size: int, name: str = SECTION) -> Optional[tuple[int, int]]:
    """(offset, size) of the named section of a 64-bit little-endian ELF file, or None when it has none."""
    head = _read(fh, 0, 64)
    if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        raise FatbinError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    if shnum == 0 or shnum > MAX_SECTIONS or shentsize != 64 or shstrndx >= shnum:
        raise FatbinError(f"section headers not understood ({shnum} of {shentsize} bytes)")
    if shoff + shnum * 64 > file_size:
        raise FatbinError("section headers beyond the end of the file")
    table = _read(fh, shoff, shnum * 64)
    rows = [struct.unpack_from("<IIQQQQ", table, i * 64) for i in range(shnum)]  # name, type, flags, addr, off, size
    str_off, str_size = rows[shstrndx][4], rows[shstrndx][5]
    if str_size > MAX_STRTAB or str_off + str_size > file_size:
        raise FatbinError("section names table out of bounds")
    names = _read(fh, str_off, str_size)
    want = name.encode()
    for name_off, kind, _flags, _addr, off, size in rows:
        end = names.find(b"\0", name_off)
        if name_off < len(names) and names[name_off:end if end >= 0 else None] == want:
            if kind == 8:  # SHT_NOBITS: nothing in the file
                return None
            if off + size > file_size:
                raise FatbinError(f"{name} lies beyond the end of the file")
            return off, size
    return None


def _cc(arch: int) -> str:
    return f"{arch // 10}.{arch % 10}"


def _entries(fh: BinaryIO, start: int, end: int) -> tuple[frozenset[int], frozenset[int]]:
    """The SASS and PTX architectures of one fat binary's entries in [start, end)."""
    sass: set[int] = set()
    ptx: set[int] = set()
    pos = start
    for _ in range(MAX_ENTRIES):
        if pos >= end:
            return frozenset(sass), frozenset(ptx)
        if pos + 32 > end:
            raise FatbinError(f"an entry header crosses its fat binary's end at {pos}")
        head = _read(fh, pos, 32)
        kind, _ver, hsize, psize = struct.unpack_from("<HHIQ", head, 0)
        arch, = struct.unpack_from("<I", head, 28)
        if not 32 <= hsize <= 4096 or pos + hsize + psize > end:
            raise FatbinError(f"an entry at {pos} does not fit its fat binary")
        if kind == KIND_SASS:
            sass.add(arch)
        elif kind == KIND_PTX:
            ptx.add(arch)
        pos += hsize + psize
    raise FatbinError(f"more than {MAX_ENTRIES} entries in one fat binary")


def read_fatbins(fh: BinaryIO, file_size: int) -> Optional[FatbinFacts]:
    """What the file's `.nv_fatbin` section carries, or None when it has no such section (no GPU code)."""
    found = section(fh, file_size)
    if found is None:
        return None
    off, size = found
    end = off + size
    pos = off
    kinds: list[tuple[frozenset[int], frozenset[int]]] = []
    while pos + 16 <= end:
        if len(kinds) >= MAX_CONTAINERS:
            raise FatbinError(f"more than {MAX_CONTAINERS} fat binaries")
        magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", _read(fh, pos, 16))
        if magic != MAGIC:
            if _read(fh, pos, 8) == b"\0" * 8:  # alignment padding between fat binaries
                pos += 8
                continue
            raise FatbinError(f"no fat binary header at {pos - off} in {SECTION}")
        if hsize < 16 or pos + hsize + fsize > end:
            raise FatbinError(f"the fat binary at {pos - off} does not fit {SECTION}")
        kinds.append(_entries(fh, pos + hsize, pos + hsize + fsize))
        pos += hsize + fsize
    if not kinds:
        return FatbinFacts(0, (), ())
    every_sass = frozenset.intersection(*(s for s, _ in kinds))
    every_ptx = frozenset.intersection(*(p for _, p in kinds))
    uneven = any(k != kinds[0] for k in kinds)
    return FatbinFacts(len(kinds), tuple(_cc(a) for a in sorted(every_sass)), tuple(_cc(a) for a in sorted(every_ptx)),
                       uneven)
