"""What kind of machine this is: WSL2, a container, an NVIDIA Jetson (Tegra SoC), NVIDIA GPUs on the
PCI bus. One home for these detections: facts/host.py, facts/gpudetect.py and doctor all ask here.

Files are read through ctx.sys_path (a root prefix a test can plant); pure parsers beside them.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional

from tfgpu_install.context import Context
from tfgpu_install.facts import gpu as smi

WSL_LIB = "/usr/lib/wsl/lib"
# NVIDIA display/3D controllers: VGA 0x0300, 3D 0x0302 (data-centre GPUs), display 0x0380.
GPU_CLASSES = ("0x0300", "0x0302", "0x0380")


def _read(ctx: Context, path: str) -> Optional[str]:
    try:
        return ctx.sys_path(path).read_text(errors="replace")
    except OSError:
        return None


# ---- WSL2 ------------------------------------------------------------------------------------------
def is_wsl(ctx: Context) -> bool:
    """WSL2: Microsoft's kernel (/proc/version) or its GPU library dir."""
    return "microsoft" in (_read(ctx, "/proc/version") or "").lower() or ctx.sys_path(WSL_LIB).is_dir()


# ---- containers ------------------------------------------------------------------------------------
def container_from(dockerenv: bool, containerenv: bool, cgroup: str, environ: Mapping[str, str]) -> Optional[str]:
    """Which container runtime, from its markers. Pure."""
    if environ.get("KUBERNETES_SERVICE_HOST") or "kubepods" in cgroup:
        return "kubernetes"
    if containerenv or environ.get("container") == "podman":
        return "podman"
    if dockerenv or re.search(r"/docker[/-]", cgroup):
        return "docker"
    if "/lxc/" in cgroup or environ.get("container") == "lxc":
        return "lxc"
    if environ.get("container"):
        return environ["container"]
    return None


def container(ctx: Context) -> Optional[str]:
    return container_from(ctx.sys_path("/.dockerenv").exists(), ctx.sys_path("/run/.containerenv").exists(),
                          _read(ctx, "/proc/1/cgroup") or "", ctx.environ)


# ---- Jetson (Tegra) --------------------------------------------------------------------------------
def parse_nv_tegra_release(text: str) -> Optional[str]:
    """'# R35 (release), REVISION: 4.1, GCID: ...' -> 'L4T R35.4.1' (the Jetson Linux release)."""
    m = re.search(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)", text)
    return f"L4T R{m.group(1)}.{m.group(2)}" if m else None


def parse_device_tree_model(text: str) -> Optional[str]:
    """/proc/device-tree/model (NUL-terminated) -> the board name when it is a Jetson, else None."""
    model = text.replace("\x00", "").strip()
    return model if "jetson" in model.lower() else None


def parse_device_tree_compatible(text: str) -> Optional[str]:
    """/proc/device-tree/compatible (NUL-separated) -> 'nvidia,tegra234' when the SoC is a Tegra."""
    return next((c for c in text.split("\x00") if c.strip().startswith("nvidia,tegra")), None)


def tegra(ctx: Context) -> tuple[Optional[str], Optional[str]]:
    """(what, source) for an NVIDIA Jetson (Tegra SoC: its GPU is nvgpu, on no PCI bus, with no
    /dev/nvidia0 and no NVML), from files under the context's root prefix."""
    found = [(parse_nv_tegra_release(_read(ctx, "/etc/nv_tegra_release") or ""), "/etc/nv_tegra_release"),
             (parse_device_tree_model(_read(ctx, "/proc/device-tree/model") or ""), "/proc/device-tree/model"),
             (parse_device_tree_compatible(_read(ctx, "/proc/device-tree/compatible") or ""),
              "/proc/device-tree/compatible")]
    found = [(v, s) for v, s in found if v]
    if not found:
        return None, None
    return "; ".join(v for v, _ in found if v), ", ".join(s for _, s in found)


# ---- the PCI bus -------------------------------------------------------------------------------------
# Display-device vendors by PCI id, for saying what a machine without an NVIDIA GPU has instead.
OTHER_VENDORS = {"0x1002": "AMD", "0x8086": "Intel", "0x1a03": "ASPEED", "0x102b": "Matrox", "0x1414": "Microsoft",
                 "0x1234": "QEMU", "0x15ad": "VMware", "0x1af4": "virtio"}


def other_display_devices(ctx: Context) -> tuple[str, ...]:
    """Display devices of other vendors in sysfs: "AMD (1002:73bf) at 0000:03:00.0" (vendor ids by PCI-SIG)."""
    out = []
    try:
        devices = sorted(p.name for p in ctx.sys_path("/sys/bus/pci/devices").iterdir())
    except OSError:
        return ()
    for name in devices[:4096]:
        base = f"/sys/bus/pci/devices/{name}"
        vendor = (_read(ctx, f"{base}/vendor") or "").strip().lower()
        cls = (_read(ctx, f"{base}/class") or "").strip().lower()
        if vendor and vendor != "0x10de" and cls[:6] in GPU_CLASSES and re.fullmatch(r"0x[0-9a-f]{4}", vendor):
            dev = (_read(ctx, f"{base}/device") or "").strip().lower()
            ids = f"{vendor[2:]}:{dev[2:]}" if re.fullmatch(r"0x[0-9a-f]{4}", dev) else vendor[2:]
            out.append(f"{OTHER_VENDORS.get(vendor, 'vendor ' + vendor[2:])} ({ids}) at {printable_slot(name)}")
    return tuple(out)


def printable_slot(name: str) -> str:
    return name if re.fullmatch(r"[0-9a-fA-F:.]{1,32}", name) else "?"


def pci_gpus(ctx: Context) -> tuple[smi.PciGpu, ...]:
    """NVIDIA display devices from sysfs (no lspci needed): vendor 0x10de, a display class."""
    out = []
    try:
        devices = sorted(p.name for p in ctx.sys_path("/sys/bus/pci/devices").iterdir())
    except OSError:
        return ()
    for name in devices:
        base = f"/sys/bus/pci/devices/{name}"
        vendor = (_read(ctx, f"{base}/vendor") or "").strip().lower()
        cls = (_read(ctx, f"{base}/class") or "").strip().lower()
        if vendor == "0x10de" and cls[:6] in GPU_CLASSES:
            dev = (_read(ctx, f"{base}/device") or "").strip().lower()
            out.append(smi.PciGpu(name, "display", "NVIDIA device", dev.replace("0x", "") or None, None))
    return tuple(out)
