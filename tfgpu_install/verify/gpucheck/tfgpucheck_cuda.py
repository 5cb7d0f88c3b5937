"""Layers 0-4 of the GPU check: PCI bus, driver, CUDA runtime, cuDNN, cuBLAS, through ctypes.

Runs inside the target environment, imported by check.py from its own directory: stdlib
and ctypes only (numpy is used for the SGEMM reference when the env has it). Nothing here
imports from `tfgpu_install` because the target env does not have our package. Every library call's
return code is checked: a failed read is reported by name, never taken as a value.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_codes import (
        COMPUTE_MODES,
        CU_RESULT,
        CUDA_ERROR,
        HINTS,
        code_name,
        err,
        outcome,
    )
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import (
        CheckPlan,
        DeviceEntry,
        Measured,
        Outcome,
        PciGpu,
        State,
    )
else:
    from tfgpucheck_codes import (
        COMPUTE_MODES,
        CU_RESULT,
        CUDA_ERROR,
        HINTS,
        code_name,
        err,
        outcome,
    )
    from tfgpucheck_report import DeviceEntry, PciGpu
if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_libs import (
        CUDART,
        CUDNN,
        CUDNN9_SUBLIBS,
        cuda_int,
        find_file,
        load_library,
        major,
        search_dirs,
        sonames,
    )
else:
    from tfgpucheck_libs import (
        CUDART,
        CUDNN,
        CUDNN9_SUBLIBS,
        cuda_int,
        find_file,
        load_library,
        major,
        search_dirs,
        sonames,
    )

__all__ = ["outcome", "layer_hardware", "layer_driver", "layer_runtime"]


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


# ---- layer 0 -------------------------------------------------------------------------------------
def tegra_soc(root: str) -> str:
    """A Jetson's Tegra SoC, from /etc/nv_tegra_release or the device tree's `nvidia,tegra*`
    compatible string ('' when neither says so). Mirrors facts/identity.py (this file runs inside
    the env, without the package)."""
    m = re.search(r"R(\d+)\s*\(release\),\s*REVISION:\s*([\d.]+)", _read(os.path.join(root, "etc/nv_tegra_release")))
    first = f"R{m.group(1)}.{m.group(2)}" if m else ""
    compat = [c for c in _read(os.path.join(root, "proc/device-tree/compatible")).split("\x00")
              if c.startswith("nvidia,tegra")]
    return "; ".join(x for x in (f"L4T {first}" if first else "", compat[0] if compat else "") if x)


def layer_hardware(root: str) -> Outcome:
    """An NVIDIA display/3D controller (vendor 0x10de, class 0x03xxxx) on the PCI bus."""
    base = os.path.join(root, "sys/bus/pci/devices")
    gpus: list[PciGpu] = []
    for dev in sorted(glob.glob(os.path.join(base, "*"))):
        if _read(os.path.join(dev, "vendor")).lower() != "0x10de":
            continue
        cls = _read(os.path.join(dev, "class")).lower()
        if not cls.startswith("0x03"):
            continue  # the card's audio function (0x0403) is not a GPU
        drv = os.path.join(dev, "driver")
        driver = os.path.basename(os.path.realpath(drv)) if os.path.lexists(drv) else None
        gpus.append({"pci": os.path.basename(dev).lower(), "device_id": _read(os.path.join(dev, "device")),
                     "class": cls, "kernel_driver": driver})
    if gpus:
        drivers = sorted({g.get("kernel_driver") or "none" for g in gpus})
        summary = f"{len(gpus)} NVIDIA GPU(s) on the PCI bus (kernel driver: {', '.join(drivers)})"
        hint = None
        if "nouveau" in drivers:
            hint = "the nouveau driver holds the GPU: install the NVIDIA driver and blacklist nouveau"
        return outcome("pass", summary, {"gpus": gpus}, hint=hint)
    # Some containers hide /sys/bus/pci; the driver's own view (/proc/driver/nvidia/gpus/<pci>) and
    # device nodes still show a GPU that the container was given.
    proc_gpus = sorted(os.path.basename(p).lower() for p in glob.glob(os.path.join(root, "proc/driver/nvidia/gpus/*")))
    nodes = sorted(os.path.basename(p) for p in glob.glob(os.path.join(root, "dev/nvidia[0-9]*")))
    if proc_gpus or nodes:
        seen = proc_gpus or nodes
        return outcome("pass", f"{len(seen)} NVIDIA GPU(s) from the driver ({', '.join(seen)}); the PCI bus is "
                       "not visible here", {"gpus": [PciGpu(pci=p) for p in proc_gpus], "device_nodes": nodes})
    # WSL2 exposes the GPU through /dev/dxg and its own libcuda, not through PCI.
    if os.path.exists(os.path.join(root, "dev/dxg")) and os.path.exists(
            os.path.join(root, "usr/lib/wsl/lib/libcuda.so.1")):
        return outcome("pass", "WSL2 GPU paravirtualisation (/dev/dxg, /usr/lib/wsl/lib)", {"wsl2": True})
    tegra = tegra_soc(root)
    if tegra:
        return outcome("pass", f"NVIDIA Jetson (Tegra SoC: {tegra}): an integrated GPU (nvgpu) on no PCI bus, "
                       "no /dev/nvidia0 and no NVML, as on every Jetson", {"tegra": tegra, "gpus": []})
    return outcome("fail", f"no NVIDIA GPU on the PCI bus ({base}: no vendor 0x10de display controller)",
                   {"gpus": []},
                   hint="this machine has no NVIDIA GPU visible: in a VM or container pass the GPU through "
                   "(docker run --gpus all); for a CPU-only env install with --allow-cpu")


# ---- layer 1 -------------------------------------------------------------------------------------
def _driver_failure(lib: Any, rc: int, what: str, measured: Measured) -> Outcome:
    name = code_name(CU_RESULT, rc, lib, "cuGetErrorName")
    hint = HINTS.get(name)
    if name == "CUDA_ERROR_NO_DEVICE" and "CUDA_VISIBLE_DEVICES" in os.environ:
        hint = f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r} hides the GPUs: unset it or " \
               "name an existing GPU (an index, or a GPU-/MIG- UUID from `nvidia-smi -L`)"
    return outcome("fail", f"{what} failed: {name} ({rc})", measured, error=err(rc, name), hint=hint)


def format_uuid(raw: bytes) -> str:
    """CUuuid's 16 bytes as nvidia-smi prints them, without the GPU-/MIG- prefix."""
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _device_uuid(lib: Any, dev: ctypes.c_int) -> Optional[str]:
    """cuDeviceGetUuid_v2 (a MIG instance's own UUID, CUDA 11.4+), else cuDeviceGetUuid."""
    for fn in ("cuDeviceGetUuid_v2", "cuDeviceGetUuid"):
        if hasattr(lib, fn):
            buf = (ctypes.c_ubyte * 16)()
            if getattr(lib, fn)(buf, dev) == 0:
                return format_uuid(bytes(buf))
    return None


