"""Driver and GPU detection: NVML, nvidia-smi, the kernel module files and the PCI bus,
cross-checked. Each value keeps the source it came from; disagreements become problems.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import RunnerError
from tfgpu_install.facts import gpu as smi
from tfgpu_install.facts import identity
from tfgpu_install.facts.model import Driver, Gpu, Host, Problem, SourceTried, Tools
from tfgpu_install.facts.nvml import NvmlReading, query_nvml
from tfgpu_install.runner import TIMED_OUT

SMI_TIMEOUT_S = 15.0
PROC_VERSION = "/proc/driver/nvidia/version"
HUNG = "hung"  # nvidia-smi / NVML timed out
SYS_VERSION = "/sys/module/nvidia/version"


@dataclass(frozen=True)
class GpuDetection:
    driver: Driver
    gpus: tuple[Gpu, ...]
    truncated: tuple[int, ...] = ()  # indices whose name nvidia-smi cut short
    problems: tuple[Problem, ...] = ()
    tried: tuple[SourceTried, ...] = ()
    gpu_on_pci: Optional[bool] = None
    pci: tuple[smi.PciGpu, ...] = field(default=())


def _read(ctx: Context, path: str) -> Optional[str]:
    try:
        return ctx.sys_path(path).read_text(errors="replace")
    except OSError:
        return None


def _summary(driver: Optional[str], n: int) -> str:
    return f"driver {driver or '?'}, {n} GPU{'s' if n != 1 else ''}"


def _state_hint(state: str, host: Optional[Host]) -> str:
    if state == smi.VERSION_MISMATCH:
        return ("the driver was upgraded but the old kernel module is still loaded: reboot "
                "(or reload the nvidia modules)")
    if state == smi.NO_DRIVER:
        if host is not None and host.container:
            return (f"inside a {host.container} container: start it with GPU access (`docker run --gpus all`, "
                    "the NVIDIA container toolkit)")
        if host is not None and host.wsl:
            return ("on WSL2 the driver is the Windows one: update the Windows NVIDIA driver and `wsl --update`; "
                    "never install a Linux driver inside WSL")
        return "the NVIDIA kernel module is not loaded: install the driver (or blacklist nouveau) and reboot"
    if state == HUNG:
        return "the driver does not answer: check `dmesg` for NVRM/Xid errors and reboot"
    if state == smi.GPU_LOST:
        return ("the GPU fell off the bus (Xid 79: power, heat or a PCIe fault): `sudo dmesg | grep -i xid`, "
                "check power cables and seating, then reboot")
    if state == smi.NVML_MISSING:
        return ("the driver's user-space library libnvidia-ml.so is not installed, or the loader's cache does not know "
                "it: `sudo ldconfig` (in a container too), else install the NVIDIA driver's libraries package for the "
                "loaded kernel module; in a container start it with GPU access (`--gpus all`)")
    if state == smi.NO_DEVICES:
        return "the driver is loaded but sees no GPU (passthrough, BIOS settings, or a GPU too new for this driver)"
    return ""


def reading_to_detection(reading: smi.SmiReading, source: str, origin: Optional[str] = None,
                         host: Optional[Host] = None) -> GpuDetection:
    """Driver and GPUs from one nvidia-smi reading (a saved file, or the live tool)."""
    problems: list[Problem] = []
    origin = origin or source
    cuda, cuda_src = (reading.cuda_version, source) if reading.cuda_field == "ok" else (None, None)
    if reading.cuda_field == "error":
        problems.append(Problem(
            "driver.max_cuda",
            f"nvidia-smi printed '{reading.cuda_label}: {reading.cuda_raw}' instead of a version "
            "(WSL2 prints ERR!, some compatibility layers N/A): using the driver table instead",
            "warning",
        ))
    tool = reading.tool_version if reading.tool_differs else None
    if tool:
        problems.append(Problem(
            "driver.version",
            f"nvidia-smi is version {tool} but the driver is {reading.driver_version} "
            "(normal inside containers and on WSL2, where the tool and the driver come from different places); "
            "the driver's version counts",
            "info",
        ))
    version, vsource = reading.driver_version, (source if reading.driver_version else None)
    if version is None and reading.module_version:
        # A pasted /proc/driver/nvidia/version next to a failing nvidia-smi still names the driver.
        version, vsource = reading.module_version, f"{PROC_VERSION} ({origin})"
    lib, module = reading.nvml_library_version, reading.module_version
    if lib and module and not (_prefix_of(lib, module) or _prefix_of(module, lib)):
        problems.append(Problem(
            "driver.version",
            f"the NVML library is {lib} but the loaded kernel module is {module}: "
            "finish the driver upgrade (reinstall one version) and reboot",
            "error",
        ))
    driver = Driver(version, cuda, vsource, max_cuda_source=cuda_src,
                    loaded=reading.state == smi.OK and bool(reading.driver_version), tool_version=tool)
    mig_gpus = {m.gpu for m in reading.mig_devices}
    gpus: list[Gpu] = []
    truncated: list[int] = []
    for g in reading.gpus:
        idx = g.index if g.index is not None else len(gpus)
        if g.name_truncated:
            truncated.append(idx)
        mig = idx in mig_gpus or g.mig_mode == "Enabled"
        gpus.append(Gpu(
            index=idx,
            name=(g.name or "unnamed GPU") + (" ..." if g.name_truncated else ""),
            compute_capability=g.compute_capability,
            memory_mib=g.memory_mib,
            source=source,
            cc_source=source if g.compute_capability else None,
            uuid=g.uuid,
            pci_bus_id=g.bus_id,
            mig=mig,
            pci_device_id=g.pci_device_id,
            architecture=g.architecture,
        ))
    for i in sorted(mig_gpus):
        problems.append(Problem(
            f"gpus[{i}].mig",
            f"GPU {i} is split into MIG instances: TensorFlow uses one instance per process; choose it with "
            "CUDA_VISIBLE_DEVICES=MIG-<uuid> (see `nvidia-smi -L`)",
            "info",
        ))
    if reading.gpu_count is not None and reading.gpu_count > len(gpus):
        problems.append(Problem("gpus", f"{origin} reports {reading.gpu_count} GPUs attached but lists {len(gpus)}",
                                "info"))
    if reading.state != smi.OK:
        hint = _state_hint(reading.state, host)
        problems.append(Problem("driver", f"nvidia-smi: {reading.message}" + (f" ({hint})" if hint else ""), "error"))
    outcome = (_summary(reading.driver_version, len(gpus)) if reading.state == smi.OK
               else (reading.message or reading.state))
    return GpuDetection(driver, tuple(gpus), tuple(truncated), tuple(problems), (SourceTried(origin, outcome),))


class _Hung(Exception):
    """nvidia-smi did not answer in time: the driver is wedged; asking again would hang again."""


def _run_smi(ctx: Context, exe: str, *args: str) -> str:
    try:
        done = ctx.runner.run([exe, *args], desc="nvidia-smi", timeout=SMI_TIMEOUT_S)
    except RunnerError as exc:  # cannot execute
        return f"NVIDIA-SMI could not run: {exc}"
    if done.returncode == TIMED_OUT:
        raise _Hung(f"nvidia-smi did not answer within {SMI_TIMEOUT_S:g}s (a hung driver)")
    # Failures print to stdout on some versions, stderr on others.
    return done.stdout + ("\n" + done.stderr if done.stderr else "")


def read_smi(ctx: Context, exe: str) -> tuple[smi.SmiReading, tuple[SourceTried, ...]]:
    """The live nvidia-smi reading the probe takes (the query first, then the table, `-q` when the table is
    unreadable; a driver that does not answer in time is a reading of its own): what `probe` and `doctor`
    both start from."""
    reading, tried = _live_smi(ctx, exe)
    return reading, tuple(tried)


def _live_smi(ctx: Context, exe: str) -> tuple[smi.SmiReading, list[SourceTried]]:
    tried: list[SourceTried] = []
    try:
        return _live_smi_steps(ctx, exe, tried)
    except _Hung as exc:
        tried.append(SourceTried("nvidia-smi", str(exc)))
        return smi.SmiReading(state=HUNG, message=str(exc), formats=("failure",)), tried


def _live_smi_steps(ctx: Context, exe: str, tried: list[SourceTried]) -> tuple[smi.SmiReading, list[SourceTried]]:
    q_text = _run_smi(ctx, exe, "--query-gpu=" + ",".join(smi.QUERY_FIELDS), "--format=csv,noheader,nounits")
    q_gpus, invalid = smi.parse_query_gpu(q_text, smi.QUERY_FIELDS)
    if invalid:
        # Drivers before ~R510 reject compute_cap: ask again without it (CC then comes from the name table).
        q_text = _run_smi(ctx, exe, "--query-gpu=" + ",".join(smi.QUERY_FIELDS_OLD), "--format=csv,noheader,nounits")
        q_gpus, _ = smi.parse_query_gpu(q_text, smi.QUERY_FIELDS_OLD)
    failure = smi.parse_smi_failure(q_text)
    if failure and not q_gpus:
        tried.append(SourceTried("nvidia-smi --query-gpu", failure[1]))
        return smi.SmiReading(state=failure[0], message=failure[1],
                              nvml_library_version=smi.parse_nvidia_smi(q_text).nvml_library_version,
                              formats=("failure",)), tried
    tried.append(SourceTried("nvidia-smi --query-gpu",
                             _summary(q_gpus[0].driver_version if q_gpus else None, len(q_gpus))))
    table = smi.parse_nvidia_smi(_run_smi(ctx, exe))  # the header holds the CUDA version and the tool's own
    tried.append(SourceTried("nvidia-smi", _summary(table.driver_version, len(table.gpus)) if table.state == smi.OK
                             else (table.message or table.state)))
    if table.driver_version is None and table.state in (smi.OK, smi.UNRECOGNIZED):
        # A table layout we cannot read (a future relabel): the -q report names the same fields.
        long = smi.parse_nvidia_smi(_run_smi(ctx, exe, "-q"))
        tried.append(SourceTried("nvidia-smi -q", _summary(long.driver_version, len(long.gpus))
                                 if long.driver_version else (long.message or long.state)))
        if long.driver_version:
            table = long
    gpus = q_gpus or table.gpus
    if q_gpus and table.gpus:
        # Keep the query's full names; take MIG mode from the table.
        by_idx = {g.index: g for g in table.gpus}
        gpus = tuple(
            smi.SmiGpu(**{**g.__dict__, "mig_mode": g.mig_mode or getattr(by_idx.get(g.index), "mig_mode", None)})
            for g in q_gpus
        )
    drv = table.driver_version or next((g.driver_version for g in q_gpus if g.driver_version), None)
    state = smi.OK if (gpus or drv) else table.state
    return smi.SmiReading(
        state=state, driver_version=drv, tool_version=table.tool_version, cuda_version=table.cuda_version,
        cuda_field=table.cuda_field, cuda_raw=table.cuda_raw, cuda_label=table.cuda_label, gpus=gpus,
        mig_devices=table.mig_devices, message=table.message, formats=table.formats,
    ), tried


def _with_sysfs_device_id(ctx: Context, gpu: Gpu) -> Gpu:
    """A GPU without a compute capability gets its PCI device id from sysfs (by its bus id), so the
    probe can still identify it from pci_ids.yaml when its name is in no table."""
    if gpu.compute_capability or gpu.pci_device_id or not gpu.pci_bus_id:
        return gpu
    m = re.fullmatch(r"0*([0-9a-fA-F]{4}):([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])", gpu.pci_bus_id.strip())
    if m is None:
        return gpu
    dev = (_read(ctx, f"/sys/bus/pci/devices/{m.group(1).lower()}:{m.group(2).lower()}/device") or "").strip()
    return replace(gpu, pci_device_id=dev) if re.fullmatch(r"0x[0-9a-fA-F]{4}", dev) else gpu


# What NVML needs from the kernel: the nvidia module (its /proc and /sys entries, the control
# node a container runtime passes in) or WSL2's GPU paravirtualisation (/dev/dxg). With none of
# them NVML can only fail, so its child process (a Python start, ~25 ms) is not spent.
KERNEL_SIDE = ("/proc/driver/nvidia", "/sys/module/nvidia", "/dev/nvidiactl", "/dev/dxg", "/usr/lib/wsl/lib")
NO_KERNEL_SIDE = "skipped: no NVIDIA kernel driver (" + ", ".join(KERNEL_SIDE) + " absent)"


def _nvidia_kernel_side(ctx: Context) -> bool:
    return any(os.path.lexists(ctx.sys_path(p)) for p in KERNEL_SIDE)


def detect_gpus(ctx: Context, tools: Tools, host: Host) -> GpuDetection:
    """Every source asked in turn (kernel module files, NVML, nvidia-smi, the PCI bus), then cross-checked."""
    problems: list[Problem] = []
    tried: list[SourceTried] = []
    proc_ver, sys_ver = _module_versions(ctx, tried)
    nvml = _ask_nvml(ctx, tried)
    reading = _ask_smi(ctx, tools, host, nvml, tried, problems)
    det = reading_to_detection(reading, "nvidia-smi", host=host) if reading is not None else None
    if det is not None:
        problems += det.problems
    gpus, truncated = _merge_gpus(nvml, det, problems)
    gpus = tuple(_with_sysfs_device_id(ctx, g) for g in gpus)
    driver = _cross_check_driver(nvml, det, reading, proc_ver, sys_ver, problems)
    pci: tuple[smi.PciGpu, ...] = ()
    gpu_on_pci: Optional[bool] = True if gpus else None
    if not gpus:
        pci = _look_on_pci(ctx, host, reading, tried, problems)
        gpu_on_pci = bool(pci)
    return GpuDetection(driver, gpus, truncated, tuple(problems), tuple(tried), gpu_on_pci, pci)


def _module_versions(ctx: Context, tried: list[SourceTried]) -> tuple[Optional[str], Optional[str]]:
    """The loaded kernel module's version, from /proc and from /sys."""
    proc_text = _read(ctx, PROC_VERSION)
    proc_ver = smi.parse_proc_driver_version(proc_text or "")
    tried.append(SourceTried(PROC_VERSION,
                             f"driver {proc_ver}" if proc_ver else ("unreadable" if proc_text else "absent")))
    sys_ver = smi.parse_sys_module_version(_read(ctx, SYS_VERSION) or "")
    tried.append(SourceTried(SYS_VERSION, f"driver {sys_ver}" if sys_ver else "absent"))
    return proc_ver, sys_ver


