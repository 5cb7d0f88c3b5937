"""The probe's independent sources run side by side: the NVML child, `ldconfig -p` and each
interpreter's version are asked at the same time. Proved without a clock: each recorded
answer waits at a barrier for the others, which only a concurrent probe ever reaches (a
sequential one breaks the barrier and the source fails)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from support.probe_machine import MINI_KNOWLEDGE, nvml_argv, nvml_json, plant, replay

from tfgpu_install.context import build_context
from tfgpu_install.facts.model import Tools
from tfgpu_install.facts.probe import gather
from tfgpu_install.facts.python import VERSION_SCRIPT, gather_pythons
from tfgpu_install.runner import Completed, ReplayRunner

# Long enough for a loaded machine; only a sequential probe ever waits it out.
_MEET_S = 60.0


def _meeting(barrier: threading.Barrier, answer: Completed, met: list[str], name: str):  # type: ignore[no-untyped-def]
    def respond(argv: tuple[str, ...]) -> Completed:
        barrier.wait()  # BrokenBarrierError when the other source never runs alongside
        met.append(name)
        return Completed(argv, answer.returncode, answer.stdout, answer.stderr)

    return respond


def _executable(path: Path) -> str:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_nvml_and_the_loader_cache_are_asked_at_once(tmp_env: dict[str, str]) -> None:
    runner = replay(nvml=nvml_json("550.54.14", 12040, [
        {"index": 0, "name": "NVIDIA GeForce RTX 4090", "compute_capability": "8.9", "memory_mib": 24564}]),
        ldconfig="1 libs found in cache `/etc/ld.so.cache'\n\tlibcudart.so.12 (libc6,x86-64) => "
                 "/usr/lib/libcudart.so.12\n")
    barrier, met = threading.Barrier(2, timeout=_MEET_S), []
    for key, name in ((nvml_argv(), "nvml"), (("/sbin/ldconfig", "-p"), "ldconfig")):
        runner.responses[key] = _meeting(barrier, runner.responses[key], met, name)  # type: ignore[arg-type]
    plant(Path(tmp_env["TFGPU_ROOT"]), {"/etc/os-release": 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\n',
                                        "/dev/nvidiactl": ""})  # the driver's node: NVML is worth asking
    empty = Path(tmp_env["HOME"]) / "empty-path"
    empty.mkdir()
    facts = gather(build_context({**tmp_env, "PATH": str(empty)}, runner=runner), knowledge=MINI_KNOWLEDGE)
    assert sorted(met) == ["ldconfig", "nvml"]
    assert [g.compute_capability for g in facts.gpus] == ["8.9"]
    assert [c.name for c in facts.cuda_installs if c.kind == "library"] == ["libcudart.so.12"]


def test_each_interpreter_is_asked_its_version_at_once(tmp_env: dict[str, str], tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    paths = [_executable(bindir / "python3.10"), _executable(bindir / "python3.12")]
    runner = ReplayRunner()
    barrier, met = threading.Barrier(2, timeout=_MEET_S), []
    for path, version in zip(paths, ("3.10.14", "3.12.3")):
        runner.responses[(path, "-c", VERSION_SCRIPT)] = _meeting(
            barrier, Completed((), 0, version + "\n"), met, version)
    ctx = build_context({**tmp_env, "PATH": str(bindir)}, runner=runner)
    pythons, problems = gather_pythons(ctx, Tools())
    assert sorted(met) == ["3.10.14", "3.12.3"] and problems == []
    # Order is the probe's, not the threads': newest first on PATH.
    assert ([(os.path.basename(p.path), p.version) for p in pythons]
            == [("python3.12", "3.12.3"), ("python3.10", "3.10.14")])
