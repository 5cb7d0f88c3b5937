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
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Literal, Optional

if TYPE_CHECKING:  # the sibling as mypy sees it; at run time it is imported by file name
    from tfgpu_install.verify.gpucheck import tfgpucheck_health as judge
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import (
        DeviceEntry,
        DeviceMap,
        Ecc,
        GpuFacts,
        Health,
        Limits,
        NvmlDevice,
        NvmlFacts,
        NvmlInventory,
        Processes,
        RemappedRows,
        RetiredPages,
        Sample,
    )
    from tfgpu_install.verify.gpucheck.tfgpucheck_report import (
        Telemetry as TelemetrySummary,
    )
else:
    import tfgpucheck_health as judge
    from tfgpucheck_report import Ecc, RemappedRows, RetiredPages

NVML_SUCCESS, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INSUFFICIENT_SIZE = 0, 3, 7
_TEMP_GPU, _CLOCK_SM, _CLOCK_MEM = 0, 1, 2  # NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM
_FI_MEMORY_TEMP = 82  # NVML_FI_DEV_MEMORY_TEMP: the HBM's temperature (data-centre GPUs)
# nvmlTemperatureThresholds_t
_THRESHOLDS: dict[Literal["shutdown_c", "slowdown_c", "mem_max_c", "gpu_max_c"], int] = {
    "shutdown_c": 0, "slowdown_c": 1, "mem_max_c": 2, "gpu_max_c": 3}
THROTTLE = judge.THROTTLE_BITS  # every nvmlClocksEventReasons bit, by name


class PciInfo(ctypes.Structure):  # nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it (nvml.h)
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


class Utilization(ctypes.Structure):  # nvmlUtilization_t
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class FieldValue(ctypes.Structure):  # nvmlFieldValue_t: the value is a union of 8 bytes
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", ctypes.c_ulonglong)]


class ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t, as nvmlDeviceGetComputeRunningProcesses_v3 fills it
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong), ("gpuInstanceId", ctypes.c_uint),
                ("computeInstanceId", ctypes.c_uint)]


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

    def _device(self, i: int) -> tuple[NvmlDevice, Optional[Any]]:
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

    def devices(self) -> tuple[list[NvmlDevice], list[Any]]:
        """([{nvidia_smi, uuid, pci, mig, mig_uuids[, error]}], handles) in NVML's (= nvidia-smi's)
        order; a GPU that could not be opened has its error and a None handle."""
        count = ctypes.c_uint()
        rc = self.lib.nvmlDeviceGetCount_v2(ctypes.byref(count))
        if rc != NVML_SUCCESS:
            raise OSError(f"nvmlDeviceGetCount failed: {self.error_string(self.lib, rc)} ({rc})")
        out: list[NvmlDevice] = []
        handles: list[Any] = []
        for i in range(count.value):
            entry, h = self._device(i)
            out.append(entry)
            handles.append(h)
        return out, handles


    def _read(self, fn: str, *args: Any) -> tuple[int, str]:
        """(rc, "") or (rc, "fn: why"): NOT_SUPPORTED and a missing symbol both read as unsupported."""
        f = getattr(self.lib, fn, None)
        if f is None:
            return NVML_ERROR_NOT_SUPPORTED, f"{fn}: not in this driver's NVML"
        rc = int(f(*args))
        return rc, "" if rc == NVML_SUCCESS else f"{fn}: {self.error_string(self.lib, rc)} ({rc})"

    def limits(self, h: Any) -> Limits:
        """What the samples are judged against: clock maxima, the enforced power limit, the
        temperature thresholds (each absent when the GPU does not report it)."""
        out: Limits = {}
        v = ctypes.c_uint()
        clocks: tuple[tuple[Literal["sm_max_mhz", "mem_max_mhz"], int], ...] = (("sm_max_mhz", _CLOCK_SM),
                                                                                 ("mem_max_mhz", _CLOCK_MEM))
        for key, clock in clocks:
            if self._read("nvmlDeviceGetMaxClockInfo", h, clock, ctypes.byref(v))[0] == NVML_SUCCESS:
                out[key] = v.value
        if self._read("nvmlDeviceGetEnforcedPowerLimit", h, ctypes.byref(v))[0] == NVML_SUCCESS:
            out["power_limit_w"] = v.value / 1000.0
        for threshold, which in _THRESHOLDS.items():
            if self._read("nvmlDeviceGetTemperatureThreshold", h, which, ctypes.byref(v))[0] == NVML_SUCCESS:
                out[threshold] = v.value
        return out

    def health(self, h: Any) -> Health:
        """ECC counts, remapped rows, retired pages, as DCGM reads them; each {"unsupported": why}
        where the GPU has none (no ECC, or page retirement on Ampere and later), or {"error": why}."""
        out: Health = {}
        n = ctypes.c_ulonglong()
        ecc: Ecc = {}
        counters: tuple[tuple[Literal["uncorrected_volatile", "corrected_volatile", "uncorrected_aggregate"], int,
                              int], ...] = (("uncorrected_volatile", 1, 0), ("corrected_volatile", 0, 0),
                                            ("uncorrected_aggregate", 1, 1))
        for key, kind, counter in counters:
            rc, why = self._read("nvmlDeviceGetTotalEccErrors", h, kind, counter, ctypes.byref(n))
            if rc == NVML_SUCCESS:
                ecc[key] = n.value
            else:
                ecc = Ecc(unsupported=why) if rc == NVML_ERROR_NOT_SUPPORTED else Ecc(error=why)
                break
        out["ecc"] = ecc
        corr, unc, pend, fail = (ctypes.c_uint() for _ in range(4))
        rc, why = self._read("nvmlDeviceGetRemappedRows", h, ctypes.byref(corr), ctypes.byref(unc),
                             ctypes.byref(pend), ctypes.byref(fail))
        out["remapped_rows"] = (RemappedRows(correctable=corr.value, uncorrectable=unc.value,
                                             pending=bool(pend.value), failure=bool(fail.value))
                                if rc == NVML_SUCCESS else RemappedRows(unsupported=why)
                                if rc == NVML_ERROR_NOT_SUPPORTED else RemappedRows(error=why))
        pages: RetiredPages = {}
        count, pending = ctypes.c_uint(), ctypes.c_int()
        causes: tuple[tuple[Literal["multiple_single_bit", "double_bit"], int], ...] = (("multiple_single_bit", 0),
                                                                                       ("double_bit", 1))
        for kind_of_page, cause in causes:
            count.value = 0
            rc, why = self._read("nvmlDeviceGetRetiredPages", h, cause, ctypes.byref(count), None)
            if rc not in (NVML_SUCCESS, NVML_ERROR_INSUFFICIENT_SIZE):
                pages = RetiredPages(unsupported=why) if rc == NVML_ERROR_NOT_SUPPORTED else RetiredPages(error=why)
                break
            pages[kind_of_page] = count.value
        if "unsupported" not in pages and "error" not in pages:
            rc, why = self._read("nvmlDeviceGetRetiredPagesPendingStatus", h, ctypes.byref(pending))
            pages["pending"] = bool(pending.value) if rc == NVML_SUCCESS else None
        out["retired_pages"] = pages
        return out

    def processes(self, h: Any) -> Processes:
        """{"processes": [{pid, used_mib, this_check}]} or {"error": why}: who else holds the GPU."""
        count = ctypes.c_uint(0)
        rc, why = self._read("nvmlDeviceGetComputeRunningProcesses_v3", h, ctypes.byref(count), None)
        procs = (ProcessInfo * max(count.value * 2 + 4, 1))()
        if rc == NVML_ERROR_INSUFFICIENT_SIZE:
            count.value = len(procs)
            rc, why = self._read("nvmlDeviceGetComputeRunningProcesses_v3", h, ctypes.byref(count), procs)
        if rc != NVML_SUCCESS:
            return {"error": why}
        return {"processes": [{"pid": p.pid, "used_mib": p.usedGpuMemory // (1024 * 1024) if p.usedGpuMemory <
                               (1 << 63) else None, "this_check": p.pid == os.getpid()}
                              for p in procs[:count.value]]}


def inventory() -> NvmlInventory:
    """{"devices": [...]} or {"error": why}: NVML's view, for the CUDA <-> nvidia-smi mapping."""
    nv, why = Nvml.open()
    if nv is None:
        return {"error": why}
    try:
        return {"devices": nv.devices()[0]}
    except OSError as exc:
        return {"error": str(exc)}