def _ask_nvml(ctx: Context, tried: list[SourceTried]) -> NvmlReading:
    nvml = query_nvml(ctx.runner) if _nvidia_kernel_side(ctx) else NvmlReading(ok=False, error=NO_KERNEL_SIDE)
    tried.append(SourceTried("nvml", _summary(nvml.driver_version, len(nvml.gpus)) if nvml.ok
                             else (nvml.error or "failed")))
    return nvml


def _ask_smi(ctx: Context, tools: Tools, host: Host, nvml: NvmlReading, tried: list[SourceTried],
             problems: list[Problem]) -> Optional[smi.SmiReading]:
    """nvidia-smi (WSL2's own when none is on PATH), unless NVML already found the driver hung."""
    exe = tools.nvidia_smi
    if exe is None and host.wsl and ctx.sys_path("/usr/lib/wsl/lib/nvidia-smi").exists():
        exe = str(ctx.sys_path("/usr/lib/wsl/lib/nvidia-smi"))
    if not exe:
        tried.append(SourceTried("nvidia-smi", "not on PATH"))
        return None
    if nvml.error and "timed out" in nvml.error:
        # nvidia-smi goes through the same wedged driver: it would hang for as long again.
        tried.append(SourceTried("nvidia-smi", "skipped: NVML timed out (a hung driver)"))
        problems.append(Problem("driver", "NVML timed out: " + _state_hint(HUNG, host), "error"))
        return None
    reading, t = _live_smi(ctx, exe)
    tried += t
    return reading


