"""One shape per command (#36 item 3): app/install.py and app/upgrade.py return frozen data and ask through
the command; commands/install.py and commands/upgrade.py word the question and render the outcome. Rendered
here from data alone (no probe, no env): the question's parts in order, worked out once and only when
asked; a dry run's JSON keys in install's order; an upgrade with nothing to do."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tfgpu_install.app import install as app_install
from tfgpu_install.app import upgrade as app_upgrade
from tfgpu_install.app.install import Details, Download, FreeSpace, Installed, InstallPlan, InstallQuestion
from tfgpu_install.app.upgrade import Upgraded
from tfgpu_install.commands.install import installed, question
from tfgpu_install.commands.upgrade import upgraded
from tfgpu_install.context import Context
from tfgpu_install.engine.executor import ExecReport, StepReport
from tfgpu_install.plan.options import InstallOptions
from tfgpu_install.report import Heading, Table, Text
from tfgpu_install.resolver.model import Choice, Resolution
from tfgpu_install.steps.package_changes import PackageChanges


def _plan(env: Path, before: str = "2.16.1") -> InstallPlan:
    choice = Choice(tensorflow="2.17.1", cuda="12.3", cudnn="8.9", python="3.11", jit_only=False)
    return InstallPlan(Resolution(profile="stable", choice=choice, reasons=(), rejected=()),
                       InstallOptions(env=env), before)


def _preview() -> ExecReport:
    return ExecReport([StepReport("env.create", "create the venv", "pending"),
                       StepReport("packages.install", "install TensorFlow", "pending")])


def test_the_apps_return_frozen_data() -> None:
    for fn, shape in ((app_install.install, Installed), (app_upgrade.upgrade, Upgraded)):
        assert fn.__annotations__["return"] == shape.__name__  # (postponed annotations: the name)
        assert dataclasses.is_dataclass(shape) and shape.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_the_question_is_the_plan_the_space_the_download_and_the_packages(tmp_path: Path) -> None:
    asked: list[int] = []

    def details() -> Details:
        asked.append(1)
        return Details(PackageChanges(added=(("six", "1.17.0"),)), FreeSpace(tmp_path, 3 * 1024 ** 3),
                       Download(None))

    blocks = question(InstallQuestion(_plan(tmp_path / "env"), _preview(), details))
    assert asked == [1]  # uv's dry run and the sizes: once, when the question is put
    texts = [b.text for b in blocks if isinstance(b, (Heading, Text))]
    assert texts[0] == "TensorFlow 2.17.1 (CUDA 12.3, cuDNN 8.9) on Python 3.11"
    assert "TensorFlow in this env: 2.16.1 → 2.17.1 (installed now → planned)" in texts
    assert texts[-2:] == [f"disk: 3.0 GiB free at {tmp_path}",
                          "download: none from an index (--no-index); size on disk unknown"]
    tables = [b for b in blocks if isinstance(b, Table)]
    assert [t.title for t in tables] == ["steps", "packages: 1 to add"]


def test_a_dry_run_is_installs_document_in_its_order(ctx: Context, tmp_path: Path) -> None:
    done = Installed(_plan(tmp_path / "env"), _preview(), dry_run=True, ran=False, gpu_verified=None,
                     changes=PackageChanges(), download=None, findings=None)
    out = installed(ctx, done)
    assert list(out.data) == ["env", "dry_run", "changed", "resolution", "options", "steps", "gpu_verified",
                              "packages", "tensorflow_change"]
    assert out.data["tensorflow_change"] == {"from": "2.16.1", "to": "2.17.1"} and out.exit_code == 0
    assert isinstance(out.blocks[-2], Table) and out.blocks[-2].title == "steps (dry run: nothing was changed)"
    assert isinstance(out.blocks[-1], Text) and out.blocks[-1].text == "2 step(s) would run"


def test_an_upgrade_with_nothing_to_do(ctx: Context, tmp_path: Path) -> None:
    up = Upgraded(tmp_path / "old", "2.17.1", "stable", ("six==1.17.0",), (), ("--allow-cpu",), None)
    out = upgraded(ctx, up)
    assert out.data == {"upgrade": {"from": {"env": str(tmp_path / "old"), "tensorflow": "2.17.1"},
                                    "profile": "stable", "carried": ["six==1.17.0"], "not_carried": [],
                                    "flags_from_record": ["--allow-cpu"], "to": None}, "changed": False}
    assert [b.text for b in out.blocks if isinstance(b, Text)] == [
        f"{tmp_path / 'old'} already has TensorFlow 2.17.1, profile 'stable''s current choice: nothing to upgrade"]
