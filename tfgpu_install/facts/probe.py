"""gather(ctx, assume) -> Facts: every probe, cross-checked, each value with its source.

Overrides (--assume-* flags, TFGPU_OVERRIDE_* variables, --from-nvidia-smi) beat detection
and say so in the source ("override:flag", "override:env", "nvidia-smi file").
A probe that fails leaves None and a reason in `problems`; gather never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, UsageError
from tfgpu_install.facts.background import Background
from tfgpu_install.facts.gpu import UNRECOGNIZED, parse_nvidia_smi
from tfgpu_install.facts.gpudetect import GpuDetection, detect_gpus, reading_to_detection
from tfgpu_install.facts.model import AssumeFlags, Driver, Facts, Gpu, Host, Problem, PythonInterp

if TYPE_CHECKING:
    from tfgpu_install.knowledge.model import Knowledge

FLAG = "override:flag"
ENV = "override:env"
SMI_FILE = "nvidia-smi file"
_RE_CC = re.compile(r"^\d{1,2}\.\d$")


@dataclass(frozen=True)
class Assumptions:
    """What the user told us about the target machine. Empty: detect everything."""

    driver: Optional[str] = None
    gpus: tuple[str, ...] = ()  # names ("RTX 4090") or compute capabilities ("8.9"), one per GPU
    python: Optional[str] = None  # "3.11"
    glibc: Optional[str] = None  # "2.31"
    nvidia_smi_text: Optional[str] = None
    nvidia_smi_origin: Optional[str] = None  # the file name ("-" for stdin)
    os: Optional[str] = None  # "windows", "linux"
    sources: dict[str, str] = field(default_factory=dict)  # field -> FLAG | ENV

    def source(self, name: str) -> str:
        return self.sources.get(name, FLAG)


def _check(name: str, value: Optional[str], pattern: str, example: str, origin: str) -> Optional[str]:
    if value is None:
        return None
    value = value.strip()
    if not re.fullmatch(pattern, value):
        raise UsageError(f"{origin}: {value!r} is not a valid {name}", hint=f"give it like {example}")
    return value


def _read_smi(path: str) -> str:
    try:
        from tfgpu_install.guard.bounded import read_text

        return read_text(path, "nvidia-smi output", errors="replace")  # capped: /dev/zero is BAD_INPUT
    except OSError as exc:
        raise BadInputError(
            f"cannot read the nvidia-smi output {path!r}: {exc.strerror or exc}",
            hint="save it with `nvidia-smi > smi.txt` on the target machine and pass that file",
            ref="bad-nvidia-smi-file",
        ) from exc


def assumptions(flags: AssumeFlags, ctx: Context) -> Assumptions:
    """--assume-* flags beat TFGPU_OVERRIDE_* variables, which beat detection.

    Raises UsageError for a malformed value and BadInputError for an unreadable or
    unrecognizable --from-nvidia-smi file.
    """
    ov = ctx.overrides
    sources: dict[str, str] = {}

    def pick(name: str, flag: Optional[str], env_key: str) -> Optional[str]:
        if flag is not None:
            sources[name] = FLAG
            return flag
        if ov.get(env_key):
            sources[name] = ENV
            return ov[env_key]
        return None

    def origin(name: str, flag: str, env: str) -> str:
        return flag if sources.get(name) == FLAG else f"TFGPU_OVERRIDE_{env}"

    driver = pick("driver", flags.driver, "driver")
    driver = _check("driver version", driver, r"\d+\.\d+(\.\d+)*", "535.104.05",
                    origin("driver", "--assume-driver", "DRIVER"))
    python = pick("python", flags.python, "python")
    python = _check("Python version", python, r"3\.\d+(\.\d+)?", "3.11", origin("python", "--assume-python", "PYTHON"))
    glibc = pick("glibc", flags.glibc, "glibc")
    glibc = _check("glibc version", glibc, r"\d+\.\d+", "2.31", origin("glibc", "--assume-glibc", "GLIBC"))
    os_name = pick("os", None, "os")
    flag_gpus = flags.gpus
    gpus: tuple[str, ...] = ()
    if flag_gpus:
        sources["gpus"] = FLAG
        gpus = tuple(g.strip() for g in flag_gpus if g.strip())
    elif ov.get("gpus"):
        sources["gpus"] = ENV
        gpus = tuple(g.strip() for g in ov["gpus"].split(",") if g.strip())
    smi_path = pick("nvidia_smi", flags.nvidia_smi, "nvidia_smi")
    smi_text = None
    if smi_path is not None:
        smi_text = _read_smi(smi_path)
        reading = parse_nvidia_smi(smi_text)
        if reading.state == UNRECOGNIZED and not reading.driver_version:
            raise BadInputError(
                f"{smi_path}: no nvidia-smi output recognized in it",
                hint="pass the plain output of `nvidia-smi`, `nvidia-smi -q` or "
                "`nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv`",
                ref="bad-nvidia-smi-file",
            )
    return Assumptions(
        driver=driver,
        gpus=gpus,
        python=python,
        glibc=glibc,
        nvidia_smi_text=smi_text,
        nvidia_smi_origin=smi_path,
        os=os_name.strip().lower() if os_name else None,
        sources=sources,
    )


class _Lazy:
    """Loads the knowledge once, only if a lookup needs it; a failure becomes one problem."""

    def __init__(self, knowledge: Optional["Knowledge"], ctx: Optional[Context] = None) -> None:
        self.ctx = ctx
        self.value = knowledge
        self.tried = knowledge is not None
        self.error: Optional[str] = None

    def get(self) -> Optional["Knowledge"]:
        if not self.tried:
            self.tried = True
            try:
                from tfgpu_install.knowledge.load import load_knowledge

                ctx = self.ctx
                self.value = load_knowledge(ctx.profiles_dir if ctx is not None else None,
                                            cache_dir=ctx.cache_dir if ctx is not None else None)
            except Exception as exc:  # noqa: BLE001 (recorded in self.error, reported as the facts' problem)
                self.error = f"the compatibility tables could not be loaded: {exc}"
        return self.value


def _max_cuda_from_table(kn: _Lazy, version: str) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """(max_cuda, source, reason-if-none) from NVIDIA's minimum-driver table."""
    k = kn.get()
    if k is None:
        return None, None, kn.error
    from tfgpu_install.knowledge.model import max_cuda_for_driver

    row = max_cuda_for_driver(k, version)
    if row is None:
        return None, None, f"driver {version} is older than every CUDA release in drivers.yaml"
    return row.cuda, "table:drivers.yaml", None


