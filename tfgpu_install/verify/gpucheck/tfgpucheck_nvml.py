"""NVML through ctypes (libnvidia-ml.so.1): the GPUs as nvidia-smi numbers them, which of them
CUDA's devices are, and telemetry of the one under load. stdlib + ctypes only (runs in the env).

nvidia-smi numbers GPUs as NVML does, by PCI bus id; CUDA numbers them fastest first unless
CUDA_DEVICE_ORDER=PCI_BUS_ID, and after CUDA_VISIBLE_DEVICES. Only a GPU's UUID (or its bus id)
says which is which, never its position in /sys (a container sees every host GPU there, and
CUDA_VISIBLE_DEVICES=1 makes the second GPU CUDA's device 0). Every NVML return code is checked:
a failed read is an error, never 0 degrees.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any, Callable, Optional

NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED = 0, 3
_TEMP_GPU, _CLOCK_SM = 0, 1  # NVML_TEMPERATURE_GPU, NVML_CLOCK_SM
# nvmlClocksThrottleReasons bits that mean the card slowed itself down (nvml.h)
THROTTLE = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake"}


class PciInfo(ctypes.Structure):  # nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it (nvml.h)
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


class Utilization(ctypes.Structure):  # nvmlUtilization_t
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


def normal_pci(bus_id: str) -> str:
    """'00000000:3B:00.0' (NVML) and '0000:3b:00.0' (CUDA, sysfs) -> '0000:3b:00.0'."""
    try:
        dom, rest = bus_id.strip().split(":", 1)
        return f"{int(dom, 16):04x}:{rest.lower()}"
    except ValueError:
        return bus_id.strip().lower()


def bare_uuid(uuid: str) -> str:
    """'GPU-8c5e...' / 'MIG-8c5e...' / '8c5e...' -> '8c5e...' (CUDA's CUuuid has no prefix)."""
    u = uuid.strip().lower()
    return u[4:] if u[:4] in ("gpu-", "mig-") else u


class Nvml:
    def __init__(self, lib: Any) -> None:
        self.lib = lib

    @classmethod
    def open(cls) -> tuple[Optional["Nvml"], Optional[str]]:
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError as exc:
            return None, f"libnvidia-ml.so.1 did not load ({exc})"
        rc = lib.nvmlInit_v2()
        if rc != NVML_SUCCESS:
            return None, f"nvmlInit failed: {cls.error_string(lib, rc)} ({rc})"
        return cls(lib), None

    @staticmethod
    def error_string(lib: Any, rc: int) -> str:
        try:
            lib.nvmlErrorString.restype = ctypes.c_char_p
            lib.nvmlErrorString.argtypes = [ctypes.c_int]
            return (lib.nvmlErrorString(rc) or b"").decode(errors="replace") or f"NVML error {rc}"
        except (AttributeError, ctypes.ArgumentError):
            return f"NVML error {rc}"

    def _uuid(self, handle: ctypes.c_void_p) -> Optional[str]:
        buf = ctypes.create_string_buffer(96)
        return buf.value.decode() if self.lib.nvmlDeviceGetUUID(handle, buf, 96) == NVML_SUCCESS else None

    def _migs(self, handle: ctypes.c_void_p) -> list[str]:
        cur, pending, count = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        if not hasattr(self.lib, "nvmlDeviceGetMigMode") or \
                self.lib.nvmlDeviceGetMigMode(handle, ctypes.byref(cur), ctypes.byref(pending)) != NVML_SUCCESS \
                or not cur.value:
            return []
        if self.lib.nvmlDeviceGetMaxMigDeviceCount(handle, ctypes.byref(count)) != NVML_SUCCESS:
            return []
        out = []
        for i in range(count.value):
            mig = ctypes.c_void_p()
            if self.lib.nvmlDeviceGetMigDeviceHandleByIndex(handle, i, ctypes.byref(mig)) == NVML_SUCCESS:
                uuid = self._uuid(mig)
                if uuid:
                    out.append(uuid)
        return out

    def _device(self, i: int) -> tuple[dict[str, Any], Optional[Any]]:
        """One GPU's entry and handle; a GPU NVML cannot open (no permission in a cgroup, lost after
        an Xid) gets an entry with its error and no handle, and the others are still read."""
        h = ctypes.c_void_p()
        rc = self.lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h))
        if rc != NVML_SUCCESS:
            return {"nvidia_smi": i, "uuid": None, "pci": None, "mig": False, "mig_uuids": [],
                    "error": f"nvmlDeviceGetHandleByIndex({i}) failed: {self.error_string(self.lib, rc)} ({rc})"}, None
        pci = PciInfo()
        bus = normal_pci(pci.busId.decode()) if self.lib.nvmlDeviceGetPciInfo_v3(
            h, ctypes.byref(pci)) == NVML_SUCCESS else None
        migs = self._migs(h)
        return {"nvidia_smi": i, "uuid": self._uuid(h), "pci": bus, "mig": bool(migs), "mig_uuids": migs}, h

    def devices(self) -> tuple[list[dict[str, Any]], list[Any]]:
        """([{nvidia_smi, uuid, pci, mig, mig_uuids[, error]}], handles) in NVML's (= nvidia-smi's)
        order; a GPU that could not be opened has its error and a None handle."""
        count = ctypes.c_uint()
        rc = self.lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
        if rc != NVML_SUCCESS:
            raise OSError(f"nvmlDeviceGetCount failed: {self.error_string(self.lib, rc)} ({rc})")
        out, handles = [], []
        for i in range(count.value):
            entry, h = self._device(i)
            out.append(entry)
            handles.append(h)
        return out, handles


