"""Where an addition goes, for a GPU family (issue #36): its models and compute capability in gpus.yaml, a
library floor or a known failure in kernels.yaml; nothing in the code. A made-up family added to a copy of
the profiles dir is seen at each far end: `plan` knows its compute capability by name and rejects the
releases its known-failure row names (with the row's sources and what runs there instead), and the
look-ups the doctor and the GPU check use (knowledge/gpu_rules.py) return the same row."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tfgpu_install.cli import main
from tfgpu_install.errors import ExitCode
from tfgpu_install.knowledge.gpu_rules import known_failure, lacks_kernels
from tfgpu_install.knowledge.load import load_knowledge, profiles_dir

FAMILY = """  - compute_capability: "13.7"
    architecture: Testwell
    source: "a made-up family for this test"
    gpus:
      - NVIDIA Testwell T1000
"""
FAILURE = """  - id: testwell-ptx-jit
    tensorflow: "<2.22"
    cc_min: "13.7"
    cc_max: "13.7"
    text: "made up: every release up to 2.21 fails on Testwell"
    runs_instead: ["a release whose fat binary carries sm_137"]
    sources: ["https://example.invalid/testwell-report"]
"""
FLOOR = """  - library: cudnn
    from: "9.3"
    min_cc: "8.0"
    source: "made up: cuDNN >= 9.3 dropped cc < 8.0"
"""


def site(tmp_path: Path) -> Path:
    d = tmp_path / "profiles"
    shutil.copytree(profiles_dir(), d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    gpus = (d / "gpus.yaml").read_text()
    (d / "gpus.yaml").write_text(gpus.replace("groups:\n", "groups:\n" + FAMILY, 1))
    kernels = (d / "kernels.yaml").read_text()
    kernels = kernels.replace("known_failures:\n", "known_failures:\n" + FAILURE, 1)
    (d / "kernels.yaml").write_text(kernels.replace("floors:\n", "floors:\n" + FLOOR, 1))
    return d


def plan(env: dict[str, str], gpu: str, capsys: Any) -> tuple[int, dict[str, Any]]:
    code = main(["plan", "--profile", "latest", "--assume-driver", "580.65.06", "--assume-gpu", gpu,
                 "--assume-python", "3.12", "--assume-glibc", "2.35", "--json"], environ=env)
    return code, json.loads(capsys.readouterr().out)


def test_a_gpu_family_is_rows_and_each_far_end_sees_them(tmp_path: Path, tmp_env: dict[str, str],
                                                         capsys: Any) -> None:
    env = {**tmp_env, "TFGPU_PROFILES_DIR": str(site(tmp_path))}
    code, doc = plan(env, "NVIDIA Testwell T1000", capsys)
    assert code == ExitCode.UNSATISFIABLE and doc["choice"] is None
    assert doc["machine"]["gpus"][0]["compute_capability"] in (None, "13.7")  # by name, from gpus.yaml
    why = " ".join(doc["rejected"][0]["reasons"])
    assert "cc 13.7 from table:gpus.yaml" in why and "known failure testwell-ptx-jit" in why
    assert "example.invalid/testwell-report" in why
    assert any("what runs there: a release whose fat binary carries sm_137" in r for r in doc["remedies"])
    # The floor row: a Turing GPU (cc 7.5) under the made-up cuDNN floor is pinned or rejected by it.
    kn = load_knowledge(Path(env["TFGPU_PROFILES_DIR"]))
    assert known_failure(kn.known_failures, "2.21.0", "13.7", has_sass=False) is not None
    assert lacks_kernels(kn.floors, "cudnn", "9.3.0.75", "7.5") is not None
    code, doc = plan(env, "Tesla T4", capsys)
    assert code == ExitCode.OK and any("cuDNN >= 9.3 has no kernels for compute capability < 8.0" in r
                                       for r in doc["reasons"] + [w for x in doc["rejected"] for w in x["reasons"]])


def test_control_the_packaged_tables_know_no_such_family(tmp_env: dict[str, str], capsys: Any) -> None:
    code, doc = plan(tmp_env, "NVIDIA Testwell T1000", capsys)
    assert code == ExitCode.OK  # an unknown name: compute capability unknown, not checked (and said so)
    assert any("compute capability unknown" in r for r in doc["reasons"])
