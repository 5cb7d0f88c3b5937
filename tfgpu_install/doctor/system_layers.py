"""The lower layers of the walk: driver (nvidia-smi, kernel module, WSL2, containers, GPU memory,
CUDA_VISIBLE_DEVICES), CUDA toolkits, and the CUDA/cuDNN libraries on the library path.

Files are read through ctx.sys_path (a root prefix), commands through ctx.runner."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from tfgpu_install.doctor.libpath import LibFile, parse_toolkit_version_file, scan_dir, toolkit_of
from tfgpu_install.doctor.walkstate import (
    ABSENT,
    BROKEN,
    OK,
    SYSTEM_LIB_DIRS,
    WARN,
    WSL_LIB,
    Check,
    Walk,
    real_path,
    split_path,
    version_tuple,
)
from tfgpu_install.facts import gpu as smi
from tfgpu_install.facts import identity
from tfgpu_install.guard import shellquote

# ------------------------------------------------------------------ driver


def gather_host(w: Walk) -> None:
    """The probe's facts the walk starts from: the host (facts.host: WSL, container) and the probe's own
    nvidia-smi reading (facts.gpudetect.read_smi: the query, the table, a hung driver's timeout), not a
    second way of asking. What only the doctor reads (loaded modules, the PCI bus) is added here."""
    from tfgpu_install.facts.gpudetect import read_smi
    from tfgpu_install.facts.host import gather_host as probe_host

    host, _ = probe_host(w.ctx, runner_glibc=False)  # glibc is not the doctor's question
    w.wsl, w.container = host.wsl, host.container is not None
    mods = w.read("/proc/modules") or ""
    w.modules = frozenset(line.split()[0] for line in mods.splitlines() if line.strip())
    w.pci_nvidia = bool(identity.pci_gpus(w.ctx))
    w.smi_path = w.ctx.runner.which("nvidia-smi")
    if w.smi_path is None and w.wsl and w.exists(f"{WSL_LIB}/nvidia-smi"):
        w.smi_path = f"{WSL_LIB}/nvidia-smi"
    if w.smi_path is not None:
        w.reading, _ = read_smi(w.ctx, w.smi_path)
        w.gpus = w.reading.gpus


def check_driver(w: Walk) -> Check:
    """The driver layer: what nvidia-smi answered, else WSL2's driver, else why there is no driver."""
    answered = _driver_answer(w)
    if answered is not None:
        return answered
    if w.wsl:
        return _wsl_driver(w)
    return _driver_missing(w)


def _driver_answer(w: Walk) -> Optional[Check]:
    """nouveau in the way, or what nvidia-smi's answer says (None: it did not answer usefully)."""
    r = w.reading
    if "nouveau" in w.modules:
        return Check("driver", "kernel module", BROKEN, "the nouveau module is loaded (/proc/modules)",
                     w.rules.by_id("nouveau-loaded").cause, w.rules.by_id("nouveau-loaded").fix, rule="nouveau-loaded")
    if r is not None and r.state == smi.VERSION_MISMATCH:
        rule = w.rules.by_id("driver-library-mismatch")
        return Check("driver", "nvidia-smi", BROKEN, r.message or "Driver/library version mismatch",
                     rule.cause, rule.fix, rule=rule.id)
    if r is not None and r.state == smi.OK and (r.driver_version or r.gpus):
        cuda = r.cuda_version or "unknown"
        gpus = ", ".join(g.name or "?" for g in r.gpus) or "GPU rows not shown"
        return Check("driver", "nvidia-smi", OK, f"driver {r.driver_version}, supports CUDA <= {cuda}; {gpus}")
    if r is not None and r.state == smi.NO_DEVICES and not w.wsl:
        return Check("driver", "nvidia-smi", BROKEN, r.message or "No devices were found",
                     "The NVIDIA driver is loaded but sees no GPU: the GPU fell off the bus (`sudo dmesg | grep -i "
                     "xid`), "
                     "is not passed through to this VM, or is too new/old for this driver branch.",
                     "`sudo dmesg | grep -iE 'nvrm|xid'` for the reason; reseat/power-cycle or fix the passthrough; "
                     "install a driver branch that supports this GPU; reboot.")
    return None


def _wsl_driver(w: Walk) -> Check:
    r = w.reading
    if not w.exists(f"{WSL_LIB}/libcuda.so.1"):
        return Check("driver", "WSL2 driver", BROKEN, f"WSL2 without {WSL_LIB}/libcuda.so.1",
                     "On WSL2 the GPU driver is the Windows one; WSL exposes it as /usr/lib/wsl/lib. It is missing: "
                     "the Windows NVIDIA driver is absent or too old for WSL2, or WSL is outdated.",
                     "Install/update the NVIDIA driver on Windows and run `wsl --update` in Windows, then `wsl "
                     "--shutdown`. "
                     "Never install a Linux NVIDIA driver inside WSL.")
    msg = (r.message if r is not None else None) or "nvidia-smi not found"
    return Check("driver", "WSL2 driver", BROKEN, msg,
                 "WSL2 exposes the Windows driver but nvidia-smi cannot use it.",
                 "Update the NVIDIA driver on Windows and WSL (`wsl --update`, `wsl --shutdown`). "
                 "Never install a Linux NVIDIA driver inside WSL.")


def _driver_missing(w: Walk) -> Check:
    """No answer from a driver: no GPU at all, a container without GPU access, no kernel module, or a
    module nvidia-smi cannot talk to."""
    r = w.reading
    if r is None and not w.pci_nvidia and not any(m.startswith("nvidia") for m in w.modules) \
            and not w.exists("/proc/driver/nvidia/version"):
        where = " This runs in a container." if w.container else ""
        return Check("driver", "GPU", ABSENT,
                     "no NVIDIA GPU on the PCI bus, no nvidia kernel module, no nvidia-smi." + where,
                     "No NVIDIA GPU or driver is visible here, so TensorFlow can only use the CPU on this machine. "
                     "Nothing is broken: there is nothing GPU-related to diagnose.",
                     ("If the host has a GPU, start the container with `--gpus all` (NVIDIA Container Toolkit). "
                      if w.container else
                      "If this machine should have one (a cloud VM), check the instance type or PCI passthrough. ")
                     + "Otherwise use `pip install tensorflow` (CPU), or plan for another machine with "
                     "`tfgpu-install plan --from-nvidia-smi FILE`.")
    if w.container:
        return Check("driver", "container", BROKEN,
                     "nvidia-smi " + ("failed" if r is not None else "is missing") + " inside a container",
                     "The container was started without GPU access: no driver libraries or /dev/nvidia* are injected.",
                     "Start it with `docker run --gpus all ...` (NVIDIA Container Toolkit); never install a driver "
                     "inside the container.")
    if not any(m == "nvidia" for m in w.modules):
        pci = "an NVIDIA GPU is on the PCI bus but " if w.pci_nvidia else ""
        return Check("driver", "kernel module", BROKEN, f"{pci}the nvidia kernel module is not loaded",
                     "No NVIDIA kernel module is loaded: the driver is not installed, not built for this kernel "
                     "(DKMS), "
                     "or blocked by Secure Boot.",
                     "`sudo modprobe nvidia` and read its error; install the driver for this kernel "
                     "(`sudo ubuntu-drivers install` on Ubuntu, or your distribution's nvidia-driver package), reboot, "
                     "then check `nvidia-smi`.")
    msg = (r.message if r is not None else None) or "nvidia-smi is missing or unreadable"
    return Check("driver", "nvidia-smi", BROKEN, msg, "The nvidia module is loaded but nvidia-smi cannot talk to it.",
                 "`sudo dmesg | grep -i nvrm` for the reason; reinstall the driver and reboot.")


def check_wsl_linux_driver(w: Walk) -> Optional[Check]:
    if not w.wsl:
        return None
    for d in SYSTEM_LIB_DIRS:
        p = w.ctx.sys_path(f"{d}/libcuda.so.1")
        if p.exists() and not real_path(w, f"{d}/libcuda.so.1").startswith(WSL_LIB):
            return Check("driver", "WSL2 driver", BROKEN, f"a Linux libcuda at {d}/libcuda.so.1 inside WSL2",
                         "A Linux NVIDIA driver was installed inside WSL; its libcuda shadows the Windows driver's "
                         f"({WSL_LIB}) and cannot reach the GPU.",
                         f"Remove it: `sudo apt-get remove --purge 'libnvidia-compute-*' 'nvidia-driver-*'` "
                         f"(or `sudo rm {shellquote.command(w.ctx, d)}/libcuda.so*`), then `sudo ldconfig`. Never "
                         "install a Linux driver inside "
                         "WSL.")
    return None


def check_gpu_memory(w: Walk) -> Optional[Check]:
    if w.smi_path is None or w.reading is None or w.reading.state != smi.OK:
        return None
    res = w.ctx.runner.run([w.smi_path, "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
                           desc="processes using the GPU", timeout=30)
    if not res.ok:
        return None
    apps = [line.strip() for line in res.stdout.splitlines() if line.strip() and "No running" not in line]
    if not apps:
        return Check("driver", "GPU memory", OK, "no compute process holds GPU memory")
    pids = " ".join(a.split(",")[0].strip() for a in apps)
    return Check("driver", "GPU memory", WARN, f"{len(apps)} process(es) hold GPU memory",
                 "Processes hold GPU memory; a leftover one (an old notebook kernel, a crashed training) makes "
                 "TensorFlow fail with CUDA_ERROR_OUT_OF_MEMORY.",
                 f"If they are leftovers: `kill {pids}` (or shut the notebook kernels down).", evidence=tuple(apps))


def check_visible_devices(w: Walk) -> Optional[Check]:
    cvd = w.ctx.env("CUDA_VISIBLE_DEVICES")
    if cvd is None:
        return None
    value = cvd.strip()
    if value in ("", "-1"):
        rule = w.rules.by_id("cuda-visible-devices-empty")
        return Check("devices", "CUDA_VISIBLE_DEVICES", BROKEN, f"CUDA_VISIBLE_DEVICES={cvd!r}", rule.cause, rule.fix,
                     rule=rule.id)
    gpus = w.gpus
    count = len(gpus)
    uuids = {g.uuid for g in gpus if g.uuid}
    for item in (x.strip() for x in value.split(",")):
        missing = (item.isdigit() and count > 0 and int(item) >= count) or (
            item.upper().startswith("GPU-") and bool(uuids) and item not in uuids)
        if missing:
            return Check("devices", "CUDA_VISIBLE_DEVICES", BROKEN,
                         f"CUDA_VISIBLE_DEVICES={cvd!r} but nvidia-smi lists {count} GPU(s)",
                         f"CUDA_VISIBLE_DEVICES names GPU {item!r}, which this machine does not have; CUDA stops at an "
                         "invalid entry, so TensorFlow may see no GPU at all.",
                         "Set it to existing indices or UUIDs from `nvidia-smi -L`, or `unset CUDA_VISIBLE_DEVICES`.")
    return Check("devices", "CUDA_VISIBLE_DEVICES", OK, f"CUDA_VISIBLE_DEVICES={cvd!r}")


# ------------------------------------------------------------------ toolkit






def check_toolkits(w: Walk) -> list[Check]:
    """/usr/local/cuda, the toolkit PATH and LD_LIBRARY_PATH use, and that toolkit against the driver."""
    cuda_link, dangling = _cuda_link(w)
    if dangling is not None:
        return [dangling]
    path_tk, ld_tk = _toolkits_in_use(w)
    if path_tk and ld_tk and path_tk != ld_tk:
        return [Check("toolkit", "two toolkits", BROKEN,
                      f"nvcc/ptxas from {path_tk} (PATH) but CUDA libraries from {ld_tk} (LD_LIBRARY_PATH)",
                      "Two CUDA toolkits are in use at once: code compiled (and XLA's ptxas) comes from one, the "
                      "libraries loaded at run time from the other.",
                      f"Use one toolkit for both, e.g. `{shellquote.prepend(w.ctx, 'PATH', f'{ld_tk}/bin')}` (the "
                      "toolkit whose libraries TensorFlow loads), or "
                      f"`{shellquote.prepend(w.ctx, 'LD_LIBRARY_PATH', f'{path_tk}/lib64')}`; "
                      "put the line in the env's activation.")]
    used = ld_tk or path_tk
    if cuda_link and used and cuda_link != used:
        return [Check("toolkit", "/usr/local/cuda", BROKEN,
                      f"/usr/local/cuda -> {cuda_link}, but {used} is the one in use",
                      "/usr/local/cuda points at a different toolkit than PATH/LD_LIBRARY_PATH use; XLA looks in "
                      "/usr/local/cuda for ptxas and libdevice, so it mixes versions.",
                      f"`{shellquote.command(w.ctx, 'sudo', 'ln', '-sfn', str(used), '/usr/local/cuda')}` (or set "
                      f"PATH/LD_LIBRARY_PATH to {cuda_link}).")]
    tk = used or cuda_link
    return [_toolkit_vs_driver(w, tk)] if tk else []


def _cuda_link(w: Walk) -> tuple[Optional[str], Optional[Check]]:
    """The toolkit /usr/local/cuda names, or the finding that it dangles."""
    link = w.ctx.sys_path("/usr/local/cuda")
    if link.is_symlink():
        target = os.readlink(link)
        if not w.ctx.sys_path(real_path(w, "/usr/local/cuda")).exists():
            installed = sorted((p.name for p in w.ctx.sys_path("/usr/local").glob("cuda-*") if p.is_dir()),
                               key=lambda n: version_tuple(n))
            to = f"/usr/local/{installed[-1]}" if installed else "/usr/local/cuda-X.Y"
            return None, Check("toolkit", "/usr/local/cuda", BROKEN, f"/usr/local/cuda -> {target} (missing)",
                               "/usr/local/cuda is a dangling symlink: the toolkit it named was removed. XLA and build "
                               "tools look there for ptxas and libdevice.",
                               "Point it at an installed toolkit "
                               f"(`{shellquote.command(w.ctx, 'sudo', 'ln', '-sfn', str(to), '/usr/local/cuda')}`) "
                               "or remove it: "
                               "`sudo rm /usr/local/cuda`.")
        return toolkit_of(real_path(w, "/usr/local/cuda")), None
    return ("/usr/local/cuda" if link.is_dir() else None), None


def _toolkits_in_use(w: Walk) -> tuple[Optional[str], Optional[str]]:
    """The toolkit whose nvcc PATH finds, and the one whose libcudart LD_LIBRARY_PATH finds."""
    path_tk = next((toolkit_of(real_path(w, p)) for p in split_path(w.ctx.env("PATH"))
                    if w.ctx.sys_path(p + "/nvcc").exists() and toolkit_of(real_path(w, p))), None)
    for p in split_path(w.ctx.env("LD_LIBRARY_PATH")):
        d = w.ctx.sys_path(p)
        if d.is_dir() and any(n.startswith("libcudart.so") for n in os.listdir(d)) and toolkit_of(real_path(w, p)):
            return path_tk, toolkit_of(real_path(w, p))
    return path_tk, None


def _toolkit_vs_driver(w: Walk, tk: str) -> Check:
    version = None
    for f in ("version.json", "version.txt"):
        text = w.read(f"{real_path(w, tk)}/{f}")
        if text:
            version = parse_toolkit_version_file(text)
            break
    drv = w.reading.cuda_version if w.reading is not None else None
    summary = f"toolkit {tk}" + (f" (CUDA {version})" if version else "")
    if not (version and drv and version_tuple(version)[:2] > version_tuple(drv)[:2]):
        return Check("toolkit", "toolkit", OK, summary)
    same_major = version_tuple(version)[0] == version_tuple(drv)[0]
    return Check("toolkit", "toolkit vs driver", WARN if same_major else BROKEN,
                 f"{summary}; the driver supports CUDA <= {drv}",
                 f"nvcc's CUDA {version} is newer than the driver's CUDA {drv} (nvidia-smi's header is the "
                 "driver's maximum, not the installed toolkit). "
                 + ("Minor-version compatibility runs its libraries, but PTX it produces (XLA) will not load."
                    if same_major else "Its libraries cannot run on this driver."),
                 f"Upgrade the driver to one supporting CUDA {version}, or use a toolkit <= {drv}.")


# ------------------------------------------------------------------ libraries and cuDNN


def _lib_dirs(w: Walk) -> list[str]:
    dirs = split_path(w.ctx.env("LD_LIBRARY_PATH"))
    if w.env_files is not None:
        dirs += list(w.env_files.nvidia_lib_dirs) + [w.env_files.path.rstrip("/") + "/lib"]
    dirs += list(SYSTEM_LIB_DIRS)
    seen: list[str] = []
    for d in dirs:
        if d not in seen:
            seen.append(d)
    return seen


def _scan(w: Walk, d: str) -> list[LibFile]:
    # Env dirs are user paths (absolute, not under the root prefix); system ones go through it.
    env = w.env_files.path if w.env_files is not None else None
    if env and d.startswith(env):
        return scan_dir(Path(d), d)
    return scan_dir(w.ctx.sys_path(d), d, lambda p: w.ctx.sys_path(real_path(w, f"{d}/{p.name}")).exists())


# Where drivers put libcuda.so.1 besides the system dirs (containers, WSL2).
DRIVER_LIB_DIRS = (WSL_LIB, "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/nvidia")


def check_libraries(w: Walk) -> list[Check]:
    """libcuda findable (and not a stub), no dangling links, one cuDNN major, the newest copy first."""
    libs = [lf for d in _lib_dirs(w) for lf in _scan(w, d)]
    found = _libcuda_missing(w, libs) or _libcuda_stub(w, libs) or _dangling(libs, shellquote.shell_of(w.ctx.environ))
    if found is not None:
        return [found]
    cudnn = [lf for lf in libs if re.match(r"^libcudnn\.so\.\d", lf.name) and not lf.dangling]
    majors: dict[str, list[LibFile]] = {}
    for lf in cudnn:
        if lf.major:
            majors.setdefault(lf.major, []).append(lf)
    found = _cudnn_majors(w, cudnn, majors) or _cudnn_shadowed(majors, shellquote.shell_of(w.ctx.environ))
    if found is not None:
        return [found]
    if cudnn:
        return [Check("cudnn", "cuDNN", OK, ", ".join(sorted({f'{lf.soname or lf.name} in {lf.dir}' for lf in cudnn})))]
    return []


def _libcuda_missing(w: Walk, libs: list[LibFile]) -> Optional[Check]:
    if w.reading is None or w.reading.state != smi.OK:
        return None
    if any(lf.name == "libcuda.so.1" and not lf.dangling for lf in libs) or any(
            lf.name == "libcuda.so.1" and not lf.dangling for d in DRIVER_LIB_DIRS for lf in _scan(w, d)):
        return None
    rule = w.rules.by_id("libcuda-missing")
    return Check("libraries", "libcuda.so.1", BROKEN,
                 "nvidia-smi answers, but no libcuda.so.1 is in the library path or the system library dirs",
                 rule.cause, rule.fix, rule=rule.id)


def _libcuda_stub(w: Walk, libs: list[LibFile]) -> Optional[Check]:
    stub = next((lf for lf in libs if lf.name.startswith("libcuda.so") and "/stubs" in lf.dir), None)
    if stub is None:
        return None
    # A toolkit's link-time stub ahead of the driver: every CUDA call returns CUDA_ERROR_STUB_LIBRARY.
    rule = w.rules.by_id("libcuda-stub-loaded")
    return Check("libraries", "libcuda stub", BROKEN, f"{stub.path} is on the library path",
                 rule.cause, rule.fix, rule=rule.id)


def _dangling(libs: list[LibFile], shell: str = "sh") -> Optional[Check]:
    dangling = [lf for lf in libs if lf.dangling]
    if not dangling:
        return None
    lf = dangling[0]
    return Check("libraries", "dangling symlink", BROKEN, f"{lf.path} -> {lf.target} (missing)",
                 f"{lf.path} is a dangling symlink: the library it named was removed or moved, so the loader "
                 "skips it (or ldconfig keeps a broken entry).",
                 f"Remove it: `{shellquote.command(shell, 'sudo', 'rm', str(lf.path))}` (then `sudo ldconfig`), or "
                 "reinstall the package that owns it.",
                 evidence=tuple(f"{x.path} -> {x.target}" for x in dangling))


def _cudnn_majors(w: Walk, cudnn: list[LibFile], majors: dict[str, list[LibFile]]) -> Optional[Check]:
    """Two cuDNN majors on the library path: the one the env (or TF's build) does not want is stale."""
    if len(majors) <= 1:
        return None
    wanted = w.env_files.wanted_cudnn_major() if w.env_files is not None else None
    wanted = wanted or _build_cudnn_major(w)
    stale = [m for m in sorted(majors) if m != wanted] if wanted else sorted(majors)[:-1]
    files = [lf for m in stale for lf in majors[m]]
    keep = wanted or sorted(majors)[-1]
    return Check("cudnn", "stale cuDNN", BROKEN,
                 "cuDNN " + " and ".join(sorted(majors)) + " are both on the library path",
                 f"A stale cuDNN {', '.join(stale)} sits on the library path beside cuDNN {keep}"
                 + (" (the one TensorFlow's env wants)" if wanted else "")
                 + ": whichever a process loads first wins, which gives 'Loaded runtime CuDNN library ... but "
                   "source was compiled with ...' and crashes when frameworks share a process.",
                 "Remove the stale files (or their directory from LD_LIBRARY_PATH): "
                 + " ".join(f"`{shellquote.command(w.ctx, 'rm', str(lf.path))}`" for lf in files),
                 evidence=tuple(f"{lf.path} (SONAME {lf.soname or '?'})" for lf in cudnn))


def _cudnn_shadowed(majors: dict[str, list[LibFile]], shell: str = "sh") -> Optional[Check]:
    """The same major in two places, an older copy first: that one is loaded."""
    for group in majors.values():
        versions = [(lf, version_tuple(lf.version or "")) for lf in group if lf.version and lf.version.count(".") >= 1]
        if len(versions) > 1 and versions[0][1] < max(v for _, v in versions):
            first, newest = versions[0][0], max(versions, key=lambda x: x[1])[0]
            return Check("cudnn", "stale cuDNN", BROKEN, f"{first.path} comes before {newest.path} on the library path",
                         f"cuDNN {first.version} is found first and shadows {newest.version}: TensorFlow loads the "
                         "older one ('Loaded runtime CuDNN library ... but source was compiled with ...').",
                         f"Remove the stale copy (`{shellquote.command(shell, 'rm', str(first.path))}`) or put "
                         f"{newest.dir} first on LD_LIBRARY_PATH.")
    return None


def _build_cudnn_major(w: Walk) -> Optional[str]:
    v = str((w.probe.build if w.probe else {}).get("cudnn_version") or "")
    return v.split(".")[0] if v[:1].isdigit() else None
