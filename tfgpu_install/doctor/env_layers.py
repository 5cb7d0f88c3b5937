"""The upper layers of the walk: the env (activation block), `import tensorflow` in it, the device
list, the build's compute capabilities against the GPUs, and the ptxas XLA will use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from tfgpu_install.doctor.classify import classify
from tfgpu_install.doctor.envpackages import culprit
from tfgpu_install.doctor.walkstate import BROKEN, OK, SKIP, WARN, Check, Walk, split_path, version_tuple
from tfgpu_install.facts import gpu as smi
from tfgpu_install.guard import shellquote

# ------------------------------------------------------------------ env, import, devices, CC


def _cmd(w: Walk, command: str, env: object) -> str:
    """`tfgpu-install COMMAND --env ENV`, quoted for the user's shell (a fix they paste)."""
    return shellquote.command(w.ctx, "tfgpu-install", command, "--env", str(env))


def _restore(w: Walk, snapshot: str, env: object) -> str:
    return shellquote.command(w.ctx, "tfgpu-install", "snapshot", "restore", snapshot, "--env", str(env))


def check_env(w: Walk) -> list[Check]:
    e = w.env_files
    if e is None:
        return [Check("import", "environment", SKIP,
                      "no env given (--env PATH, or activate it): TensorFlow not checked")]
    if not e.exists or e.python is None:
        return [Check("import", "environment", BROKEN, f"{e.path} is not a Python environment",
                      "The env path does not exist or has no bin/python.",
                      f"Check the path, or create it: `{_cmd(w, 'install', e.path)}`.")]
    out = []
    if not e.activation:
        out.append(Check("import", "activation", WARN, f"no tfgpu-install activation block in {e.path}",
                         "The env has no activation block, so LD_LIBRARY_PATH (its CUDA/cuDNN libraries) and PATH "
                         "(ptxas for XLA) are not set when it is activated.",
                         f"Re-run `{_cmd(w, 'install', e.path)}` (it writes the block), or use its "
                         "bin/tfgpu-run."))
    else:
        out.append(Check("import", "activation", OK, f"activation block in {', '.join(e.activation)}"))
    return out


def check_env_packages(w: Walk) -> list[Check]:
    """What `tfgpu-install check` and `pip check` say of the env's packages: the drift since its known-good
    snapshot and the broken requirements. Warnings here; a failed import names the package they point at."""
    pk, e = w.packages, w.env_files
    if pk is None or e is None:
        return []
    out = []
    if pk.snapshot is None:
        out.append(Check("import", "packages since known-good", SKIP,
                         "no known-good snapshot of this env: package drift not checked"))
    elif pk.drifted:
        out.append(Check("import", "packages since known-good", WARN,
                         f"{len(pk.drift_lines())} package change(s) since the known-good snapshot {pk.snapshot}",
                         "The env's packages are not the ones it was verified with (`tfgpu-install check` reports "
                         "the same): a changed package can break `import tensorflow` or its GPU use.",
                         f"Go back to them: `{_restore(w, pk.snapshot, e.path)}`; or, if the "
                         "change is wanted, verify the env as it is now.", evidence=pk.drift_lines()))
    else:
        out.append(Check("import", "packages since known-good", OK,
                         f"the packages of the known-good snapshot {pk.snapshot}"))
    if pk.conflicts:
        out.append(Check("import", "pip check", WARN, f"{pk.pip_check}: {len(pk.conflicts)} broken requirement(s)",
                         "Installed packages no longer meet each other's requirements (a later `pip install` "
                         "changed one that TensorFlow or another package pins).",
                         "Install the versions the requirements name (`pip install 'numpy<2.1'` for a line such as "
                         "'tensorflow requires numpy<2.1.0'), or restore the known-good snapshot.",
                         evidence=tuple(c.text() for c in pk.conflicts)))
    elif pk.pip_check.startswith(("pip check", "uv pip check")):
        out.append(Check("import", "pip check", OK, f"{pk.pip_check}: no broken requirements"))
    else:
        out.append(Check("import", "pip check", SKIP, pk.pip_check))
    return out


def _blame(w: Walk, error: str) -> tuple[str, str]:
    """(cause addition, fix addition) naming the package that broke the import, when the drift or pip check
    points at a package the error names; ("", "") otherwise."""
    if w.packages is None:
        return "", ""
    found = culprit(w.packages, error)
    if found is None:
        return "", ""
    name, seen = found
    env = w.env_files.path if w.env_files else "ENV"
    back = (f" Or go back to the known-good packages: `{_restore(w, w.packages.snapshot, env)}`."
            if w.packages.snapshot else "")
    return f" The package that broke it: {name} ({seen}).", back