def _merge_gpus(nvml: NvmlReading, det: Optional[GpuDetection],
                problems: list[Problem]) -> tuple[tuple[Gpu, ...], tuple[int, ...]]:
    """GPUs: NVML first (full names, CC), nvidia-smi where NVML has none; disagreements are problems."""
    if not (nvml.ok and nvml.gpus):
        return (det.gpus, det.truncated) if det is not None else ((), ())
    smi_by_idx = {g.index: g for g in (det.gpus if det else ())}
    gpus = tuple(
        Gpu(g.index, g.name or "unnamed GPU", g.compute_capability, g.memory_mib, "nvml",
            cc_source="nvml" if g.compute_capability else None, uuid=g.uuid, pci_bus_id=g.pci_bus_id,
            mig=g.mig or (g.index in smi_by_idx and smi_by_idx[g.index].mig))
        for g in nvml.gpus
    )
    for g in gpus:
        other = smi_by_idx.get(g.index)
        theirs = other.compute_capability if other else None
        if theirs and g.compute_capability and theirs != g.compute_capability:
            problems.append(Problem(f"gpus[{g.index}].compute_capability",
                                    f"nvml says {g.compute_capability}, nvidia-smi says {theirs}", "warning"))
    if det and det.gpus and len(det.gpus) != len(gpus):
        problems.append(Problem("gpus", f"nvml lists {len(gpus)} GPUs, nvidia-smi {len(det.gpus)}", "warning"))
    return gpus, ()


