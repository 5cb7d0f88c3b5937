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
from typing import Any, Mapping, Optional

from tfgpu_install.app.confirm import confirm
from tfgpu_install.app.envs import default_env_path
from tfgpu_install.app.package_plan import (
    changed_in_env_blocks,
    changes_made,
    package_blocks,
    planned_changes,
    target_python,
    uv_links,
)
from tfgpu_install.app.provision import ProvisionRequest, provision
from tfgpu_install.app.resolution import Resolved, ResolveRequest, require_choice, resolve_machine
from tfgpu_install.context import Context
from tfgpu_install.engine.executor import ExecReport
from tfgpu_install.env.layout import user_path
from tfgpu_install.env.verification import BadRecord, gpu_verified, read_record
from tfgpu_install.errors import EnvironmentProblem, ExitCode, UsageError
from tfgpu_install.guard.shellquote import activate_command, command, shell_of
from tfgpu_install.plan.options import InstallOptions, options_to_json
from tfgpu_install.report import Block, Bullets, Heading, Result, Text, table
from tfgpu_install.resolver.model import Resolution
from tfgpu_install.steps.package_changes import PackageChanges


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
    yes: bool = False
    dry_run: bool = False
    wait: bool = False
    progress: bool = False  # live progress on the terminal
    with_requirements: tuple[str, ...] = ()  # --with REQ...: the user's own, resolved with TF's pins
    with_files: tuple[str, ...] = ()  # --with-file requirements.txt | pylock.toml | pyproject.toml
    with_hashes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> hashes (upgrade's carry)


def install(ctx: Context, req: InstallRequest) -> Result:
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
    before = installed_tensorflow(options.env)  # read before anything changes: the plan says old -> new
    done = provision(ctx, ProvisionRequest(
        env=options.env, steps=steps, plan=JournaledPlan(resolution, options).to_json(),
        ask=lambda preview: confirm(ctx, req.yes, lambda: _question(
            ctx, steps, preview, _plan_blocks(resolution, options, preview, before), options.env)),
        facts=resolved.facts, dry_run=req.dry_run, wait=req.wait, progress=req.progress,
        make_default=True,
    ))
    head = _plan_blocks(resolution, options, done.preview, before)
    changes = planned_changes(ctx, steps, done.preview) if req.dry_run else None
    if req.dry_run and req.progress:  # a dry run read by a person (never --json): the same sizes as the question
        head[-1:-1] = _download(ctx, steps, done.preview, changes, options.env) + package_blocks(changes)
    if done.report is None:
        results = {} if done.pending else {"verified_before": _verified_before(ctx, options.env)}
        out = _result(ctx, resolution, options, done.preview, head, dry_run=req.dry_run, results=results)
    else:
        out = _result(ctx, resolution, options, done.report, head, dry_run=False, results=dict(done.results))
        changes = changes_made(done.results)
        out.blocks[-2:-2] = changed_in_env_blocks(changes)
    if changes is not None:
        out.data["packages"] = changes.to_json()
    assert resolution.choice is not None
    if before is not None and before != resolution.choice.tensorflow:
        out.data["tensorflow_change"] = {"from": before, "to": resolution.choice.tensorflow}
    return out


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

_MARK = {"done": "done", "unchanged": "unchanged", "applied": "applied", "pending": "to do"}


def _plan_blocks(resolution: Resolution, options: InstallOptions, report: ExecReport,
                 before: Optional[str] = None) -> list[Block]:
    choice = resolution.choice
    assert choice is not None
    cuda = f"CUDA {choice.cuda}, cuDNN {choice.cudnn}" if choice.cuda else "CPU build"
    blocks: list[Block] = [
        Heading(f"TensorFlow {choice.tensorflow} ({cuda}) on Python {choice.python}"),
        Text(f"env: {options.env} ({options.backend})"),
    ]
    if before is not None and before != choice.tensorflow:
        blocks.append(Text(f"TensorFlow in this env: {before} → {choice.tensorflow} (installed now → planned)", "warn"))
    if resolution.cpu_only:
        blocks.append(Text("no usable GPU: TensorFlow will be verified on the CPU (gpu_verified: false)", "warn"))
    if resolution.warnings:
        blocks.append(Bullets("warnings", tuple(resolution.warnings), "warn"))
    blocks.append(table("steps", ("step", "state", "what"),
                        [(s.id, _MARK.get(s.status, s.status), s.describe) for s in report.steps]))
    return blocks


def _gpu_verified(resolution: Resolution, options: InstallOptions, results: Mapping[str, object]) -> bool:
    if resolution.cpu_only:
        return False
    verify = results.get("verify.run")
    if isinstance(verify, dict) and "gpu_verified" in verify:
        return bool(verify["gpu_verified"])
    return bool(results.get("verified_before"))


def _result(
    ctx: Context,
    resolution: Resolution,
    options: InstallOptions,
    report: ExecReport,
    head: list[Block],
    dry_run: bool,
    results: Mapping[str, object],  # step id -> its record this run (or verified_before: a no-op's)
) -> Result:
    blocks = list(head)
    if dry_run:
        pending = sum(1 for s in report.steps if s.status == "pending")
        blocks[-1] = table("steps (dry run: nothing was changed)", ("step", "state", "what"),
                           [(s.id, _MARK.get(s.status, s.status), s.describe) for s in report.steps])
        blocks.append(Text(f"{pending} step(s) would run", "dim"))
    elif report.changed:
        blocks[-1] = table("steps", ("step", "state", "what"),
                           [(s.id, _MARK.get(s.status, s.status), s.describe) for s in report.steps])
        blocks += verification_findings(ctx, options.env)
        blocks.append(Text(f"done: activate with `{activate_command(ctx, str(options.env), options.backend)}`, "
                           f"or run anything through `{command(ctx, str(options.env / 'bin' / 'tfgpu-run'))}`", "ok"))
        blocks.append(Text(add_packages_hint(options.env, shell_of(ctx.environ)), "dim"))
    else:
        blocks = [Text(noop_message(options.env), "ok")]
    data: dict[str, Any] = {
        "env": str(options.env),
        "dry_run": dry_run,
        "changed": report.changed,
        "resolution": resolution.to_json(),
        "options": options_to_json(options),
        "steps": report.to_json(),
        "gpu_verified": None if dry_run else _gpu_verified(resolution, options, results),
    }
    return Result(data=data, blocks=blocks, exit_code=int(ExitCode.OK))


def _space(env: Path) -> list[Block]:
    """For the confirmation: the free space where the env goes (measured now)."""
    import shutil

    probe = Path(os.path.abspath(str(env)))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError:
        return []
    from tfgpu_install.report import human_bytes

    return [Text(f"disk: {human_bytes(free)} free at {probe}", "dim")]


PYPI_SIMPLE = "https://pypi.org/simple"


def _question(ctx: Context, steps: list[Any], preview: ExecReport, plan: list[Block], env: Path) -> list[Block]:
    """What the confirmation shows: the plan, the free space, the download and what it takes on disk (counting
    what uv's cache holds), and every package it adds, changes or removes (uv's dry run, asked once)."""
    changes = planned_changes(ctx, steps, preview)
    return plan + _space(env) + _download(ctx, steps, preview, changes, env) + package_blocks(changes)


def _download(ctx: Context, steps: list[Any], preview: ExecReport, changes: Optional[PackageChanges] = None,
              env: Optional[Path] = None) -> list[Block]:
    """For the confirmation only (never the no-op path or --json): the download size as the index states
    it and an estimate of the size on disk (fetch/wheelsizes.py). With uv's dry run (`changes`): every wheel
    the run installs, less those in uv's cache, on disk less what uv links from its cache; else the pinned
    requirements' wheels as if none were cached."""
    from tfgpu_install.fetch.trust import ssl_context
    from tfgpu_install.fetch.wheelsizes import estimate, lookup
    from tfgpu_install.steps.packages import InstallPackages, index_flags

    pending = {s.id for s in preview.steps if s.status == "pending"}
    step = next((s for s in steps if isinstance(s, InstallPackages)), None)
    if step is None or step.id not in pending:
        return []
    flags = index_flags(ctx, "uv", step.index_url, step.extra_index_urls, no_index=step.no_index)
    if "--no-index" in flags:
        return [Text("download: none from an index (--no-index); size on disk unknown", "dim")]
    index = flags[flags.index("--index-url") + 1] if "--index-url" in flags else PYPI_SIMPLE
    trust = ssl_context(ctx.environ)
    if changes is not None and changes.uncached is not None and not changes.unknown and env is not None:
        fetch = set(changes.uncached)
        cached = [p for p in changes.installs() if p not in fetch]
        sizes = estimate(sorted(fetch), cached, uv_links(ctx, env), index, target_python(steps), context=trust)
    else:
        sizes = lookup(step.requirements, index, target_python(steps), context=trust)
    return [Text(sizes.line(), "dim")]


def installed_tensorflow(env: Path) -> Optional[str]:
    """The TensorFlow version installed in the env now (its dist-info), or None."""
    from tfgpu_install.env.layout import site_packages_dirs

    for sp in site_packages_dirs(env):
        for d in sorted(sp.glob("tensorflow-*.dist-info")):
            return d.name[len("tensorflow-"):-len(".dist-info")]
    return None


def add_packages_hint(env: Path, shell: str = "sh") -> str:
    """How to add packages to the env, as it is now (pip only when the env has it), quoted for `shell`."""
    uv = f"`{command(shell, 'uv', 'pip', 'install', '--python', str(env / 'bin' / 'python'), 'PACKAGE')}`"
    if (env / "bin" / "pip").exists():
        return f"add packages: `pip install PACKAGE` in the activated env, or {uv}"
    return f"add packages: {uv} (this env has no pip: installed with --no-pip)"


def noop_message(env: Path) -> str:
    """The whole answer on a complete env (also what the no-op fast path, app/noop.py, prints)."""
    return f"{env} is already installed and verified: nothing to do"


def verification_findings(ctx: Context, env: Path) -> list[Block]:
    """What verification found, for the last screen: per GPU its name, compute capability, the
    layers passed, matmul GFLOP/s and speed-up, mixed precision; or that only the CPU was checked."""
    from tfgpu_install.verify.host import VerifyReport

    try:
        doc = read_record(ctx, env)
        report = VerifyReport.from_json(doc.report.raw if doc and doc.report else {})
    except BadRecord:  # no findings is no reason to fail
        return []
    except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:  # a record of another shape: say so
        return [Text(f"verification record for {env} not understood ({exc!r}): run `tfgpu-install verify`", "warn")]
    if not report.layers:
        return []
    # Names, not "5 tensorflow": a number before a name reads as a count of layers passed.
    passed = [lay.name for lay in report.layers if lay.status == "pass"]
    unchecked = [lay.name for lay in report.layers if lay.status == "skip"]
    items: list[str] = []
    if not report.gpu_verified:
        items.append("CPU only (--allow-cpu): GPU not checked; TensorFlow ran its matmul on the CPU")
    else:
        driver = report.layer("driver")
        for dev in (driver.measured.get("devices") if driver else None) or []:
            mem = f", {dev['memory_mib']} MiB" if dev.get("memory_mib") else ""
            items.append(f"GPU {dev.get('index')}: {dev.get('name')} (compute capability "
                         f"{dev.get('compute_capability') or '?'}{mem})")
        six = report.layer("benchmark")
        bench = six.measured.get("benchmark") if six else None
        if bench and bench.get("sizes"):
            top = bench["sizes"][-1]
            items.append(f"matmul {top['n']}x{top['n']}: {top['gpu_gflops']} GFLOP/s on {bench.get('device')}, "
                         f"{top['speedup']}x the CPU")
        mp = report.extras.get("mixed_precision")
        if mp:
            items.append(f"mixed precision: {'eligible' if mp.get('eligible') else 'not recommended'}"
                         + (f" ({mp['why']})" if mp.get("why") else ""))
    items.append(f"layers passed: {', '.join(passed) or 'none'}"
                 + (f"; not checked: {', '.join(unchecked)}" if unchecked else ""))
    return [Bullets("Verification", tuple(items), "ok" if report.ok else "error")]
