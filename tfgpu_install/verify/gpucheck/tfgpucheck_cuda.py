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
        CUDNN8_STATUS,
        CUDNN_STATUS,
        HINTS,
        code_name,
        err,
        outcome,
    )
else:
    from tfgpucheck_codes import (
        COMPUTE_MODES,
        CU_RESULT,
        CUDA_ERROR,
        CUDNN8_STATUS,
        CUDNN_STATUS,
        HINTS,
        code_name,
        err,
        outcome,
    )
if TYPE_CHECKING:  # the siblings as mypy sees them; at run time they are imported by file name
    from tfgpu_install.verify.gpucheck.tfgpucheck_libs import (
        CUDART,
        CUDNN,
        CUDNN9_OPTIONAL,
        CUDNN9_SUBLIBS,
        cuda_int,
        cudnn_int,
        find_file,
        load_library,
        loaded_path,
        major,
        search_dirs,
        sonames,
        version_matches,
    )
else:
    from tfgpucheck_libs import (
        CUDART,
        CUDNN,
        CUDNN9_OPTIONAL,
        CUDNN9_SUBLIBS,
        cuda_int,
        cudnn_int,
        find_file,
        load_library,
        loaded_path,
        major,
        search_dirs,
        sonames,
        version_matches,
    )

__all__ = ["outcome", "layer_hardware", "layer_driver", "layer_runtime", "layer_cudnn"]


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


def layer_hardware(root: str) -> dict[str, Any]:
    """An NVIDIA display/3D controller (vendor 0x10de, class 0x03xxxx) on the PCI bus."""
    base = os.path.join(root, "sys/bus/pci/devices")
    gpus = []
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
        drivers = sorted({g["kernel_driver"] or "none" for g in gpus})
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
                       "not visible here", {"gpus": [{"pci": p} for p in proc_gpus], "device_nodes": nodes})
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
def _driver_failure(lib: Any, rc: int, what: str, measured: dict[str, Any]) -> dict[str, Any]:
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


def _device_info(lib: Any, i: int,
                 measured: dict[str, Any]) -> tuple[Optional[dict[str, Any]], Optional[dict[str, Any]]]:
    """(info, None) for CUDA device ordinal i, or (None, failure outcome)."""
    dev = ctypes.c_int(0)
    rc = lib.cuDeviceGet(ctypes.byref(dev), i)
    if rc != 0:
        return None, _driver_failure(lib, rc, f"cuDeviceGet({i})", measured)
    buf = ctypes.create_string_buffer(256)
    rc = lib.cuDeviceGetName(buf, 256, dev)
    if rc != 0:
        return None, _driver_failure(lib, rc, f"cuDeviceGetName({i})", measured)
    info: dict[str, Any] = {"index": i, "name": buf.value.decode(errors="replace")}
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


