"""A stand-in `conda` executable for tests (conda cannot be installed on these machines).

    conda = write_fake_conda(bin_dir, root=tmp/"miniforge", pythons={"3.11": "/usr/bin/python3.11"})
    read_log(conda) -> [argv, ...]     every invocation's arguments, in order

It is a real executable (a Python script, shebang sys.executable) that the tool finds on
PATH and runs through its real Runner. It answers the commands the conda backend uses
and lays out a prefix the way conda does, so everything up to conda itself runs for real:

    conda --version                              "conda 24.1.2"
    conda info --json                            root_prefix, envs_dirs, conda_version
    conda create -y (-p PREFIX | -n NAME) python=X.Y [-c CHANNEL]
        -> PREFIX/bin/python (a real interpreter of that version; see below), conda-meta/history,
           conda-meta/python-X.Y.Z-h0_cpython.json, etc/conda/activate.d, etc/conda/deactivate.d;
           the prefix is added to ROOT/environments.txt. Unknown version: PackagesNotFoundError, rc 1.
           A non-empty directory that is not an env: CondaValueError, rc 1 (as conda does).
    conda remove -y --all (-p|-n) / conda env remove -y (-p|-n)   removes the prefix
    anything else: rc 2 and "fake conda: unsupported" (a test sees it in the log)

Where it differs from conda: the prefix's interpreter is a venv of the real Python
(`python -m venv --without-pip`), so packages installed into it land in the prefix and not
in the system Python; that leaves a pyvenv.cfg a real conda env does not have. The tool
identifies conda envs by conda-meta/, never by pyvenv.cfg, so this does not mask anything.
Named `mamba`/`micromamba` (name=...), it behaves the same under that name.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Mapping, Optional

_SCRIPT = r'''#!{python}
import json, os, shutil, subprocess, sys, time
LOG = {log!r}
ROOT = {root!r}
PYTHONS = {pythons!r}
NAME = {name!r}

args = sys.argv[1:]
with open(LOG, "a") as fh:
    fh.write(json.dumps(args) + "\n")


def die(msg, rc=1):
    sys.stderr.write(msg + "\n")
    sys.exit(rc)


def prefix_of(args):
    if "-p" in args:
        return os.path.abspath(args[args.index("-p") + 1])
    if "--prefix" in args:
        return os.path.abspath(args[args.index("--prefix") + 1])
    if "-n" in args:
        return os.path.join(ROOT, "envs", args[args.index("-n") + 1])
    die("CondaValueError: either -n NAME or -p PREFIX option required")


if args[:1] == ["--version"]:
    print(NAME + " 24.1.2")
elif args[:2] == ["info", "--json"]:
    print(json.dumps({{"root_prefix": ROOT, "envs_dirs": [os.path.join(ROOT, "envs")], "conda_version": "24.1.2"}}))
elif args[:1] == ["create"]:
    prefix = prefix_of(args)
    spec = next((a for a in args if a.startswith("python=")), None)
    if spec is None:
        die("fake conda: create without python=X.Y is not supported", 2)
    want = spec.split("=", 1)[1]
    interp = PYTHONS.get(want)
    if interp is None:
        die("PackagesNotFoundError: The following packages are not available from current channels:\n\n  - " + spec)
    if os.path.isdir(prefix) and os.listdir(prefix) and not os.path.isdir(os.path.join(prefix, "conda-meta")):
        die("CondaValueError: The target prefix is a non-empty directory that is not a conda environment: " + prefix)
    if os.path.exists(prefix) and not os.path.isdir(prefix):
        die("CondaValueError: The target prefix exists and is not a directory: " + prefix)
    subprocess.run([interp, "-m", "venv", "--without-pip", prefix], check=True)
    full = subprocess.run([interp, "-c", "import platform; print(platform.python_version())"],
                          check=True, capture_output=True, text=True).stdout.strip()
    meta = os.path.join(prefix, "conda-meta")
    os.makedirs(meta, exist_ok=True)
    with open(os.path.join(meta, "python-%s-h0_cpython.json" % full), "w") as fh:
        json.dump({{"name": "python", "version": full, "build": "h0_cpython", "channel": "conda-forge"}}, fh)
    with open(os.path.join(meta, "history"), "a") as fh:
        fh.write("==> %s <==\n# cmd: %s %s\n+conda-forge::python-%s-h0_cpython\n"
                 % (time.strftime("%Y-%m-%d %H:%M:%S"), NAME, " ".join(args), full))
    for d in ("activate.d", "deactivate.d"):
        os.makedirs(os.path.join(prefix, "etc", "conda", d), exist_ok=True)
    os.makedirs(ROOT, exist_ok=True)
    with open(os.path.join(ROOT, "environments.txt"), "a") as fh:
        fh.write(prefix + "\n")
    print("done\n# To activate this environment, use\n#     $ conda activate " + prefix)
elif (args[:1] == ["remove"] and "--all" in args) or args[:2] == ["env", "remove"]:
    prefix = prefix_of(args)
    if not os.path.isdir(os.path.join(prefix, "conda-meta")):
        die("EnvironmentLocationNotFound: Not a conda environment: " + prefix)
    shutil.rmtree(prefix)
    envs = os.path.join(ROOT, "environments.txt")
    if os.path.exists(envs):
        with open(envs) as fh:
            keep = [l for l in fh if l.strip() != prefix]
        with open(envs, "w") as fh:
            fh.writelines(keep)
    print("Remove all packages in environment " + prefix)
else:
    die("fake conda: unsupported: " + " ".join(args), 2)
'''


def write_fake_conda(
    bin_dir: Path,
    root: Path,
    pythons: Optional[Mapping[str, str]] = None,
    name: str = "conda",
) -> Path:
    """Write the stand-in as bin_dir/<name>; returns its path. Its log is <path>.log."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / name
    if pythons is None:
        pythons = {f"{sys.version_info.major}.{sys.version_info.minor}": sys.executable}
    text = _SCRIPT.format(
        python=sys.executable, log=str(exe) + ".log", root=str(root), pythons=dict(pythons), name=name
    )
    exe.write_text(text)
    exe.chmod(0o755)
    return exe


def read_log(exe: Path) -> list[list[str]]:
    log = Path(str(exe) + ".log")
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