def _device_info(lib: Any, i: int, measured: Measured) -> tuple[Optional[DeviceEntry], Optional[Outcome]]:
    """(info, None) for CUDA device ordinal i, or (None, failure outcome)."""
    dev = ctypes.c_int(0)
    rc = lib.cuDeviceGet(ctypes.byref(dev), i)
    if rc != 0:
        return None, _driver_failure(lib, rc, f"cuDeviceGet({i})", measured)
    buf = ctypes.create_string_buffer(256)
    rc = lib.cuDeviceGetName(buf, 256, dev)
    if rc != 0:
        return None, _driver_failure(lib, rc, f"cuDeviceGetName({i})", measured)
    info: DeviceEntry = {"index": i, "name": buf.value.decode(errors="replace")}
    cc_major, cc_minor = ctypes.c_int(0), ctypes.c_int(0)
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
    if lib.cuDeviceGetAttribute(ctypes.byref(cc_major), 75, dev) == 0 and \
            lib.cuDeviceGetAttribute(ctypes.byref(cc_minor), 76, dev) == 0:
        info["compute_capability"] = f"{cc_major.value}.{cc_minor.value}"
    mode = ctypes.c_int(0)
    if lib.cuDeviceGetAttribute(ctypes.byref(mode), 20, dev) == 0:  # CU_DEVICE_ATTRIBUTE_COMPUTE_MODE
        info["compute_mode"] = COMPUTE_MODES.get(mode.value, f"mode {mode.value}")
    mem = ctypes.c_size_t(0)
    if hasattr(lib, "cuDeviceTotalMem_v2") and lib.cuDeviceTotalMem_v2(ctypes.byref(mem), dev) == 0:
        info["memory_mib"] = mem.value // (1024 * 1024)
    bus = ctypes.create_string_buffer(64)
    if hasattr(lib, "cuDeviceGetPCIBusId") and lib.cuDeviceGetPCIBusId(bus, 64, dev) == 0:
        info["pci"] = bus.value.decode().lower()
    uuid = _device_uuid(lib, dev)
    if uuid:
        info["uuid"] = uuid
    return info, None


