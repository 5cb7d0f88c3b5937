"""cuDNN steps: fetch (NVIDIA redist download or a local archive), place (checked, atomic),
quarantine stale copies (opt-in), and check the PyPI wheel's libraries (default source).

    cudnn.fetch       redist: manifest -> archive into the sha256-keyed cache; archive: take
                      --cudnn-archive. Either way a small record in the env's state dir says
                      what place should unpack.
    cudnn.place       extract into staging beside the destination, fix/verify soname links
                      against each ELF SONAME, refuse a major TF cannot use, rename into
                      <env>/lib/cudnn-<ver>/ (link <env>/lib/cudnn -> it) or --cudnn-prefix DIR.
    cudnn.quarantine  move other cuDNN versions on the env's library path aside into
                      <state>/quarantine/<env>/<original absolute path>; undo moves them back.
    cudnn.check       wheel source: nvidia/cudnn/lib holds libcudnn.so.<major> whose SONAME
                      matches and whose version serves the TF build.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, DownloadError, StepFailed, UsageError
from tfgpu_install.files import atomic_write, remove_file, replace_symlink
from tfgpu_install.guard.jsondoc import JSONObject, text
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint
from tfgpu_install.steps.cudnn.want import CudnnOptions, Want, check_cudnn_inputs

if TYPE_CHECKING:
    from tfgpu_install.resolver.model import Resolution

MARKER = ".tfgpu-cudnn.json"  # in a placed tree: which archive it came from


def placed_lib_dir(options: CudnnOptions) -> Optional[Path]:
    """The directory the activation puts first on LD_LIBRARY_PATH (None for the wheel
    source, whose nvidia/*/lib dirs the activation adds already). The stable link
    <env>/lib/cudnn keeps this path the same whatever version gets placed."""
    if options.cudnn_source == "wheel":
        return None
    if options.cudnn_prefix:
        return Path(options.cudnn_prefix).expanduser() / "lib"
    return Path(options.env) / "lib" / "cudnn" / "lib"


def cudnn_steps(resolution: "Resolution", options: CudnnOptions, env: Any = None) -> list[Step]:
    """The cuDNN steps for this install, in order (pure: builds objects only).
    `env`: the target env's path, or a steps.env.TargetEnv (its .path); default options.env."""
    env = Path(getattr(env, "path", env)) if env is not None else Path(options.env)
    if options.cudnn_source not in ("wheel", "redist", "archive"):
        raise UsageError(
            f"unknown --cudnn-source {options.cudnn_source!r}", "use one of: wheel, redist, archive"
        )
    if options.cudnn_source == "archive" and not options.cudnn_archive:
        raise UsageError("--cudnn-source archive needs --cudnn-archive FILE",
                         "give the path of the .tar.xz/.tar.gz/.zip")
    if options.cudnn_archive and options.cudnn_source != "archive":
        raise UsageError("--cudnn-archive is only used with --cudnn-source archive", "add --cudnn-source archive")
    if options.cudnn_mirror and options.cudnn_source != "redist":
        raise UsageError("--cudnn-mirror is only used with --cudnn-source redist", "add --cudnn-source redist")
    from tfgpu_install.steps.cudnn.stale import QuarantineStale
    from tfgpu_install.steps.cudnn.wheel import CheckCudnnWheel

    want = Want(resolution, options, env)
    steps: list[Step] = []
    choice = resolution.choice
    if options.cudnn_source == "wheel":
        # Only when the PyPI wheels bring cuDNN: a "system" CUDA line has no wheel to check.
        if choice is not None and choice.cudnn and choice.cuda_from == "pip":
            steps.append(CheckCudnnWheel(want))
    else:
        steps += [FetchCudnn(want), PlaceCudnn(want)]
    if options.quarantine_stale:
        steps.append(QuarantineStale(want))
    return steps


def find_stale(ctx: Context, resolution: "Resolution", options: CudnnOptions, env: Any = None) -> list[Any]:
    """Other cuDNN copies on the env's library path (cudnn.CudnnCopy), for reports and
    doctor, whether or not --quarantine-stale is given."""
    from tfgpu_install.steps.cudnn.stale import QuarantineStale

    env = Path(getattr(env, "path", env)) if env is not None else Path(options.env)
    return QuarantineStale(Want(resolution, options, env)).stale(ctx)


# --- cudnn.fetch ---------------------------------------------------------------------------


class FetchCudnn(Step):
    id = "cudnn.fetch"

    def __init__(self, want: Want) -> None:
        self.want = want

    def describe(self) -> str:
        if self.want.source == "archive":
            return f"take the cuDNN archive {self.want.archive}"
        return f"download cuDNN {self.want.version or '?'} ({self.want.platform}) from {self.want.base_url}"

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.want.record_path(ctx))]

    def check(self, ctx: Context) -> bool:
        return self.want.record(ctx) is not None

    def apply(self, ctx: Context) -> UndoRecord:
        rec = self._take_archive(ctx) if self.want.source == "archive" else self._download(ctx)
        rec["key"] = self.want.key()
        atomic_write(self.want.record_path(ctx), json.dumps(rec, indent=2, sort_keys=True) + "\n")
        return {"record": str(self.want.record_path(ctx)), "archive": rec["archive"], "sha256": rec["sha256"]}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        # The cached download stays: it is a cache (keyed by hash), not part of the env.
        remove_file(Path(text(record, "record") or self.want.record_path(ctx)))

    def _take_archive(self, ctx: Context) -> JSONObject:
        from tfgpu_install.fetch.cudnn_redist import check_serves, version_from_name
        from tfgpu_install.files import sha256_file

        arc = self.want.archive
        assert arc is not None
        # again (a resumed run may find it gone); the members are vetted again by the extraction
        check_cudnn_inputs(self.want.source, arc, members=False)
        named = version_from_name(arc.name)
        if named and len(named.split(".")) >= 2:
            # Early, cheap refusal; place checks again with the header inside.
            check_serves(named, self.want.built_with, self.want.tensorflow, arc.name)
        return {"source": "archive", "archive": str(arc.resolve()), "sha256": sha256_file(arc), "version": named}

    def _download(self, ctx: Context) -> JSONObject:
        from tfgpu_install.fetch import download
        from tfgpu_install.fetch.cudnn_redist import (
            check_serves,
            manifest_labels,
            manifest_url,
            parse_index,
            pick_label,
            select_archive,
        )

        want = self.want
        if not want.version:
            raise UsageError(
                "no cuDNN version to download: the resolution names none",
                "this TensorFlow build takes cuDNN from the system; pass the version "
                "(InstallOptions.extra['cudnn_version']) or use --cudnn-source archive",
                ref="cudnn-version-missing",
            )
        # Plain http only for an http mirror the user named; an https one stays https (redirects too).
        allow_http = want.mirror is not None and want.mirror.lower().startswith("http://")
        text = url = None
        for label in manifest_labels(want.version):
            url = manifest_url(want.base_url, label)
            try:
                text = download.fetch_text(ctx, url, allow_http=allow_http)
                break
            except DownloadError as err:
                if err.ref != "download-not-found":
                    raise
        if text is None:
            # No manifest for that exact release: ask the directory listing for the
            # closest one that serves the build (same major, not older).
            index = download.fetch_text(ctx, want.base_url.rstrip("/") + "/", allow_http=allow_http)
            picked = pick_label(want.version, parse_index(index))
            if picked is None:
                raise DownloadError(
                    f"no cuDNN manifest at {want.base_url} matches {want.version}",
                    f"the mirror lists: {', '.join(parse_index(index)) or 'nothing'}; mirror NVIDIA's "
                    "redist directory or use --cudnn-source archive",
                    ref="cudnn-no-manifest",
                )
            url = manifest_url(want.base_url, picked)
            text = download.fetch_text(ctx, url, allow_http=allow_http)
        assert url is not None
        arc = select_archive(text, want.platform, want.cuda_major, source=url)
        check_serves(arc.version, want.built_with, want.tensorflow, url)  # before a big download
        got = download.fetch(
            ctx, arc.url(want.base_url), arc.sha256, size=arc.size, allow_http=allow_http,
            what=f"cuDNN {arc.version}",
        )
        checkpoint(ctx, self.id, "middle")
        return {
            "source": "redist",
            "archive": str(got.path),
            "sha256": arc.sha256,
            "version": arc.version,
            "url": arc.url(want.base_url),
            "manifest": url,
            "name": Path(arc.relative_path).name,
        }


# --- cudnn.place ---------------------------------------------------------------------------


class PlaceCudnn(Step):
    id = "cudnn.place"

    def __init__(self, want: Want) -> None:
        self.want = want

    def describe(self) -> str:
        where = self.want.prefix or (self.want.env / "lib" / "cudnn-<version>")
        return f"unpack cuDNN into {where}, check its soname links"

    def _placed(self, ctx: Context) -> Optional[Path]:
        """The placed tree this request points at (through the link or the prefix)."""
        link = self.want.link()
        if link is not None:
            return link.parent / os.readlink(link) if link.is_symlink() else None
        return self.want.prefix

    def touches(self, ctx: Context) -> list[str]:
        out = []
        rec = self.want.record(ctx)
        if rec and rec.get("version"):
            out.append(str(self.want.dest(_xyz(str(rec["version"])))))
        elif self.want.prefix:
            out.append(str(self.want.prefix))
        link = self.want.link()
        if link is not None:
            out.append(str(link))
        return out

    def check(self, ctx: Context) -> bool:
        from tfgpu_install.fetch.cudnn_redist import link_problems

        rec = self.want.record(ctx)
        tree = self._placed(ctx)
        if rec is None or tree is None:
            return False
        try:
            marker = json.loads((tree / MARKER).read_text())
        except (OSError, ValueError):
            return False
        return marker.get("sha256") == rec.get("sha256") and not link_problems(tree / "lib")

    def apply(self, ctx: Context) -> UndoRecord:
        from tfgpu_install.fetch import archive as archive_mod
        from tfgpu_install.fetch.cudnn_redist import check_serves, link_problems, tree_version, wanted_links

        rec = self.want.record(ctx)
        if rec is None:
            raise StepFailed("cudnn.place found no fetched archive", "run the install again: cudnn.fetch runs first")
        arc = Path(str(rec["archive"]))
        parent = (self.want.prefix.parent if self.want.prefix else self.want.env / "lib")
        staging = archive_mod.extract(arc, parent)
        try:
            root = archive_mod.content_root(staging, arc)
            _normalize_layout(root)
            version, where = tree_version(root)
            check_serves(version, self.want.built_with, self.want.tensorflow,
                         f"{rec.get('name') or arc.name} ({where})")
            assert version is not None
            lib = root / "lib"
            if not lib.is_dir():
                raise BadInputError(f"{arc.name} holds no lib/ directory", "is this a cuDNN archive for Linux?",
                                    ref="cudnn-no-lib")
            links, problems = wanted_links(lib)
            if problems:
                raise BadInputError("; ".join(problems), "the archive is not a usable cuDNN; download it again",
                                    ref="cudnn-bad-libs")
            for want_link in links:  # archives whose links were lost (zips, hand copies) get them back
                p = lib / want_link.name
                if p.is_symlink() or p.exists():
                    if p.is_symlink() and os.readlink(p) == want_link.target:
                        continue
                    p.unlink()
                os.symlink(want_link.target, p)
            left = link_problems(lib)
            if left:
                raise BadInputError("; ".join(left), "the archive's libraries are inconsistent", ref="cudnn-bad-links")
            marker = {"sha256": rec["sha256"], "version": version, "source": rec.get("source"),
                      "from": rec.get("url") or rec["archive"]}
            atomic_write(root / MARKER, json.dumps(marker, indent=2, sort_keys=True) + "\n")
            dest = self.want.dest(version)
            # The intent outlives a kill: a re-run or a rollback knows whether dest was ours.
            intent = self._intent(ctx)
            existed = intent["existed"] if intent and intent.get("dest") == str(dest) else dest.exists()
            atomic_write(self._intent_path(ctx), json.dumps({"dest": str(dest), "existed": existed}) + "\n")
            if _marker_sha(dest) != rec["sha256"]:
                archive_mod.place(root, dest)
            created = not existed
            checkpoint(ctx, self.id, "middle")  # placed, not linked yet
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        undo: UndoRecord = {"dest": str(dest), "created": created, "version": version}
        link = self.want.link()
        if link is not None:
            undo["link"] = str(link)
            undo["previous_link"] = os.readlink(link) if link.is_symlink() else None
            _replace_link(link, dest.name)
        self._loader_check(ctx, dest / "lib", version)
        remove_file(self._intent_path(ctx))
        # Listed for the report even without --quarantine-stale (the executor's results).
        from tfgpu_install.steps.cudnn.stale import QuarantineStale

        undo["stale"] = [c.to_json() for c in QuarantineStale(self.want).stale(ctx)]
        return undo

    def _intent_path(self, ctx: Context) -> Path:
        return self.want.record_path(ctx).with_name("cudnn-place-intent.json")

    def _intent(self, ctx: Context) -> Optional[JSONObject]:
        try:
            data = json.loads(self._intent_path(ctx).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _loader_check(self, ctx: Context, lib: Path, version: str) -> None:
        """Ask the real loader (in a child process) to resolve libcudnn.so.<major>."""
        name = f"libcudnn.so.{version.split('.')[0]}"
        code = f"import ctypes; ctypes.CDLL({name!r})"
        done = ctx.runner.run(
            [sys.executable, "-c", code], desc=f"load {name}", env={"LD_LIBRARY_PATH": str(lib)}, timeout=60
        )
        if not done.ok:
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise StepFailed(
                f"the loader cannot load {name} from {lib}: {tail}",
                "the archive's libraries need something this system lacks; run `tfgpu-install doctor`",
                ref="cudnn-load-failed",
            )

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        link = Path(str(record["link"])) if record.get("link") else self.want.link()
        if link is not None and link.is_symlink():
            prev = record.get("previous_link")
            if prev:
                _replace_link(link, str(prev))
            elif not record.get("partial") or link.parent / os.readlink(link) == Path(str(record.get("dest", ""))):
                link.unlink()
        dest = Path(str(record["dest"])) if record.get("dest") else None
        created = bool(record.get("created"))
        intent = self._intent(ctx)
        if dest is None and intent is not None:  # killed mid-apply: the intent says what it did
            dest, created = Path(str(intent["dest"])), not intent.get("existed", True)
            if link is not None and link.is_symlink() and link.parent / os.readlink(link) == dest:
                link.unlink()
        if dest is not None and created and (dest / MARKER).is_file():
            shutil.rmtree(dest)  # only a tree we placed (it carries our marker)
        remove_file(self._intent_path(ctx))
        parent = self.want.prefix.parent if self.want.prefix else self.want.env / "lib"
        for leftover in parent.glob(".tfgpu-staging-*") if parent.is_dir() else []:
            shutil.rmtree(leftover, ignore_errors=True)


def _marker_sha(tree: Path) -> Optional[str]:
    try:
        return str(json.loads((tree / MARKER).read_text()).get("sha256"))
    except (OSError, ValueError, AttributeError):
        return None


def _xyz(version: str) -> str:
    return ".".join(version.split(".")[:3])


def _normalize_layout(root: Path) -> None:
    """Old archives ship lib64/ (cuda/lib64 in the oldest); the place is lib/."""
    if not (root / "lib").exists() and (root / "lib64").is_dir():
        os.rename(root / "lib64", root / "lib")
        os.symlink("lib", root / "lib64")



def _replace_link(link: Path, target: str) -> None:
    replace_symlink(link, target)
