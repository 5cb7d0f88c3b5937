"""`install`: probe, resolve, show the plan, confirm, run the steps with a journal, verify,
record a snapshot (the provisioning itself is app/provision.py, shared with restore).

A re-run on a complete env is a no-op (every check() passes, verify and snapshot are
skipped while the env's fingerprint is unchanged). A re-run after a kill finishes the job.
No usable GPU and no --allow-cpu: stop after the probe with exit 3 (NO_GPU).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional

from tfgpu_install.app.envs import default_env_path
from tfgpu_install.app.package_plan import changes_made, planned_changes, target_python, uv_links
from tfgpu_install.app.provision import ProvisionRequest, provision
from tfgpu_install.app.resolution import Resolved, ResolveRequest, require_choice, resolve_machine
from tfgpu_install.context import Context
from tfgpu_install.engine.executor import ExecReport
from tfgpu_install.env.layout import user_path
from tfgpu_install.env.verification import BadRecord, gpu_verified, read_record
from tfgpu_install.errors import EnvironmentProblem, UsageError
from tfgpu_install.plan.options import InstallOptions
from tfgpu_install.resolver.model import Resolution
from tfgpu_install.steps.package_changes import PackageChanges

if TYPE_CHECKING:
    from tfgpu_install.fetch.wheelsizes import Sizes
    from tfgpu_install.verify.host import VerifyReport


@dataclass(frozen=True)
class InstallRequest:
    resolve: ResolveRequest = field(default_factory=ResolveRequest)
    env: Optional[str] = None  # --env as given; None: the default location for the choice
    system_ldconfig: bool = False
    shell_rc: Optional[str] = None
    seed_pip: bool = True  # pip in the env (--no-pip: none)
    cudnn_source: str = "wheel"
    cudnn_mirror: Optional[str] = None
    cudnn_archive: Optional[str] = None
    cudnn_prefix: Optional[str] = None
    quarantine_stale: bool = False
    index_url: Optional[str] = None
    conda_channel: Optional[str] = None  # conda backend: channel for Python and cudatoolkit/cudnn
    cuda_source: str = "default"  # "default" | "redist" (NVIDIA's archives), for TF <= 2.13
    cuda_mirror: Optional[str] = None
    yes: bool = False  # no question (the command asks it: commands/install.py)
    dry_run: bool = False
    wait: bool = False
    progress: bool = False  # live progress on the terminal (a dry run's download sizes: read by a person)
    with_requirements: tuple[str, ...] = ()  # --with REQ...: the user's own, resolved with TF's pins
    with_files: tuple[str, ...] = ()  # --with-file requirements.txt | pylock.toml | pyproject.toml
    with_hashes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> hashes (upgrade's carry)


@dataclass(frozen=True)
class InstallPlan:
    """What an install is about to do: the choice, where it goes, and the TensorFlow the env has now."""

    resolution: Resolution
    options: InstallOptions
    before: Optional[str]  # the TensorFlow installed in the env before this run (None: none)


@dataclass(frozen=True)
class FreeSpace:
    """The free space where the env goes (measured when asked)."""

    at: Path  # the env, or its nearest parent that exists
    free: int  # bytes


@dataclass(frozen=True)
class Download:
    """What the run fetches from the package index (fetch/wheelsizes.py's sizes, as the index states them)."""

    sizes: Optional[Sizes]  # None: nothing from an index (--no-index), the size on disk unknown


@dataclass(frozen=True)
class Details:
    """What only a person reads before a run (the question): worked out only when asked."""

    changes: Optional[PackageChanges]  # every package it adds, changes or removes (uv's dry run)
    space: Optional[FreeSpace]  # None: not measurable
    download: Optional[Download]  # None: the packages step has nothing to do


@dataclass(frozen=True)
class InstallQuestion:
    """What an install is about to do, asked before the first change (commands/install.py words it)."""

    plan: InstallPlan
    preview: ExecReport  # each step's state
    details: Callable[[], Details]  # sizes and package changes: only when shown


@dataclass(frozen=True)
class Findings:
    """What the env's verification record says, for the last screen after a run that changed the env."""

    report: Optional[VerifyReport]  # None: a record of another shape (not_understood says why)
    not_understood: Optional[str] = None  # the error reading it, as repr()


@dataclass(frozen=True)
class Installed:
    """`install`'s outcome (commands/install.py renders it)."""

    plan: InstallPlan
    report: ExecReport  # the run's steps (not run: the preview's)
    dry_run: bool
    ran: bool  # False: a dry run, or nothing was pending
    gpu_verified: Optional[bool]  # None: a dry run
    # A dry run: what the packages step would add, change and remove; a run: what it did to them.
    changes: Optional[PackageChanges]
    download: Optional[Download]  # a dry run read by a person (progress): what it would fetch
    findings: Optional[Findings]  # a run that changed the env: what its verification found (None: nothing)

    @property
    def env(self) -> Path:
        return self.plan.options.env


def install(ctx: Context, req: InstallRequest, ask: Callable[[InstallQuestion], None]) -> Installed:
    """Probe, resolve and provision the env; `ask` is called before the first change and stops it by
    raising (commands/install.py: the question on the terminal, or -y)."""
    from tfgpu_install.plan.additions import gather_pinned
    from tfgpu_install.plan.install import build_steps
    from tfgpu_install.plan.journaled import JournaledPlan

    _check_request(req, ctx)
    wanted, pinned = gather_pinned(req.with_requirements, req.with_files)  # bad input: refused before the probe
    pinned = {**req.with_hashes, **pinned}
    resolved = resolve_machine(ctx, req.resolve)
    require_choice(resolved, req.resolve.allow_cpu)
    options = _with_additions(ctx, _options(req, ctx, resolved), wanted, resolved.resolution.choice, pinned)
    _check_shell_rc(options)
    resolution = resolved.resolution
    from tfgpu_install.snapshot.model import known_builds

    steps = build_steps(resolution, options, resolved.facts, expected=known_builds(ctx.state_dir, options.env))
    # read before anything changes: the plan says old -> new
    plan = InstallPlan(resolution, options, installed_tensorflow(options.env))
    done = provision(ctx, ProvisionRequest(
        env=options.env, steps=steps, plan=JournaledPlan(resolution, options).to_json(),
        ask=lambda preview: ask(InstallQuestion(plan, preview, lambda: _details(ctx, steps, preview, options.env))),
        facts=resolved.facts, dry_run=req.dry_run, wait=req.wait, progress=req.progress,
        make_default=True,
    ))
    changes = planned_changes(ctx, steps, done.preview) if req.dry_run else None
    # a dry run read by a person (never --json): the same sizes as the question
    download = _download(ctx, steps, done.preview, changes, options.env) if req.dry_run and req.progress else None
    if done.report is None:
        report = done.preview
        results: Mapping[str, object] = {} if done.pending else {"verified_before": _verified_before(ctx, options.env)}
    else:
        report = done.report
        results = dict(done.results)
        changes = changes_made(done.results)
    dry_run = req.dry_run and done.report is None
    findings = read_findings(ctx, options.env) if not dry_run and report.changed else None
    return Installed(plan, report, dry_run, done.report is not None,
                     None if dry_run else _gpu_verified(resolution, results), changes, download, findings)


# --- the pieces before execution ------------------------------------------------------------


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _check_request(req: InstallRequest, ctx: Context) -> None:
    if req.resolve.conda_name and req.resolve.backend not in (None, "conda"):
        raise UsageError("--name names a conda env", hint="add --backend conda, or use --env PATH for a venv")
    if req.resolve.conda_name and req.env:
        raise UsageError("give either --name (a conda env) or --env PATH, not both")
    if req.system_ldconfig and str(ctx.root) == "/" and not _is_root():
        raise EnvironmentProblem(
            "--system-ldconfig edits /etc/ld.so.conf.d and needs root",
            hint="run with sudo (e.g. `sudo -E tfgpu-install ... --system-ldconfig`), or leave the flag out: "
            "activation and the tfgpu-run launcher cover normal use",
            ref="needs-root",
        )
    # The cuDNN archive is read before anything runs: a missing one used to be noticed only
    # after the env and TensorFlow were installed.
    from tfgpu_install.steps.cudnn.want import check_cudnn_inputs

    archive = Path(os.path.expanduser(req.cudnn_archive)) if req.cudnn_archive else None
    check_cudnn_inputs(req.cudnn_source, archive)
    if req.cuda_mirror and req.cuda_source != "redist":
        raise UsageError("--cuda-mirror is only used with --cuda-source redist", "add --cuda-source redist")
    if req.cudnn_prefix and req.cudnn_source != "wheel":
        # cuDNN is unpacked beside --cudnn-prefix and renamed into it: a place that takes no new files
        # failed only after the env and its packages were installed.
        from tfgpu_install.guard.argtypes import creatable

        prefix = Path(os.path.abspath(os.path.expanduser(req.cudnn_prefix)))
        why = creatable(prefix.parent)
        if why is not None:
            raise EnvironmentProblem(f"--cudnn-prefix {prefix} cannot be made: {why}",
                                     "give --cudnn-prefix a directory you can write", ref="no-permission")


def _check_shell_rc(options: InstallOptions) -> None:
    """An rc that cannot be edited safely (a directory, unreadable, unbalanced markers) is
    refused before any step changes anything (exit 6 / 5)."""
    if options.shell_rc is not None:
        from tfgpu_install.steps.shell_rc import validate_shell_rc

        validate_shell_rc(options.shell_rc, options.env)


def _options(req: InstallRequest, ctx: Context, resolved: Resolved) -> InstallOptions:
    resolution = resolved.resolution
    choice = resolution.choice
    assert choice is not None
    explicit_python = resolved.explicit_python
    r = req.resolve
    if r.backend:
        backend = r.backend
    elif r.conda_name:
        backend = "conda"
    else:
        backend = "venv" if (explicit_python or choice.python_path) else "conda"
    if r.conda_name:
        from tfgpu_install.env.tools import conda_named_env_path

        env = conda_named_env_path(ctx, r.conda_name)
    elif req.env:
        env = user_path(req.env)
    else:
        env = default_env_path(ctx, choice)
    return InstallOptions(
        env=env,
        backend=backend,
        name=r.conda_name,
        python=explicit_python or choice.python_path,
        system_ldconfig=req.system_ldconfig,
        seed_pip=req.seed_pip,
        shell_rc=Path(os.path.expanduser(req.shell_rc)) if req.shell_rc else None,
        allow_cpu=bool(r.allow_cpu or resolution.cpu_only),
        allow_minor_compat=r.allow_minor_compat,
        restrict_gpus=r.restrict_gpus,
        strict_driver=r.strict_driver,
        cudnn_source=req.cudnn_source,
        cudnn_mirror=req.cudnn_mirror,
        cudnn_archive=Path(req.cudnn_archive) if req.cudnn_archive else None,
        cudnn_prefix=Path(req.cudnn_prefix) if req.cudnn_prefix else None,
        quarantine_stale=req.quarantine_stale,
        index_url=req.index_url,
        conda_channel=req.conda_channel,
        cuda_source=req.cuda_source,
        cuda_mirror=req.cuda_mirror,
        extra={"profiles_dir": str(ctx.profiles_dir)} if ctx.profiles_dir else {},
    )


def _with_additions(ctx: Context, options: InstallOptions, wanted: tuple[str, ...], choice: Any,
                    pinned: Optional[dict[str, tuple[str, ...]]] = None) -> InstallOptions:
    """The env's earlier additions (a re-install keeps them, with the hashes they were pinned to)
    with --with's on top, checked against the release's pins by uv before anything changes (exit 4
    on a conflict)."""
    from dataclasses import replace

    from tfgpu_install.app.additions import added_hashes, added_requirements, check_resolves
    from tfgpu_install.plan.additions import merged, with_pins

    earlier = added_requirements(ctx, options.env) if options.env.is_dir() else ()
    if not wanted and not earlier:
        return options
    together = merged(earlier, wanted)
    hashes = with_pins(ctx, together, added_hashes(ctx, options.env) if options.env.is_dir() else {},
                       wanted, pinned or {})
    options = replace(options, with_requirements=together, with_hashes=hashes)
    # All of them against this release's pins when something is new: --with, or another release
    # than the env's plan (an upgrade carries the earlier ones: they must fit its pins too). A
    # re-run of the same plan needs no index (offline re-runs stay offline). The env may not
    # exist yet: its Python is the resolver's.
    if wanted or sorted(choice.requirements()) != sorted(_planned_requirements(ctx, options.env)):
        check_resolves(ctx, options, choice.requirements(), options.with_requirements, choice.python)
    return options


def _planned_requirements(ctx: Context, env: Path) -> list[str]:
    """The release requirements of the env's journaled plan ([] when there is none)."""
    from tfgpu_install.plan.journaled import last_journaled_plan

    plan = last_journaled_plan(ctx, env) if env.is_dir() else None
    choice = plan.resolution.choice if plan else None
    return choice.requirements() if choice is not None else []


def _verified_before(ctx: Context, env: Path) -> bool:
    """A complete env: the stored verification said the GPU works."""
    try:
        return gpu_verified(read_record(ctx, env))
    except BadRecord:  # a damaged record vouches for nothing; `verify` says what is wrong with it
        return False


# --- the result ---------------------------------------------------------------------------


def _gpu_verified(resolution: Resolution, results: Mapping[str, object]) -> bool:
    if resolution.cpu_only:
        return False
    verify = results.get("verify.run")
    if isinstance(verify, dict) and "gpu_verified" in verify:
        return bool(verify["gpu_verified"])
    return bool(results.get("verified_before"))


def _free_space(env: Path) -> Optional[FreeSpace]:
    """For the confirmation: the free space where the env goes (measured now)."""
    import shutil

    probe = Path(os.path.abspath(str(env)))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return FreeSpace(probe, shutil.disk_usage(probe).free)
    except OSError:
        return None


PYPI_SIMPLE = "https://pypi.org/simple"


def _details(ctx: Context, steps: list[Any], preview: ExecReport, env: Path) -> Details:
    """What the confirmation shows beside the plan: every package it adds, changes or removes (uv's dry run,
    asked once), the free space, the download and what it takes on disk (counting what uv's cache holds)."""
    changes = planned_changes(ctx, steps, preview)
    return Details(changes, _free_space(env), _download(ctx, steps, preview, changes, env))


def _download(ctx: Context, steps: list[Any], preview: ExecReport, changes: Optional[PackageChanges] = None,
              env: Optional[Path] = None) -> Optional[Download]:
    """For the confirmation only (never the no-op path or --json): the download size as the index states
    it and an estimate of the size on disk (fetch/wheelsizes.py). With uv's dry run (`changes`): every wheel
    the run installs, less those in uv's cache, on disk less what uv links from its cache; else the pinned
    requirements' wheels as if none were cached. None: the packages step has nothing to do."""
    from tfgpu_install.fetch.trust import ssl_context
    from tfgpu_install.fetch.wheelsizes import estimate, lookup
    from tfgpu_install.steps.packages import InstallPackages, index_flags

    pending = {s.id for s in preview.steps if s.status == "pending"}
    step = next((s for s in steps if isinstance(s, InstallPackages)), None)
    if step is None or step.id not in pending:
        return None
    flags = index_flags(ctx, "uv", step.index_url, step.extra_index_urls, no_index=step.no_index)
    if "--no-index" in flags:
        return Download(None)
    index = flags[flags.index("--index-url") + 1] if "--index-url" in flags else PYPI_SIMPLE
    trust = ssl_context(ctx.environ)
    if changes is not None and changes.uncached is not None and not changes.unknown and env is not None:
        fetch = set(changes.uncached)
        cached = [p for p in changes.installs() if p not in fetch]
        sizes = estimate(sorted(fetch), cached, uv_links(ctx, env), index, target_python(steps), context=trust)
    else:
        sizes = lookup(step.requirements, index, target_python(steps), context=trust)
    return Download(sizes)


def installed_tensorflow(env: Path) -> Optional[str]:
    """The TensorFlow version installed in the env now (its dist-info), or None."""
    from tfgpu_install.env.layout import site_packages_dirs

    for sp in site_packages_dirs(env):
        for d in sorted(sp.glob("tensorflow-*.dist-info")):
            return d.name[len("tensorflow-"):-len(".dist-info")]
    return None


def read_findings(ctx: Context, env: Path) -> Optional[Findings]:
    """What verification found, from the env's record (None: no record, or a damaged one: no findings is
    no reason to fail); a record of another shape is said so."""
    from tfgpu_install.verify.host import VerifyReport

    try:
        doc = read_record(ctx, env)
        return Findings(VerifyReport.from_json(doc.report.raw if doc and doc.report else {}))
    except BadRecord:
        return None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
        return Findings(None, repr(exc))
