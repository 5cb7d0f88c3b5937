"""A small, pure-Python ELF reader: just enough to read a shared library's DT_SONAME.

(Owned by the env/packages work; the cuDNN steps use `read_soname`. Keep its contract:
`read_soname(path) -> Optional[str]`, None for anything that is not a readable ELF with a soname.)

Why not `objdump`/`readelf`: binutils is often missing on the machines we provision,
and spawning a tool per library would make `check()` slow. The soname is what the
dynamic loader matches (TF dlopens "libcudnn.so.9", not a file name), so it is the
honest test that a library is the one TF will load.

How: the ELF header gives the program headers; PT_DYNAMIC gives the dynamic array;
DT_STRTAB (a virtual address, mapped to a file offset through the PT_LOAD segments)
and DT_SONAME (an offset into that table) give the name. Section headers are not
needed, so stripped libraries work too. Handles 32/64-bit and both byte orders.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Optional, Union

ELF_MAGIC = b"\x7fELF"
PT_LOAD = 1
PT_DYNAMIC = 2
DT_NULL = 0
DT_NEEDED = 1
DT_STRTAB = 5
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
ET_DYN = 3

_MAX_DYNAMIC = 1 << 20  # bytes of dynamic array we are willing to read (real ones: a few KiB)


@dataclass(frozen=True)
class ElfInfo:
    elf_class: int  # 32 or 64
    little_endian: bool
    type: int  # e_type: 2 executable, 3 shared object
    machine: int  # e_machine: 62 x86-64, 183 aarch64
    soname: Optional[str]
    needed: tuple[str, ...]  # DT_NEEDED entries, in order
    runpath: tuple[str, ...] = ()  # DT_RUNPATH (or the older DT_RPATH) entries, unexpanded ("$ORIGIN/..")


@dataclass(frozen=True)
class _Segment:
    type: int
    offset: int
    vaddr: int
    filesz: int


def _read_at(fh: BinaryIO, offset: int, size: int) -> bytes:
    fh.seek(offset)
    data = fh.read(size)
    if len(data) != size:
        raise ValueError("truncated ELF file")
    return data


def _cstring(fh: BinaryIO, offset: int, limit: int = 4096) -> str:
    fh.seek(offset)
    raw = fh.read(limit)
    end = raw.find(b"\0")
    if end < 0:
        raise ValueError("unterminated string in ELF string table")
    return raw[:end].decode("utf-8", "replace")


def _parse(fh: BinaryIO) -> ElfInfo:
    ident = fh.read(16)
    if len(ident) < 16 or ident[:4] != ELF_MAGIC:
        raise ValueError("not an ELF file")
    cls = {1: 32, 2: 64}.get(ident[4])
    if cls is None or ident[5] not in (1, 2):
        raise ValueError("unknown ELF class or byte order")
    end = "<" if ident[5] == 1 else ">"
    if cls == 64:
        hdr = struct.unpack(end + "HHIQQQIHHHHHH", _read_at(fh, 16, 48))
    else:
        hdr = struct.unpack(end + "HHIIIIIHHHHHH", _read_at(fh, 16, 36))
    e_type, e_machine, _ver, _entry, e_phoff, _shoff, _flags, _ehsize, e_phentsize, e_phnum = hdr[:10]

    segments: list[_Segment] = []
    for i in range(e_phnum):
        raw = _read_at(fh, e_phoff + i * e_phentsize, e_phentsize)
        if cls == 64:
            p_type, _pflags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack(end + "IIQQQQ", raw[:40])
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack(end + "IIIII", raw[:20])
        segments.append(_Segment(p_type, p_offset, p_vaddr, p_filesz))

    dyn = next((s for s in segments if s.type == PT_DYNAMIC), None)
    if dyn is None:  # a static executable or an object file: no dynamic section, no soname
        return ElfInfo(cls, end == "<", e_type, e_machine, None, ())

    entry_size = 16 if cls == 64 else 8
    fmt = end + ("qQ" if cls == 64 else "iI")
    blob = _read_at(fh, dyn.offset, min(dyn.filesz, _MAX_DYNAMIC))
    strtab_addr: Optional[int] = None
    soname_off: Optional[int] = None
    needed_offs: list[int] = []
    runpath_off: Optional[int] = None
    rpath_off: Optional[int] = None
    for pos in range(0, len(blob) - entry_size + 1, entry_size):
        tag, val = struct.unpack(fmt, blob[pos : pos + entry_size])
        if tag == DT_NULL:
            break
        if tag == DT_STRTAB:
            strtab_addr = val
        elif tag == DT_SONAME:
            soname_off = val
        elif tag == DT_NEEDED:
            needed_offs.append(val)
        elif tag == DT_RUNPATH:
            runpath_off = val
        elif tag == DT_RPATH:
            rpath_off = val
    if strtab_addr is None:
        return ElfInfo(cls, end == "<", e_type, e_machine, None, ())

    strtab = _vaddr_to_offset(segments, strtab_addr)
    soname = _cstring(fh, strtab + soname_off) if soname_off is not None else None
    needed = tuple(_cstring(fh, strtab + off) for off in needed_offs)
    # The loader ignores DT_RPATH when DT_RUNPATH is present.
    path_off = runpath_off if runpath_off is not None else rpath_off
    runpath = tuple(p for p in _cstring(fh, strtab + path_off, 1 << 16).split(":") if p) if path_off is not None else ()
    return ElfInfo(cls, end == "<", e_type, e_machine, soname, needed, runpath)


def _vaddr_to_offset(segments: list[_Segment], addr: int) -> int:
    for s in segments:
        if s.type == PT_LOAD and s.vaddr <= addr < s.vaddr + s.filesz:
            return addr - s.vaddr + s.offset
    raise ValueError("string table outside every PT_LOAD segment")


def read_elf(path: Union[str, Path]) -> Optional[ElfInfo]:
    """The dynamic-linking facts of an ELF file, or None when it is not a readable ELF
    (not ELF at all, truncated, corrupt, unreadable)."""
    try:
        with open(path, "rb") as fh:
            return _parse(fh)
    except (OSError, ValueError, struct.error):
        return None


def read_soname(path: Union[str, Path]) -> Optional[str]:
    """DT_SONAME of a shared library ("libcudnn.so.9"), or None (not ELF, no soname, unreadable)."""
    info = read_elf(path)
    return info.soname if info else None


def soname_major(soname: str) -> Optional[str]:
    """The version after ".so." in a soname: "libcudnn.so.9" -> "9", "libcudart.so.11.0" -> "11".
    None when the soname carries no version ("libfoo.so")."""
    _, sep, ver = soname.partition(".so.")
    if not sep or not ver:
        return None
    return ver.split(".")[0]