def gpu_facts(cuda_devices: list[DeviceEntry]) -> NvmlFacts:
    """Per CUDA device, NVML's view of its GPU: which nvidia-smi GPU it is, its limits, health
    counters and the processes on it. {"error": why} when NVML is not there (a container given only
    libcuda): every value is then unknown, never zero."""
    nv, why = Nvml.open()
    if nv is None:
        return {"error": why}
    try:
        devices, handles = nv.devices()
    except OSError as exc:
        return {"error": str(exc)}
    out: list[GpuFacts] = []
    for d in cuda_devices:
        gpu, how = match(d, devices)
        entry: GpuFacts = {"cuda": d.get("index"), "nvidia_smi": gpu["nvidia_smi"] if gpu else None}
        h = handles[gpu["nvidia_smi"]] if gpu else None
        if h is None:
            entry["error"] = (gpu.get("error") if gpu else None) or \
                "NVML does not list this CUDA device (no UUID or bus id matched)"
        else:
            entry.update({"matched_by": how, "limits": nv.limits(h), "health": nv.health(h)})
            held = nv.processes(h)  # {"processes": [...]} or {"error": why}
            if "processes" in held:
                entry["processes"] = held["processes"]
            if "error" in held:
                entry["error"] = held["error"]
        out.append(entry)
    return {"gpus": out}


def match(cuda_dev: DeviceEntry, nvml_devices: list[NvmlDevice]) -> tuple[Optional[NvmlDevice], str]:
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


