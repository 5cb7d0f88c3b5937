"""`knowledge update` against a loopback index serving a TensorFlow-2.22-shaped release (issue #40): its
build_info.py names no CUDA, its and-cuda extra pins nvshmem, and its GPU code is a shared object nvcc built
here for sm_75, sm_86, sm_120 + compute_120. Learned with CUDA, cuDNN and the exact SASS/PTX list, each with
its source, by closed range requests only; pre-releases only with --pre and picked only by `preview`."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any, Optional

import pytest
from support.fatbin_lib import BUILD_INFO_222, build_gpu_lib, plain_lib, tf222_wheel

from tests.support.httpserver import LoopbackServer
from tfgpu_install.cli import main
from tfgpu_install.errors import ExitCode

RTX5090 = ["--assume-driver", "575.51.03", "--assume-gpu", "NVIDIA GeForce RTX 5090", "--assume-python", "3.12",
           "--assume-glibc", "2.35"]
RTX3090 = ["--assume-driver", "575.51.03", "--assume-gpu", "NVIDIA GeForce RTX 3090", "--assume-python", "3.12",
           "--assume-glibc", "2.35"]


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("libs")
    return {"gpu": build_gpu_lib(d, ("sm_75", "sm_86", "sm_120"), ptx="compute_120"), "plain": plain_lib(d)}


class Index:
    def __init__(self, srv: LoopbackServer) -> None:
        self.srv = srv
        self.files: list[dict[str, Any]] = []

    def add(self, version: str, wheel: tuple[str, bytes], uploaded: Optional[date] = None) -> None:
        name, data = wheel
        self.srv.add(f"/files/{name}", data)
        self.files.append({"filename": name, "url": f"../../files/{name}", "hashes": {}, "size": len(data),
                           "upload-time": f"{(uploaded or date.today()).isoformat()}T10:00:00Z"})
        doc = {"meta": {"api-version": "1.1"}, "name": "tensorflow", "files": self.files}
        self.srv.add("/simple/tensorflow/", json.dumps(doc).encode(),
                     content_type="application/vnd.pypi.simple.v1+json")


def run(capsys: Any, env: dict[str, str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json"], environ=env)
    return code, json.loads(capsys.readouterr().out)


def overlay_row(env: dict[str, str], version: str) -> dict[str, Any]:
    from tfgpu_install.context import build_context
    from tfgpu_install.knowledge.learned import overlay_path

    text = overlay_path(build_context(env).state_dir).read_text()
    doc = json.loads(text[text.index("{"):])
    return next(r for r in doc["releases"] if r["tensorflow"] == version)


@pytest.mark.parametrize("stored", [False, True], ids=["deflated", "stored"])
def test_a_2_22_shaped_release_is_learned_from_its_fat_binary_by_range_reads(
        stored: bool, libs: dict[str, Path], tmp_env: dict[str, str], capsys: Any) -> None:
    with LoopbackServer() as srv:
        Index(srv).add("2.22.0", tf222_wheel("2.22.0", libs["gpu"], libs["plain"], stored=stored))
        code, doc = run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))
        wheel_reads = [r for r in srv.requests if r.path.startswith("/files/")]
    assert code == ExitCode.OK and [r["tensorflow"] for r in doc["learned"]] == ["2.22.0"], doc
    assert wheel_reads and all(r.range and r.range.startswith("bytes=") and not r.range.endswith("-")
                               for r in wheel_reads)  # closed ranges only: never the whole file
    row = overlay_row(tmp_env, "2.22.0")
    assert (row["cuda"], row["cudnn"], row["sass"], row["ptx"]) == ("12.5", "9.10", ["7.5", "8.6", "12.0"], ["12.0"])
    assert row["pins"]["nvidia-nvshmem-cu12"] == "3.2.5" and row["pins"]["nvidia-cudnn-cu12"] == "9.10.2.21"
    src = row["sources"]
    assert src["cuda"].startswith("and-cuda pin nvidia-cuda-runtime-cu12<13.0,>=12.5.82")
    assert src["cudnn"].startswith("and-cuda pin nvidia-cudnn-cu12<10.0,>=9.10.2.21")
    assert "fat-binary headers of tensorflow/libtensorflow_cc.so.2" in src["sass"] and src["ptx"] == src["sass"]
    assert row["build_info"] == {"is_cuda_build": "True"}

    # Its fat binary carries sm_120: latest picks it on an RTX 5090, with native kernels (no JIT, no failure).
    code, plan = run(capsys, tmp_env, "plan", "--profile", "latest", *RTX5090)
    assert code == ExitCode.OK and plan["choice"]["tensorflow"] == "2.22.0" and not plan["choice"]["jit_only"]
    assert any("sm_120 SASS" in r and "fat-binary headers" in r for r in plan["reasons"])
    assert "nvidia-nvshmem-cu12" in plan["choice"]["pins"]


def test_without_the_fat_binary_scan_the_release_would_be_skipped(tmp_env: dict[str, str], libs: dict[str, Path],
                                                                  capsys: Any) -> None:
    """The control and the attack in one: no library with GPU code -> skipped with the reason, never
    called CPU-only; a CPU-only build says so."""
    with LoopbackServer() as srv:
        index = Index(srv)
        index.add("2.22.0", tf222_wheel("2.22.0", None, libs["plain"]))
        cpu_info = BUILD_INFO_222.replace("('is_cuda_build', True)", "('is_cuda_build', False)")
        index.add("2.23.0", tf222_wheel("2.23.0", libs["gpu"], build_info=cpu_info))
        code, doc = run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))
    assert code == ExitCode.OK and doc["learned"] == [] and doc["status"] == "up-to-date"
    skipped = dict(s.split(": ", 1) for s in doc["skipped"])
    assert skipped["2.22.0"].startswith("its GPU facts cannot be established: none of the wheel's 1 shared "
                                        "libraries carries CUDA fat binaries")
    assert skipped["2.23.0"] == "a CPU-only build (its build_info.py says is_cuda_build False)"


def test_a_pre_release_is_skipped_learned_with_pre_and_picked_only_by_preview(
        libs: dict[str, Path], tmp_env: dict[str, str], capsys: Any) -> None:
    with LoopbackServer() as srv:
        Index(srv).add("2.22.0rc0", tf222_wheel("2.22.0rc0", libs["gpu"], libs["plain"], py="cp314"))
        code, doc = run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))
        assert code == ExitCode.OK and doc["learned"] == [] and doc["skipped"] == ["2.22.0rc0: pre-release (use --pre)"]
        assert not [r for r in srv.requests if r.path.startswith("/files/")]  # not even read
        code, doc = run(capsys, tmp_env, "knowledge", "update", "--pre", "--index-url", srv.url("/simple/"))
    assert code == ExitCode.OK and [r["tensorflow"] for r in doc["learned"]] == ["2.22.0rc0"]
    assert overlay_row(tmp_env, "2.22.0rc0")["pythons"] == ["3.14"]
    code, shown = run(capsys, tmp_env, "knowledge", "show")
    assert [r["origin"] for r in shown["learned"]] == ["learned, not curated (pre-release)"]
    for profile in ("latest", "stable"):
        code, plan = run(capsys, tmp_env, "plan", "--profile", profile, *RTX3090)
        assert code == ExitCode.OK and plan["choice"]["tensorflow"] != "2.22.0rc0", profile
        assert "2.22.0rc0 (a pre-release; the preview profile may pick it" in " ".join(plan["reasons"])
    code, plan = run(capsys, tmp_env, "plan", "--profile", "preview", *RTX3090[:4], "--assume-python", "3.14",
                     *RTX3090[6:])
    assert code == ExitCode.OK and plan["choice"]["tensorflow"] == "2.22.0rc0"
    assert plan["choice"]["python"] == "3.14"


def test_a_learned_row_is_cited_where_it_lives(libs: dict[str, Path], tmp_env: dict[str, str], capsys: Any) -> None:
    with LoopbackServer() as srv:
        Index(srv).add("2.22.0", tf222_wheel("2.22.0", libs["gpu"], libs["plain"]))
        assert run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))[0] == ExitCode.OK
    code, plan = run(capsys, tmp_env, "plan", "--profile", "latest", *RTX5090)
    assert any("not confirmed from a source: defects (learned.yaml:" in w for w in plan["warnings"])