def inventory() -> dict[str, Any]:
    """{"devices": [...]} or {"error": why}: NVML's view, for the CUDA <-> nvidia-smi mapping."""
    nv, why = Nvml.open()
    if nv is None:
        return {"error": why}
    try:
        return {"devices": nv.devices()[0]}
    except OSError as exc:
        return {"error": str(exc)}


def match(cuda_dev: dict[str, Any], nvml_devices: list[dict[str, Any]]) -> tuple[Optional[dict[str, Any]], str]:
    """The NVML GPU a CUDA device is: by UUID (GPU- or a MIG instance's MIG-), else by PCI bus id."""
    uuid = bare_uuid(cuda_dev.get("uuid") or "")
    if uuid:
        for g in nvml_devices:
            if bare_uuid(g.get("uuid") or "") == uuid:
                return g, "uuid"
            if any(bare_uuid(m) == uuid for m in g.get("mig_uuids", [])):
                return g, "mig-uuid"
    pci = normal_pci(cuda_dev.get("pci") or "")
    for g in nvml_devices:
        if pci and g.get("pci") == pci:
            return g, "pci"
    return None, ""


def order_note(mapping: list[dict[str, Any]], environ: dict[str, str]) -> Optional[str]:
    """Advice when CUDA's numbers and nvidia-smi's disagree for what the user sees or typed."""
    if environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID":
        return None
    smi = [m["nvidia_smi"] for m in mapping]
    if not smi or any(s is None for s in smi):
        return None
    cvd = environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        if smi != sorted(smi):
            return ("CUDA numbers GPUs fastest first, nvidia-smi by PCI bus: set CUDA_DEVICE_ORDER=PCI_BUS_ID so "
                    "CUDA_VISIBLE_DEVICES and TensorFlow's GPU:N use nvidia-smi's numbers")
        return None
    tokens = [t.strip() for t in cvd.split(",") if t.strip()]
    if not tokens or not all(t.isdigit() for t in tokens):
        return None  # UUIDs name a GPU exactly
    wrong = [(t, m) for t, m in zip(tokens, mapping) if int(t) != m["nvidia_smi"]]
    if not wrong:
        return None
    t, m = wrong[0]
    return (f"CUDA_VISIBLE_DEVICES={cvd} counts GPUs in CUDA's order (fastest first): {t} selected nvidia-smi's "
            f"GPU {m['nvidia_smi']} ({m.get('pci')}); set CUDA_DEVICE_ORDER=PCI_BUS_ID, or name GPUs by UUID "
            "(`nvidia-smi -L`)")


