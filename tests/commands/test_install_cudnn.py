"""End to end, the real CLI in a subprocess: `tfgpu-install --profile stable --allow-cpu
--cudnn-source redist --cudnn-mirror http://127.0.0.1:PORT/` and `--cudnn-source archive
--cudnn-archive FILE` on this machine (no GPU). Packages come from the local wheelhouse, cuDNN
from a loopback mirror or a local archive of gcc-built libraries; the placed library is what the
env's loader resolves; a re-run changes nothing; rollback removes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cudnn_archive import build_archive, publish
from tests.support.httpserver import Fault, LoopbackServer
from tests.support.install_kit import cli_env, run_cli
from tests.support.promised import absent, needs_tool
from tfgpu_install.errors import ExitCode

pytestmark = pytest.mark.skipif(absent("gcc"), reason="the libraries are built with gcc")


def install(env: dict[str, str], target: Path, *argv: str) -> "subprocess.CompletedProcess[str]":
    args = ["--profile", "stable", "--allow-cpu", "-y", "--json", "--python", sys.executable,
            "--env", str(target), *argv]
    return run_cli(args, env)


def loads_placed(target: Path) -> int:
    """Through the env's own launcher, with an empty environment, the loader resolves OUR
    libcudnn.so.9 (the wheel's stand-in has no cudnnGetVersion)."""
    code = "import ctypes; print(ctypes.CDLL('libcudnn.so.9').cudnnGetVersion())"
    out = subprocess.run(["/usr/bin/env", "-i", str(target / "bin" / "tfgpu-run"), "python", "-c", code],
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_install_with_redist_cudnn_from_a_loopback_mirror(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env = cli_env(tmp_env, knowledge, index.url)
    arc = build_archive(tmp_path / "build", "9.1.0.70", pad=300_000)
    target = tmp_path / "data" / "env"
    with LoopbackServer() as srv:
        mirror = publish(srv, arc, "9.1.0.70", fault=Fault.CUT_ONCE, cut_at=150_000)
        first = install(env, target, "--cudnn-source", "redist", "--cudnn-mirror", mirror)
        assert first.returncode == 0, first.stderr + first.stdout
        doc = json.loads(first.stdout)
        ids = [s["id"] for s in doc["steps"]]
        assert ids.index("cudnn.fetch") < ids.index("cudnn.place") < ids.index("activation.write")
        assert os.readlink(target / "lib" / "cudnn") == "cudnn-9.1.0"
        assert loads_placed(target) == 90100
        archive_reqs = srv.requests_for(f"/cudnn/linux-x86_64/{arc.name}")
        assert len(archive_reqs) == 2 and archive_reqs[1].range  # cut once, resumed with Range
        n = len(srv.requests)
        again = install(env, target, "--cudnn-source", "redist", "--cudnn-mirror", mirror)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["changed"] is False
        assert len(srv.requests) == n  # a complete env asks the mirror nothing
    back = run_cli(["rollback", "-y", "--env", str(target)], env)
    assert back.returncode == 0, back.stderr + back.stdout
    assert not target.exists() or not (target / "lib" / "cudnn-9.1.0").exists()


def test_install_with_a_local_archive(tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path) -> None:
    env = cli_env(tmp_env, knowledge, index.url)
    arc = build_archive(tmp_path / "build", "9.1.0.70", fmt="tar.gz", links=False)  # links made by place
    target = tmp_path / "data" / "env"
    done = install(env, target, "--cudnn-source", "archive", "--cudnn-archive", str(arc))
    assert done.returncode == 0, done.stderr + done.stdout
    assert os.readlink(target / "lib" / "cudnn" / "lib" / "libcudnn.so.9") == "libcudnn.so.9.1.0"
    assert loads_placed(target) == 90100


def test_install_refuses_a_cudnn_of_the_wrong_major(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env = cli_env(tmp_env, knowledge, index.url)
    arc = build_archive(tmp_path / "build", "8.9.7.29")
    target = tmp_path / "data" / "env"
    done = install(env, target, "--cudnn-source", "archive", "--cudnn-archive", str(arc))
    assert done.returncode == ExitCode.UNSATISFIABLE, done.stderr + done.stdout
    err = json.loads(done.stdout or done.stderr)
    assert "cuDNN 8.9.7.29" in err["message"] and "9.1" in err["message"] and err["hint"]
    assert not (target / "lib" / "cudnn").exists()


def test_install_with_an_unreachable_mirror_fails_with_one_message(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    from tests.support.httpserver import refused_port

    env = cli_env(tmp_env, knowledge, index.url)
    target = tmp_path / "data" / "env"
    done = install(env, target, "--cudnn-source", "redist", "--cudnn-mirror", f"http://127.0.0.1:{refused_port()}/")
    assert done.returncode == ExitCode.DOWNLOAD, done.stderr + done.stdout
    err = json.loads(done.stdout or done.stderr)
    assert "refused" in err["message"] and "--cudnn-archive" in err["hint"]


@pytest.mark.parametrize("case,words", [("missing", "not found"), ("directory", "not a file"),
                                        ("not-an-archive", "not a .tar.xz/.tar.gz/.zip archive")])
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_bad_cudnn_archive_is_refused_before_anything_changes(
    tmp_path: Path, tmp_env: dict[str, str], knowledge: Path, case: str, words: str, dry_run: bool
) -> None:
    """Issue 17: a missing --cudnn-archive was noticed only after the env and TensorFlow were
    installed. Now the CLI refuses first (exit 5); no env, no journal, no package index asked."""
    from tests.support.httpserver import refused_port

    env = cli_env(tmp_env, knowledge, f"http://127.0.0.1:{refused_port()}/simple/")
    arc = tmp_path / "downloads" / "cudnn-linux-x86_64-9.1.0.70_cuda12-archive.tar.xz"
    arc.parent.mkdir()
    if case == "directory":
        arc.mkdir()
    elif case == "not-an-archive":
        arc.write_text("<html>404 Not Found</html>\n")  # what a failed browser download saves
    target = tmp_path / "data" / "env"
    done = install(env, target, "--cudnn-source", "archive", "--cudnn-archive", str(arc),
                   *(["--dry-run"] if dry_run else []))
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr + done.stdout
    err = json.loads(done.stdout or done.stderr)
    assert words in err["message"] and str(arc) in err["message"] and err["hint"]
    assert not target.exists()
    assert not (tmp_path / "state" / "envs").exists() or not any((tmp_path / "state" / "envs").iterdir())


def test_hostile_cudnn_zip_cannot_reach_the_users_rc(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """The issue's reproduction: a valid cuDNN 9 layout plus a chain of symlinks that each look
    inside the tree but climb one real directory more (to $HOME), then a file member named like
    the last link. On main the install exited 0 with ~/.bashrc overwritten."""
    import zipfile

    env = cli_env(tmp_env, knowledge, index.url)
    rc = Path(tmp_env["HOME"]) / ".bashrc"
    rc.write_bytes(b"# mine\nexport KEEP=1\n")
    rc_stat = rc.stat()
    arc = build_archive(tmp_path / "build", "9.1.0.70", fmt="zip")
    top = arc.name[: -len(".zip")]
    # staging = <tmp>/data/env/lib/.tfgpu-staging-*: l1 is the staging dir, l<k> k-1 above it.
    chain = [(f"{top}/x/y/l1", "../../..")]
    for n in range(2, 6):
        chain.append((f"{top}/x/y/l{n}", f"../../../{top}/x/y/l{n - 1}/.."))
    chain.append((f"{top}/x/y/evil", f"../../../{top}/x/y/l5/home/.bashrc"))
    with zipfile.ZipFile(arc, "a") as zf:
        for name, target_ in chain:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o120777 << 16
            zf.writestr(info, target_)
        member = zipfile.ZipInfo(f"{top}/x/y/evil")
        member.external_attr = 0o100644 << 16  # a regular file, as zip -y writes it
        zf.writestr(member, b"echo owned\n")
    target = tmp_path / "data" / "env"
    done = install(env, target, "--cudnn-source", "archive", "--cudnn-archive", str(arc))
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr + done.stdout
    err = json.loads(done.stdout or done.stderr)
    assert err["message"].startswith(f"refusing to extract {arc.name}: member") and err["hint"]
    assert rc.read_bytes() == b"# mine\nexport KEEP=1\n" and rc.stat().st_mtime_ns == rc_stat.st_mtime_ns
    assert not list((target / "lib").glob(".tfgpu-staging-*"))


@needs_tool("openssl", "the loopback certificate is made with it")
def test_https_mirror_redirecting_to_http_is_refused(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """Issue 17: an https --cudnn-mirror answering 302 to plain http was followed (manifest and
    archive over http). Two loopback servers: the https mirror redirects every path to the
    http one, which holds a complete mirror. Exit 8 before the http one is asked."""
    from tests.support.httpserver import self_signed_cert

    cert, key = self_signed_cert(tmp_path / "tls")
    env = cli_env(tmp_env, knowledge, index.url, SSL_CERT_FILE=str(cert))
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    target = tmp_path / "data" / "env"
    with LoopbackServer(tls=(cert, key)) as mirror, LoopbackServer() as plain:
        publish(plain, arc, "9.1.0.70")
        for path in list(plain.resources):
            mirror.redirect(path, plain.url(path))
        done = install(env, target, "--cudnn-source", "redist", "--cudnn-mirror", mirror.url("/"))
        assert done.returncode == ExitCode.DOWNLOAD, done.stderr + done.stdout
        assert plain.requests == [] and mirror.requests
    err = json.loads(done.stdout or done.stderr)
    assert err["error"] == "insecure-redirect" and "https to plain http" in err["message"] and err["hint"]
    assert not (target / "lib" / "cudnn").exists()


@pytest.mark.parametrize("member", ["../../../../.bashrc", "/tmp/tfgpu-attack-absolute-early.txt"])
@pytest.mark.parametrize("dry_run", [True, False])
def test_hostile_archive_members_are_found_before_the_env_is_built(
    tmp_path: Path, tmp_env: dict[str, str], knowledge: Path, member: str, dry_run: bool
) -> None:
    """Issue 24: the member checks ran only when the cuDNN step extracted, after the env and
    TensorFlow were installed, and a dry run said all was well. Now: exit 5 first, nothing built."""
    import zipfile

    from tests.support.httpserver import refused_port

    env = cli_env(tmp_env, knowledge, f"http://127.0.0.1:{refused_port()}/simple/")
    arc = build_archive(tmp_path / "build", "9.1.0.70", fmt="zip")
    with zipfile.ZipFile(arc, "a") as zf:
        zf.writestr(zipfile.ZipInfo(member), b"echo owned\n")
    target = tmp_path / "data" / "env"
    done = install(env, target, "--cudnn-source", "archive", "--cudnn-archive", str(arc),
                   *(["--dry-run"] if dry_run else []))
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr + done.stdout
    err = json.loads(done.stdout or done.stderr)
    assert "refusing to extract" in err["message"] and err["hint"]
    assert not target.exists() and not Path("/tmp/tfgpu-attack-absolute-early.txt").exists()