def _norm(name: str) -> str:
    n = name.lower().replace("nvidia ", "").replace("geforce ", "")
    return re.sub(r"[\s_-]+", " ", n).strip()


def lookup_cc(knowledge: Optional["Knowledge"], name: str,
              truncated: bool = False) -> tuple[Optional[str], Optional[str]]:
    """(compute capability, source) for a GPU name, via gpus.yaml. A truncated name
    ("NVIDIA GeForce RTX 3060 ...") counts only if every model it could be shares one CC."""
    if knowledge is None or not name:
        return None, None
    from tfgpu_install.knowledge.gpu_names import gpu_by_name, vgpu_board

    row = gpu_by_name(knowledge, name)
    if row is not None:
        board = vgpu_board(name)
        note = f" (vGPU profile on a physical {row.name})" if board else (" (name truncated)" if truncated else "")
        return row.compute_capability, "table:gpus.yaml" + note
    if not truncated:
        return None, None
    prefix = _norm(re.sub(r"\s*(\.\.\.|\u2026)\s*$", "", name))
    ccs = {
        r.compute_capability
        for r in knowledge.gpus
        if any(_norm(n).startswith(prefix) for n in (r.name, *r.aliases))
    }
    if len(ccs) == 1:
        return ccs.pop(), "table:gpus.yaml (name truncated: every match has this CC)"
    return None, None


