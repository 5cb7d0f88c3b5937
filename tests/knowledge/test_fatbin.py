"""knowledge/fatbin.py on shared objects nvcc built here for known architectures, and on damaged ones."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from support.fatbin_lib import build_gpu_lib, plain_lib

from tfgpu_install.knowledge.fatbin import MAGIC, FatbinError, read_fatbins, section


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("fatbin")
    return {
        "one": build_gpu_lib(d, ("sm_75", "sm_86", "sm_120"), ptx="compute_120"),
        "linked": build_gpu_lib(d, ("sm_75", "sm_86", "sm_120"), ptx="compute_120", nvcc_links=True),
        "sass-only": build_gpu_lib(d, ("sm_80", "sm_90")),
        "plain": plain_lib(d),
    }


def facts(path: Path):  # type: ignore[no-untyped-def]
    with path.open("rb") as fh:
        return read_fatbins(fh, path.stat().st_size)


def test_the_exact_lists_nvcc_was_asked_for(libs: dict[str, Path]) -> None:
    f = facts(libs["one"])
    assert f is not None and (f.containers, f.sass, f.ptx, f.uneven) == (1, ("7.5", "8.6", "12.0"), ("12.0",), False)
    f = facts(libs["sass-only"])
    assert f is not None and (f.sass, f.ptx) == (("8.0", "9.0"), ())


def test_fat_binaries_that_differ_give_what_every_one_carries(libs: dict[str, Path]) -> None:
    # nvcc's own link step adds a second fat binary without PTX: no kernel-wide PTX is claimed.
    f = facts(libs["linked"])
    assert f is not None and f.containers == 2 and f.uneven
    assert f.sass == ("7.5", "8.6", "12.0") and f.ptx == ()


def test_a_library_without_gpu_code_has_no_section(libs: dict[str, Path]) -> None:
    assert facts(libs["plain"]) is None


def _section_bounds(path: Path) -> tuple[int, int]:
    with path.open("rb") as fh:
        found = section(fh, path.stat().st_size)
    assert found is not None
    return found


@pytest.mark.parametrize("damage", ["truncated", "not-elf", "entry-overflow", "container-overflow", "garbage",
                                    "section-past-eof", "zeroed"])
def test_damaged_input_is_refused_or_read_within_bounds(damage: str, libs: dict[str, Path], tmp_path: Path) -> None:
    data = bytearray(libs["one"].read_bytes())
    off, size = _section_bounds(libs["one"])
    if damage == "truncated":
        data = data[: off + 40]
    elif damage == "not-elf":
        data[:4] = b"MZ\0\0"
    elif damage == "entry-overflow":  # the first entry's payload size points far past its fat binary
        struct.pack_into("<Q", data, off + 16 + 8, 1 << 60)
    elif damage == "container-overflow":
        struct.pack_into("<Q", data, off + 8, 1 << 40)
    elif damage == "garbage":
        data[off: off + 16] = b"\x01" * 16
    elif damage == "section-past-eof":  # its section header says it runs past the end of the file
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shnum, = struct.unpack_from("<H", data, 0x3C)
        row = next(i for i in range(shnum) if struct.unpack_from("<Q", data, shoff + i * 64 + 24)[0] == off)
        struct.pack_into("<Q", data, shoff + row * 64 + 32, len(data))
    elif damage == "zeroed":  # all padding: read to its end, nothing found, no loop
        data[off: off + size] = b"\0" * size
    bad = tmp_path / "bad.so"
    bad.write_bytes(bytes(data))
    if damage == "zeroed":
        f = facts(bad)
        assert f is not None and (f.containers, f.sass, f.ptx) == (0, (), ())
        return
    with pytest.raises(FatbinError):
        facts(bad)


def test_the_magic_is_nvcc_s(libs: dict[str, Path]) -> None:
    off, _ = _section_bounds(libs["one"])
    assert struct.unpack_from("<I", libs["one"].read_bytes(), off)[0] == MAGIC
