"""Host facts from a planted root: distribution, WSL2, container, sudo, glibc."""

from __future__ import annotations

from pathlib import Path

from support.probe_machine import plant

from tfgpu_install.context import build_context
from tfgpu_install.facts.host import (
    container_from,
    gather_host,
    parse_confstr_glibc,
    parse_ldd_version,
    parse_os_release,
)
from tfgpu_install.runner import ReplayRunner

UBUNTU = '''PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
ID=ubuntu
ID_LIKE=debian
'''
WSL_PROC_VERSION = (
    "Linux version 5.15.146.1-microsoft-standard-WSL2 (root@65c757a075e2) (gcc (GCC) 11.2.0, "
    "GNU ld (GNU Binutils) 2.37) #1 SMP Thu Jan 11 04:09:03 UTC 2024\n"
)


def test_parse_os_release_and_glibc() -> None:
    osr = parse_os_release(UBUNTU + "# comment\nbroken line\nVERSION='22.04.4 LTS (Jammy Jellyfish)'\n")
    assert osr["PRETTY_NAME"] == "Ubuntu 22.04.4 LTS" and osr["ID"] == "ubuntu"
    assert osr["VERSION"] == "22.04.4 LTS (Jammy Jellyfish)"
    assert parse_ldd_version("ldd (Ubuntu GLIBC 2.35-0ubuntu3.6) 2.35\nCopyright (C) 2022") == "2.35"
    assert parse_ldd_version("musl libc (x86_64)\nVersion 1.2.4") is None
    assert parse_ldd_version("") is None
    assert parse_confstr_glibc("glibc 2.36") == "2.36" and parse_confstr_glibc(None) is None


def test_container_markers() -> None:
    assert container_from(True, False, "", {}) == "docker"
    assert container_from(False, True, "", {}) == "podman"
    assert container_from(False, False, "12:pids:/kubepods/besteffort/pod1/abc\n", {}) == "kubernetes"
    assert container_from(False, False, "", {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}) == "kubernetes"
    assert container_from(False, False, "11:memory:/docker/4f1c3b\n", {}) == "docker"
    assert container_from(False, False, "0::/\n", {}) is None


def _ctx(tmp_env: dict[str, str], **extra: str):  # type: ignore[no-untyped-def]
    return build_context({**tmp_env, **extra}, runner=ReplayRunner())


def test_plain_ubuntu_host(tmp_env: dict[str, str]) -> None:
    root = Path(tmp_env["TFGPU_ROOT"])
    plant(root, {"/etc/os-release": UBUNTU, "/proc/version": "Linux version 6.5.0-35-generic\n",
                 "/proc/sys/kernel/osrelease": "6.5.0-35-generic\n", "/proc/1/cgroup": "0::/init.scope\n"})
    host, problems = gather_host(_ctx(tmp_env))
    assert host.os == "Ubuntu 22.04.4 LTS" and host.os_id == "ubuntu" and host.source == "/etc/os-release"
    assert host.kernel == "6.5.0-35-generic"
    assert not host.wsl and host.container is None and not host.sudo
    assert host.glibc and host.glibc_source == "confstr"  # this machine's real glibc
    assert problems == []


def test_wsl2_in_docker_under_sudo(tmp_env: dict[str, str]) -> None:
    root = Path(tmp_env["TFGPU_ROOT"])
    plant(root, {"/etc/os-release": UBUNTU, "/proc/version": WSL_PROC_VERSION, "/.dockerenv": ""})
    host, problems = gather_host(_ctx(tmp_env, SUDO_USER="alice"))
    assert host.wsl and host.container == "docker"
    assert host.sudo and host.sudo_user == "alice"
    assert any("LD_LIBRARY_PATH" in p.reason for p in problems)


def test_wsl2_by_driver_dir_only(tmp_env: dict[str, str]) -> None:
    root = Path(tmp_env["TFGPU_ROOT"])
    (root / "usr/lib/wsl/lib").mkdir(parents=True)
    host, problems = gather_host(_ctx(tmp_env))
    assert host.wsl
    assert host.os is None and host.source == "none"
    assert any(p.field == "host.os" for p in problems)