def order_note(mapping: list[DeviceMap], environ: dict[str, str]) -> Optional[str]:
    """Advice when CUDA's numbers and nvidia-smi's disagree for what the user sees or typed."""
    if environ.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID":
        return None
    smi = [m["nvidia_smi"] for m in mapping if m["nvidia_smi"] is not None]
    if not smi or len(smi) != len(mapping):
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
    """NVML samples of the GPUs under load (the CUDA devices given, found by UUID/bus id), in a thread.
    Each sample holds the GPU and memory temperature, SM and memory clocks, power, utilisation and
    every throttle reason, at a time `t` on the burn's own clock (time.monotonic). Each read's return
    code is checked: a read the GPU does not support (utilisation on MIG, HBM temperature on a
    GeForce) is left out and sampling goes on; failed reads are counted, never recorded as 0.

    `summary(i)` is GPU i's: the old min/max keys, the samples themselves, the limits they are judged
    against, and the share of the time each throttle reason was active."""

    def __init__(self, target: "Optional[DeviceEntry | list[DeviceEntry]]" = None,
                 interval: float = 0.5) -> None:
        self.interval = interval
        given = target if isinstance(target, list) else [target] if target else []
        targets: list[Optional[DeviceEntry]] = list(given) or [None]  # None: NVML's first GPU
        self.series: list[list[Sample]] = [[] for _ in targets]
        self.gpus: list[Optional[NvmlDevice]] = [None for _ in self.series]
        self.limits: list[Limits] = [{} for _ in self.series]
        self.errors: list[Optional[str]] = [None for _ in self.series]
        self.unsupported: list[set[str]] = [set() for _ in self.series]
        self.failed: list[int] = [0 for _ in self.series]
        self.source: Optional[str] = None
        self.load_start: Optional[float] = None
        self.load_end: Optional[float] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._readers: list[Optional[Callable[[], Sample]]] = [None for _ in self.series]
        nv, why = Nvml.open()
        if nv is None:
            self.errors = [f"NVML not available ({why}): no temperature/clock/power samples" for _ in self.series]
            return
        try:
            devices, handles = nv.devices()
        except OSError as exc:
            self.errors = [str(exc) for _ in self.series]
            return
        self.source = "libnvidia-ml"
        for i, t in enumerate(targets):
            gpu, how = match(t, devices) if t else (devices[0] if devices else None, "first")
            if gpu is None:
                failed = [d["error"] for d in devices if d.get("error")]
                self.errors[i] = "NVML does not list the CUDA device under load (no UUID or bus id matched)" + (
                    f"; GPUs NVML could not open: {'; '.join(failed)}" if failed else "")
                continue
            if handles[gpu["nvidia_smi"]] is None:
                self.errors[i] = gpu.get("error") or "NVML has no handle for the GPU under load"
                continue
            self.gpus[i] = {**gpu, "matched_by": how}
            h = handles[gpu["nvidia_smi"]]
            self.limits[i] = nv.limits(h)
            self._readers[i] = self._reader(nv, h, i)

    def _reader(self, nv: Nvml, h: Any, i: int) -> Callable[[], Sample]:
        lib = nv.lib
        # Renamed ...ClocksEventReasons in newer drivers; the old name stays exported for now.
        reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        fields = getattr(lib, "nvmlDeviceGetFieldValues", None)

        def mem_temp(out: ctypes.c_uint) -> int:
            if fields is None:
                return NVML_ERROR_NOT_SUPPORTED
            fv = FieldValue(fieldId=_FI_MEMORY_TEMP)
            rc = int(fields(h, 1, ctypes.byref(fv)))
            if rc == NVML_SUCCESS and fv.nvmlReturn != NVML_SUCCESS:
                rc = int(fv.nvmlReturn)
            out.value = fv.value & 0xFFFFFFFF  # an unsigned int in the union's first bytes (little-endian)
            return rc

        def read() -> Sample:
            t, mt, clk, mclk, mw = (ctypes.c_uint() for _ in range(5))
            thr, u = ctypes.c_ulonglong(), Utilization()
            reads: dict[str, tuple[Callable[[], int], Callable[[], Any]]] = {
                "temp_c": (lambda: lib.nvmlDeviceGetTemperature(h, _TEMP_GPU, ctypes.byref(t)), lambda: t.value),
                "mem_temp_c": (lambda: mem_temp(mt), lambda: mt.value),
                "sm_mhz": (lambda: lib.nvmlDeviceGetClockInfo(h, _CLOCK_SM, ctypes.byref(clk)), lambda: clk.value),
                "mem_mhz": (lambda: lib.nvmlDeviceGetClockInfo(h, _CLOCK_MEM, ctypes.byref(mclk)),
                            lambda: mclk.value),
                "power_w": (lambda: lib.nvmlDeviceGetPowerUsage(h, ctypes.byref(mw)), lambda: mw.value / 1000.0),
                "util_pct": (lambda: lib.nvmlDeviceGetUtilizationRates(h, ctypes.byref(u)), lambda: u.gpu),
                "throttle": (lambda: reasons(h, ctypes.byref(thr)) if reasons else NVML_ERROR_NOT_SUPPORTED,
                             lambda: judge.reasons(thr.value))}
            gpu = self.gpus[i]
            sample: Sample = {"gpu": gpu["nvidia_smi"] if gpu else None}
            for key, (call, value) in reads.items():
                if key in self.unsupported[i]:
                    continue
                rc = call()
                if rc == NVML_SUCCESS:
                    sample[key] = value()
                elif rc == NVML_ERROR_NOT_SUPPORTED:
                    self.unsupported[i].add(key)
                else:
                    self.failed[i] += 1
                    self.errors[i] = f"{key}: {nv.error_string(lib, rc)} ({rc})"
            return sample
        return read

    def _loop(self) -> None:
        while not self._stop.is_set():
            for i, read in enumerate(self._readers):
                if read is not None:
                    self.series[i].append({**read(), "t": round(time.monotonic(), 3)})
            self._stop.wait(self.interval)

    def load(self, start: float, end: float) -> None:
        """The window (time.monotonic) in which the GPUs were under load: only those samples are judged."""
        self.load_start, self.load_end = start, end

    def __enter__(self) -> "Telemetry":
        if any(r is not None for r in self._readers):
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    @property
    def samples(self) -> list[Sample]:
        return self.series[0]

    @samples.setter
    def samples(self, given: list[Sample]) -> None:  # recorded samples, summarised as the live ones
        self.series[0] = list(given)

    @property
    def error(self) -> Optional[str]:
        return self.errors[0]

    def summary(self, i: int = 0) -> TelemetrySummary:
        samples = self.series[i]
        t0 = self.load_start
        loaded = judge.under_load(samples, self.load_start, self.load_end) if t0 is not None else samples
        out: TelemetrySummary = {"source": self.source, "samples": len(samples), "under_load": len(loaded),
                               "error": self.errors[i], "gpu": self.gpus[i], "unsupported": sorted(self.unsupported[i]),
                               "failed_reads": self.failed[i], "limits": self.limits[i], "interval_s": self.interval,
                               "series": [_relative(s, t0) for s in samples]}
        out["stats"] = stats = {}
        for key in judge.SERIES_KEYS:
            st = judge.stats(loaded, key)
            if st:
                out[key] = {"min": st["min"], "max": st["max"]}  # the shape reports have always had
                stats[key] = st
        shares = judge.throttle_shares(loaded)
        if loaded:
            out["throttle_reasons"] = sorted(shares)
            out["throttle_shares"] = shares
        return out


def _relative(sample: Sample, t0: Optional[float]) -> Sample:
    """A sample with its time since the load began (the samples' own clock otherwise)."""
    t = sample.get("t")
    if "t" not in sample:
        return dict(sample)
    seconds = float(t) if isinstance(t, (int, float)) else float(str(t))
    return {**sample, "t": round(seconds - (t0 or 0.0), 3)}
