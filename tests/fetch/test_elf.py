"""The pure-Python ELF reader against gcc-built libraries and hand-made headers."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from tests.support.promised import absent
from tests.support.wheelhouse import build_shared_lib
from tfgpu_install.fetch.elf import read_elf, read_soname, soname_major

needs_gcc = pytest.mark.skipif(absent("gcc"), reason="needs gcc")


@needs_gcc
def test_soname_of_gcc_built_library(tmp_path: Path) -> None:
    lib = build_shared_lib(tmp_path / "libcudnn.so.9.1.0", "libcudnn.so.9")
    assert read_soname(lib) == "libcudnn.so.9"
    info = read_elf(lib)
    assert info is not None and info.elf_class == 64 and info.type == 3


@needs_gcc
def test_library_without_soname_and_executable(tmp_path: Path) -> None:
    src = tmp_path / "x.c"
    src.write_text("int f(void){return 1;}\nint main(void){return f();}\n")
    lib = tmp_path / "libplain.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    exe = tmp_path / "prog"
    subprocess.run(["gcc", "-o", str(exe), str(src)], check=True)
    assert read_soname(lib) is None
    info = read_elf(exe)
    assert info is not None and info.soname is None and "libc.so.6" in info.needed


@needs_gcc
def test_stripped_library_still_reads(tmp_path: Path) -> None:
    lib = build_shared_lib(tmp_path / "libcudart.so.12", "libcudart.so.12")
    if shutil.which("strip"):
        subprocess.run(["strip", "--strip-all", str(lib)], check=True)
    assert read_soname(lib) == "libcudart.so.12"


@needs_gcc
def test_truncated_and_non_elf_files_give_none(tmp_path: Path) -> None:
    lib = build_shared_lib(tmp_path / "libcublas.so.12", "libcublas.so.12")
    cut = tmp_path / "cut.so"
    cut.write_bytes(lib.read_bytes()[:200])  # header intact, dynamic section gone
    assert read_soname(cut) is None
    text = tmp_path / "libfoo.so"
    text.write_text("INPUT(libfoo.so.1)\n")  # a linker script, as some distros ship
    assert read_soname(text) is None
    assert read_soname(tmp_path / "missing.so") is None
    assert read_elf(tmp_path) is None  # a directory


def _make_elf(bits: int, little: bool, soname: str, vaddr_base: int = 0x1000) -> bytes:
    """A minimal shared object: ELF header, PT_LOAD + PT_DYNAMIC, dynamic array, string table.
    The string table sits at a virtual address different from its file offset, as in real
    libraries, so the reader must map it through PT_LOAD."""
    e = "<" if little else ">"
    ehsize, phentsize = (64, 56) if bits == 64 else (52, 32)
    phoff = ehsize
    dyn_off = phoff + 2 * phentsize
    entsize = 16 if bits == 64 else 8
    dyn_count = 4  # NEEDED, STRTAB, SONAME, NULL
    str_off = dyn_off + dyn_count * entsize
    strtab = b"\0libc.so.6\0" + soname.encode() + b"\0"
    needed_idx, soname_idx = 1, 1 + len("libc.so.6") + 1
    total = str_off + len(strtab)
    ident = b"\x7fELF" + bytes([2 if bits == 64 else 1, 1 if little else 2, 1]) + b"\0" * 9
    if bits == 64:
        hdr = struct.pack(e + "HHIQQQIHHHHHH", 3, 62, 1, 0, phoff, 0, 0, ehsize, phentsize, 2, 64, 0, 0)
        load = struct.pack(e + "IIQQQQQQ", 1, 5, 0, vaddr_base, vaddr_base, total, total, 0x1000)
        dyn = struct.pack(e + "IIQQQQQQ", 2, 6, dyn_off, vaddr_base + dyn_off, 0, dyn_count * entsize, 0, 8)
        fmt = e + "qQ"
    else:
        hdr = struct.pack(e + "HHIIIIIHHHHHH", 3, 3, 1, 0, phoff, 0, 0, ehsize, phentsize, 2, 40, 0, 0)
        load = struct.pack(e + "IIIIIIII", 1, 0, vaddr_base, vaddr_base, total, total, 5, 0x1000)
        dyn = struct.pack(e + "IIIIIIII", 2, dyn_off, vaddr_base + dyn_off, 0, dyn_count * entsize, 0, 6, 4)
        fmt = e + "iI"
    dynamic = (
        struct.pack(fmt, 1, needed_idx)
        + struct.pack(fmt, 5, vaddr_base + str_off)
        + struct.pack(fmt, 14, soname_idx)
        + struct.pack(fmt, 0, 0)
    )
    blob = ident + hdr + load + dyn + dynamic + strtab
    assert len(blob) == total
    return blob


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("little", [True, False])
def test_both_classes_and_byte_orders(tmp_path: Path, bits: int, little: bool) -> None:
    path = tmp_path / "lib.so"
    path.write_bytes(_make_elf(bits, little, "libcudnn.so.8"))
    info = read_elf(path)
    assert info is not None
    assert ((info.elf_class, info.little_endian, info.soname, info.needed)
            == (bits, little, "libcudnn.so.8", ("libc.so.6",)))


def test_soname_major() -> None:
    assert soname_major("libcudnn.so.9") == "9"
    assert soname_major("libcudart.so.11.0") == "11"
    assert soname_major("libnvrtc-builtins.so.12.3") == "12"
    assert soname_major("libfoo.so") is None


@needs_gcc
def test_runpath_and_rpath(tmp_path: Path) -> None:
    src = tmp_path / "x.c"
    src.write_text("int f(void){return 1;}\n")
    new = tmp_path / "libnew.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(new), str(src), "-Wl,--enable-new-dtags",
                    "-Wl,-rpath,$ORIGIN/../nvidia/cudnn/lib:$ORIGIN/../nvidia/cublas/lib"], check=True)
    old = tmp_path / "libold.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(old), str(src), "-Wl,--disable-new-dtags",
                    "-Wl,-rpath,/opt/cuda/lib64"], check=True)
    new_elf = read_elf(new)
    assert new_elf is not None and new_elf.runpath == ("$ORIGIN/../nvidia/cudnn/lib", "$ORIGIN/../nvidia/cublas/lib")
    assert read_elf(old).runpath == ("/opt/cuda/lib64",)  # type: ignore[union-attr]
    assert read_elf(build_shared_lib(tmp_path / "libz.so.1", "libz.so.1")).runpath == ()  # type: ignore[union-attr]
