"""Every byte a snapshot is written with stays what it was: the documents under
tests/fixtures/snapshots/ were written by the tool before its documents became typed (dicts
inside), one per shape it writes or reads; today's code writes each case to the same bytes, and
reading a file and writing it back gives the same bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from tests.support.snapshot_doc import make
from tfgpu_install.snapshot import model as S

FILES = Path(__file__).resolve().parent.parent / "fixtures" / "snapshots"
WHEN = {"id": "20261201T000000Z-known-good-aaaaaa", "created": "2026-12-01T00:00:00Z"}
DIGEST = "sha256:" + "d" * 64


def _report() -> dict[str, object]:
    """A verify report as VerifyReport.to_json() writes it (layers, extras, the TF log)."""
    return {"ok": True, "mode": "gpu", "gpu_verified": True, "env": "/envs/tf", "when": "2026-12-01T00:00:00Z",
            "summary": "verified on the GPU: 2 layer(s) passed", "crashed": None,
            "layers": [{"layer": 0, "name": "driver", "status": "pass", "summary": "driver 535.104.05",
                        "measured": {"driver": "535.104.05"}, "error": None, "hint": None, "seconds": 0.01},
                       {"layer": 5, "name": "tensorflow", "status": "pass", "summary": "matmul on GPU:0",
                        "measured": {"gflops": 1234.5, "devices": ["GPU:0"]}, "error": None, "hint": None,
                        "seconds": 3.2}],
            "extras": {"benchmark": {"gpu_gflops": 1234.5, "cpu_gflops": 55.0}}, "tf_log": {"lines": 3}}


def recorded() -> S.Snapshot:
    """A known-good record as an install writes it: the resolver's resolution + added, the step's
    verification (its undo record, the report, when)."""
    resolution = {
        "profile": "stable",
        "choice": {"tensorflow": "2.17.1", "cuda": "12.3", "cudnn": "8.9", "python": "3.11", "jit_only": False,
                   "package": "tensorflow", "python_path": "/usr/bin/python3.11", "cuda_from": "pip",
                   "pins": {"nvidia-cudnn-cu12": "8.9.7.29"}, "constraints": {"numpy": ">=1.26,<2"},
                   "visible_devices": None, "hashes": {"nvidia-cudnn-cu12": [DIGEST]}, "sonames": []},
        "reasons": ["driver 535.104.05 supports CUDA <= 12.2 (nvidia-smi)"],
        "rejected": [{"tensorflow": "2.18.0", "reasons": ["CUDA 12.5 > driver's 12.2"]}],
        "options": [], "remedies": [], "warnings": ["w"], "cpu_only": False, "added": ["pandas>=2"],
    }
    verification = {"record": "/state/envs/tf-0123/verify.json", "gpu_verified": True, "mode": "gpu", "ok": True,
                    "report": _report(), "verified_at": "2026-12-01T00:00:00Z"}
    return make(**WHEN, resolution=resolution, verification=verification)


def conda() -> S.Snapshot:
    records = [{"name": "cudatoolkit", "version": "11.8.0", "build": "h6a678d5_0", "channel": "conda-forge",
                "sha256": "c" * 64}, {"name": "python", "version": "3.11.7", "build": "h0_cpython", "channel": "",
                                      "sha256": ""}]
    return make(**WHEN, env={"path": "/envs/c", "backend": "conda", "python": "3.11.7", "conda_packages": records})


def rollback_point() -> S.Snapshot:
    """Before the first change to an env nothing journaled: no resolution, no verification."""
    return make(id="20261201T000000Z-rollback-point-bbbbbb", kind="rollback-point", created=WHEN["created"],
                env={"path": "/envs/old", "backend": "venv", "python": None}, host=S.HostContract(),
                resolution={}, packages=(), files=(), activation={}, verification=None)


def plain() -> S.Snapshot:
    """The tests' own document: a flat resolution, a short verification."""
    return make(**WHEN)


CASES: dict[str, Callable[[], S.Snapshot]] = {
    "recorded": recorded, "conda": conda, "rollback-point": rollback_point, "plain": plain,
}
FORMAT_1 = "format: 1\nenv: /envs/old\nresolution: {tensorflow: 2.15.1}\npackages: ['numpy==1.26.4']\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_snapshot_is_written_to_the_same_bytes(name: str) -> None:
    assert S.dumps(CASES[name]()) == (FILES / f"{name}.yaml").read_text()


@pytest.mark.parametrize("name", [*sorted(CASES), "format-1"])
def test_a_file_read_and_written_back_is_the_same_bytes(name: str) -> None:
    text = (FILES / f"{name}.yaml").read_text()
    assert S.dumps(S.loads(text, name)) == text


if __name__ == "__main__":  # writes the files (run once, with the code whose bytes they keep)
    for case, build in CASES.items():
        (FILES / f"{case}.yaml").write_text(S.dumps(build()))
    (FILES / "format-1.yaml").write_text(S.dumps(S.loads(FORMAT_1)))
