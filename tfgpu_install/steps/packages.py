"""Step packages.install: TensorFlow, its exact CUDA/cuDNN wheel pins and numpy/protobuf
constraints, installed into the target env with uv (pip as the fallback).

check() never spawns pip: it reads the env's *.dist-info METADATA headers (env/layout.py)
and tests every requirement, and every requirement of those (their Requires-Dist, with
markers evaluated for the env's Python), with packaging's specifiers. A no-op re-run is
a directory listing and a few small file reads; a half-finished install (killed while
uv was unpacking) shows up as a missing dependency and is finished on the next run.

Undo restores the package set that was there before: the set is saved to the env's
state dir before the installer runs (so even a kill mid-install can be undone), then
what was added is uninstalled and what changed is reinstalled at its old version.
When env.create made the env in this same run, the env's removal undoes everything,
and the record says so.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from tfgpu_install.context import Context, shows_progress
from tfgpu_install.env.layout import installed_dists, record_rows, site_packages_dirs
from tfgpu_install.env.target import TargetEnv, env_python_version
from tfgpu_install.env.tools import find_uv, last_lines, tool_env
from tfgpu_install.errors import DownloadError, StepFailed
from tfgpu_install.files import atomic_write
from tfgpu_install.guard.jsondoc import obj
from tfgpu_install.steps.base import NOTHING_EARLIER, Step, UndoRecord, checkpoint
from tfgpu_install.steps.install_progress import InstallProgress
from tfgpu_install.steps.package_changes import PackageChanges

_NETWORK_SIGNS = (
    "Failed to fetch",
    "Connection refused",
    "Name or service not known",
    "Temporary failure in name resolution",
    "NewConnectionError",
    "ConnectTimeout",
    "Network is unreachable",
    "error sending request",
    "ProxyError",
    "SSL: CERTIFICATE_VERIFY_FAILED",
    "invalid peer certificate",
)


# --- reading what is installed, without pip ------------------------------------------------


def installed(env: TargetEnv) -> dict[str, tuple[str, list[str]]]:
    """canonical name -> (version, Requires-Dist lines) of every distribution in the env."""
    return {name: (d.version, list(d.requires)) for name, d in installed_dists(env.site_packages()).items()}


def installed_versions(env: TargetEnv, have: Optional[Mapping[str, tuple[str, list[str]]]] = None) -> dict[str, str]:
    return {name: ver for name, (ver, _) in sorted((installed(env) if have is None else have).items())}


def marker_environment(env: TargetEnv) -> dict[str, str]:
    """PEP 508 marker values for the env's interpreter (this host's platform, the env's Python)."""
    from packaging.markers import default_environment

    menv: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    full = env_python_version(env)
    if full:
        parts = full.split(".")
        menv["python_version"] = ".".join(parts[:2])
        menv["python_full_version"] = full if len(parts) >= 3 else full + ".0"
        menv["implementation_version"] = menv["python_full_version"]
    return menv