def layer_driver(plan: CheckPlan, state: State) -> Outcome:
    names = [plan.get("libcuda") or "libcuda.so.1"]
    lib, path, errors = load_library(names, [])
    if lib is None:
        return outcome("fail", f"libcuda.so.1 did not load: {errors[-1] if errors else 'not found'}",
                       hint="install the NVIDIA driver (it provides libcuda.so.1); on WSL2 keep "
                       "/usr/lib/wsl/lib on the library path")
    measured: Measured = {"libcuda": path}
    rc = lib.cuInit(0)
    if rc != 0:
        return _driver_failure(lib, rc, "cuInit", measured)
    ver = ctypes.c_int(0)
    rc = lib.cuDriverGetVersion(ctypes.byref(ver))
    if rc != 0:
        return _driver_failure(lib, rc, "cuDriverGetVersion", measured)
    measured["driver_cuda"] = state["driver_cuda"] = cuda_int(ver.value)
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value == 0:
        fail = _driver_failure(lib, rc or 100, "cuDeviceGetCount", measured)
        fail["summary"] = "the driver reports no CUDA device: " + fail["summary"].split(" failed: ", 1)[1]
        return fail
    devices = []
    for i in range(count.value):
        info, failure = _device_info(lib, i, measured)
        if failure is not None or info is None:
            return failure or outcome("fail", f"CUDA device {i}: no information")
        devices.append(info)
    measured["devices"] = devices
    state["devices"] = devices
    desc = ", ".join(f"{d.get('name')} (cc {d.get('compute_capability', '?')})" for d in devices)
    return outcome("pass", f"driver supports CUDA {measured['driver_cuda']}; {len(devices)} device(s): {desc}",
                   measured)


# ---- layer 2 -------------------------------------------------------------------------------------
def _so_major(soname: str) -> int:
    """'libcudart.so.12' -> 12, 'libcudart.so.11.0' -> 11; the bare 'libcudart.so' sorts last (999)."""
    parts = soname.split(".so.")
    return int(parts[1].split(".")[0]) if len(parts) == 2 and parts[1].split(".")[0].isdigit() else 999


def cudnn_built_for(plan: CheckPlan) -> Optional[int]:
    """The CUDA major the env's own cuDNN was built for (cudnnGetCudartVersion), found in the env's
    dirs only (never through the loader); None when the env has none, or cuDNN 9 lacks its graph
    library (its first call would abort the check: the cudnn layer says so)."""
    names = [n for n in sonames("libcudnn.so", major(plan.get("cudnn")), CUDNN) if n != "libcudnn.so"]
    path = find_file(names, search_dirs(plan, "cudnn"))
    if not path:
        return None
    try:
        if path.endswith(".so.9"):  # the shim's first call aborts unless its graph library loads
            ctypes.CDLL(os.path.join(os.path.dirname(path), CUDNN9_SUBLIBS[0]), mode=ctypes.RTLD_GLOBAL)
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    if not hasattr(lib, "cudnnGetCudartVersion"):
        return None
    lib.cudnnGetCudartVersion.restype = ctypes.c_size_t
    return major(cuda_int(int(lib.cudnnGetCudartVersion())))


def runtime_names(plan: CheckPlan, state: State) -> list[str]:
    """libcudart sonames in the order to try: the plan's major; without a plan the major the env's
    cuDNN was built for, then the newest the driver can run, then the rest."""
    names = sonames("libcudart.so", major(plan.get("cuda")), CUDART)
    if plan.get("cuda"):
        return names
    driver = major(state.get("driver_cuda"))
    if driver:
        names = [n for n in names if _so_major(n) <= driver] + [n for n in names if _so_major(n) > driver]
    wanted = cudnn_built_for(plan)
    if wanted and (not driver or wanted <= driver):
        state["cudnn_built_for"] = wanted
        names = [n for n in names if _so_major(n) == wanted] + [n for n in names if _so_major(n) != wanted]
    return names


def _holders(state: State, dev: int) -> str:
    """'; held by pid 4242 (10240 MiB)' from NVML's process list for CUDA device `dev` ('' when unknown)."""
    for g in (state.get("nvml_facts") or {}).get("gpus", []):
        if g.get("cuda") == dev and g.get("processes"):
            procs = [p for p in g.get("processes", []) if not p.get("this_check")]
            if procs:
                return "; held by " + ", ".join(f"pid {p['pid']}" + (f" ({p['used_mib']} MiB)" if p.get("used_mib")
                                                                      is not None else "") for p in procs)
    return ""


