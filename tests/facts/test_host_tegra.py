"""Jetson (Tegra) detection from the files L4T writes, planted under the context's root prefix."""

from __future__ import annotations

from tfgpu_install.context import Context
from tfgpu_install.facts.host import gather_host, gather_tegra, parse_device_tree_model, parse_nv_tegra_release

# As L4T writes them (a JetPack 5.1.2 / L4T 35.4.1 board).
NV_TEGRA_RELEASE = ("# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, "
                    "DATE: Tue Aug  1 19:57:35 UTC 2023\n")
MODEL = "NVIDIA Jetson AGX Orin Developer Kit\x00"


def test_parsers() -> None:
    assert parse_nv_tegra_release(NV_TEGRA_RELEASE) == "L4T R35.4.1"
    assert parse_nv_tegra_release("garbage") is None
    assert parse_device_tree_model(MODEL) == "NVIDIA Jetson AGX Orin Developer Kit"
    assert parse_device_tree_model("Raspberry Pi 4 Model B Rev 1.4\x00") is None


def test_a_jetson_is_detected_through_the_root_prefix(ctx: Context) -> None:
    assert gather_tegra(ctx) == (None, None)
    (ctx.root / "etc").mkdir(parents=True, exist_ok=True)
    (ctx.root / "etc" / "nv_tegra_release").write_text(NV_TEGRA_RELEASE)
    dt = ctx.root / "proc" / "device-tree"
    dt.mkdir(parents=True)
    (dt / "model").write_text(MODEL)
    host, _ = gather_host(ctx, runner_glibc=False)
    assert host.tegra == "L4T R35.4.1; NVIDIA Jetson AGX Orin Developer Kit"
    assert host.tegra_source == "/etc/nv_tegra_release, /proc/device-tree/model"