def unsatisfied(env: TargetEnv, requirements: Sequence[str],
                have: Optional[Mapping[str, tuple[str, list[str]]]] = None) -> list[str]:
    """Why the env does not satisfy `requirements` and their dependency closure
    ([] when it does). Each item names the requirement and what is installed (`have`: the
    env's installed() when the caller has it already)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    have = installed(env) if have is None else have
    menv = marker_environment(env)
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    queue: list[tuple[str, Optional[str]]] = [(r, None) for r in requirements]
    while queue:
        text, wanted_by = queue.pop(0)
        try:
            req = Requirement(text)
        except InvalidRequirement:
            problems.append(f"unparseable requirement {text!r}" + (f" (of {wanted_by})" if wanted_by else ""))
            continue
        name = canonicalize_name(req.name)
        if req.marker is not None and not req.marker.evaluate({**menv, "extra": ""}):
            continue
        got = have.get(name)
        by = f" (needed by {wanted_by})" if wanted_by else ""
        if got is None:
            problems.append(f"{req} is not installed{by}")
            continue
        version, requires = got
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req} wanted{by}, {name} {version} is installed")
            continue
        for extra in [""] + sorted(req.extras):
            key = (name, extra)
            if key in seen:
                continue
            seen.add(key)
            for dep in requires:
                try:
                    dreq = Requirement(dep)
                except InvalidRequirement:
                    continue  # a dependency's own bad metadata is not ours to judge
                if dreq.marker is not None:
                    if not dreq.marker.evaluate({**menv, "extra": extra}):
                        continue
                    dreq.marker = None
                elif extra:
                    continue  # unconditional dependencies are walked in the base ("") pass
                queue.append((str(dreq), name))
    return problems


# --- index options -------------------------------------------------------------------------


def truthy(value: Optional[str]) -> bool:
    return bool(value) and str(value).lower() not in ("0", "false", "no", "off", "")


def index_flags(
    ctx: Context,
    tool: str,
    index_url: Optional[str] = None,
    extra_index_urls: Sequence[str] = (),
    find_links: Sequence[str] = (),
    no_index: bool = False,
) -> list[str]:
    """Index flags for uv or pip: explicit options first, then the user's mirror settings for
    either tool (a user behind a mirror often sets only PIP_INDEX_URL; uv alone would not read
    it). Installs and hash look-ups use the same, so both see the same packages."""
    own, other = ("UV", "PIP") if tool == "uv" else ("PIP", "UV")
    index = index_url or ctx.env(f"{own}_INDEX_URL") or ctx.env("UV_DEFAULT_INDEX") or ctx.env(f"{other}_INDEX_URL")
    args: list[str] = []
    if index:
        args += ["--index-url", index]
    extras: list[str] = list(extra_index_urls)
    for var in (f"{own}_EXTRA_INDEX_URL", f"{other}_EXTRA_INDEX_URL", "UV_INDEX"):
        extras += (ctx.env(var) or "").split()
    links = list(find_links)
    for var in (f"{own}_FIND_LINKS", f"{other}_FIND_LINKS"):
        links += (ctx.env(var) or "").split()
    for url in dict.fromkeys(extras):
        if url != index:
            args += ["--extra-index-url", url]
    for link in dict.fromkeys(links):
        args += ["--find-links", link]
    if no_index or truthy(ctx.env("PIP_NO_INDEX")) or truthy(ctx.env("UV_NO_INDEX")):
        args.append("--no-index")
    return args


# Files the installer writes get a ctime from the kernel's coarse clock, which may lag time_ns() by
# a tick: "written since" starts a little earlier (a file of ours written just before is rewritten anyway).
_CLOCK_SLACK_NS = 50_000_000


class InstallPackages(Step):
    id = "packages.install"
    needs = ("env.create",)

    def __init__(
        self,
        env: TargetEnv,
        requirements: Sequence[str],
        *,
        hashes: Optional[Mapping[str, Sequence[str]]] = None,
        require_hashes: Optional[bool] = None,
        index_url: Optional[str] = None,
        extra_index_urls: Sequence[str] = (),
        find_links: Sequence[str] = (),
        no_index: bool = False,
        full_check: bool = False,
        expected: Optional[Mapping[str, tuple[str, str]]] = None,
    ) -> None:
        """hashes: canonical name -> ["sha256:..."]. require_hashes: pass --require-hashes
        (default: when every requirement has hashes, i.e. the pins are a complete lock).
        full_check: every installed file hashed against its RECORD (a restore: code swapped at
        the same version is reinstalled), not only sizes and the shared libraries.
        expected: canonical name -> (version, content digest) from a snapshot (env/builds.py): a
        distribution of that version whose RECORD is another build is reinstalled, and one still
        another build after the install fails the step (the index served other bytes)."""
        self.env = env
        self.requirements = list(requirements)
        # PEP 503 names without `packaging` (its import is ~10 ms of every `plan`, which builds
        # this step only to list it): the rule packaging.utils.canonicalize_name applies.
        self.hashes = {re.sub(r"[-_.]+", "-", k).lower(): list(v) for k, v in (hashes or {}).items()}
        self.require_hashes = require_hashes
        self.index_url = index_url
        self.extra_index_urls = list(extra_index_urls)
        self.find_links = list(find_links)
        self.no_index = no_index
        self.full_check = full_check
        self.expected = dict(expected or {})

    @classmethod
    def from_choice(cls, env: TargetEnv, choice: Any, options: Any = None,
                    expected: Optional[Mapping[str, tuple[str, str]]] = None) -> "InstallPackages":
        """From a resolver Choice and the InstallOptions (index_url; extra["find_links"],
        extra["extra_index_url"], extra["no_index"] for mirrors and offline wheelhouses)."""
        extra: Mapping[str, str] = getattr(options, "extra", None) or {}
        added = list(getattr(options, "with_requirements", None) or ())  # the user's own (--with, add)
        # the hashes a --with-file pinned for the user's own requirements, beside the release's
        pinned = {**(getattr(choice, "hashes", None) or {}), **(getattr(options, "with_hashes", None) or {})}
        return cls(
            env,
            choice.requirements() + added,
            hashes=pinned,
            index_url=getattr(options, "index_url", None),
            extra_index_urls=[u for u in extra.get("extra_index_url", "").split() if u],
            find_links=[u for u in extra.get("find_links", "").split() if u],
            no_index=truthy(extra.get("no_index")),
            expected=expected,
        )

    def describe(self) -> str:
        more = len(self.requirements) - 3
        head = ", ".join(self.requirements[:3]) + (f" and {more} more" if more > 0 else "")
        return f"install {head} into {self.env.path}"

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.env.site_packages())]

    def _before_file(self, ctx: Context) -> Path:
        from tfgpu_install.env.state import env_state_dir

        return env_state_dir(ctx, self.env.path) / "packages-before.json"

    # check ------------------------------------------------------------------------------

    def check(self, ctx: Context) -> bool:
        if not self.env.path.is_dir() or self._before_file(ctx).exists():
            return False  # no env yet, or an install of ours was interrupted
        return not unsatisfied(self.env, self.requirements) and not self._damaged(ctx)

    def _damaged(self, ctx: Context) -> list[str]:
        """Distributions whose installed files no longer match their RECORD (a file missing,
        resized, a shared library changed): the versions are right, the bytes are not."""
        from tfgpu_install.env.integrity import check_installed
        from tfgpu_install.env.state import hash_cache

        if not self.env.path.is_dir():
            return []
        found = check_installed(self.env.path, full=self.full_check, cache=hash_cache(ctx, self.env.path),
                                expected=self.expected or None)
        return found.names()

    def _verified_names(self, tool: str, use_hashes: bool) -> set[str]:
        """The distributions whose wheel's sha256 the installer checks in this run."""
        return {n for n, h in self.hashes.items() if h and (use_hashes or tool == "uv")}

    def _refuse_other_builds(self) -> None:
        """After the install: every distribution the snapshot describes is its recorded build."""
        from tfgpu_install.env.integrity import builds

        if not self.expected:
            return
        now = builds(self.env.path)
        other = sorted(f"{n} {v}" for n, (v, content) in self.expected.items()
                       if n in now and now[n][0] == v and now[n][1] != content)
        if other:
            raise DownloadError(
                f"the installed {', '.join(other[:5])} {'is' if len(other) == 1 else 'are'} another build than "
                "the snapshot recorded (the same version with other files): the index or a cache served other "
                "bytes for that version",
                hint="install from the index the snapshot was taken with (--index-url) or from its bundle "
                "(`snapshot bundle`, then restore --offline); the step is undone",
                ref="other-build",
            )

    # the installer command ----------------------------------------------------------------

    def _use_hashes(self) -> bool:
        if self.require_hashes is not None:
            return self.require_hashes
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name

        names = [canonicalize_name(Requirement(r).name) for r in self.requirements]
        return bool(names) and all(self.hashes.get(n) for n in names)

    def _lines(self, tool: str, use_hashes: bool) -> list[str]:
        """The requirements file's lines: each requirement with its hashes where they are used."""
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name

        lines = []
        for req in self.requirements:
            hashes = self.hashes.get(canonicalize_name(Requirement(req).name), [])
            # pip turns on hash-checking for everything as soon as one line has a hash, so
            # it only gets hashes for a complete lock; uv checks the hashes it is given.
            if hashes and (use_hashes or tool == "uv"):
                lines.append(req + "".join(f" --hash={h}" for h in hashes))
            else:
                lines.append(req)
        return lines

    def preview_changes(self, ctx: Context, python_version: Optional[str] = None) -> PackageChanges:
        """What apply() would do to the env's packages, with versions, asking uv and changing nothing:
        `uv pip install --dry-run` on the env, or `uv pip compile` for an env not made yet (python_version:
        its Python X.Y). Unknown (with the reason) without uv, or when uv cannot answer."""
        import tempfile

        from tfgpu_install.steps.package_changes import parse_dry_run

        uv = find_uv(ctx)
        if uv is None:
            return PackageChanges(unknown="uv is not available to work them out")
        exists = self.env.python.exists()
        if not exists and not python_version:
            return PackageChanges(unknown="the new env's Python is not known yet")
        use_hashes = self._use_hashes()
        with tempfile.TemporaryDirectory(prefix="tfgpu-preview-") as tmp:
            reqfile = Path(tmp) / "requirements.txt"
            reqfile.write_text("\n".join(self._lines("uv", use_hashes)) + "\n")
            # an env not made yet: into a directory that is never created (--target with the env's Python
            # version), so uv says the same of it, every package added, and which it has to download (-v)
            where = (["--python", str(self.env.python)] if exists
                     else ["--target", str(Path(tmp) / "new-env"), "--python-version", str(python_version)])
            argv = [uv, "pip", "install", "--dry-run", "-v", *where, *self._index_args(ctx, "uv"),
                    *(["--require-hashes"] if use_hashes else []), "-r", str(reqfile)]
            done = ctx.runner.run(argv, desc="work out the package changes (changes nothing)", env=tool_env(ctx),
                                  timeout=600)
        if not done.ok:
            return PackageChanges(unknown="uv: " + last_lines(done.stderr or done.stdout, 3))
        return parse_dry_run(done.stderr + "\n" + done.stdout)

    def _index_args(self, ctx: Context, tool: str) -> list[str]:
        return index_flags(ctx, tool, self.index_url, self.extra_index_urls, self.find_links, self.no_index)

    def _installer(self, ctx: Context) -> tuple[str, list[str], list[str]]:
        """(tool name, install argv prefix, uninstall argv prefix) for this env."""
        py = str(self.env.python)
        uv = find_uv(ctx)
        if uv:
            return "uv", [uv, "pip", "install", "--python", py], [uv, "pip", "uninstall", "--python", py]
        pip = [py, "-m", "pip"]
        return (
            "pip",
            pip + ["install", "--disable-pip-version-check", "--no-input"],
            pip + ["uninstall", "-y", "--disable-pip-version-check"],
        )

    def _ensure_pip(self, ctx: Context) -> None:
        if "pip" in installed(self.env):
            return
        res = ctx.runner.run([str(self.env.python), "-m", "ensurepip", "--default-pip"], desc="bootstrap pip",
                             env=tool_env(ctx), timeout=600, mutating=True)
        if not res.ok:
            raise StepFailed(
                f"the env at {self.env.path} has no pip and ensurepip failed: {last_lines(res.stderr)}",
                hint="install uv (pip install uv) so the env needs no pip, or recreate the env",
            )

    def _run(self, ctx: Context, argv: list[str], what: str,
             on_line: Optional[Callable[[str], None]] = None, terminal: bool = False) -> None:
        res = ctx.runner.run(argv, desc=what, env=tool_env(ctx), timeout=3600, mutating=True, on_line=on_line,
                             terminal=terminal)
        if res.ok:
            return
        detail = last_lines(res.stderr or res.stdout, 8)
        if any(sign in (res.stderr + res.stdout) for sign in _NETWORK_SIGNS):
            raise DownloadError(
                f"{what} failed: could not reach the package index: {detail}",
                hint="check your connection; behind a mirror or proxy set PIP_INDEX_URL/UV_INDEX_URL "
                "(or --index-url) and HTTPS_PROXY, then run again",
            )
        raise StepFailed(
            f"{what} failed: {detail}",
            hint="fix the cause above and run again (it resumes), or `tfgpu-install rollback`",
        )

    # apply ------------------------------------------------------------------------------

    def apply(self, ctx: Context) -> UndoRecord:
        return self.apply_with(ctx, NOTHING_EARLIER)

    def apply_with(self, ctx: Context, earlier: Mapping[str, UndoRecord]) -> UndoRecord:
        before_file = self._before_file(ctx)
        # env.create made the env in this run: undo leaves it to env removal (nothing uninstalled one by one)
        env_created = bool((earlier.get("env.create") or {}).get("created"))
        if before_file.exists():
            # An interrupted install of ours: its "before" is the true before.
            saved = json.loads(before_file.read_text())
            _drop_half_installed(self.env)
        else:
            saved = {"before": installed_versions(self.env), "env_created": env_created}
            atomic_write(before_file, json.dumps(saved, indent=1, sort_keys=True))
        tool, install, _ = self._installer(ctx)
        if tool == "pip":
            self._ensure_pip(ctx)
        use_hashes = self._use_hashes()
        reqfile = before_file.parent / "requirements.txt"
        atomic_write(reqfile, "\n".join(self._lines(tool, use_hashes)) + "\n")
        argv = (install + self._index_args(ctx, tool) + (["--require-hashes"] if use_hashes else [])
                + ["-r", str(reqfile)])
        damaged = self._damaged(ctx)
        if damaged:  # the same versions again, from the (hashed) pins: the recorded bytes back
            argv += ([a for n in damaged for a in ("--reinstall-package", n)] if tool == "uv"
                     else ["--force-reinstall"])
        since_ns = time.time_ns() - _CLOCK_SLACK_NS
        shown = InstallProgress(ctx.progress, f"installing {len(self.requirements)} requirements with {tool}")
        shown.start()
        donor = None
        if tool == "uv":  # uv links its cache's files: another env's bytecode fits these (steps/bytecode.py)
            from tfgpu_install.facts.background import Background
            from tfgpu_install.steps.bytecode import donor_for

            version = env_python_version(self.env) or ""
            donor = Background(lambda: donor_for(ctx, self.env.path, version))  # walked while uv works
        # uv shows each download's bytes only on a terminal: given one while someone watches the progress
        self._run(ctx, argv, f"{tool} install into {self.env.path}", on_line=shown.feed,
                  terminal=tool == "uv" and shows_progress(ctx))
        checkpoint(ctx, self.id, "middle")
        have = installed(self.env)
        missing = unsatisfied(self.env, self.requirements, have)
        if missing:
            raise StepFailed(
                f"{tool} finished but the env does not satisfy the plan: {'; '.join(missing[:5])}",
                hint="run again; if it persists, report it with the output of --debug",
            )
        after = installed_versions(self.env, have)
        self._refuse_other_builds()
        from tfgpu_install.env.integrity import remember_installed
        from tfgpu_install.env.state import hash_cache, written_list

        remember_installed(self.env.path, hash_cache(ctx, self.env.path), since_ns=since_ns,
                           verified=self._verified_names(tool, use_hashes), written=written_list(ctx, self.env.path))
        if donor is not None:
            from tfgpu_install.steps.bytecode import link_from

            try:  # a saving, never a reason to fail the install
                surveyed = donor.result()
                if surveyed is not None:
                    link_from(self.env.site_packages(), surveyed)
            except (OSError, ValueError):
                pass
        before_file.unlink(missing_ok=True)
        return {
            "tfgpu_install": tool,
            "env_created": bool(saved.get("env_created")),
            "before": saved["before"],
            "after": after,
            "requirements": self.requirements,
        }

    # undo -------------------------------------------------------------------------------

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        before_file = self._before_file(ctx)
        if record.get("partial"):
            if not before_file.exists():
                return  # killed before anything was installed
            record = json.loads(before_file.read_text())
        if record.get("env_created") or not self.env.python.exists():
            # env.create made this env in the same run: removing it (the next undo) removes
            # every package too; uninstalling gigabytes first would be wasted work.
            before_file.unlink(missing_ok=True)
            return
        before = {str(k): str(v) for k, v in obj(record, "before").items()}
        now = installed_versions(self.env)
        added = sorted(n for n in now if n not in before)
        changed = sorted(f"{n}=={v}" for n, v in before.items() if now.get(n) != v)
        tool, install, uninstall = self._installer(ctx)
        if added:
            self._run(ctx, uninstall + added, f"{tool} uninstall of packages added by the install")
        if changed:
            if tool == "pip":
                self._ensure_pip(ctx)
            self._run(ctx, install + self._index_args(ctx, tool) + ["--no-deps"] + changed,
                      f"{tool} reinstall of the previous versions")
        before_file.unlink(missing_ok=True)


