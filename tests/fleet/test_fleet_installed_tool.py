"""#43: fleet from a wheel installed into its own tool venv (as pipx / `uv tool` do), run from outside any
checkout with a bare PATH: ansible-playbook is found beside the tool's Python, the tool's own wheel is
packed from the installed distribution (the same files as the wheel it came from), and `fleet status`
reports its host's row: no "not installed", no internal error. An edited install is not shipped."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.registry import trusted_env

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # a wheel build and an install of ansible-core from the registry (a minute)


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    uv = Path(sys.executable).parent / "uv"
    if not uv.is_file():
        pytest.skip("uv is not in the test venv")
    tmp = tmp_path_factory.mktemp("installed-tool")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(REPO), "-w", str(tmp / "dist")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    wheel = next((tmp / "dist").glob("tfgpu_install-*.whl"))
    venv = tmp / "tool-venv"
    for argv in ([str(uv), "venv", "-q", "--python", sys.executable, str(venv)],
                 [str(uv), "pip", "install", "-q", "--python", str(venv / "bin" / "python"), f"{wheel}[fleet]"]):
        # the test's own uv fetches ansible-core from the registry: the system CA store, as the tool's uv
        done = subprocess.run(argv, capture_output=True, text=True, timeout=900, env=trusted_env())
        assert done.returncode == 0, done.stderr[-3000:]
    return {"tmp": tmp, "wheel": wheel, "venv": venv}


def _fleet(tool: dict[str, Any], *args: str) -> tuple[int, dict[str, Any]]:
    tmp = tool["tmp"]
    (tmp / "outside").mkdir(exist_ok=True)
    inv = tmp / "outside" / "hosts.ini"
    # A host nobody listens for: the run gets as far as ansible's ssh (the row says unreachable).
    inv.write_text("[gpu]\nnode1 ansible_host=127.0.0.1 ansible_port=9 ansible_user=root\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp / "home"), "TFGPU_STATE_DIR": str(tmp / "state"),
           "TFGPU_CACHE_DIR": str(tmp / "cache"), "TFGPU_DATA_DIR": str(tmp / "data"),
           "ANSIBLE_HOME": str(tmp / "ansible"), "ANSIBLE_LOCAL_TEMP": str(tmp / "ansible" / "tmp")}
    done = subprocess.run([str(tool["venv"] / "bin" / "tfgpu-install"), "fleet", *args, "-i", str(inv), "--json"],
                          capture_output=True, text=True, timeout=600, cwd=tmp / "outside", env=env,
                          stdin=subprocess.DEVNULL)
    try:
        return done.returncode, json.loads(done.stdout)
    except ValueError:
        raise AssertionError(f"exit {done.returncode}: {done.stdout[-2000:]} {done.stderr[-2000:]}") from None


def test_fleet_status_from_an_installed_tool_outside_any_checkout(tool: dict[str, Any]) -> None:
    code, doc = _fleet(tool, "status")
    assert doc.get("error") not in ("internal-error", "environment"), doc
    assert code == 7 and [h["state"] for h in doc["hosts"]] == ["unreachable"], doc
    assert doc["engine"].startswith("ansible-playbook 2.")
    # The wheel it would ship: packed from the installed files, the same members as the wheel installed.
    packed = sorted((tool["tmp"] / "cache" / "fleet-wheel").glob("*/tfgpu_install-*.whl"))
    assert len(packed) == 1
    with zipfile.ZipFile(tool["wheel"]) as a, zipfile.ZipFile(packed[0]) as b:
        assert sorted(a.namelist()) == sorted(b.namelist())
        for name in a.namelist():
            if not name.endswith(".dist-info/RECORD"):
                assert a.read(name) == b.read(name), name


def test_an_edited_install_is_not_shipped_as_the_release(tool: dict[str, Any]) -> None:
    site = next((tool["venv"] / "lib").glob("python3*/site-packages"))
    target = site / "tfgpu_install" / "fleet" / "table.py"
    original = target.read_bytes()
    target.write_bytes(original + b"\n# edited\n")
    try:
        code, doc = _fleet(tool, "status")
        assert (code, doc["error"]) == (6, "environment"), doc
        assert "tfgpu_install/fleet/table.py is not what tfgpu-install" in doc["message"]
        assert "--wheel" in doc["hint"]
    finally:
        target.write_bytes(original)
    code, doc = _fleet(tool, "status")  # the control: restored, it runs again
    assert code == 7 and doc["hosts"][0]["state"] == "unreachable"