def check_import(w: Walk) -> list[Check]:
    e, p = w.env_files, w.probe
    if e is None or p is None:
        return []
    if not p.installed:
        return [Check("import", "tensorflow", BROKEN, f"TensorFlow is not installed in {e.path}",
                      "There is no TensorFlow in this env.", f"`{_cmd(w, 'install', e.path)}`.")]
    if p.tf_version is None:
        missing = re.search(r"No module named '([A-Za-z0-9_.]{1,100})'", (p.error or "") + "\n" + p.log)
        if missing and missing.group(1).split(".")[0] != "tensorflow":
            mod = missing.group(1)
            return [Check("import", "import tensorflow", BROKEN, p.error or f"No module named '{mod}'",
                          f"`import tensorflow` needs the module '{mod}', and the env no longer has it (its "
                          "distribution was uninstalled, or its files removed).",
                          f"Run the install again: `{_cmd(w, 'install', e.path)}` reinstalls what is missing "
                          f"(`{_cmd(w, 'check', e.path)}` lists the damaged files).")]
        text = p.log + "\n" + (p.error or "")
        diag = classify(text, w.rules)
        blame, back = _blame(w, text)
        if diag.primary is not None:
            f = diag.primary
            return [Check("import", "import tensorflow", BROKEN, p.error or "import failed", f.cause + blame,
                          f.fix + back, evidence=f.evidence, rule=f.rule_id)]
        if blame:
            return [Check("import", "import tensorflow", BROKEN, p.error or "import failed",
                          "`import tensorflow` failed, and its error names a package that changed or no longer "
                          "meets its requirements." + blame,
                          "Put that package back at the version the env was verified with." + back,
                          evidence=tuple(x for x in (p.error,) if x))]
        return [Check("import", "import tensorflow", BROKEN, p.error or "import failed",
                      "`import tensorflow` failed with an error doctor does not know.",
                      "Read the traceback: `" + (e.python or "python") + " -c 'import tensorflow'`; try "
                      "`tfgpu-install doctor --log FILE` on its output.")]
    via = " through bin/tfgpu-run" if e.launcher else ""
    out = [Check("import", "import tensorflow", OK, f"TensorFlow {p.tf_version} imports{via} "
                 f"(built for CUDA {p.build.get('cuda_version', '?')}, cuDNN {p.build.get('cudnn_version', '?')})")]
    if p.gpus:
        out.append(Check("devices", "device list", OK, f"TensorFlow lists {len(p.gpus)} GPU(s)"))
        return out
    drv_ok = w.reading is not None and w.reading.state == smi.OK
    diag = classify(p.log, w.rules)
    if w.ctx.env("SUDO_USER") and not w.ctx.env("LD_LIBRARY_PATH"):
        rule = w.rules.by_id("sudo-strips-ld-library-path")
        out.append(Check("devices", "device list", BROKEN, "running under sudo without LD_LIBRARY_PATH; TensorFlow "
                                                           "lists no GPU",
                         rule.cause, rule.fix, rule=rule.id))
    elif e.tf_version and e.tf_version.startswith("2.16") and e.nvidia_lib_dirs and not e.activation \
            and not any(d in split_path(w.ctx.env("LD_LIBRARY_PATH")) for d in e.nvidia_lib_dirs):
        rule = w.rules.by_id("tf216-pip-libs-off-path")
        out.append(Check("devices", "device list", BROKEN, "TensorFlow 2.16 lists no GPU; its nvidia libs are off "
                                                           "LD_LIBRARY_PATH",
                         rule.cause, rule.fix, rule=rule.id))
    elif diag.primary is not None:
        f = diag.primary
        out.append(Check("devices", "device list", BROKEN, "TensorFlow lists no GPU", f.cause, f.fix,
                         evidence=f.evidence, rule=f.rule_id))
    elif not e.activation and e.nvidia_lib_dirs and _needs_loader_path(e.tf_version):
        out.append(Check("devices", "device list", BROKEN, "TensorFlow lists no GPU; the env has no activation block",
                         "The env's CUDA/cuDNN wheels are installed but nothing puts them on the loader path.",
                         f"Re-run `{_cmd(w, 'install', e.path)}` (writes the activation), then activate the "
                         "env."))
    else:
        out.append(Check("devices", "device list", BROKEN if drv_ok else WARN, "TensorFlow lists no GPU",
                         "TensorFlow imported but registered no GPU and its log names no known cause.",
                         "Run `TF_CPP_MAX_VLOG_LEVEL=3 python -c 'import tensorflow as tf; "
                         "tf.config.list_physical_devices()' 2>&1 | tfgpu-install doctor --log -`."))
    return out


