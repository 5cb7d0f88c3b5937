"""The user's own requirements on top of TensorFlow, for real: a venv provisioned from the local
wheelhouse by the install command with `--with myproj` (real uv over loopback HTTP, real verify
on the CPU), then `add`, a conflicting requirement refused before any change (exit 4), the
additions recorded in the plan and the known-good snapshot, carried by export -> restore, and a
Jupyter kernel (real jupyter_client + ipykernel) that sees the env's library paths and imports
the wheelhouse's TensorFlow."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.install_kit import computing_wheelhouse
from tests.support.restore_kit import Provisioned, base_environ, cli, freeze, needs_gcc
from tests.support.wheelhouse import WheelSpec
from tfgpu_install.context import build_context
from tfgpu_install.errors import ExitCode
from tfgpu_install.snapshot import model as S

pytestmark = needs_gcc

MYPROJ = WheelSpec("myproj", "1.0.0", {"myproj/__init__.py": b"import numpy\nVERSION = '1.0.0'\n"},
                   requires=("numpy>=1.24", "absl-py"))
OLD_ABSL = WheelSpec("absl-py", "2.0.0", {"absl/__init__.py": b'__version__ = "2.0.0"\n'})  # older than the env's 2.1.0


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    wh = computing_wheelhouse(tmp_path_factory.mktemp("wheelhouse-with"), extra_specs=[MYPROJ, OLD_ABSL])
    with wh.serve() as srv:  # type: ignore[attr-defined]
        yield srv


@pytest.fixture(scope="module")
def with_env(tmp_path_factory: pytest.TempPathFactory, index: Any) -> Provisioned:
    tmp = tmp_path_factory.mktemp("with")
    environ = base_environ(tmp, index.url)
    env = tmp / "data" / "with-env"
    from tfgpu_install.cli import main

    code = main(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env),
                 "--with", "myproj>=1", "--json"], environ=environ)
    assert code == 0, f"install --with failed with exit {code}"
    return Provisioned(env, environ, index.url, tmp)


def _known_good(p: Provisioned) -> S.Snapshot:
    found = S.latest_for_env(build_context(p.environ).state_dir, p.env)
    assert found is not None
    return found[1]


def test_install_with_adds_and_records_the_requirement(with_env: Provisioned) -> None:
    from tfgpu_install.app.additions import added_requirements

    pins = dict(line.split("==") for line in freeze(with_env.env))
    assert pins["myproj"] == "1.0.0" and pins["tensorflow"] == "2.99.0" and pins["numpy"] == "1.26.4"
    snap = _known_good(with_env)
    assert snap.resolution.added == ("myproj>=1",)
    assert "myproj" in snap.package_map()
    assert added_requirements(build_context(with_env.environ), with_env.env) == ("myproj>=1",)


def test_a_reinstall_keeps_the_additions(with_env: Provisioned, capsys: pytest.CaptureFixture[str]) -> None:
    before = freeze(with_env.env)
    code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env",
                     str(with_env.env), "--debug"], with_env.environ, capsys)
    assert code == 0, doc
    assert doc["options"]["with_requirements"] == ["myproj>=1"] and doc["changed"] is False
    assert freeze(with_env.env) == before


def test_a_conflicting_with_is_refused_before_any_change(
    with_env: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh = with_env.tmp / "data" / "never-made"
    code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(fresh),
                     "--with", "protobuf>=5"], with_env.environ, capsys)
    assert code == ExitCode.UNSATISFIABLE, doc
    message = doc["message"]
    print(message)
    assert "protobuf>=5" in message and "protobuf<5" in message.replace(">=3.20.3,", "")  # both sides named
    assert not fresh.exists()
    project = with_env.tmp / "pyproject.toml"
    project.write_text('[project]\nname = "mine"\ndependencies = ["myproj", "protobuf>=5"]\n')
    code, doc = cli(["--profile", "stable", "--allow-cpu", "--python", sys.executable, "--env", str(fresh),
                     "--with-file", str(project), "--dry-run"], with_env.environ, capsys)
    assert code == ExitCode.UNSATISFIABLE and "protobuf>=5" in doc["message"], doc
    assert not fresh.exists()


def test_add_refuses_a_conflict_and_changes_nothing(with_env: Provisioned, capsys: pytest.CaptureFixture[str]) -> None:
    before = freeze(with_env.env)
    for extra in ([], ["--dry-run"]):  # every check that can fail runs under --dry-run too
        code, doc = cli(["add", "protobuf>=5", "--env", str(with_env.env), "-y", *extra], with_env.environ, capsys)
        assert code == ExitCode.UNSATISFIABLE, doc
    assert freeze(with_env.env) == before
    # TensorFlow allows absl-py 2.0.0, but the env holds 2.1.0: `add` moves nothing that is installed
    code, doc = cli(["add", "absl-py<2.1", "--env", str(with_env.env), "-y"], with_env.environ, capsys)
    assert code == ExitCode.UNSATISFIABLE and "absl-py==2.1.0 (installed)" in doc["message"], doc
    assert freeze(with_env.env) == before
    code, doc = cli(["add", "myproj", "--env", str(with_env.env), "--dry-run"], with_env.environ, capsys)
    assert code == 0 and doc["dry_run"] is True and freeze(with_env.env) == before


def test_bad_requirement_files_are_refused_with_the_fix(
    with_env: Provisioned, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("myproj\n-e git+https://example.invalid/x.git#egg=x\n")
    code, doc = cli(["add", "--with-file", str(reqs), "--env", str(with_env.env), "-y"], with_env.environ, capsys)
    assert code == ExitCode.BAD_INPUT and "requirements.txt:2" in str(doc)
    code, doc = cli(["add", "evil @ file:///etc/passwd", "--env", str(with_env.env), "-y"], with_env.environ, capsys)
    assert code == ExitCode.USAGE and "direct reference" in str(doc)


def test_restore_brings_back_the_additions(with_env: Provisioned, capsys: pytest.CaptureFixture[str]) -> None:
    out = with_env.tmp / "with-snap.yaml"
    code, _ = cli(["snapshot", "export", "--env", str(with_env.env), "-o", str(out)], with_env.environ, capsys)
    assert code == 0
    target = with_env.tmp / "data" / "restored-with"
    code, doc = cli(["snapshot", "restore", str(out), "--env", str(target), "--allow-cpu", "-y"],
                    with_env.environ, capsys)
    assert code == 0, doc
    assert freeze(target) == freeze(with_env.env)
    from tfgpu_install.app.additions import added_requirements

    ctx = build_context(with_env.environ)
    assert added_requirements(ctx, target) == ("myproj>=1",)
    found = S.latest_for_env(ctx.state_dir, target)
    assert found is not None and found[1].resolution.added == ("myproj>=1",)


@pytest.fixture(scope="module")
def ipykernel_links(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ipykernel and its dependencies as wheels for this interpreter, from the registry."""
    dest = tmp_path_factory.mktemp("ipykernel-wheels")
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                    "--only-binary=:all:", "ipykernel", "-d", str(dest)],
                   check=True, capture_output=True, text=True, timeout=900)
    return dest


