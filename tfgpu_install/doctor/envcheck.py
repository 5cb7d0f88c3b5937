"""The target environment, read from its files (cheap) and by importing TensorFlow in it (through
the Runner, in a child process with a timeout: a wedged driver cannot hang the doctor)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.env.layout import site_packages_dirs
from tfgpu_install.guard.jsondoc import JSONObject

# Any of these marks an activation block written by tfgpu-install (venv bin/activate, conda activate.d).
ACTIVATION_MARKERS = ("tfgpu-install", "tfgpu_install", "TFGPU")
_DIST = re.compile(r"^(?P<name>[A-Za-z0-9_.]+)-(?P<version>[^-]+)\.dist-info$")

# Runs inside the env. Prints one JSON line after a marker; TensorFlow's own log goes to stderr.
PROBE_MARKER = "TFGPU-DOCTOR-JSON:"
PROBE_SCRIPT = r"""
import json, sys
out = {"python": sys.version.split()[0], "tf": None, "build": {}, "gpus": [], "error": None}
try:
    import importlib.util
    if importlib.util.find_spec("tensorflow") is None:
        out["error"] = "not-installed"
    else:
        import tensorflow as tf
        out["tf"] = tf.__version__
        try:
            out["build"] = {k: (v if isinstance(v, (str, int, float, bool))
                                else list(v) if isinstance(v, (list, tuple)) else str(v))
                            for k, v in dict(tf.sysconfig.get_build_info()).items()}
        except Exception as exc:
            out["build"] = {"error": str(exc)}
        out["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
except BaseException as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write("\nTFGPU-DOCTOR-JSON:" + json.dumps(out) + "\n")
"""


@dataclass(frozen=True)
class ImportProbe:
    ran: bool
    tf_version: Optional[str] = None
    build: JSONObject = field(default_factory=dict)  # tf.sysconfig.get_build_info(), as the probe printed it
    gpus: tuple[str, ...] = ()
    error: Optional[str] = None  # "not-installed", "ImportError: ...", or why it did not run
    log: str = ""  # stderr: TensorFlow's own log, to classify

    @property
    def installed(self) -> bool:
        return self.error != "not-installed"


def parse_probe_output(stdout: str, stderr: str, returncode: int) -> ImportProbe:
    for line in reversed(stdout.splitlines()):
        if line.startswith(PROBE_MARKER):
            try:
                d = json.loads(line[len(PROBE_MARKER):])
            except ValueError:
                break
            return ImportProbe(
                ran=True, tf_version=d.get("tf"), build=dict(d.get("build") or {}),
                gpus=tuple(d.get("gpus") or ()), error=d.get("error"), log=stderr,
            )
    # No JSON: the interpreter died (a segfault in a CUDA library, a fatal abort in TF's import).
    tail = (stderr.strip().splitlines() or [f"exit status {returncode}"])[-1]
    return ImportProbe(ran=True, error=f"the import crashed (exit {returncode}): {tail}", log=stderr)


@dataclass(frozen=True)
class EnvFiles:
    path: str
    exists: bool
    python: Optional[str]  # the env's interpreter as the user sees it
    activation: tuple[str, ...]  # files holding a tfgpu-install activation block
    tf_version: Optional[str]  # from tensorflow-*.dist-info
    nvidia_lib_dirs: tuple[str, ...]  # site-packages/nvidia/*/lib that exist
    nvidia_dists: dict[str, str] = field(default_factory=dict)  # "nvidia-cudnn-cu12" -> "9.3.0.75"
    site_packages: Optional[str] = None
    launcher: Optional[str] = None  # <env>/bin/tfgpu-run when the install wrote it

    def wanted_cudnn_major(self) -> Optional[str]:
        for name, version in self.nvidia_dists.items():
            if name.startswith("nvidia-cudnn-"):
                return version.split(".")[0]
        return None


def read_env(ctx: Context, env: str) -> EnvFiles:
    """Files of the env (a venv or conda prefix). Paths are the user's (no root prefix mapping:
    an env is a user directory, given as is)."""
    root = Path(env)
    if not root.is_dir():
        return EnvFiles(env, False, None, (), None, ())
    python = next((str(root / p) for p in ("bin/python", "bin/python3") if (root / p).exists()), None)
    activation = []
    for f in [root / "bin" / "activate", *sorted((root / "etc" / "conda" / "activate.d").glob("*.sh"))]:
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        if any(m in text for m in ACTIVATION_MARKERS):
            activation.append(str(f))
    site = next(iter(site_packages_dirs(root)), None)
    tf_version = None
    dists: dict[str, str] = {}
    lib_dirs: list[str] = []
    if site is not None:
        for d in sorted(site.glob("*.dist-info")):
            m = _DIST.match(d.name)
            if not m:
                continue
            name = m.group("name").lower().replace("_", "-")
            if name in ("tensorflow", "tensorflow-gpu", "tensorflow-cpu", "tf-nightly"):
                tf_version = m.group("version")
            elif name.startswith("nvidia-"):
                dists[name] = m.group("version")
        lib_dirs = [str(p) for p in sorted((site / "nvidia").glob("*/lib")) if p.is_dir()]
    return EnvFiles(
        path=env, exists=True, python=python, activation=tuple(activation), tf_version=tf_version,
        nvidia_lib_dirs=tuple(lib_dirs), nvidia_dists=dists, site_packages=str(site) if site else None,
        launcher=str(root / "bin" / LAUNCHER) if (root / "bin" / LAUNCHER).exists() else None,
    )


LAUNCHER = "tfgpu-run"  # written by the activation step: sets the env's variables, then runs its arguments


def probe_import(ctx: Context, python: str, timeout: float = 180.0, launcher: Optional[str] = None) -> ImportProbe:
    """Import TensorFlow in the env. Through the env's launcher when it has one, so the activation's
    LD_LIBRARY_PATH/PATH apply whether or not the user's shell activated the env."""
    argv = ([launcher] if launcher else []) + [python, "-c", PROBE_SCRIPT]
    res = ctx.runner.run(argv, desc="import tensorflow in the env", timeout=timeout)
    if res.returncode == 124 and PROBE_MARKER not in res.stdout:
        return ImportProbe(ran=False, error=f"`import tensorflow` did not finish in {timeout:.0f}s", log=res.stderr)
    return parse_probe_output(res.stdout, res.stderr, res.returncode)
