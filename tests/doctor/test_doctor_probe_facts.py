"""The doctor starts from the probe's facts (issue 36): the host identity and the nvidia-smi reading come
from facts/ (facts.host, facts.gpudetect.read_smi), so doctor and `probe` cannot disagree on what the
driver said. Shown on the case where they used to: a driver that answers the table but hangs on the query."""

from __future__ import annotations

from pathlib import Path

from tests.support.doctor_layouts import QUERY, make_ctx, plant_driver_ok, recorded_smi, replay
from tfgpu_install.doctor.chain import BROKEN, walk
from tfgpu_install.doctor.rules import load_rules
from tfgpu_install.facts import gpu as smi
from tfgpu_install.facts.gpudetect import read_smi
from tfgpu_install.runner import TIMED_OUT, Completed

RULES = load_rules()
SMI_OK = recorded_smi("case_027")


def test_a_hung_query_is_the_same_answer_for_probe_and_doctor(tmp_env: dict[str, str]) -> None:
    plant_driver_ok(Path(tmp_env["TFGPU_ROOT"]))
    hung = {QUERY: Completed(QUERY, TIMED_OUT, "", "")}
    ctx = make_ctx(tmp_env, replay(SMI_OK, extra=hung))
    probe_reading, _ = read_smi(ctx, "/usr/bin/nvidia-smi")
    rep = walk(make_ctx(tmp_env, replay(SMI_OK, extra=hung)), RULES)
    driver = next(c for c in rep.checks if c.layer == "driver")
    assert probe_reading.state == "hung"
    assert driver.status == BROKEN and "did not answer" in driver.summary  # was "ok": the doctor ran the table


def test_control_a_driver_that_answers(tmp_env: dict[str, str]) -> None:
    plant_driver_ok(Path(tmp_env["TFGPU_ROOT"]))
    ctx = make_ctx(tmp_env, replay(SMI_OK))
    reading, _ = read_smi(ctx, "/usr/bin/nvidia-smi")
    rep = walk(make_ctx(tmp_env, replay(SMI_OK)), RULES)
    assert reading.state == smi.OK and rep.broken is None
    assert next(c for c in rep.checks if c.layer == "driver").summary.startswith(f"driver {reading.driver_version}")
