"""The tfgpu-install wheel a fleet ships to its nodes when --wheel is not given, and the Ansible tools it
runs: both found for a tool installed by pip, pipx or `uv tool` as well as for a checkout.

- A checkout (the package sits beside a pyproject.toml naming it): `pip wheel` of the checkout, cached by a
  hash of its sources.
- An installed distribution: the wheel is packed again from the installed files its RECORD lists (each
  file's sha256 checked against the RECORD first: an edited install is not shipped as the release), with a
  fresh RECORD and without the installer's own files (INSTALLER, REQUESTED, direct_url.json).
- ansible-playbook / ansible-inventory: beside the running Python first (the `[fleet]` extra inside a pipx or
  `uv tool` venv is never on PATH), then PATH.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import sys
import sysconfig
import threading
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Optional

import tfgpu_install
from tfgpu_install.context import Context
from tfgpu_install.errors import EnvironmentProblem

DIST = "tfgpu-install"
# What installers add to a .dist-info (pip, uv), never in a wheel.
_DROP = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD", "uv_cache.json", "uv_build.json")
_WHEEL_FIX = ("build the wheel where the source is (`pip wheel --no-deps . -w dist` in a checkout) and pass "
              "--wheel dist/tfgpu_install-*.whl")


def find_tool(ctx: Context, name: str) -> str:
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = ctx.runner.which(name)
    if not found:
        raise EnvironmentProblem(
            f"{name} is not installed here (the controller): not beside this tool's Python "
            f"({Path(sys.executable).parent}) nor on PATH",
            hint=f"add ansible-core to this tool's own environment: `{sys.executable} -m pip install "
            "'ansible-core>=2.15'` (pipx: `pipx inject tfgpu-install ansible-core`; uv: `uv tool install "
            "--with ansible-core PATH-OR-WHEEL`; a checkout: `pip install -e '.[fleet]'`), or put "
            "ansible-playbook on PATH")
    return found


def checkout_root() -> Optional[Path]:
    """The source tree this package runs from, if it does (an editable install or a run from the tree)."""
    root = Path(tfgpu_install.__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    try:
        named = f'name = "{DIST}"' in pyproject.read_text(errors="replace")
    except OSError:
        return None
    return root if named and (root / "tfgpu_install" / "__init__.py").is_file() else None


def own_wheel(ctx: Context) -> Path:
    root = checkout_root()
    return checkout_wheel(ctx, root) if root is not None else installed_wheel(ctx)


def checkout_wheel(ctx: Context, root: Path) -> Path:
    """This checkout's wheel, built once per source state (cached by a hash of the sources)."""
    h = hashlib.sha256()
    for path in sorted([root / "pyproject.toml", *root.joinpath("tfgpu_install").rglob("*.py"),
                        *root.joinpath("profiles").glob("*.yaml")]):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    out = ctx.cache_dir / "fleet-wheel" / h.hexdigest()[:16]
    found = sorted(out.glob("tfgpu_install-*.whl"))
    if found:
        return found[0]
    done = ctx.runner.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           str(root), "-w", str(out)], desc="build the tfgpu-install wheel", timeout=600,
                          mutating=True)
    found = sorted(out.glob("tfgpu_install-*.whl"))
    if not done.ok or not found:
        raise EnvironmentProblem(f"could not build the tfgpu-install wheel: {done.stderr.strip()[-600:]}",
                                 hint=_WHEEL_FIX)
    return found[0]


def _b64(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _members(record_text: str, base: Path, prefix: Path) -> list[tuple[str, str, Optional[str]]]:
    """(path in the wheel, path as installed relative to `base`, recorded sha256) of each RECORD row a wheel
    carries: site-packages files (no bytecode, none of the installer's own files) and the data files installed
    under the prefix (back to <name>.data/data/...); scripts in bin/ are made again from the entry points."""
    rows = [row for row in csv.reader(io.StringIO(record_text)) if row and row[0]]
    info = next((r[0].split("/", 1)[0] for r in rows if r[0].split("/", 1)[0].endswith(".dist-info")), "")
    out = []
    for row in rows:
        name, parts = row[0], row[0].split("/")
        digest = row[1][7:] if len(row) > 1 and row[1].startswith("sha256=") else None
        if name.startswith("/") or "__pycache__" in parts or parts[0].endswith(".data"):
            continue
        if ".." in parts:
            installed = Path(os.path.normpath(base / name))
            try:
                rel = installed.relative_to(prefix)
            except ValueError:
                continue  # outside this install's prefix: not ours to carry
            if not info or rel.parts[:1] == ("bin",) or ".." in rel.parts:
                continue
            out.append((f"{info[:-len('.dist-info')]}.data/data/{rel.as_posix()}", name, digest))
            continue
        if parts[0].endswith(".dist-info") and parts[-1] in _DROP:
            continue
        out.append((name, name, digest))
    return out


def installed_wheel(ctx: Context) -> Path:
    """The installed distribution packed again as a wheel (cached by its RECORD's hash). Every file is
    checked against the RECORD on each call: an install edited since is refused, cached wheel or not."""
    try:
        dist = metadata.distribution(DIST)
        record_text = dist.read_text("RECORD")
    except metadata.PackageNotFoundError:
        record_text = None
    if not record_text:
        raise EnvironmentProblem("this tfgpu-install has no installed distribution record to pack its wheel from",
                                 hint=_WHEEL_FIX)
    version = dist.version
    base = Path(str(dist.locate_file("")))
    members = _members(record_text, base, Path(sysconfig.get_paths()["data"]))
    dist_infos = {name.split("/", 1)[0] for name, _, _ in members if name.split("/", 1)[0].endswith(".dist-info")}
    if len(dist_infos) != 1:
        raise EnvironmentProblem("the installed tfgpu-install's RECORD names no single .dist-info", hint=_WHEEL_FIX)
    files: dict[str, bytes] = {}
    for name, installed, recorded in members:
        try:
            data = (base / installed).read_bytes()
        except OSError as exc:
            raise EnvironmentProblem(f"the installed file {name} cannot be read ({exc.strerror or exc})",
                                     hint="reinstall tfgpu-install, or " + _WHEEL_FIX) from exc
        if recorded is not None and _b64(hashlib.sha256(data).digest()) != recorded:
            raise EnvironmentProblem(
                f"the installed file {name} is not what tfgpu-install {version} installed (its sha256 differs "
                "from the RECORD): the fleet will not ship an edited install as the release",
                hint="reinstall tfgpu-install, or " + _WHEEL_FIX)
        files[name] = data
    out = ctx.cache_dir / "fleet-wheel" / hashlib.sha256(record_text.encode()).hexdigest()[:16]
    wheel = out / f"tfgpu_install-{version}-py3-none-any.whl"
    if wheel.is_file():
        return wheel
    out.mkdir(parents=True, exist_ok=True)
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    part = out / f".{os.getpid()}-{threading.get_ident()}.whl.part"  # two controllers never share one
    with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
            writer.writerow([name, "sha256=" + _b64(hashlib.sha256(data).digest()), str(len(data))])
        info = next(iter(dist_infos))
        writer.writerow([f"{info}/RECORD", "", ""])
        zf.writestr(f"{info}/RECORD", record.getvalue())
    part.replace(wheel)
    return wheel
