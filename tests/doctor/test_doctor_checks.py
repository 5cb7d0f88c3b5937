"""Where an addition goes (issue 36), for a doctor machine check: one file in tfgpu_install/doctor/checks/
defining CHECK = MachineCheck(name, order, what, fix, run); the walk runs it in its place with nothing else
edited. (A doctor rule: one row in profiles/errors.yaml, or a site's own copy: tests/commands/test_doctor.py::
test_errors_yaml_in_the_profiles_dir_is_used; a verification layer: tests/doctor/test_doctor_layer_rows.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

import tfgpu_install.doctor.checks as checks
from tests.support.doctor_layouts import make_ctx, plant_driver_ok, recorded_smi, replay
from tfgpu_install.doctor.chain import walk
from tfgpu_install.doctor.rules import load_rules

RULES = load_rules()
SMI_OK = recorded_smi("case_027")


def test_every_registered_check_says_what_it_checks_and_the_fix() -> None:
    got = checks.registered()
    assert len(got) >= 14 and [c.order for c in got] == sorted(c.order for c in got)
    for c in got:
        assert c.name and c.what and c.fix and callable(c.run), c
    names = [c.name for c in got]
    assert names.index("driver") < names.index("libraries") < names.index("import-tensorflow") < names.index("ptxas")


def test_a_new_check_file_is_run_in_its_place(tmp_env: dict[str, str], tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    extra = tmp_path / "more_checks"
    extra.mkdir()
    (extra / "site_scratch.py").write_text(
        "from tfgpu_install.doctor.checks import MachineCheck\n"
        "from tfgpu_install.doctor.walkstate import BROKEN, Check\n"
        "CHECK = MachineCheck(name='site-scratch', order=35, host=True, what='the site scratch is mounted',\n"
        "                     fix='mount /scratch',\n"
        "                     run=lambda w: [Check('driver', 'site scratch', BROKEN, 'no /scratch', 'gone', "
        "'mount /scratch')])\n")
    monkeypatch.setattr(checks, "__path__", [*checks.__path__, str(extra)])
    plant_driver_ok(Path(tmp_env["TFGPU_ROOT"]))
    rep = walk(make_ctx(tmp_env, replay(SMI_OK)), RULES)
    names = [c.name for c in rep.checks]
    assert rep.broken is not None and rep.broken.name == "site scratch"
    assert names.index("nvidia-smi") < names.index("site scratch")  # after the driver (10), before toolkits (40)
    assert not any("toolkit" in n for n in names[names.index("site scratch"):])  # the walk stopped there


def test_a_file_without_its_check_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    extra = tmp_path / "bad_checks"
    extra.mkdir()
    (extra / "half_written.py").write_text("X = 1\n")
    monkeypatch.setattr(checks, "__path__", [*checks.__path__, str(extra)])
    with pytest.raises(TypeError, match="half_written defines no CHECK"):
        checks.registered()