def _needs_loader_path(tf_version: Optional[str]) -> bool:
    """TensorFlow 2.14/2.15 and >= 2.17 find their nvidia-* wheels by themselves; older releases and
    2.16 (tensorflow/tensorflow#63362) need LD_LIBRARY_PATH, which the activation block sets."""
    v = version_tuple(tf_version or "")
    return not v or v < (2, 14) or v[:2] == (2, 16)


def _sm(cc: str) -> int:
    major, minor = cc.split(".")[:2]
    return int(major) * 10 + int(minor)


def check_compute_capability(w: Walk) -> list[Check]:
    if w.probe is None or w.reading is None:
        return []
    given = w.probe.build.get("cuda_compute_capabilities") or []
    archs: list[object] = re.findall(r"(?:sm|compute)_\d+a?", given) if isinstance(given, str) else \
        list(given) if isinstance(given, list) else []
    sass = [int(m.group(1)) for a in archs if (m := re.match(r"sm_(\d+)$", str(a)))]
    ptx = [int(m.group(1)) for a in archs if (m := re.match(r"compute_(\d+)$", str(a)))]
    if not sass and not ptx:
        return []
    out = []
    for g in w.gpus:
        if not g.compute_capability:
            continue
        cc = _sm(g.compute_capability)
        if any(s // 10 == cc // 10 and s <= cc for s in sass):
            out.append(Check("execution", f"GPU {g.index} CC {g.compute_capability}", OK, "the build has SASS for it"))
        elif any(p <= cc for p in ptx):
            out.append(Check("execution", f"GPU {g.index} CC {g.compute_capability}", WARN,
                             f"no SASS for {g.compute_capability}; PTX {max(p for p in ptx if p <= cc)} will be "
                             "JIT-compiled",
                             "Kernels are JIT-compiled from PTX on first use (slow start; may fail on new "
                             "architectures).",
                             "Install a TensorFlow whose build has SASS for this GPU (`tfgpu-install plan`); keep the "
                             "JIT "
                             "cache: CUDA_CACHE_MAXSIZE=4294967296."))
        else:
            out.append(Check("execution", f"GPU {g.index} CC {g.compute_capability}", BROKEN,
                             f"the build covers {', '.join(map(str, archs))}",
                             "This TensorFlow has neither SASS nor usable PTX for compute capability "
                             f"{g.compute_capability}: "
                             "the GPU is listed but no kernel can run ('no kernel image is available').",
                             "Install a TensorFlow release whose build covers this GPU (`tfgpu-install plan`), or run "
                             "on CPU."))
    return out


_PTXAS_RELEASE = re.compile(r"release (\d+\.\d+)")


def check_ptxas(w: Walk) -> list[Check]:
    """The ptxas XLA will use (the env's nvidia-cuda-nvcc wheel first, then PATH) must know the GPU."""
    ccs = sorted({g.compute_capability for g in w.gpus if g.compute_capability})
    if not ccs or not w.rules.ptxas_min_cuda:
        return []
    candidates: list[tuple[str, str]] = []  # (path to run, path shown)
    if w.env_files is not None and w.env_files.site_packages:
        p = Path(w.env_files.site_packages) / "nvidia" / "cuda_nvcc" / "bin" / "ptxas"
        if p.exists():
            candidates.append((str(p), str(p)))
    for d in split_path(w.ctx.env("PATH")):
        if w.ctx.sys_path(f"{d}/ptxas").exists():
            candidates.append((f"{d}/ptxas", f"{d}/ptxas"))
    if not candidates:
        return []
    run_path, shown = candidates[0]
    res = w.ctx.runner.run([run_path, "--version"], desc="ptxas --version", timeout=30)
    m = _PTXAS_RELEASE.search(res.stdout)
    if not m:
        return []
    have = m.group(1)
    for cc in ccs:
        need = w.rules.ptxas_min_cuda.get(cc)
        if need and version_tuple(have) < version_tuple(need):
            return [Check("xla", "ptxas", WARN, f"{shown} is CUDA {have}; compute capability {cc} needs >= {need}",
                          f"XLA compiles with the first ptxas it finds; CUDA {have}'s ptxas does not know "
                          f"sm_{cc.replace('.', '')}, "
                          "so XLA-compiled ops (jit_compile, Keras' XLA) fail or fall back to the driver.",
                          f"Put a ptxas from CUDA >= {need} first on PATH: `pip install nvidia-cuda-nvcc-cu12` in the "
                          "env "
                          f"(its activation puts nvidia/cuda_nvcc/bin on PATH), or a newer /usr/local/cuda-X.Y/bin "
                          f"(source: {w.rules.ptxas_source}).")]
    return [Check("xla", "ptxas", OK, f"{shown} (CUDA {have}) knows compute capability {', '.join(ccs)}")]
