"""`tfgpu-install doctor` end to end through the CLI: exit codes, JSON, and the human account."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_cases
from tfgpu_install.cli import main


def _case(case_id: str) -> dict[str, Any]:
    return next(c for c in load_cases("logs") if c["id"] == case_id)


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_log_with_a_cause_exits_13(tmp_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "log.txt"
    f.write_text(_case("case_033")["verbatim"])
    assert main(["doctor", "--log", str(f), "--json"], environ=tmp_env) == 13
    doc = _json(capsys)
    assert doc["mode"] == "log" and doc["status"] == "cause"
    assert doc["primary"]["rule"] == "cudnn-runtime-older" and "8.7.0" in doc["primary"]["cause"]
    assert doc["primary"]["source"] == "https://github.com/bmaltais/kohya_ss/issues/2787"


def test_log_human_output_names_cause_fix_and_harmless(tmp_env: dict[str, str], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "log.txt"
    f.write_text(_case("case_037")["verbatim"])
    assert main(["doctor", "--log", str(f)], environ=tmp_env) == 13
    out = capsys.readouterr().out
    assert "Cause" in out and "Fix:" in out and "tensorflow[and-cuda]" in out
    assert "Known harmless" in out and "TensorRT is optional" in out
    assert "driver 525.85.12, supports CUDA <= 12.0" in out  # the pasted nvidia-smi header


def test_log_from_stdin_harmless_only_exits_0(tmp_env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(_case("case_045")["verbatim"]))
    assert main(["doctor", "--log", "-", "--json"], environ=tmp_env) == 0
    doc = _json(capsys)
    assert doc["status"] == "harmless-only" and doc["primary"] is None
    assert {h["rule"] for h in doc["harmless"]} >= {"factory-registration"}


def test_unknown_log_says_no_known_cause(tmp_env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("Segmentation fault (core dumped)\n"))
    assert main(["doctor", "--log", "-"], environ=tmp_env) == 14  # a failure nothing explains (issue 43; was 0)
    out = capsys.readouterr().out
    assert "No known cause" in out and "1. NVIDIA driver" in out and "10. utilisation" in out
    assert "Diagnosis: unknown" in out and "Generic checklist (not a diagnosis" in out
    assert "Lines doctor could not explain" in out and "L1: Segmentation fault (core dumped)" in out


def test_unknown_log_json_keeps_the_checklist_apart(tmp_env: dict[str, str], monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("Segmentation fault (core dumped)\n"))
    assert main(["doctor", "--log", "-", "--json"], environ=tmp_env) == 14  # issue 43: was 0
    doc = _json(capsys)
    assert doc["status"] == "unknown" and doc["primary"] is None
    assert doc["unexplained"] == ["L1: Segmentation fault (core dumped)"]
    assert "not a diagnosis" in doc["checklist"]["label"] and len(doc["checklist"]["steps"]) == 10


def test_reverse_numpy_abi_log_exits_13_with_a_numpy_diagnosis(tmp_env: dict[str, str], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 43 item 1: this log was `harmless-only`, exit 0."""
    from tests.doctor.test_doctor_unexplained import REVERSE_ABI

    f = tmp_path / "log.txt"
    f.write_text(REVERSE_ABI)
    assert main(["doctor", "--log", str(f), "--json"], environ=tmp_env) == 13
    doc = _json(capsys)
    assert doc["status"] == "cause" and doc["primary"]["rule"] == "numpy-api-version"
    assert "NumPy" in doc["primary"]["cause"] and doc["checklist"] is None and doc["advice"] == []