class Telemetry:
    """NVML samples of ONE GPU (the CUDA device under load, found by UUID/bus id) in a thread.
    Each read's return code is checked; a read the GPU does not support (utilisation on MIG) is
    left out and sampling goes on; failed reads are counted, never recorded as 0."""

    def __init__(self, target: Optional[dict[str, Any]] = None, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[dict[str, Any]] = []
        self.source: Optional[str] = None
        self.error: Optional[str] = None
        self.gpu: Optional[dict[str, Any]] = None
        self.unsupported: set[str] = set()
        self.failed_reads = 0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._read: Optional[Callable[[], dict[str, Any]]] = None
        nv, why = Nvml.open()
        if nv is None:
            self.error = f"NVML not available ({why}): no temperature/clock/power samples"
            return
        try:
            devices, handles = nv.devices()
        except OSError as exc:
            self.error = str(exc)
            return
        gpu, how = match(target or {}, devices) if target else (devices[0] if devices else None, "first")
        if gpu is None:
            failed = [d["error"] for d in devices if d.get("error")]
            self.error = "NVML does not list the CUDA device under load (no UUID or bus id matched)" + (
                f"; GPUs NVML could not open: {'; '.join(failed)}" if failed else "")
            return
        if handles[gpu["nvidia_smi"]] is None:
            self.error = gpu.get("error") or "NVML has no handle for the GPU under load"
            return
        self.gpu = dict(gpu, matched_by=how)
        self.source = "libnvidia-ml"
        self._read = self._reader(nv, handles[gpu["nvidia_smi"]])

    def _reader(self, nv: Nvml, h: Any) -> Callable[[], dict[str, Any]]:
        lib = nv.lib
        # Renamed ...ClocksEventReasons in newer drivers; the old name stays exported for now.
        reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None)

        def read() -> dict[str, Any]:
            t, clk, mw, thr, u = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong(), Utilization()
            reads: dict[str, tuple[Callable[[], int], Callable[[], Any]]] = {
                "temp_c": (lambda: lib.nvmlDeviceGetTemperature(h, _TEMP_GPU, ctypes.byref(t)), lambda: t.value),
                "sm_mhz": (lambda: lib.nvmlDeviceGetClockInfo(h, _CLOCK_SM, ctypes.byref(clk)), lambda: clk.value),
                "power_w": (lambda: lib.nvmlDeviceGetPowerUsage(h, ctypes.byref(mw)), lambda: mw.value / 1000.0),
                "util_pct": (lambda: lib.nvmlDeviceGetUtilizationRates(h, ctypes.byref(u)), lambda: u.gpu),
                "throttle": (lambda: reasons(h, ctypes.byref(thr)) if reasons else NVML_ERROR_NOT_SUPPORTED,
                             lambda: thr.value)}
            sample: dict[str, Any] = {"gpu": self.gpu["nvidia_smi"] if self.gpu else None}
            for key, (call, value) in reads.items():
                if key in self.unsupported:
                    continue
                rc = call()
                if rc == NVML_SUCCESS:
                    sample[key] = value()
                elif rc == NVML_ERROR_NOT_SUPPORTED:
                    self.unsupported.add(key)
                else:
                    self.failed_reads += 1
                    self.error = f"{key}: {nv.error_string(lib, rc)} ({rc})"
            return sample
        return read

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self._read is not None:
                self.samples.append(dict(self._read(), t=round(time.monotonic(), 2)))
            self._stop.wait(self.interval)

    def __enter__(self) -> "Telemetry":
        if self._read is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "samples": len(self.samples), "error": self.error,
                               "gpu": self.gpu, "unsupported": sorted(self.unsupported),
                               "failed_reads": self.failed_reads}
        for key in ("temp_c", "sm_mhz", "power_w", "util_pct"):
            vals = [s[key] for s in self.samples if key in s]
            if vals:
                out[key] = {"min": min(vals), "max": max(vals)}
        reasons: set[str] = set()
        for s in self.samples:
            reasons |= {name for bit, name in THROTTLE.items() if s.get("throttle", 0) & bit}
        if self.samples:
            out["throttle_reasons"] = sorted(reasons)
        return out
