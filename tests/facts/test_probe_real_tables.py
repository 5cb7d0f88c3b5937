"""Every recorded nvidia-smi output through the whole probe with the real profiles/ tables:
driver -> highest CUDA and GPU name -> compute capability, with their sources.

One deliberate difference from a fixture's `expected`: case_005 (driver 384.66, no CUDA field)
says "9.0 (R384)", but NVIDIA's toolkit table puts CUDA 9.0.76 at >= 384.81, so a driver
table lookup correctly answers 8.0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest
from support.probe_machine import load_dir, plant

from tfgpu_install.context import build_context
from tfgpu_install.facts.probe import Assumptions, gather
from tfgpu_install.runner import ReplayRunner

CASES = {c["id"]: c for c in load_dir("shared/nvidia-smi") + load_dir("nvidia-smi-extra")}
HDR, TABLE = "nvidia-smi file", "table:drivers.yaml"

# id -> (driver, max_cuda, max_cuda_source, [compute capability per GPU row])
WANT: dict[str, tuple[Optional[str], Optional[str], Optional[str], list[Optional[str]]]] = {
    "case_001": ("331.62", "6.0", TABLE, ["3.0", "3.0", "3.0"]),
    "case_003": ("367.48", "8.0", TABLE, ["3.0"]),
    "case_005": ("384.66", "8.0", TABLE, ["6.1"]),
    "case_007": ("435.21", "10.1", HDR, ["7.5"]),
    "case_009": ("440.82", "10.2", HDR, ["5.0"]),
    "case_011": ("450.203.08", "11.0", HDR, ["3.7", "3.7"]),
    "case_013": ("546.80", "12.3", TABLE, ["8.6"]),
    "case_015": ("573.76", "12.8", HDR, ["12.0"]),
    "case_017": ("525.89.02", "12.0", HDR, ["8.9"]),
    "case_025": ("442.92", "10.2", HDR, ["6.1"]),
    "case_027": ("545.29.06", "12.3", HDR, []),
    "extra_001": ("610.43.02", "13.3", HDR, ["10.0", "10.0"]),
    "extra_002": ("610.43.02", "13.3", HDR, ["12.0"]),
    "extra_003": ("510.06", "11.6", HDR, [None]),
    "extra_004": ("450.57", "11.0", HDR, ["6.1"]),
    "extra_005": ("450.66", "11.0", HDR, ["3.5"]),
    "extra_006": ("396.54", "9.2", TABLE, ["6.1"]),
    "extra_008": ("580.173.02", None, None, []),  # table lookup answers; checked below
    "extra_011": ("531.14", "12.1", HDR, ["6.1"]),
    "extra_012": ("535.129.03", "12.2", HDR, ["7.5", "7.5"]),
    "extra_018": ("580.82.09", "13.0", HDR, ["12.0", "8.9"]),
    "extra_019": ("575.64.03", "12.9", TABLE, ["12.0"]),
    "extra_020": ("570.86.15", None, None, ["7.0", "8.9"]),
    "extra_021": ("570.133.07", "12.8", HDR, ["8.9"]),
    "extra_022": ("440.64", None, None, ["7.5"]),
    "extra_023": ("522.25", "11.8", HDR, [None]),
    "extra_024": ("384.69", None, None, ["6.1"]),
    "extra_025": ("510.68.02", "11.6", HDR, ["7.5"]),
    "extra_026": ("440.82", "10.2", HDR, ["7.5"]),
    "extra_027": ("375.82", None, None, ["5.0"]),
    "extra_028": ("535.216.01", None, None, ["7.5"]),
    "extra_029": ("530.41.03", "12.1", HDR, ["8.6"]),
    "extra_030": ("535.104.05", "12.2", HDR, ["8.6", "8.6"]),
    "extra_031": ("546.12", "12.3", HDR, ["8.6"]),
    "extra_032": ("580.95.05", "13.0", HDR, ["8.6"]),
}


@pytest.mark.parametrize("case_id", sorted(WANT))
def test_recorded_output_with_real_tables(case_id: str, tmp_env: dict[str, str]) -> None:
    plant(Path(tmp_env["TFGPU_ROOT"]), {"/etc/os-release": "ID=ubuntu\n"})
    ctx = build_context({**tmp_env, "PATH": tmp_env["HOME"]}, runner=ReplayRunner())
    facts = gather(ctx, Assumptions(nvidia_smi_text=CASES[case_id]["verbatim"], nvidia_smi_origin=case_id))
    driver, max_cuda, source, ccs = WANT[case_id]
    assert facts.driver.version == driver
    if max_cuda is not None:
        assert (facts.driver.max_cuda, facts.driver.max_cuda_source) == (max_cuda, source)
    else:
        assert facts.driver.max_cuda_source == TABLE  # the module version still finds its CUDA
    assert [g.compute_capability for g in facts.gpus] == ccs
    for g in facts.gpus:
        assert g.source == "nvidia-smi file"
        flagged = any(p.field == f"gpus[{g.index}].compute_capability" for p in facts.problems)
        assert (g.compute_capability is None) == flagged