def layer_driver(plan: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    names = [plan["libcuda"]] if plan.get("libcuda") else ["libcuda.so.1"]
    lib, path, errors = load_library(names, [])
    if lib is None:
        return outcome("fail", f"libcuda.so.1 did not load: {errors[-1] if errors else 'not found'}",
                       hint="install the NVIDIA driver (it provides libcuda.so.1); on WSL2 keep "
                       "/usr/lib/wsl/lib on the library path")
    measured: dict[str, Any] = {"libcuda": path}
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
    desc = ", ".join(f"{d['name']} (cc {d.get('compute_capability', '?')})" for d in devices)
    return outcome("pass", f"driver supports CUDA {measured['driver_cuda']}; {len(devices)} device(s): {desc}",
                   measured)


# ---- layer 2 -------------------------------------------------------------------------------------
def _so_major(soname: str) -> int:
    """'libcudart.so.12' -> 12, 'libcudart.so.11.0' -> 11; the bare 'libcudart.so' sorts last (999)."""
    parts = soname.split(".so.")
    return int(parts[1].split(".")[0]) if len(parts) == 2 and parts[1].split(".")[0].isdigit() else 999


def cudnn_built_for(plan: dict[str, Any]) -> Optional[int]:
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


def runtime_names(plan: dict[str, Any], state: dict[str, Any]) -> list[str]:
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


def _make_context(lib: Any, measured: dict[str, Any], state: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The primary context on device 0 (cudaSetDevice + cudaFree(0)), made here so that a GPU that
    refuses contexts (exclusive-process mode held by another process, prohibited mode) is named in
    this layer instead of showing up as a cuDNN error."""
    for what in ("cudaSetDevice(0)", "cudaFree(0) (context creation)"):
        rc = int(lib.cudaSetDevice(0)) if what.startswith("cudaSetDevice") else int(lib.cudaFree(ctypes.c_void_p(0)))
        if rc != 0:
            name = code_name(CUDA_ERROR, rc, lib, "cudaGetErrorName")
            modes = sorted({d["compute_mode"] for d in state.get("devices", []) if d.get("compute_mode")})
            mode = f"; compute mode: {', '.join(modes)}" if modes else ""
            return outcome("fail", f"{what} failed: {name} ({rc}){mode}", measured, error=err(rc, name),
                           hint=HINTS.get(name))
    measured["context"] = "created on device 0"
    return None


def layer_runtime(plan: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    names = runtime_names(plan, state)
    lib, path, errors = load_library(names, search_dirs(plan, "cuda_runtime"))
    if lib is None:
        return outcome("fail", f"{names[0]} did not load: {errors[-1] if errors else 'not found'}",
                       hint=f"the env has no CUDA runtime {plan.get('cuda') or ''}: re-run `tfgpu-install` to "
                       "reinstall the nvidia-cuda-runtime wheel")
    state["cudart"] = lib
    measured: dict[str, Any] = {"libcudart": path}
    ver = ctypes.c_int(0)
    rc = lib.cudaRuntimeGetVersion(ctypes.byref(ver))
    if rc != 0:
        name = code_name(CUDA_ERROR, rc, lib, "cudaGetErrorName")
        return outcome("fail", f"cudaRuntimeGetVersion failed: {name} ({rc})", measured, error=err(rc, name))
    measured["runtime_cuda"] = cuda_int(ver.value)
    state["runtime_version"] = ver.value
    want = major(plan.get("cuda"))
    if want is not None and major(measured["runtime_cuda"]) != want:
        return outcome("fail", f"CUDA runtime {measured['runtime_cuda']} but the plan placed CUDA {plan['cuda']}",
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
    return outcome("pass", f"CUDA runtime {measured['runtime_cuda']} ({path}) sees {count.value} device(s)",
                   measured)


# ---- layer 3 -------------------------------------------------------------------------------------
def _cudnn_sublibraries(libdir: str) -> tuple[dict[str, str], list[str]]:
    """cuDNN 9's run-time loaded parts, each loaded from libcudnn.so.9's own directory:
    ({name: path} loaded, ["name: why"] missing or broken)."""
    loaded: dict[str, str] = {}
    bad: list[str] = []
    for name in CUDNN9_SUBLIBS + CUDNN9_OPTIONAL:
        path = os.path.join(libdir, name)
        if not os.path.exists(path):
            if name in CUDNN9_SUBLIBS:
                bad.append(f"{name}: missing")
            continue
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            loaded[name] = path
        except OSError as exc:
            bad.append(f"{name}: {exc}")
    return loaded, bad


def _cudnn_handle(lib: Any, table: dict[int, str]) -> Optional[str]:
    """Create and destroy a cuDNN handle (it initialises cuDNN on the GPU); None, or what failed."""
    handle = ctypes.c_void_p()
    rc = lib.cudnnCreate(ctypes.byref(handle))
    namer = "cudnnGetErrorString"
    if rc != 0:
        return f"cudnnCreate failed: {code_name(table, rc, lib, namer)} ({rc})"
    rc = lib.cudnnDestroy(handle)
    if rc != 0:
        return f"cudnnDestroy failed: {code_name(table, rc, lib, namer)} ({rc})"
    return None


_REINSTALL = "re-run `tfgpu-install` to reinstall the nvidia-cudnn wheel (or pass --cudnn-source)"


def _cudnn9_parts_first(path: str, names: list[str], measured: dict[str, Any]) -> Optional[dict[str, Any]]:
    """cuDNN 9's libcudnn.so.9 is a shim whose first call loads libcudnn_graph.so.9 (and aborts the
    process when it cannot): every required sub-library must exist and load before that call."""
    real = path if os.path.isabs(path) else (loaded_path(names[0]) or path)
    if not os.path.basename(real).startswith("libcudnn.so.9"):
        return None
    libdir = os.path.dirname(real)
    loaded, bad = _cudnn_sublibraries(libdir)
    measured["sublibraries"] = sorted(loaded)
    if not bad:
        return None
    return outcome("fail", f"cuDNN 9: sub-libraries next to {path} do not load ({'; '.join(bad)})", measured,
                   hint="cuDNN 9 loads these at run time (a missing libcudnn_graph.so.9 aborts the process in its "
                   f"first call, and TensorFlow would fail on its first convolution): {_REINSTALL}")


def _cudnn_cuda_mismatch(lib: Any, version: str, state: dict[str, Any],
                         measured: dict[str, Any]) -> Optional[dict[str, Any]]:
    if not hasattr(lib, "cudnnGetCudartVersion") or not state.get("runtime_version"):
        return None
    lib.cudnnGetCudartVersion.restype = ctypes.c_size_t
    built_for = cuda_int(int(lib.cudnnGetCudartVersion()))
    measured["cudnn_cuda"] = built_for
    runtime = cuda_int(int(state["runtime_version"]))
    if major(built_for) == major(runtime):
        return None
    return outcome("fail", f"cuDNN {version} was built for CUDA {built_for}, the CUDA runtime is {runtime}",
                   measured, hint=f"install the cuDNN build for this CUDA major (nvidia-cudnn-cu{major(runtime)}): "
                   f"{_REINSTALL}")


def _sm(cc: str) -> int:
    """'9.0' -> 900, '12.0' -> 1200: cuDNN's SM numbering (major*100 + minor*10)."""
    maj, _, minor = cc.partition(".")
    return int(maj) * 100 + int(minor or 0) * 10 if maj.isdigit() and (minor or "0").isdigit() else 0


def forward_compat_note(lib: Any, state: dict[str, Any], measured: dict[str, Any]) -> Optional[str]:
    """cuDNN 9 runs a GPU newer than its newest native SM in forward-compatibility mode (PTX JIT,
    some operations unsupported): read cudnnGetMaxDeviceVersion and say so."""
    if not hasattr(lib, "cudnnGetMaxDeviceVersion"):
        return None
    lib.cudnnGetMaxDeviceVersion.restype = ctypes.c_size_t
    max_sm = int(lib.cudnnGetMaxDeviceVersion())
    measured["cudnn_max_device_sm"] = max_sm
    newer = sorted({d["compute_capability"] for d in state.get("devices", [])
                    if d.get("compute_capability") and _sm(d["compute_capability"]) > max_sm})
    if not newer:
        return None
    measured["forward_compatibility"] = newer
    return (f"cuDNN's newest native GPU is sm_{max_sm // 10}; compute capability {', '.join(newer)} runs in "
            "forward-compatibility mode (kernels JIT-compiled from PTX, slower, some operations unsupported): "
            "install a newer cuDNN 9 that supports this GPU natively")


def layer_cudnn(plan: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    names = sonames("libcudnn.so", major(plan.get("cudnn")), CUDNN)
    lib, path, errors = load_library(names, search_dirs(plan, "cudnn"))
    if lib is None:
        return outcome("fail", f"{names[0]} did not load: {errors[-1] if errors else 'not found'}",
                       hint="cuDNN is missing from the env: re-run `tfgpu-install` (or pass --cudnn-source)")
    measured: dict[str, Any] = {"libcudnn": path}
    failure = _cudnn9_parts_first(path, names, measured)
    if failure is not None:
        return failure
    lib.cudnnGetVersion.restype = ctypes.c_size_t
    version = cudnn_int(int(lib.cudnnGetVersion()))
    measured["cudnn"] = version
    expected = plan.get("cudnn")
    if expected and not version_matches(version, str(expected)):
        return outcome("fail", f"cuDNN {version} loaded from {path}, but the plan placed {expected}", measured,
                       hint="another cuDNN comes first on the library path: `tfgpu-install doctor` lists stale "
                       "copies; re-run the install with --quarantine-stale")
    failure = _cudnn_cuda_mismatch(lib, version, state, measured)
    if failure is not None:
        return failure
    note = forward_compat_note(lib, state, measured) if major(version) == 9 else None
    failed = _cudnn_handle(lib, CUDNN_STATUS if major(version) == 9 else CUDNN8_STATUS)
    if failed:
        return outcome("fail", f"cuDNN {version} ({path}): {failed}", measured,
                       hint="cuDNN could not initialise on the GPU: check `nvidia-smi` (memory, other processes) "
                       "and that cuDNN matches the CUDA runtime")
    measured["handle"] = "created and destroyed"
    subs = f", {len(measured['sublibraries'])} sub-libraries loaded" if "sublibraries" in measured else ""
    return outcome("pass", f"cuDNN {version} ({path}), handle created{subs}"
                   + (f"; as planned ({expected})" if expected else ""), measured, hint=note)