def test_noise_then_an_unexplained_failure_exits_14_and_noise_alone_0(
        tmp_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.doctor.test_doctor_unexplained import NOISE

    f = tmp_path / "log.txt"
    f.write_text(NOISE + "Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
                 "SystemError: <built-in function __import__> returned a result with an exception set\n")
    assert main(["doctor", "--log", str(f), "--json"], environ=tmp_env) == 14
    doc = _json(capsys)
    assert doc["status"] == "unknown" and doc["primary"] is None and "SystemError" in doc["stopped_by"]
    assert doc["checklist"]["steps"] == doc["advice"]  # one list; advice repeats it for old readers
    f.write_text(NOISE)
    assert main(["doctor", "--log", str(f)], environ=tmp_env) == 0
    assert "Nothing wrong in this log" in capsys.readouterr().out


def test_unreadable_log_is_a_usage_error(tmp_env: dict[str, str], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--log", str(tmp_path / "nope.txt")], environ=tmp_env) == 2
    assert "cannot read log file" in capsys.readouterr().err


def test_bad_rules_file_names_file_and_line(tmp_env: dict[str, str], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "errors.yaml"
    bad.write_text("layers:\n  - id: driver\n    title: t\n    check: c\nrules:\n  - id: x\n    layer: nope\n")
    assert main(["doctor", "--rules", str(bad), "--log", "-", "--json"], environ=tmp_env) == 5
    doc = _json(capsys)
    assert doc["error"] == "bad-input" and f"{bad}:6:" in doc["message"]


def test_machine_walk_without_gpu_is_calm(tmp_env: dict[str, str], tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    env = dict(tmp_env, PATH=str(tmp_path / "empty-bin"))  # no nvidia-smi reachable
    assert main(["doctor"], environ=env) == 3
    out = capsys.readouterr().out
    assert "No NVIDIA GPU or driver found" in out and "What it means" in out and "What to do" in out
    assert "Broken" not in out and "error" not in out.lower()
    assert main(["doctor", "--json"], environ=env) == 3
    doc = _json(capsys)
    assert doc["status"] == "no-gpu" and doc["broken"] is None


def test_machine_walk_names_a_broken_layer(tmp_env: dict[str, str], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    root = Path(tmp_env["TFGPU_ROOT"])
    (root / "proc").mkdir()
    (root / "proc/modules").write_text("nouveau 2306048 1 - Live 0x0\n")
    env = dict(tmp_env, PATH=str(tmp_path / "empty-bin"))
    assert main(["doctor", "--json"], environ=env) == 13
    doc = _json(capsys)
    assert doc["status"] == "broken" and doc["broken"]["rule"] == "nouveau-loaded"
    assert main(["doctor"], environ=env) == 13
    out = capsys.readouterr().out
    assert "Broken:" in out and "Why:" in out and "Fix:" in out and "blacklist nouveau" in out


def test_help_documents_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["doctor", "--help"])
    out = capsys.readouterr().out
    assert "--log" in out and "13" in out and "no known cause" in out


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None or os.path.exists("/proc/driver/nvidia/version"),
                    reason="this check is for machines without an NVIDIA driver")
def test_doctor_on_this_machine_without_gpu() -> None:
    """The real command, real runner, real root: a calm account and exit 3 (NO_GPU)."""
    proc = subprocess.run([sys.executable, "-m", "tfgpu_install", "doctor"], capture_output=True, text=True,
                          timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("TFGPU_")})
    assert proc.returncode == 3, proc.stderr
    assert "No NVIDIA GPU or driver found" in proc.stdout and "Traceback" not in proc.stderr


def test_errors_yaml_in_the_profiles_dir_is_used(tmp_env: dict[str, str], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """TFGPU_PROFILES_DIR points at a site's own knowledge: its errors.yaml is the doctor's rules."""
    from tfgpu_install.doctor.rules import default_path

    site = tmp_path / "site-profiles"
    site.mkdir()
    text = default_path().read_text(encoding="utf-8").replace("rules:\n", """rules:
  - id: site-scratch-full
    layer: driver
    severity: error
    specificity: 95
    patterns: ['SITE-SCRATCH-QUOTA-EXCEEDED']
    cause: "The site's scratch quota is used up."
    fix: "Clean /scratch."
    fix_kind: command
    source: https://example.org/site-runbook
""", 1)
    (site / "errors.yaml").write_text(text, encoding="utf-8")
    env = dict(tmp_env, TFGPU_PROFILES_DIR=str(site))
    monkeypatch.setattr(sys, "stdin", io.StringIO("job 7: SITE-SCRATCH-QUOTA-EXCEEDED\n"))
    assert main(["doctor", "--log", "-", "--json"], environ=env) == 13
    assert "site-scratch-full" in json.dumps(_json(capsys))
    # A profiles dir without errors.yaml keeps the packaged rules.
    monkeypatch.setattr(sys, "stdin", io.StringIO("job 7: SITE-SCRATCH-QUOTA-EXCEEDED\n"))
    assert main(["doctor", "--log", "-", "--json"], environ=dict(tmp_env, TFGPU_PROFILES_DIR=str(tmp_path))) == 0
    capsys.readouterr()
