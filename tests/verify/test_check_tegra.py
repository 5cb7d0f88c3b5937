"""Issue 25 defect 9: a Jetson (Tegra SoC) has no PCI GPU, no /dev/nvidia0 and no NVML; layer 0 must
recognise it, and the host-identity module (facts/identity.py) that facts and doctor share says so too."""

from __future__ import annotations

from pathlib import Path

from tests.support.stublibs import layer, run_check
from tfgpu_install.context import Context
from tfgpu_install.facts import identity

RELEASE = ("# R36 (release), REVISION: 4.3, GCID: 38968081, BOARD: generic, EABI: aarch64, "
           "DATE: Wed Jan  8 01:49:37 UTC 2025\n")
COMPATIBLE = "nvidia,p3737-0000+p3701-0005\x00nvidia,p3701-0005\x00nvidia,tegra234\x00"


def _jetson(root: Path, release: bool = True) -> Path:
    (root / "proc/device-tree").mkdir(parents=True, exist_ok=True)
    (root / "proc/device-tree/compatible").write_text(COMPATIBLE)
    (root / "sys/bus/pci/devices").mkdir(parents=True, exist_ok=True)  # a PCIe bus with nothing NVIDIA on it
    if release:
        (root / "etc").mkdir(exist_ok=True)
        (root / "etc/nv_tegra_release").write_text(RELEASE)
    return root


def test_layer_0_recognises_a_jetson(tmp_path: Path) -> None:
    doc = run_check(["--root", str(_jetson(tmp_path)), "--layers", "hardware"])
    lay = layer(doc, "hardware")
    assert lay["status"] == "pass", lay
    assert lay["measured"]["tegra"] == "L4T R36.4.3; nvidia,tegra234" and "no NVML" in lay["summary"]


def test_the_device_tree_alone_is_enough(tmp_path: Path) -> None:
    lay = layer(run_check(["--root", str(_jetson(tmp_path, release=False)), "--layers", "hardware"]), "hardware")
    assert lay["status"] == "pass" and lay["measured"]["tegra"] == "nvidia,tegra234"


def test_a_machine_with_nothing_nvidia_still_fails_layer_0(tmp_path: Path) -> None:
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    assert layer(run_check(["--root", str(tmp_path), "--layers", "hardware"]), "hardware")["status"] == "fail"


def test_the_identity_module_sees_the_same_jetson(ctx: Context) -> None:
    _jetson(ctx.root)
    what, source = identity.tegra(ctx)
    assert what == "L4T R36.4.3; nvidia,tegra234"
    assert source == "/etc/nv_tegra_release, /proc/device-tree/compatible"
    assert identity.pci_gpus(ctx) == () and identity.is_wsl(ctx) is False
