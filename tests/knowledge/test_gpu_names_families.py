"""Names as nvidia-smi prints them, one family of NVIDIA's CUDA GPU tables at a time
(https://developer.nvidia.com/cuda-gpus and https://developer.nvidia.com/cuda-legacy-gpus), plus vGPU
profiles, Jetson, laptop/Max-Q spellings, and GPUs that are not NVIDIA's."""

from __future__ import annotations

import pytest

from tfgpu_install.knowledge.gpu_names import foreign_gpu, gpu_by_name, vgpu_board
from tfgpu_install.knowledge.load import load_knowledge

K = load_knowledge()

FAMILIES: dict[str, list[tuple[str, str]]] = {
    "kepler": [("Tesla K80", "3.7"), ("GeForce GTX 780 Ti", "3.5"), ("GRID K520", "3.0")],
    "maxwell": [("Tesla M60", "5.2"), ("GeForce GTX 750 Ti", "5.0"), ("Jetson Nano", "5.3")],
    "pascal": [("Tesla P100-PCIE-16GB", "6.0"), ("GeForce GTX 1080 Ti", "6.1"), ("Jetson TX2", "6.2")],
    "volta": [("Tesla V100-SXM2-32GB", "7.0"), ("Xavier", "7.2"), ("Jetson AGX Xavier", "7.2")],
    "turing": [("Tesla T4", "7.5"), ("NVIDIA GeForce RTX 2080 with Max-Q Design", "7.5"), ("Quadro RTX 6000", "7.5")],
    "ampere": [("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA A800 80GB PCIe", "8.0"), ("NVIDIA A10", "8.6"),
               ("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6"), ("Jetson AGX Orin", "8.7"), ("Orin (nvgpu)", "8.7")],
    "ada": [("NVIDIA L40S", "8.9"), ("NVIDIA L20", "8.9"), ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"),
            ("NVIDIA RTX 2000 Ada Generation Laptop GPU", "8.9")],
    "hopper": [("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA H20", "9.0"), ("NVIDIA GH200 480GB", "9.0"),
               ("NVIDIA H200 NVL", "9.0")],
    "blackwell-datacenter": [("NVIDIA B200", "10.0"), ("NVIDIA GB200", "10.0"), ("NVIDIA B300 SXM6 AC", "10.3"),
                             ("NVIDIA GB300", "10.3")],
    "jetson-thor": [("NVIDIA Thor", "11.0"), ("Jetson AGX Thor Developer Kit", "11.0"), ("Jetson T5000", "11.0")],
    "blackwell-geforce-pro": [("NVIDIA GeForce RTX 5090", "12.0"),
                              ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "12.0"),
                              ("NVIDIA RTX PRO 2000 Blackwell Generation Laptop GPU", "12.0")],
    "gb10": [("NVIDIA GB10", "12.1")],
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_family_names_resolve_to_their_capability(family: str) -> None:
    for name, cc in FAMILIES[family]:
        row = gpu_by_name(K, name)
        assert row is not None, name
        assert row.compute_capability == cc, name
        assert row.source.startswith("https://developer.nvidia.com/cuda-"), row.source


@pytest.mark.parametrize("profile,board,cc", [
    # TensorFlow itself printed "name: GRID T4-4Q computeCapability: 7.5" in a vGPU VM:
    # https://github.com/tensorflow/tensorflow/issues/48558
    ("GRID T4-4Q", "T4", "7.5"),
    ("GRID A100D-40C", "A100D", "8.0"), ("GRID T4-16Q", "T4", "7.5"), ("GRID V100DX-32Q", "V100DX", "7.0"),
    ("GRID RTX6000-24Q", "RTX6000", "7.5"), ("NVIDIA L40S-48Q", "L40S", "8.9"), ("NVIDIA H100XM-80C", "H100XM", "9.0"),
    ("GRID P40-24Q", "P40", "6.1"), ("GRID M60-8Q", "M60", "5.2"),
])
def test_vgpu_profiles_resolve_to_the_physical_gpu(profile: str, board: str, cc: str) -> None:
    assert vgpu_board(profile) == board
    row = gpu_by_name(K, profile)
    assert row is not None and row.compute_capability == cc


@pytest.mark.parametrize("name", ["NVIDIA Foo 9000", "GRID Z99-8Q", "NVIDIA GeForce RTX 9090", "Radeon Pro W7900"])
def test_unknown_names_get_no_capability(name: str) -> None:
    assert gpu_by_name(K, name) is None


def test_regular_names_are_not_read_as_vgpu_profiles() -> None:
    for name in ("NVIDIA A100-SXM4-40GB", "Tesla T4", "NVIDIA T1000 8GB", "GRID K520", "NVIDIA RTX A2000 12GB"):
        assert vgpu_board(name) is None, name


@pytest.mark.parametrize("name,vendor", [
    ("AMD Radeon RX 7900 XTX", "AMD"), ("AMD Instinct MI300X", "AMD"), ("Intel(R) Arc(TM) A770 Graphics", "Intel"),
    ("Intel Data Center GPU Max 1550", "Intel"), ("Apple M2 Max", "Apple"),
])
def test_other_vendors_are_named_with_the_honest_remedy(name: str, vendor: str) -> None:
    found = foreign_gpu(name)
    assert found is not None and found[0] == vendor
    assert "NVIDIA GPUs only" in found[1] or "NVIDIA GPUs" in found[1]
    assert gpu_by_name(K, name) is None
    assert foreign_gpu("NVIDIA GeForce RTX 4090") is None
