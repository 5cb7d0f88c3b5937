"""`tfgpu-install plan`, in-process through tfgpu_install.cli.main, on recorded real nvidia-smi outputs.

Expected answers come from NVIDIA's CUDA driver table and TensorFlow's tested build
configurations (see tests/test_resolver_shapes.py), not from what the code happens to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import load_cases
from tfgpu_install.cli import main
from tfgpu_install.errors import ExitCode
from tfgpu_install.resolver.resolve import version_key

CASES = {c["id"]: c for c in load_cases("nvidia-smi")}
REPO = Path(__file__).resolve().parents[2]


def smi_file(tmp_path: Path, case_id: str) -> str:
    path = tmp_path / f"{case_id}.txt"
    path.write_text(CASES[case_id]["verbatim"] + "\n")
    return str(path)


def plan(capsys: Any, env: dict[str, str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["plan", "--json", *argv], environ=env)
    out = capsys.readouterr().out
    return code, json.loads(out)


def plan_text(capsys: Any, env: dict[str, str], *argv: str) -> tuple[int, str]:
    code = main(["plan", *argv], environ=env)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_json_contract_keys(tmp_path: Path, tmp_env: dict[str, str], capsys: Any) -> None:
    code, data = plan(capsys, tmp_env, "--from-nvidia-smi", smi_file(tmp_path, "case_027"), "--assume-gpu", "5.0",
                      "--assume-python", "3.11", "--assume-glibc", "2.37")
    assert code == ExitCode.OK
    for key in ("profile", "choice", "reasons", "rejected", "options", "steps", "remedies", "warnings"):
        assert key in data
    assert data["profile"] == "stable"
    assert {"tensorflow", "cuda", "cudnn", "python", "jit_only"} <= set(data["choice"])
    assert data["rejected"] and all(set(r) == {"tensorflow", "reasons"} and r["reasons"] for r in data["rejected"])
    assert data["steps"] and all(set(s) == {"id", "describe"} for s in data["steps"])
    assert isinstance(data["reasons"], list) and all(isinstance(r, str) for r in data["reasons"])


def test_gtx_750_ti_on_545_gets_cuda_12_3_with_sass(tmp_path: Path, tmp_env: dict[str, str], capsys: Any) -> None:
    # case_027: driver 545.29.06 (CUDA 12.3). TF 2.16/2.17 are built for CUDA 12.3 with sm_50 SASS; TF 2.18+
    # need CUDA 12.5 and dropped compute capability 5.0.
    code, data = plan(capsys, tmp_env, "--from-nvidia-smi", smi_file(tmp_path, "case_027"), "--assume-gpu", "5.0",
                      "--assume-python", "3.11", "--assume-glibc", "2.37")
    assert code == ExitCode.OK
    c = data["choice"]
    assert c["tensorflow"].startswith(("2.17.", "2.16.")) and c["cuda"] == "12.3"
    assert c["python"] == "3.11" and c["jit_only"] is False and c["python_path"] is None
    assert any("driver 545.29.06 supports CUDA <= 12.3 (nvidia-smi file" in r for r in data["reasons"])
    newer = {r["tensorflow"]: " ".join(r["reasons"]) for r in data["rejected"]}
    # stable ranks newest first: every rejected candidate is newer than the choice
    assert newer and all(version_key(v) > version_key(c["tensorflow"]) for v in newer)
    assert any("no SASS or PTX <= 5.0" in text for text in newer.values())


def test_two_k80s_on_r450_pick_cuda_11_0_and_offer_minor_compat(tmp_path: Path, tmp_env: dict[str, str],
                                                                  capsys: Any) -> None:
    # case_011: driver 450.203.08 says CUDA 11.0 -> TF 2.4 (CUDA 11.0, sm_35 SASS runs on cc 3.7).
    # CUDA 11.2 builds (TF 2.5-2.11) need 460.27.03, but 450.203.08 >= 450.80.02 runs 11.x by minor-version
    # compatibility: offered, never chosen silently.
    code, data = plan(capsys, tmp_env, "--from-nvidia-smi", smi_file(tmp_path, "case_011"),
                      "--assume-python", "3.8", "--assume-glibc", "2.31")
    assert code == ExitCode.OK
    c = data["choice"]
    assert c["tensorflow"].startswith("2.4.") and c["cuda"] == "11.0" and c["jit_only"] is False
    assert sum(1 for r in data["reasons"] if "Tesla K80, cc 3.7" in r) == 2  # reasoned per device
    assert any("minor-version compatibility (11.x >= 450.80.02" in o for o in data["options"])
    code, data = plan(capsys, tmp_env, "--from-nvidia-smi", smi_file(tmp_path, "case_011"),
                      "--assume-python", "3.8", "--assume-glibc", "2.31", "--allow-minor-compat")
    assert code == ExitCode.OK and data["choice"]["cuda"].startswith("11.") and data["choice"]["cuda"] != "11.0"


def test_wsl2_cuda_err_header_uses_the_driver_table(tmp_path: Path, tmp_env: dict[str, str], capsys: Any) -> None:
    # case_013: "CUDA Version: ERR!" under WSL2; driver 546.80 -> CUDA 12.3 from NVIDIA's table.
    code, data = plan(capsys, tmp_env, "--from-nvidia-smi", smi_file(tmp_path, "case_013"), "--assume-gpu", "8.6",
                      "--assume-python", "3.11", "--assume-glibc", "2.35")
    assert code == ExitCode.OK
    assert data["choice"]["cuda"] == "12.3" and data["choice"]["jit_only"] is False
    assert any(r.startswith("driver 546.80 (nvidia-smi file") and "supports CUDA <= 12.3 (table:drivers.yaml" in r
               for r in data["reasons"])


def test_blackwell_is_jit_only_or_rejected_with_explanation(tmp_path: Path, tmp_env: dict[str, str],
                                                           capsys: Any) -> None:
    # case_015: RTX PRO 1000 Blackwell (cc 12.0) on 573.76 (CUDA 12.8): no release has sm_120 SASS.
    code, data = plan(capsys, tmp_env, "--from-nvidia-smi", smi_file(tmp_path, "case_015"), "--assume-gpu", "12.0",
                      "--assume-python", "3.12", "--assume-glibc", "2.39")
    if data["choice"] is not None:
        assert code == ExitCode.OK and data["choice"]["jit_only"] is True
        assert any("PTX" in w and "JIT" in w for w in data["warnings"])
    else:
        assert code == ExitCode.UNSATISFIABLE
        assert any("12.0" in " ".join(r["reasons"]) for r in data["rejected"])


def test_driver_too_old_exits_4_with_the_driver_to_install(tmp_path: Path, tmp_env: dict[str, str],
                                                           capsys: Any) -> None:
    # case_005: TITAN Xp (cc 6.1) on 384.66 = CUDA 9.0; every TF 2.x needs CUDA >= 10.0.
    code, data = plan(capsys, tmp_env, "--from-nvidia-smi", smi_file(tmp_path, "case_005"),
                      "--assume-python", "3.11", "--assume-glibc", "2.35")
    assert code == ExitCode.UNSATISFIABLE and data["choice"] is None
    assert any(r.startswith("install NVIDIA driver >= ") for r in data["remedies"])
    assert any(r.startswith("CPU-only TensorFlow: pip install tensorflow==") for r in data["remedies"])
    code, text = plan_text(capsys, tmp_env, "--from-nvidia-smi", smi_file(tmp_path, "case_005"),
                           "--assume-python", "3.11", "--assume-glibc", "2.35")
    assert code == ExitCode.UNSATISFIABLE
    assert "Remedies" in text and "install NVIDIA driver >=" in text


def test_gpu_too_old_for_any_build(tmp_path: Path, tmp_env: dict[str, str], capsys: Any) -> None:
    # case_001: GTX 680 (cc 3.0) on 331.62: no TF GPU wheel has SASS or PTX <= 3.0.
    code, data = plan(capsys, tmp_env, "--from-nvidia-smi", smi_file(tmp_path, "case_001"),
                      "--assume-python", "3.11", "--assume-glibc", "2.35")
    assert code == ExitCode.UNSATISFIABLE and data["choice"] is None
    assert any("GeForce GTX 680, cc 3.0" in r and "source" in r for r in data["remedies"])


def test_native_windows_only_up_to_2_10(tmp_path: Path, tmp_env: dict[str, str], capsys: Any) -> None:
    # case_025: native Windows, GTX 1080 Ti, driver 442.92 (CUDA 10.2): TF 2.1-2.3 (CUDA 10.1); WSL2 for newer.
    env = {**tmp_env, "TFGPU_OVERRIDE_OS": "windows"}
    code, data = plan(capsys, env, "--from-nvidia-smi", smi_file(tmp_path, "case_025"),
                      "--assume-python", "3.8", "--assume-glibc", "2.35")
    assert code == ExitCode.OK
    assert data["choice"]["cuda"] == "10.1" and data["choice"]["tensorflow"].startswith(("2.1.", "2.2.", "2.3."))
    assert any("native-Windows" in " ".join(r["reasons"]) for r in data["rejected"])


def test_no_gpu_here_exits_3_and_allow_cpu_resolves(tmp_env: dict[str, str], capsys: Any) -> None:
    env = {**tmp_env, "PATH": str(Path(tmp_env["HOME"]))}  # no nvidia-smi, no lspci: nothing to find
    code, data = plan(capsys, env, "--assume-python", "3.11", "--assume-glibc", "2.35")
    assert code == ExitCode.NO_GPU and data["choice"] is None
    assert any("--allow-cpu" in r for r in data["remedies"])
    code, text = plan_text(capsys, env, "--assume-python", "3.11", "--assume-glibc", "2.35")
    assert code == ExitCode.NO_GPU and "--allow-cpu" in text
    code, data = plan(capsys, env, "--assume-python", "3.11", "--assume-glibc", "2.35", "--allow-cpu")
    assert code == ExitCode.OK and data["cpu_only"] is True and data["choice"]["python"] == "3.11"
    assert ("no NVIDIA GPU: resolving for CPU verification (--allow-cpu); GPU constraints not applied"
            in data["reasons"])


def test_assumed_shape_and_human_output(tmp_env: dict[str, str], capsys: Any) -> None:
    code, text = plan_text(capsys, tmp_env, "--profile", "latest", "--assume-driver", "535.104.05",
                           "--assume-gpu", "GeForce GTX 970", "--assume-python", "3.11", "--assume-glibc", "2.35")
    assert code == ExitCode.OK
    assert "TensorFlow 2.15.1" in text and "CUDA 12.2" in text
    assert "Why it fits" in text and "Rejected newer candidates" in text and "Options" in text


def test_unknown_profile_is_a_usage_error(tmp_env: dict[str, str], capsys: Any) -> None:
    # Was BAD_INPUT (5): an unknown name is a mistake on the command line, exit 2 (issue #43).
    code = main(["plan", "--profile", "no-such-profile"], environ=tmp_env)
    assert code == ExitCode.USAGE
    assert "known profiles" in capsys.readouterr().err


def test_plan_as_a_real_subprocess(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "tfgpu_install", "plan", "--json", "--from-nvidia-smi", smi_file(tmp_path, "case_027"),
         "--assume-gpu", "5.0", "--assume-python", "3.11", "--assume-glibc", "2.37"],
        capture_output=True, text=True, env={**tmp_env, "PYTHONPATH": str(REPO)}, cwd=tmp_path, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["choice"]["cuda"] == "12.3"


def test_plan_imports_nothing_heavy_at_parse_time() -> None:
    # start-up budget: building the parser must not pull in yaml/rich/requests (they load inside run()).
    code = ("import sys, tfgpu_install.cli as c; c.build_parser(); "
            "print(sorted(m for m in ('yaml','rich','requests','packaging') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "[]"


def test_profiles_dir_override_and_user_profile_file(tmp_path: Path, tmp_env: dict[str, str], capsys: Any) -> None:
    """TFGPU_PROFILES_DIR points plan at other data; --profile FILE.yaml is a user's own policy."""
    import shutil

    data = tmp_path / "profiles"
    shutil.copytree(REPO / "profiles", data, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    mine = tmp_path / "mine.yaml"
    stable = (REPO / "profiles" / "stable.yaml").read_text()
    mine.write_text(stable.replace("name: stable", "name: mine").replace("min_age_days: 90", "min_age_days: 0")
                    + 'tensorflow: "<2.16"\n')
    env = {**tmp_env, "TFGPU_PROFILES_DIR": str(data)}
    code, out = plan(capsys, env, "--profile", str(mine), "--assume-driver", "550.54.14", "--assume-gpu", "8.9",
                     "--assume-python", "3.11", "--assume-glibc", "2.35")
    assert code == ExitCode.OK, out
    assert out["profile"] == "mine" and out["choice"]["tensorflow"].startswith("2.15.")
    assert any("outside the profile's range <2.16" in r for r in out["reasons"])