def _assumed_gpus(assume: Assumptions, kn: _Lazy, problems: list[Problem]) -> tuple[Gpu, ...]:
    src = assume.source("gpus")
    out = []
    for i, item in enumerate(assume.gpus):
        if _RE_CC.match(item):
            out.append(Gpu(i, f"GPU with compute capability {item}", item, None, src, cc_source=src))
            continue
        cc, cc_src = lookup_cc(kn.get(), item)
        if cc is None:
            from tfgpu_install.knowledge.gpu_names import foreign_gpu

            foreign = foreign_gpu(item)
            if foreign is not None:
                problems.append(Problem(
                    f"gpus[{i}]", f"{item!r} is an {foreign[0]} GPU, not an NVIDIA one: {foreign[1]}", "error"))
                out.append(Gpu(i, item, None, None, src))
                continue
            reason = kn.error or f"unknown GPU model {item!r} (not in gpus.yaml)"
            problems.append(
                Problem(f"gpus[{i}].compute_capability", f"{reason}: give its compute capability instead, e.g. 8.6",
                        "error")
            )
        out.append(Gpu(i, item, cc, None, src, cc_source=cc_src and f"{cc_src} ({src})"))
    return tuple(out)


def _pci_cc(knowledge: Optional["Knowledge"], device_id: Optional[str]) -> tuple[Optional[str], str]:
    """(compute capability, what was tried) from the PCI device id table."""
    if not device_id:
        return None, "no PCI device id"
    if knowledge is None or knowledge.directory is None:
        return None, f"PCI device id {device_id}: no pci_ids.yaml"
    from tfgpu_install.knowledge.pci_ids import FILE_NAME, load_pci_table, lookup_pci

    hit = lookup_pci(load_pci_table(knowledge.directory / FILE_NAME), device_id)
    if hit is None:
        return None, f"PCI device id {device_id} not in pci_ids.yaml"
    return hit.compute_capability, f"table:pci_ids.yaml (device {hit.device_id}: {hit.name})"


def _architecture_cc(knowledge: Optional["Knowledge"], architecture: Optional[str]) -> tuple[Optional[str], str]:
    """The family's compute capability when every gpus.yaml model of it has the same one."""
    if not architecture:
        return None, "no Product Architecture"
    family = architecture.split()[0].lower()  # "Ada Lovelace" -> "ada"
    ccs = sorted({r.compute_capability for r in (knowledge.gpus if knowledge else ())
                  if (r.architecture or "").lower() == family})
    if len(ccs) == 1:
        return ccs[0], f"table:gpus.yaml (architecture {architecture}: every model is {ccs[0]})"
    if ccs:
        return None, f"architecture {architecture} has several compute capabilities ({', '.join(ccs)})"
    return None, f"architecture {architecture!r} not in gpus.yaml"


def _identify_pci(knowledge: Optional["Knowledge"], det: GpuDetection) -> list[Problem]:
    """What the PCI bus says about a GPU no driver answers for: its model and compute capability."""
    out = []
    for p in det.pci:
        cc, what = _pci_cc(knowledge, p.device_id)
        if cc:
            out.append(Problem("gpus", f"PCI device 10de:{p.device_id} ({p.slot}) is compute capability {cc}: {what}",
                               "info"))
    return out


def _fill_cc(gpus: tuple[Gpu, ...], kn: _Lazy, problems: list[Problem], truncated: set[int]) -> tuple[Gpu, ...]:
    """Name, then PCI device id, then Product Architecture; an unknown GPU is reported with all three."""
    out = []
    for g in gpus:
        if g.compute_capability is None and g.name:
            knowledge = kn.get()
            cc, src = lookup_cc(knowledge, g.name, g.index in truncated)
            tried = [f"{g.name!r}{' (name cut short by nvidia-smi)' if g.index in truncated else ''} is not in "
                     "gpus.yaml"]
            for fallback, arg in ((_pci_cc, g.pci_device_id), (_architecture_cc, g.architecture)):
                if cc is None:
                    cc, what = fallback(knowledge, arg)
                    src = what if cc else None
                    if cc is None:
                        tried.append(what)
            if cc:
                g = replace(g, compute_capability=cc, cc_source=src)
            else:
                why = kn.error or "; ".join(tried)
                problems.append(
                    Problem(f"gpus[{g.index}].compute_capability", f"compute capability unknown: {why}", "warning")
                )
        out.append(g)
    return tuple(out)


