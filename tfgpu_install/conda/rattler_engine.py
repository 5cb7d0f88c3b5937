"""py-rattler (the conda solver and installer pixi is built on) as the embedded conda engine:
`--backend conda` works on a machine without conda, mamba or micromamba.

solve + install run in this process through rattler's own async API (no subprocess: rattler
is a library). Channels are names ("conda-forge") or URLs (https://, file://). The package
cache is the tool's cache dir, so a second env links the same files instead of downloading.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, EnvironmentProblem, StepFailed, UnsatisfiableError

RATTLER_HINT = ("install the embedded conda engine (`pip install 'tfgpu-install[conda]'` into the tool's "
                "environment; from a checkout, `scripts/install --with-conda`), or conda/mamba/micromamba")


def available() -> bool:
    try:
        import rattler  # noqa: F401
    except ImportError:
        return False
    return True


def _rattler() -> Any:
    try:
        import rattler
    except ImportError as exc:
        raise EnvironmentProblem(
            "--backend conda needs conda, mamba, micromamba or the py-rattler package, and none was found",
            hint=RATTLER_HINT, ref="conda-missing",
        ) from exc
    return rattler


def _prefix_records(rattler: Any, prefix: Path) -> list[Any]:
    out = []
    for meta in sorted((prefix / "conda-meta").glob("*.json")):
        try:
            out.append(rattler.PrefixRecord.from_path(str(meta)))
        # py-rattler raises its own (untyped) exception classes. A foreign or torn record: the
        # transaction treats it as absent, as conda does.
        except Exception:  # noqa: BLE001
            continue
    return out


def solve_install(
    ctx: Context, prefix: Path, specs: Sequence[str], channels: Sequence[str],
    keep_installed: bool = True, cuda_override: Optional[str] = None,
) -> list[dict[str, str]]:
    """Solve `specs` (with what the prefix already holds as locked packages) and link the
    result into `prefix`. Returns the solved records {name, version, build, channel, url, sha256}.
    cuda_override: the __cuda virtual package's version (conda's CONDA_OVERRIDE_CUDA), for
    packages that require a driver on a machine without one."""
    rattler = _rattler()
    prefix = Path(prefix)
    cache_dir = package_cache(ctx)
    (prefix / "conda-meta").mkdir(parents=True, exist_ok=True)
    installed = _prefix_records(rattler, prefix)
    # What is there stays in the request, so that solving for cuDNN does not drop, say, python.
    wanted = [_rattler_spec(s) for s in specs] + ([str(r.name.normalized) for r in installed] if keep_installed else [])
    try:
        records = asyncio.run(rattler.solve(
            [rattler.Channel(c) for c in channels],
            wanted,
            locked_packages=installed,
            virtual_packages=rattler.VirtualPackage.detect(_overrides(rattler, cuda_override)),
        ))
    except Exception as exc:
        text = str(exc)
        kind = type(exc).__name__
        if "Solver" in kind or "unsolvable" in text.lower() or "cannot be installed" in text or "No candidates" in text:
            raise UnsatisfiableError(
                f"conda (rattler) cannot solve {' '.join(specs)} from {', '.join(channels)}: {_short(text)}",
                "pass --conda-channel with a channel (or mirror) that publishes these packages; on a "
                "machine without an NVIDIA driver, CONDA_OVERRIDE_CUDA=<version> stands in for one (as with conda)",
                ref="conda-unsolvable",
            ) from exc
        raise StepFailed(
            f"conda (rattler) could not read the channel(s) {', '.join(channels)}: {kind}: {_short(text)}",
            "check the network or --conda-channel, then run again (the step resumes)",
            ref="conda-channel",
        ) from exc
    have = {(str(r.name.normalized), str(r.version), str(r.build)) for r in installed}
    for record in records:
        if (str(record.name.normalized), str(record.version), str(record.build)) not in have:
            _fetch_and_vet(ctx, record)  # before anything of it is linked into the env
    try:
        asyncio.run(rattler.install(
            records, str(prefix), cache_dir=str(cache_dir), installed_packages=installed, show_progress=False,
        ))
    except Exception as exc:
        raise StepFailed(
            f"conda (rattler) could not install into {prefix}: {type(exc).__name__}: {_short(str(exc))}",
            "free disk space / fix permissions, then run again (the step resumes), or `tfgpu-install rollback`",
            ref="conda-install",
        ) from exc
    return [_record_json(r) for r in records]


def package_cache(ctx: Context) -> Path:
    return ctx.cache_dir / "rattler"


def _fetch_and_vet(ctx: Context, record: Any) -> None:
    """The package archive on this disk (a file:// channel's own file, else downloaded
    sha256-checked into the tool's cache, and the record pointed at it so that rattler does
    not download it again), unpacked and checked before rattler links it."""
    from urllib.parse import unquote, urlparse

    from tfgpu_install.conda.vet import vet_archive

    url = str(record.url)
    sha = _hex(getattr(record, "sha256", None))
    label = f"{record.name.normalized}-{record.version}-{record.build}"
    if url.startswith("file://"):
        local = Path(unquote(urlparse(url).path))
    else:
        from tfgpu_install.fetch import download

        if not sha:
            raise BadInputError(f"conda package {label} has no sha256 in the channel's repodata",
                                "use a channel whose repodata carries sha256 (conda-forge does)",
                                ref="conda-unsafe-package")
        got = download.fetch(ctx, url, sha, size=getattr(record, "size", None), what=f"conda package {label}")
        local = package_cache(ctx) / "archives" / sha[:16] / str(record.file_name)
        if not local.is_file():
            local.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(got.path, local)
            except OSError:
                shutil.copy2(got.path, local)
        record.url = local.as_uri()
    vet_archive(local, label, sha or None, package_cache(ctx) / "vet")


def remove(ctx: Context, prefix: Path, names: Sequence[str]) -> None:
    """Unlink the named packages from `prefix`; the others stay as they are."""
    rattler = _rattler()
    cache_dir = package_cache(ctx)
    prefix = Path(prefix)
    if not (prefix / "conda-meta").is_dir():
        return
    installed = _prefix_records(rattler, prefix)
    keep = [r for r in installed if str(r.name.normalized) not in set(names)]
    if len(keep) == len(installed):
        return
    asyncio.run(rattler.install(
        keep, str(prefix), cache_dir=str(cache_dir), installed_packages=installed, show_progress=False,
    ))


def _overrides(rattler: Any, cuda: Optional[str]) -> Any:
    if cuda:
        return rattler.VirtualPackageOverrides(cuda=rattler.Override.string(cuda))
    return rattler.VirtualPackageOverrides()


def _rattler_spec(spec: str) -> str:
    """conda's `name=version=build` in the form rattler's strict parser takes: `name ==version build`
    (strictly, a bare `=11.2.2` before a build string is refused as a version without a range)."""
    parts = spec.split("=")
    if len(parts) == 3 and all(parts):
        return f"{parts[0]} =={parts[1]} {parts[2]}"
    return spec


def _record_json(r: Any) -> dict[str, str]:
    return {
        "name": str(r.name.normalized), "version": str(r.version), "build": str(r.build),
        "channel": str(getattr(r, "channel", "") or ""), "url": str(r.url), "sha256": _hex(getattr(r, "sha256", None)),
    }


def _hex(value: Optional[Any]) -> str:
    if value is None:
        return ""
    return value.hex() if isinstance(value, (bytes, bytearray)) else str(value)


def _short(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."
