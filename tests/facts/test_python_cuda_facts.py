"""Pythons (real interpreters on a temp PATH, a planted pyenv tree) and existing CUDA installs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from support.probe_machine import plant

from tfgpu_install.context import build_context
from tfgpu_install.facts.cuda import (
    gather_cuda,
    parse_ldconfig_p,
    parse_nvcc_version,
    parse_version_json,
    parse_version_txt,
    soname_version,
)
from tfgpu_install.facts.host import parse_ldd_version, parse_os_release
from tfgpu_install.facts.model import Tools
from tfgpu_install.facts.python import gather_pythons, parse_conda_env_list, parse_python_version, version_from_path
from tfgpu_install.runner import ReplayRunner, SubprocessRunner

# A real `ldconfig -p` excerpt from a machine with a system CUDA 11.8 toolkit and cuDNN 8 from NVIDIA's repo.
LDCONFIG = """1421 libs found in cache `/etc/ld.so.cache'
\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1
\tlibcudnn.so.8 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcudnn.so.8
\tlibcudnn.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcudnn.so
\tlibcudart.so.11.0 (libc6,x86-64) => /usr/local/cuda-11.8/targets/x86_64-linux/lib/libcudart.so.11.0
\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1
\tlibcublasLt.so.11 (libc6,x86-64) => /usr/local/cuda-11.8/targets/x86_64-linux/lib/libcublasLt.so.11
\tlibcuda.so.1 (libc6) => /lib/i386-linux-gnu/libcuda.so.1
\tlibcudadebugger.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcudadebugger.so.1
"""


def test_python_parsers() -> None:
    assert parse_python_version("3.11.7\n") == "3.11.7"
    assert parse_python_version("Python 3.12.1") == "3.12.1"
    assert parse_python_version("garbage") is None
    assert version_from_path("/home/u/.pyenv/versions/3.10.13/bin/python") == "3.10.13"
    assert version_from_path("/home/u/.pyenv/versions/miniconda3-latest/bin/python") is None
    assert (parse_conda_env_list('{"envs": ["/opt/conda", "/opt/conda/envs/tf"]}')
            == ("/opt/conda", "/opt/conda/envs/tf"))
    assert parse_conda_env_list("not json") == () and parse_conda_env_list("[1]") == ()


def test_real_interpreters_on_path_and_pyenv(tmp_env: dict[str, str], tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(sys.executable, bindir / f"python3.{sys.version_info[1]}")
    os.symlink(sys.executable, bindir / "python3")  # the same interpreter: listed once
    pyenv = Path(tmp_env["HOME"]) / ".pyenv/versions/3.9.18/bin"
    pyenv.mkdir(parents=True)
    (pyenv / "python3").write_text("")  # its version is in its path: never run
    env = {**tmp_env, "PATH": str(bindir)}
    ctx = build_context(env, runner=SubprocessRunner(path=str(bindir)))
    pythons, problems = gather_pythons(ctx, Tools())
    want = "%d.%d.%d" % sys.version_info[:3]
    assert [(p.version, p.source) for p in pythons] == [(want, "PATH"), ("3.9.18", "pyenv")]
    assert pythons[0].minor == "%d.%d" % sys.version_info[:2]
    assert problems == []


def test_conda_envs(tmp_env: dict[str, str], tmp_path: Path) -> None:
    env_prefix = tmp_path / "conda/envs/tf"
    (env_prefix / "bin").mkdir(parents=True)
    os.symlink(sys.executable, env_prefix / "bin/python")
    runner = ReplayRunner()
    runner.add(("/opt/conda/bin/conda", "env", "list", "--json"), stdout=json.dumps({"envs": [str(env_prefix)]}))
    runner.add((str(env_prefix / "bin/python"), "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"),
               stdout="3.10.14\n")
    ctx = build_context({**tmp_env, "PATH": str(tmp_path / "empty")}, runner=runner)
    pythons, _ = gather_pythons(ctx, Tools(conda="/opt/conda/bin/conda"))
    assert [(p.version, p.source) for p in pythons] == [("3.10.14", "conda:tf")]


def test_no_python_is_a_problem_not_an_error(tmp_env: dict[str, str], tmp_path: Path) -> None:
    ctx = build_context({**tmp_env, "PATH": str(tmp_path / "nothing")}, runner=ReplayRunner())
    pythons, problems = gather_pythons(ctx, Tools())
    assert pythons == () and problems[0].field == "pythons"


def test_cuda_parsers() -> None:
    nv = parse_nvcc_version("Cuda compilation tools, release 12.2, V12.2.140\n"
                            "Build cuda_12.2.r12.2/compiler.33191640_0")
    assert nv is not None and (nv.release, nv.full) == ("12.2", "12.2.140")
    assert parse_nvcc_version("nvcc: command not found") is None
    assert parse_version_json('{"cuda": {"name": "CUDA SDK", "version": "12.2.2"}}') == "12.2.2"
    assert parse_version_json("{") is None and parse_version_json('{"cuda": 1}') is None
    assert parse_version_txt("CUDA Version 10.2.89\n") == "10.2.89"
    entries = parse_ldconfig_p(LDCONFIG)
    assert [e.soname for e in entries] == [
        "libcudnn.so.8", "libcudnn.so", "libcudart.so.11.0", "libcuda.so.1", "libcublasLt.so.11", "libcuda.so.1",
    ]
    assert soname_version("libcudnn.so.8") == "8" and soname_version("libcudnn.so") is None


def test_gather_cuda_from_a_planted_root(tmp_env: dict[str, str]) -> None:
    root = Path(tmp_env["TFGPU_ROOT"])
    plant(root, {
        "/usr/local/cuda-12.2/version.json": '{"cuda": {"name": "CUDA SDK", "version": "12.2.2"}}',
        "/usr/local/cuda-10.2/version.txt": "CUDA Version 10.2.89\n",
        "/sbin/ldconfig": "",
    })
    (root / "usr/local/cuda").symlink_to(root / "usr/local/cuda-12.2")
    runner = ReplayRunner()
    runner.add(("/sbin/ldconfig", "-p"), stdout=LDCONFIG)
    env = {**tmp_env, "PATH": "/usr/local/cuda-12.2/bin:/usr/bin",
           "LD_LIBRARY_PATH": "/usr/local/cuda-11.8/lib64:/opt/x", "CUDA_VISIBLE_DEVICES": "1"}
    installs, problems = gather_cuda(build_context(env, runner=runner))
    toolkits = [(c.path.rsplit("/", 1)[-1], c.version, c.source) for c in installs if c.kind == "toolkit"]
    assert toolkits == [("cuda", "12.2.2", "version.json"), ("cuda-10.2", "10.2.89", "version.txt"),
                        ("cuda-12.2", "12.2.2", "version.json")]
    libs = [(c.name, c.version) for c in installs if c.kind == "library"]
    assert ("libcudnn.so.8", "8") in libs and ("libcudart.so.11.0", "11.0") in libs
    assert [(c.path, c.version) for c in installs if c.kind == "path-entry"] == [("/usr/local/cuda-12.2/bin", "12.2")]
    assert ([(c.path, c.version) for c in installs if c.kind == "ld-library-path-entry"]
            == [("/usr/local/cuda-11.8/lib64", "11.8")])
    assert problems == []


def test_gather_cuda_here_for_real(ctx, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """This machine's real `ldconfig -p` through the real runner, plus a toolkit planted under a
    root prefix (a CI machine has no CUDA: without it there would be nothing to check)."""
    toolkit = tmp_path / "usr" / "local" / "cuda-12.2"
    toolkit.mkdir(parents=True)
    (toolkit / "version.json").write_text('{"cuda": {"name": "CUDA SDK", "version": "12.2.140"}}')
    real = build_context({**ctx.environ, "TFGPU_ROOT": str(tmp_path)})
    installs, problems = gather_cuda(real)
    planted = [c for c in installs if c.kind == "toolkit" and c.path.endswith("/cuda-12.2")]
    assert [(c.version, c.source) for c in planted] == [("12.2.140", "version.json")]
    assert [c for c in installs if not c.source] == []
    assert not any("ldconfig -p failed" in p.reason for p in problems)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_no_text_crashes_these_parsers(text: str) -> None:
    parse_ldconfig_p(text)
    parse_nvcc_version(text)
    parse_version_json(text)
    parse_version_txt(text)
    parse_python_version(text)
    parse_conda_env_list(text)
    parse_os_release(text)
    parse_ldd_version(text)
    soname_version(text)
    version_from_path(text)