def _drop_half_installed(env: TargetEnv) -> None:
    """A package whose install was cut short (killed, disk full) can leave a dist-info directory
    without its METADATA or RECORD; uv and pip then stop on it ("failed to read metadata")
    instead of installing it again. Only such broken records are removed: their files are
    rewritten by the install that follows."""
    import shutil

    for site in site_packages_dirs(env.path):
        for dist in sorted(site.glob("*.dist-info")):
            if dist.is_dir() and not ((dist / "METADATA").is_file() and (dist / "RECORD").is_file()
                                      and not _record_incomplete(site, dist / "RECORD")):
                shutil.rmtree(dist, ignore_errors=True)


def _record_incomplete(site: Path, record: Path) -> bool:
    """Whether a file the RECORD lists is missing or shorter than listed. An installer copies a
    wheel's own RECORD along with its other files, so a complete-looking dist-info can sit next
    to a library the full disk cut off; only a resume after such a cut reads this."""
    rows = record_rows(record)
    if rows is None:
        return True
    for row in rows:
        if len(row) < 3 or not row[0] or row[0].endswith("RECORD"):
            continue
        path = site / row[0]
        try:
            size = path.stat().st_size
        except OSError:
            return True
        if row[2].isdigit() and size != int(row[2]):
            return True
    return False
