"""Every row of NVIDIA's two CUDA GPU tables (https://developer.nvidia.com/cuda-gpus and
https://developer.nvidia.com/cuda-legacy-gpus), transcribed in data/nvidia_cuda_gpu_tables.yaml, resolves
through the probe's own name lookup to the compute capability the table prints; one test per family.
The newest parts are also found by their PCI device id (profiles/pci_ids.yaml, from pci.ids 2026.08.22)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from tfgpu_install.facts.probe import lookup_cc
from tfgpu_install.knowledge.gpu_names import gpu_by_name
from tfgpu_install.knowledge.load import load_knowledge
from tfgpu_install.knowledge.pci_ids import FILE_NAME, load_pci_table, lookup_pci, parse_pci_ids

K = load_knowledge()
TABLES = Path(__file__).parent / "data" / "nvidia_cuda_gpu_tables.yaml"


class Row(NamedTuple):
    table: str  # current | legacy
    cc: str
    column: str  # data_center | workstation_consumer | jetson
    name: str


def _rows() -> list[Row]:
    doc = yaml.safe_load(TABLES.read_text(encoding="utf-8"))
    return [Row(table, cc, column, name)
            for table, tab in doc["tables"].items()
            for cc, columns in tab["rows"].items()
            for column, names in columns.items()
            for name in names]


ROWS = _rows()

# Where NVIDIA's table contradicts the die pci.ids names for the part: gpus.yaml keeps the capability of the die
# (the one the same table gives that die's other parts), with the evidence in a comment next to the row.
ERRATA = {
    "Quadro M5000M": "5.2",  # table: 5.0; pci.ids 13f8 GM204GLM (GTX 980/970, Quadro M5000: 5.2)
    "Quadro M4000M": "5.2",  # table: 5.0; pci.ids 13f9 GM204GLM
    "Quadro M3000M": "5.2",  # table: 5.0; pci.ids 13fa GM204GLM
    "Quadro K2200M": "5.0",  # table: 3.0; pci.ids 13b3 GM107GLM (GTX 750 Ti, Quadro K2200: 5.0)
}
# Names nvidia-smi prints for parts of different capabilities: unknown by name, told apart by the PCI device id.
AMBIGUOUS = {
    "GeForce GT 730": {"0f02": "2.1", "0fc9": "3.0", "1287": "3.5"},  # GF108, GK107, GK208B
}

ARCHITECTURES = {
    "tesla-architecture": ("1.",), "fermi": ("2.",), "kepler": ("3.",), "maxwell": ("5.",), "pascal": ("6.",),
    "volta": ("7.0", "7.2"), "turing": ("7.5",), "ampere": ("8.0", "8.6", "8.7"), "ada": ("8.9",),
    "hopper": ("9.",), "blackwell": ("10.", "11.", "12."),
}
_LAPTOP = re.compile(r"\d+MX?\b|Max-Q")


def _family(family: str) -> list[Row]:
    if family == "jetson":
        return [r for r in ROWS if r.column == "jetson"]
    if family == "data-center":
        return [r for r in ROWS if r.column == "data_center"]
    if family == "laptop-max-q":
        return [r for r in ROWS if _LAPTOP.search(r.name)]
    return [r for r in ROWS if r.cc.startswith(ARCHITECTURES[family])]


FAMILIES = sorted(ARCHITECTURES) + ["jetson", "data-center", "laptop-max-q"]


def test_the_transcription_has_every_row_once() -> None:
    names = [r.name.lower() for r in ROWS]
    assert len(ROWS) == 439  # 84 rows in the current table, 355 in the legacy one (2026-12-04)
    assert sum(r.table == "current" for r in ROWS) == 84
    assert len(set(names)) == len(names)
    assert {r.column for r in ROWS} == {"data_center", "workstation_consumer", "jetson"}
    # every row falls in an architecture family, so the tests below cover the whole table
    assert sum(len(_family(f)) for f in ARCHITECTURES) == len(ROWS)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_row_of_the_family_resolves_to_the_capability_nvidia_prints(family: str) -> None:
    rows = _family(family)
    assert len(rows) >= 3, family
    wrong = []
    for r in rows:
        if r.name in AMBIGUOUS:
            continue
        cc, source = lookup_cc(K, r.name)
        want = ERRATA.get(r.name, r.cc)
        if cc != want or source != "table:gpus.yaml":
            wrong.append((r.name, r.cc, cc, source))
            continue
        row = gpu_by_name(K, r.name)
        assert row is not None and row.source.startswith("https://developer.nvidia.com/cuda-"), (r.name, row)
    assert wrong == []


@pytest.mark.parametrize("name", sorted(ERRATA))
def test_errata_are_rows_of_the_table_with_another_capability(name: str) -> None:
    printed = [r for r in ROWS if r.name == name]
    assert len(printed) == 1 and printed[0].cc != ERRATA[name]


def test_a_name_printed_for_several_dies_is_unknown_by_name_and_known_by_pci_id() -> None:
    table = load_pci_table(K.directory / FILE_NAME)
    for name, devices in AMBIGUOUS.items():
        assert any(r.name == name for r in ROWS)
        assert lookup_cc(K, name) == (None, None)
        for device_id, cc in devices.items():
            hit = lookup_pci(table, device_id)
            assert hit is not None and hit.compute_capability == cc, (device_id, hit)
            assert hit.name == name


@pytest.mark.parametrize("device_id,name,cc", [
    ("2901", "B200", "10.0"), ("2941", "HGX GB200", "10.0"), ("3182", "B300 SXM6 AC", "10.3"),
    ("31c2", "GB300", "10.3"), ("2e12", "GB10", "12.1"), ("2b00", "Jetson AGX Thor", "11.0"),
    ("2bb5", "RTX PRO 6000 Blackwell Server Edition", "12.0"),
    ("2c3a", "RTX PRO 4500 Blackwell Server Edition", "12.0"),
    ("2b85", "GeForce RTX 5090", "12.0"), ("2d83", "GeForce RTX 5050", "12.0"),
    ("2c18", "GeForce RTX 5090 Max-Q", "12.0"), ("2717", "GeForce RTX 4090 Laptop GPU", "8.9"),
    ("2329", "H20", "9.0"), ("26b7", "L20", "8.9"), ("20f5", "A800 80GB PCIe", "8.0"),
])
def test_the_newest_parts_are_known_by_pci_device_id(device_id: str, name: str, cc: str) -> None:
    hit = lookup_pci(load_pci_table(K.directory / FILE_NAME), device_id)
    assert hit is not None and (hit.name, hit.compute_capability) == (name, cc)


def test_pci_ids_lines_that_name_a_board_code_keep_their_names() -> None:
    text = ("10de  NVIDIA Corporation\n"
            "\t2717  AD103M / GN21-X11 [GeForce RTX 4090 Laptop GPU]\n"
            "\t2c18  GB203M / GN22 [GeForce RTX 5090 Max-Q / Mobile]\n"
            "\t2684  AD102 [GeForce RTX 4090]\n")
    got = {d.device_id: (d.chip, d.names) for d in parse_pci_ids(text)}
    assert got == {
        "2717": ("AD103M", ("GeForce RTX 4090 Laptop GPU",)),
        "2c18": ("GB203M", ("GeForce RTX 5090 Max-Q", "GeForce RTX 5090 Mobile")),
        "2684": ("AD102", ("GeForce RTX 4090",)),
    }
