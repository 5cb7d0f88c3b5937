"""`upgrade`: the env's profile's current choice in a new env beside the old one, with the packages
the user added on top of the old env's known-good snapshot carried over; installed and verified as
any install is, and made the default only once it is verified. The old env is kept until the user
removes it (`tfgpu-install envs remove OLD`). An upgrade killed or failed at any step leaves the old
env the default and the new one resumable (`envs` shows it as incomplete; run `upgrade` again)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.guard.shellquote import command

if TYPE_CHECKING:
    from tfgpu_install.app.install import Installed, InstallQuestion, InstallRequest
    from tfgpu_install.app.origin import DirectOrigin
    from tfgpu_install.plan.options import InstallOptions
    from tfgpu_install.snapshot.model import Package


@dataclass(frozen=True)
class UpgradeRequest:
    env: Optional[str] = None  # the env to upgrade; None: the default
    to: Optional[str] = None  # where the new env goes; None: the default location for the new choice
    profile: Optional[str] = None  # None: the profile the old env was installed with
    install: Optional["InstallRequest"] = None  # a template: the flags shared with install; None: defaults


def added_packages(snapshot: Sequence["Package"], live: Sequence["Package"]) -> list[str]:
    """What the user installed on top of the snapshot: live packages whose name the snapshot lacks
    (a version the user changed is the new release's to choose)."""
    recorded = {p.key for p in snapshot}
    return [p.requirement() for p in live if p.key not in recorded]


def _profile_of(recorded: object) -> str:
    """The recorded profile name ("stable", "stable (--tensorflow 2.17)" -> "stable")."""
    return str(recorded or "stable").split(" (", 1)[0] or "stable"


@dataclass(frozen=True)
class Upgraded:
    """`upgrade`'s outcome (commands/upgrade.py renders it): the old env, what was carried over and what not,
    and the new env's install (None: the old env has the profile's current choice already)."""

    old: Path
    old_tensorflow: Optional[str]
    profile: str
    carried: tuple[str, ...]
    not_carried: tuple[NotCarried, ...]
    flags_from_record: tuple[str, ...]  # as a user would type them
    installed: Optional[Installed]
    tensorflow: Optional[str] = None  # the new choice's
    old_env_kept: bool = True
    is_default: bool = False  # the new env is the default now (never after a dry run)


def upgrade(ctx: Context, req: UpgradeRequest, ask: Callable[[InstallQuestion], None]) -> Upgraded:
    """The new env beside the old one (install's own work; `ask` is install's question before the first
    change), made the default once it is verified."""
    from tfgpu_install.app.additions import added_requirements
    from tfgpu_install.app.envs import target_env
    from tfgpu_install.app.install import InstallRequest, install, installed_tensorflow
    from tfgpu_install.app.resolution import resolve_machine
    from tfgpu_install.env.registry import default_env, remember_env, verified_ok
    from tfgpu_install.snapshot.envstate import installed_packages
    from tfgpu_install.snapshot.model import latest_for_env

    old = target_env(ctx, req.env)
    if not old.is_dir():
        raise EnvironmentProblem(f"the env {old} is not there", "`tfgpu-install envs` lists the envs; pass --env PATH")
    found = latest_for_env(ctx.state_dir, old)
    if found is None:
        raise EnvironmentProblem(
            f"{old} has no known-good snapshot: the packages you added cannot be told from the ones installed for you",
            f"verify it first (`{command(ctx, 'tfgpu-install', 'verify', '--env', str(old))}` records one), "
            "or install the new env with "
            "`tfgpu-install --profile stable`",
        )
    snap = found[1]
    template, from_record = with_recorded_flags(req.install or InstallRequest(), _recorded_options(ctx, old))
    recorded = snap.resolution.resolution
    profile = req.profile or _profile_of(recorded.profile if recorded else None)
    resolve = replace(template.resolve, profile=profile)
    old_tf = installed_tensorflow(old)
    resolved = resolve_machine(ctx, resolve)
    choice = resolved.resolution.choice
    by_hand, not_carried = _from_an_index(old, added_packages(snap.packages, installed_packages(old)))
    carry = _carried(added_requirements(ctx, old), by_hand)
    same = Upgraded(old, old_tf, profile, carry, tuple(not_carried), tuple(from_record), None)
    if choice is not None and old_tf == choice.tensorflow:
        return same
    from tfgpu_install.app.additions import added_hashes

    done = install(ctx, replace(template, resolve=resolve, env=req.to,
                                with_requirements=template.with_requirements + carry,
                                with_hashes={**added_hashes(ctx, old), **template.with_hashes}), ask)
    new = done.env
    # install made the new env the default once it was verified; a re-run that found it complete
    # (the first was killed after its verification) makes it so here. Killed or failed before
    # that, install raised: the default is still the old env, the new one resumes on a re-run.
    if not done.dry_run and verified_ok(ctx, new):
        remember_env(ctx, new)
    return replace(same, installed=done, tensorflow=choice.tensorflow if choice else None, old_env_kept=old.is_dir(),
                   is_default=not done.dry_run and default_env(ctx) == new)


def _recorded_options(ctx: Context, env: Path) -> Optional["InstallOptions"]:
    """The options the env's newest journaled install ran with (None: none journaled, or not readable)."""
    from tfgpu_install.plan.journaled import last_journaled_plan

    plan = last_journaled_plan(ctx, env)
    return plan.options if plan is not None else None


def with_recorded_flags(template: "InstallRequest", recorded: Optional["InstallOptions"]) -> tuple[
        "InstallRequest", list[str]]:
    """The flags the old env was installed with, where this command line does not say otherwise: what the
    resolver may accept (--allow-cpu: upgrade on the machine an --allow-cpu env was installed on stopped with
    exit 3) and where packages come from (--index-url, --no-pip). Returns the request and those flags as
    a user would type them. Not carried: what belongs to the old release (--python, --backend, the cuDNN
    and CUDA sources) or to the old env (--shell-rc, --system-ldconfig)."""
    if recorded is None:
        return template, []
    r = template.resolve
    flags = [flag for name, flag in (("allow_cpu", "--allow-cpu"), ("allow_minor_compat", "--allow-minor-compat"),
                                     ("restrict_gpus", "--restrict-gpus"), ("strict_driver", "--strict-driver"))
             if getattr(recorded, name) and not getattr(r, name)]
    out = replace(template, resolve=replace(
        r, allow_cpu=r.allow_cpu or recorded.allow_cpu, allow_minor_compat=r.allow_minor_compat or
        recorded.allow_minor_compat, restrict_gpus=r.restrict_gpus or recorded.restrict_gpus,
        strict_driver=r.strict_driver or recorded.strict_driver))
    if recorded.index_url and not template.index_url:
        out = replace(out, index_url=recorded.index_url)
        flags += ["--index-url", recorded.index_url]
    if not recorded.seed_pip and template.seed_pip:
        out = replace(out, seed_pip=False)
        flags.append("--no-pip")
    return out, flags


@dataclass(frozen=True)
class NotCarried:
    """A package the user installed from a file or URL, left out of the new env (said so)."""

    requirement: str
    origin: "DirectOrigin"
    file_ok: bool  # the recorded local file is still there with the recorded sha256

    def to_json(self) -> dict[str, object]:
        return {"package": self.requirement, "from": self.origin.url, "sha256": self.origin.sha256,
                "why": "not installed from a package index: installing it by name could take another "
                       "project's package of that name from the index"}


def _from_an_index(env: Path, found: list[str]) -> tuple[list[str], list[NotCarried]]:
    """Split the packages installed by hand into those that came from an index (carried by name)
    and those installed from a file, directory, VCS or URL (app/origin.py: not carried)."""
    from tfgpu_install.app.origin import direct_origins
    from tfgpu_install.files import sha256_file

    origins = direct_origins(env)
    keep: list[str] = []
    left: list[NotCarried] = []
    for req in found:
        origin = origins.get(_name(req))
        if origin is None:
            keep.append(req)
            continue
        path = origin.local_file()
        try:
            same = bool(path and origin.sha256 and path.is_file() and sha256_file(path) == origin.sha256)
        except OSError:
            same = False
        left.append(NotCarried(req, origin, same))
    return keep, left


def _name(text: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        return str(canonicalize_name(Requirement(text).name))
    except InvalidRequirement:
        return text


def _carried(recorded: tuple[str, ...], found: list[str]) -> tuple[str, ...]:
    """What the new env gets on top of the release: the requirements the user added through the
    tool (--with, `add`: as they wrote them), then what they installed by hand ("name==version"),
    each name once. Both go through install's --with check against the new release's pins."""
    seen = {_name(r) for r in recorded}
    return tuple(recorded) + tuple(r for r in found if _name(r) not in seen)