def _cross_check_driver(nvml: NvmlReading, det: Optional[GpuDetection], reading: Optional[smi.SmiReading],
                        proc_ver: Optional[str], sys_ver: Optional[str], problems: list[Problem]) -> Driver:
    """Driver version and CUDA limit: every source that answered, cross-checked."""
    versions = [(s, v) for s, v in (
        ("nvml", nvml.driver_version), ("nvidia-smi", det.driver.version if det else None),
        (PROC_VERSION, proc_ver), (SYS_VERSION, sys_ver),
        ("NVML library (nvidia-smi)", reading.nvml_library_version if reading else None),
    ) if v]
    vsource, version = versions[0] if versions else (None, None)
    distinct = {v for _, v in versions if not (_prefix_of(v, version) or _prefix_of(version, v))}
    if distinct:
        problems.append(Problem(
            "driver.version",
            "driver versions disagree: " + ", ".join(f"{s} {v}" for s, v in versions)
            + " (a driver upgrade without a reboot leaves the old kernel module loaded: reboot)",
            "warning",
        ))
    cuda = cuda_src = None
    if nvml.max_cuda:
        cuda, cuda_src = nvml.max_cuda, "nvml"
    if det and det.driver.max_cuda:
        if cuda and det.driver.max_cuda != cuda:
            problems.append(Problem("driver.max_cuda", f"nvml says CUDA {cuda}, nvidia-smi says {det.driver.max_cuda}",
                                    "warning"))
        cuda, cuda_src = cuda or det.driver.max_cuda, cuda_src or "nvidia-smi"
    loaded = bool(nvml.ok or proc_ver or sys_ver or (det and det.driver.loaded))
    if version and not loaded:
        problems.append(Problem("driver", f"driver {version} is installed but not loaded", "error"))
    return Driver(version, cuda, vsource, max_cuda_source=cuda_src, loaded=loaded,
                  tool_version=det.driver.tool_version if det else None)