def _host_overrides(host: Host, assume: Assumptions) -> Host:
    if assume.glibc:
        host = replace(host, glibc=assume.glibc, glibc_source=assume.source("glibc"))
    if assume.os:
        pretty = {"windows": "Windows", "linux": "Linux", "wsl": "Linux (WSL2)"}.get(assume.os, assume.os)
        host = replace(
            host, os=pretty, os_id=assume.os, source=assume.source("os"), wsl=host.wsl or assume.os == "wsl"
        )
    return host


def gather(ctx: Context, assume: Optional[Assumptions] = None, knowledge: Optional["Knowledge"] = None) -> Facts:
    """Probe the machine (or read what `assume` says about another one). Never raises."""
    from tfgpu_install.facts.cuda import gather_cuda
    from tfgpu_install.facts.host import gather_host
    from tfgpu_install.facts.python import gather_pythons, gather_tools

    assume = assume or Assumptions()
    kn = _Lazy(knowledge, ctx)
    problems: list[Problem] = []
    host, p = gather_host(ctx)
    problems += p
    host = _host_overrides(host, assume)
    tools = gather_tools(ctx)
    cuda_job = Background(lambda: gather_cuda(ctx))
    python_job = None if assume.python else Background(lambda: gather_pythons(ctx, tools))

    if assume.nvidia_smi_text is not None:
        origin = f"{SMI_FILE} ({assume.nvidia_smi_origin})" if assume.nvidia_smi_origin else SMI_FILE
        det = reading_to_detection(parse_nvidia_smi(assume.nvidia_smi_text), source=SMI_FILE, origin=origin)
    elif assume.driver and assume.gpus:
        det = GpuDetection(Driver(None, None, None, loaded=False), ())  # nothing left to detect
    else:
        det = detect_gpus(ctx, tools, host)
    problems += det.problems
    driver, gpus = det.driver, det.gpus

    if assume.driver:
        driver = Driver(assume.driver, None, assume.source("driver"), loaded=True)
    if assume.gpus:
        gpus = _assumed_gpus(assume, kn, problems)
    else:
        gpus = _fill_cc(gpus, kn, problems, set(det.truncated))

    if driver.version and driver.max_cuda is None:
        cuda, src, why = _max_cuda_from_table(kn, driver.version)
        driver = replace(driver, max_cuda=cuda, max_cuda_source=src)
        if cuda is None:
            problems.append(Problem("driver.max_cuda", f"highest CUDA for driver {driver.version} unknown: {why}",
                                    "warning"))
    others: tuple[str, ...] = ()
    if not gpus:
        tried = ", ".join(f"{t.source} ({t.outcome})" for t in det.tried) or "nothing"
        problems.append(Problem("gpus", f"no NVIDIA GPU found; tried: {tried}", "error"))
        problems += _identify_pci(kn.get(), det)
        if not det.gpu_on_pci and not assume.nvidia_smi_text:
            from tfgpu_install.facts.identity import other_display_devices

            others = other_display_devices(ctx)

    if assume.python:
        pythons: tuple[PythonInterp, ...] = (
            PythonInterp(path=f"(assumed Python {assume.python})", version=assume.python,
                         source=assume.source("python")),
        )
    else:
        assert python_job is not None
        pythons, p = python_job.result()
        problems += p
    cuda_installs, p = cuda_job.result()
    problems += p
    cvd = ctx.environ.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip() in ("", "-1", "NoDevFiles", "none"):
        problems.append(Problem(
            "cuda_visible_devices",
            f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU from TensorFlow: unset it or list the GPUs to use",
            "warning",
        ))
    return Facts(
        driver=driver,
        gpus=gpus,
        host=host,
        pythons=pythons,
        cuda_installs=cuda_installs,
        tools=tools,
        cuda_visible_devices=ctx.environ.get("CUDA_VISIBLE_DEVICES"),
        ld_library_path=ctx.environ.get("LD_LIBRARY_PATH"),
        problems=tuple(problems),
        gpu_on_pci=det.gpu_on_pci,
        sources_tried=det.tried,
        other_gpus=others,
    )


__all__ = ["AssumeFlags", "Assumptions", "assumptions", "gather", "lookup_cc"]
