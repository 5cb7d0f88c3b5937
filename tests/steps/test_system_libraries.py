"""system-libraries.check: a CUDA 10.x release on the venv backend refuses before installing when
the system lacks what TF dlopens. The machine is a temp root: gcc-built stand-ins in
/usr/local/cuda-10.1/lib64, and others registered in an ld.so.cache built by the real ldconfig."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.shapes import gpu, machine, policy

from tests.support.promised import absent
from tests.support.wheelhouse import build_shared_lib
from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode, UnsatisfiableError
from tfgpu_install.files import tree_sha256
from tfgpu_install.knowledge.load import load_knowledge
from tfgpu_install.plan.install import build_steps
from tfgpu_install.plan.options import InstallOptions
from tfgpu_install.resolver.resolve import resolve
from tfgpu_install.steps.system_libraries import CheckSystemLibraries

LDCONFIG = shutil.which("ldconfig") or "/sbin/ldconfig"
pytestmark = pytest.mark.skipif(absent("gcc") or absent("ldconfig", LDCONFIG),
                                reason="needs gcc and ldconfig")

TF23 = ["libcudart.so.10.1", "libcublas.so.10", "libcufft.so.10", "libcurand.so.10", "libcusolver.so.10",
        "libcusparse.so.10", "libcudnn.so.7"]


def _plant(ctx: Context, in_toolkit: list[str], in_cache: list[str]) -> None:
    root = ctx.root
    for so in in_toolkit:
        build_shared_lib(root / "usr/local/cuda-10.1/lib64" / so, so)
    libdir = root / "opt/cudnn/lib"
    for so in in_cache:
        build_shared_lib(libdir / so, so)
    etc = root / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "ld.so.conf").write_text(f"{libdir}\n")
    subprocess.run([LDCONFIG, "-C", str(etc / "ld.so.cache"), "-f", str(etc / "ld.so.conf")], check=True)


def test_missing_system_libraries_are_named_and_the_install_refused(ctx: Context) -> None:
    _plant(ctx, TF23[:5], [])  # no cuSPARSE, no cuDNN
    step = CheckSystemLibraries("2.3.4", "10.1", TF23)
    assert step.check(ctx) is False
    before = tree_sha256(ctx.root)
    with pytest.raises(UnsatisfiableError) as err:
        step.apply(ctx)
    assert err.value.code == ExitCode.UNSATISFIABLE
    msg = str(err.value)
    assert "lacks 2 of them: libcusparse.so.10, libcudnn.so.7" in msg and "nothing was installed" in msg
    assert "--backend conda" in err.value.hint and "toolkit" in err.value.hint
    assert tree_sha256(ctx.root) == before  # read-only


def test_toolkit_and_ldconfig_together_satisfy_it(ctx: Context) -> None:
    _plant(ctx, TF23[:6], ["libcudnn.so.7"])  # cuDNN registered with ldconfig, the rest in the toolkit
    step = CheckSystemLibraries("2.3.4", "10.1", TF23)
    assert step.check(ctx)
    found = step.apply(ctx)["found"]
    assert found["libcudnn.so.7"].endswith("/opt/cudnn/lib/libcudnn.so.7")
    assert "/usr/local/cuda-10.1/lib64/" in found["libcudart.so.10.1"]


def test_the_plan_checks_first_for_cuda_10_on_the_venv_backend_only() -> None:
    kn = load_knowledge()
    res = resolve(machine("418.87.01", [gpu("Tesla K80", "3.7")], pythons=("3.8.18",)), kn,
                  policy("legacy", prefer="newest"))
    assert res.choice is not None and res.choice.cuda == "10.1" and res.choice.sonames == TF23
    steps = build_steps(res, InstallOptions(env=Path("/tmp/x")))
    assert steps[0].id == "system-libraries.check" and steps[1].id == "env.create"
    conda = build_steps(res, InstallOptions(env=Path("/tmp/x"), backend="conda"))
    assert "system-libraries.check" not in [s.id for s in conda]
    wheels = resolve(machine("470.82.01", [gpu("Tesla K80", "3.7")]), kn, policy("stable")).choice
    assert wheels is not None and wheels.sonames == []  # the cu11 wheels bring their own