def _look_on_pci(ctx: Context, host: Host, reading: Optional[smi.SmiReading], tried: list[SourceTried],
                 problems: list[Problem]) -> tuple[smi.PciGpu, ...]:
    """No GPU answered: is one on the PCI bus (sysfs, then lspci)? Then the driver is the problem."""
    pci = identity.pci_gpus(ctx)
    tried.append(SourceTried("/sys/bus/pci/devices",
                             f"{len(pci)} NVIDIA display device(s)" if pci else "no NVIDIA display device"))
    lspci = ctx.runner.which("lspci")
    if lspci:
        try:
            done = ctx.runner.run([lspci, "-nn"], desc="PCI devices", timeout=10)
            listed = smi.parse_lspci(done.stdout) if done.ok else ()
        except RunnerError:
            listed = ()
        tried.append(SourceTried("lspci",
                                 ", ".join(p.name or p.description for p in listed) or "no NVIDIA display device"))
        pci = listed or pci
    if pci:
        names = ", ".join(p.name or f"device {p.device_id}" for p in pci)
        problems.append(Problem(
            "gpus",
            f"an NVIDIA GPU is on the PCI bus ({names}) but no working driver answers: "
            + _state_hint(reading.state if reading and reading.state != smi.OK else smi.NO_DRIVER, host),
            "error",
        ))
    return pci


def _prefix_of(a: Optional[str], b: Optional[str]) -> bool:
    """"570.124" (NVML library, two parts) agrees with "570.124.06"."""
    if not a or not b:
        return False
    return a == b or b.startswith(a + ".")