def _make_context(lib: Any, measured: Measured, state: State) -> Optional[Outcome]:
    """The primary context on every visible device (cudaSetDevice + cudaFree(0)), made here so that a
    GPU that refuses contexts (exclusive-process mode held by another process, prohibited mode, a
    forward-compatibility libcuda on a GPU it does not support) is named in this layer instead of
    showing up as a cuDNN error; then each device's free memory (cudaMemGetInfo)."""
    devices = [d for d in state.get("devices") or [] if isinstance(d.get("index"), int)] or [DeviceEntry(index=0)]
    per_device: list[DeviceEntry] = []
    for d in devices:
        i = d.get("index", 0)
        for what in (f"cudaSetDevice({i})", "cudaFree(0) (context creation)"):
            rc = int(lib.cudaSetDevice(i) if what.startswith("cudaSetDevice") else lib.cudaFree(ctypes.c_void_p(0)))
            if rc != 0:
                name = code_name(CUDA_ERROR, rc, lib, "cudaGetErrorName")
                mode = f"; compute mode: {d['compute_mode']}" if d.get("compute_mode") else ""
                where = f"GPU {i}: " if len(devices) > 1 else ""
                measured["devices"] = per_device
                return outcome("fail", f"{where}{what} failed: {name} ({rc}){mode}{_holders(state, i)}", measured,
                               error=err(rc, name), hint=HINTS.get(name))
        entry: DeviceEntry = {"index": i, "context": "created"}
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        if hasattr(lib, "cudaMemGetInfo") and lib.cudaMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0:
            entry.update({"free_mib": free.value // 2**20, "total_mib": total.value // 2**20})
        per_device.append(entry)
    lib.cudaSetDevice(devices[0].get("index", 0))
    measured["devices"] = per_device
    measured["context"] = "created on device " + ", ".join(str(e.get("index")) for e in per_device)
    return None


def layer_runtime(plan: CheckPlan, state: State) -> Outcome:
    names = runtime_names(plan, state)
    lib, path, errors = load_library(names, search_dirs(plan, "cuda_runtime"))
    if lib is None:
        return outcome("fail", f"{names[0]} did not load: {errors[-1] if errors else 'not found'}",
                       hint=f"the env has no CUDA runtime {plan.get('cuda') or ''}: re-run `tfgpu-install` to "
                       "reinstall the nvidia-cuda-runtime wheel")
    state["cudart"] = lib
    measured: Measured = {"libcudart": path}
    ver = ctypes.c_int(0)
    rc = lib.cudaRuntimeGetVersion(ctypes.byref(ver))
    if rc != 0:
        name = code_name(CUDA_ERROR, rc, lib, "cudaGetErrorName")
        return outcome("fail", f"cudaRuntimeGetVersion failed: {name} ({rc})", measured, error=err(rc, name))
    measured["runtime_cuda"] = cuda_int(ver.value)
    state["runtime_version"] = ver.value
    want = major(plan.get("cuda"))
    if want is not None and major(measured["runtime_cuda"]) != want:
        return outcome("fail", f"CUDA runtime {measured['runtime_cuda']} but the plan placed CUDA {plan.get('cuda')}",
                       measured, hint="re-run `tfgpu-install` to reinstall the planned CUDA wheels")
    count = ctypes.c_int(0)
    rc = lib.cudaGetDeviceCount(ctypes.byref(count))
    if rc != 0:
        name = code_name(CUDA_ERROR, rc, lib, "cudaGetErrorName")
        return outcome("fail", f"cudaGetDeviceCount failed: {name} ({rc}) with CUDA runtime "
                       f"{measured['runtime_cuda']}", measured, error=err(rc, name), hint=HINTS.get(name))
    measured["device_count"] = count.value
    failure = _make_context(lib, measured, state)
    if failure is not None:
        return failure
    state["runtime_ok"] = True  # the cudnn layer allocates through this runtime only when it works
    free = [f"GPU {e.get('index')} {e.get('free_mib')} of {e.get('total_mib')} MiB free"
            for e in measured.get("devices", []) if "free_mib" in e]
    return outcome("pass", f"CUDA runtime {measured['runtime_cuda']} ({path}) sees {count.value} device(s); "
                   f"context made on each" + (f"; {', '.join(free)}" if free else ""), measured)