@pytest.fixture(scope="module")
def kernel_env(with_env: Provisioned, ipykernel_links: Path) -> Provisioned:
    """with_env after `add ipykernel` (the registry's wheels as find-links beside the local index)."""
    environ = dict(with_env.environ, UV_FIND_LINKS=str(ipykernel_links), PIP_FIND_LINKS=str(ipykernel_links),
                   JUPYTER_DATA_DIR=str(with_env.tmp / "jupyter"))
    return Provisioned(with_env.env, environ, with_env.index_url, with_env.tmp)


def test_add_installs_without_moving_anything_and_verifies_again(
    kernel_env: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    before = dict(line.split("==") for line in freeze(kernel_env.env))
    first = _known_good(kernel_env)
    code, doc = cli(["add", "ipykernel", "--env", str(kernel_env.env), "-y"], kernel_env.environ, capsys)
    assert code == 0, doc
    after = dict(line.split("==") for line in freeze(kernel_env.env))
    assert "ipykernel" in after and doc["moved"] == []
    assert {n: after[n] for n in before} == before  # nothing TensorFlow needs (nothing at all) moved
    states = {s["id"]: s["status"] for s in doc["steps"]}
    assert states["packages.install"] == "applied" and states["verify.run"] == "applied"  # the check ran again
    assert doc["gpu_verified"] is False  # a CPU host: said as it is
    snap = _known_good(kernel_env)
    assert snap.id != first.id and snap.resolution.added == ("myproj>=1", "ipykernel")


def _run_in_kernel(kernel_dir: Path, name: str, code: str) -> str:
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    ksm = KernelSpecManager(kernel_dirs=[str(kernel_dir)])
    km = KernelManager(kernel_name=name, kernel_spec_manager=ksm)
    km.start_kernel()
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        out: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("ERROR " + msg["content"]["ename"] + ": " + msg["content"]["evalue"])

        reply = kc.execute_interactive(code, output_hook=hook, timeout=120)
        kc.stop_channels()
        assert reply["content"]["status"] == "ok", out
        return "".join(out)
    finally:
        km.shutdown_kernel(now=True)


def test_kernel_sees_the_library_paths_and_imports_tensorflow(
    kernel_env: Provisioned, capsys: pytest.CaptureFixture[str]
) -> None:
    env = kernel_env.env
    if not (env / "bin" / "python").exists() or "ipykernel" not in str(freeze(env)):
        cli(["add", "ipykernel", "--env", str(env), "-y"], kernel_env.environ, capsys)
    for bad in ("../escape", "UPPER", "a/b"):
        code, doc = cli(["kernel", "install", "--env", str(env), "--name", bad], kernel_env.environ, capsys)
        assert code == ExitCode.USAGE, doc
    code, doc = cli(["kernel", "install", "--env", str(env), "--name", "tf-test"], kernel_env.environ, capsys)
    assert code == 0, doc
    kdir = Path(kernel_env.environ["JUPYTER_DATA_DIR"]) / "kernels"
    assert (kdir / "tf-test" / "kernel.json").is_file()
    text = _run_in_kernel(kdir, "tf-test", "import os, tensorflow as tf\n"
                          "print(os.environ['LD_LIBRARY_PATH'])\nprint('TF', tf.__version__)\n")
    libs = text.splitlines()[0].split(":")
    assert any(p.startswith(str(env)) and p.endswith("nvidia/cublas/lib") for p in libs), text
    assert "TF 2.99.0" in text
    # someone else's kernel of the same name is never overwritten
    other = kdir / "theirs"
    other.mkdir()
    (other / "kernel.json").write_text('{"argv": ["python"], "display_name": "theirs", "language": "python"}')
    code, doc = cli(["kernel", "install", "--env", str(env), "--name", "theirs"], kernel_env.environ, capsys)
    assert code == ExitCode.ENVIRONMENT and (other / "kernel.json").read_text().startswith('{"argv": ["python"]')
    code, doc = cli(["kernel", "remove", "--env", str(env)], kernel_env.environ, capsys)
    assert code == 0 and doc["removed"] == [str(kdir / "tf-test")]
    assert not (kdir / "tf-test").exists() and (other / "kernel.json").exists()


def test_rollback_removes_the_kernel(kernel_env: Provisioned, capsys: pytest.CaptureFixture[str]) -> None:
    env = kernel_env.env
    code, doc = cli(["kernel", "install", "--env", str(env), "--sys-prefix"], kernel_env.environ, capsys)
    assert code == 0, doc
    kdir = Path(doc["path"])
    assert kdir.parent == env / "share" / "jupyter" / "kernels" and (kdir / "kernel.json").is_file()
    code, doc = cli(["rollback", "-y", "--env", str(env)], kernel_env.environ, capsys)
    assert code == 0, doc
    assert not kdir.exists()


def test_with_file_keeps_hash_pins(with_env: Provisioned, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """#39 item 9: `--hash` options of a --with-file line were dropped, so a file whose hash does
    not match was installed anyway (pip refuses it). Now a wrong hash is refused by the install
    (nothing of the package installed), the right one installs (the control), and the pin is kept
    in the plan for the re-runs."""
    import hashlib
    import re
    from urllib.request import urlopen

    page = urlopen(f"{with_env.index_url}/myproj/").read().decode()  # the index's real wheel and its sha256
    href = re.search(r'href="([^"#]+myproj-1\.0\.0[^"#]*\.whl)', page)
    assert href, page
    url = href.group(1) if href.group(1).startswith("http") else f"{with_env.index_url}/myproj/{href.group(1)}"
    good = hashlib.sha256(urlopen(url).read()).hexdigest()
    reqs = tmp_path / "requirements.txt"
    wrong = "0" * 64
    for digest, ok in ((wrong, False), (good, True)):
        target = with_env.tmp / "data" / f"hashed-{ok}"
        reqs.write_text(f"myproj==1.0.0 \\\n    --hash=sha256:{digest}\n")
        code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(target),
                         "--with-file", str(reqs)], with_env.environ, capsys)
        installed = "myproj" in dict(line.split("==") for line in freeze(target)) if target.is_dir() else False
        if ok:
            assert code == 0 and installed, doc
            assert doc["options"]["with_hashes"] == {"myproj": [f"sha256:{good}"]}
        else:
            assert code != 0 and not installed, doc
    bad = tmp_path / "bad.txt"
    bad.write_text("myproj==1.0.0 --hash=sha256:xyz\n")
    code, doc = cli(["add", "--with-file", str(bad), "--env", str(with_env.env), "--dry-run"], with_env.environ, capsys)
    assert code == ExitCode.BAD_INPUT and doc["error"] == "with-file-hash", doc
