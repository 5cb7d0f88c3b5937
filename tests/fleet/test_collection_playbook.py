"""The collection through plain `ansible-playbook -i hosts site.yml` (run from playbooks/, whose
ansible.cfg finds the collection), against this machine over Ansible's local connection: the module's
mapping of tfgpu-install --json to Ansible's contract (check mode = --dry-run, `changed` only when a
step applied, `failed` with our error reference, message and hint). Real venvs, a real local index."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.install_kit import computing_wheelhouse, write_knowledge

pytest.importorskip("ansible", reason="ansible-core is not installed (pip install '.[fleet]')")

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = REPO / "ansible_collections" / "tfgpu" / "install" / "playbooks"


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    wh = computing_wheelhouse(tmp_path_factory.mktemp("fleet-wheelhouse"))
    with wh.serve() as srv:  # type: ignore[attr-defined]
        yield srv


@pytest.fixture()
def site(tmp_path: Path, index: Any) -> dict[str, Any]:
    """An inventory for localhost, a tool venv whose tfgpu-install is this checkout, and the tool's
    environment pointed at temp dirs, the test knowledge and the local index."""
    tool_venv = tmp_path / "tool"
    (tool_venv / "bin").mkdir(parents=True)
    tool = tool_venv / "bin" / "tfgpu-install"
    tool.write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m tfgpu_install "$@"\n')
    tool.chmod(0o755)
    env_vars = {
        "HOME": str(tmp_path / "home"), "TFGPU_STATE_DIR": str(tmp_path / "state"),
        "TFGPU_CACHE_DIR": str(tmp_path / "cache"), "TFGPU_DATA_DIR": str(tmp_path / "data"),
        "TFGPU_PROFILES_DIR": str(write_knowledge(tmp_path / "knowledge")),
        "UV_INDEX_URL": index.url, "PIP_INDEX_URL": index.url,
        "UV_CACHE_DIR": os.environ.get("TFGPU_TEST_UV_CACHE", str(tmp_path / "uv-cache")),
    }
    hosts = tmp_path / "hosts"
    hosts.write_text(f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    return {"hosts": hosts, "results": tmp_path / "results", "tmp": tmp_path,
            "vars": {"tfgpu_tool_venv": str(tool_venv), "tfgpu_env_vars": env_vars, "tfgpu_allow_cpu": True,
                     "tfgpu_env": str(tmp_path / "env"), "tfgpu_remote_dir": str(tmp_path / "remote"),
                     "tfgpu_results_dir": str(tmp_path / "results"),
                     # the real numpy wheel in the index is for this interpreter
                     "tfgpu_extra_args": ["--python", sys.executable]}}


def play(site: dict[str, Any], *args: str, **extra: Any) -> tuple["subprocess.CompletedProcess[str]", dict[str, Any]]:
    variables = {**site["vars"], **extra}
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_HOME=str(site["tmp"] / "ansible-home"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CALLBACKS_ENABLED="tfgpu.install.tfgpu_results",
               PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
    done = subprocess.run(["ansible-playbook", "-i", str(site["hosts"]), "site.yml", "-e", json.dumps(variables),
                           *args], cwd=PLAYBOOKS, env=env, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    result_file = site["results"] / "localhost.json"
    doc = json.loads(result_file.read_text()) if result_file.exists() else {}
    return done, doc.get("result", {})


def test_check_mode_plans_then_install_changes_once(site: dict[str, Any]) -> None:
    done, planned = play(site, "--check")
    assert done.returncode == 0, done.stdout[-3000:]
    assert planned["dry_run"] is True and planned["changed"] is True  # steps would run
    assert "env.create" in planned["pending"] and planned["applied"] == []
    assert not (site["tmp"] / "env").exists()  # check mode touched nothing

    done, first = play(site)
    assert done.returncode == 0, done.stdout[-3000:]
    assert first["changed"] is True and first["verified"] is True
    assert {"env.create", "packages.install", "verify.run"} <= set(first["applied"])
    assert first["tensorflow"]["tensorflow"] == "2.99.0"
    assert first["host"]["machine_id"]
    # No GPU here: verified on the CPU only, and it says so, with the layers that passed (#38).
    assert first["gpu_verified"] is False and "tensorflow" in first["layers_passed"]

    done, second = play(site)
    assert done.returncode == 0, done.stdout[-3000:]
    assert (second["changed"], second["applied"], second["verified"]) == (False, [], True)
    assert "changed=0" in done.stdout.split("PLAY RECAP")[1]

    done, status = play(site, tfgpu_mode="status")  # fleet status: the last verified stack
    assert done.returncode == 0, done.stdout[-3000:]
    assert status["changed"] is False and status["verified"] is True
    assert status["gpu_verified"] is False and "tensorflow" in status["layers_passed"]
    assert (status["tensorflow"]["tensorflow"], status["tensorflow"]["cuda"]) == ("2.99.0", "12.3")


def test_a_change_whose_result_was_lost_is_reported_by_the_next_run(site: dict[str, Any]) -> None:
    """A partition: run A changed the env but its result never reached the controller (which still
    passes no reported run). Run B changes nothing itself and still says changed, naming A's steps; once
    the controller passes B back, a run is unchanged."""
    run_a, run_b, run_c = "a" * 32, "b" * 32, "c" * 32
    done, first = play(site, tfgpu_run_id=run_a)
    assert done.returncode == 0, done.stdout[-3000:]
    assert first["changed"] is True and first["ledger_run"] == run_a and "unreported" not in first

    done, second = play(site, tfgpu_run_id=run_b)  # the controller never got run A's row
    assert done.returncode == 0, done.stdout[-3000:]
    assert (second["changed"], second["applied"], second["ledger_run"]) == (True, [], run_b)
    assert second["unreported"]["runs"] == [run_a]
    assert {"env.create", "packages.install", "verify.run"} <= set(second["unreported"]["applied"])

    done, third = play(site, tfgpu_run_id=run_c, tfgpu_reported_runs={"localhost": run_b})
    assert done.returncode == 0, done.stdout[-3000:]
    assert (third["changed"], third["applied"], third.get("unreported")) == (False, [], None)
    assert "changed=0" in done.stdout.split("PLAY RECAP")[1]


def test_a_failure_carries_our_reference_message_and_hint(site: dict[str, Any]) -> None:
    done, failed = play(site, tfgpu_profile="no-such-profile")
    assert done.returncode == 2  # ansible-playbook: a host failed
    assert failed["failed"] is True
    assert (failed["error"], failed["exit_code"]) == ("usage", 2)  # an unknown profile is a usage error (#43)
    assert "no-such-profile" in failed["msg"] and "known profiles" in failed["hint"]
    assert "[usage]" in done.stdout and "-- fix:" in done.stdout


def test_check_mode_on_a_node_with_nothing_installed_writes_nothing(site: dict[str, Any]) -> None:
    """--check must not bootstrap the tool venv nor ship anything: it says a real run would."""
    wheel = site["tmp"] / "dist" / "tfgpu_install-0.0.0-py3-none-any.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"not installed in check mode")
    venv, remote = site["tmp"] / "fresh-tool", site["tmp"] / "remote"
    done, planned = play(site, "--check", tfgpu_tool_venv=str(venv), tfgpu_wheel=str(wheel))
    assert done.returncode == 0, done.stdout[-3000:]
    assert planned["changed"] is True and planned["planned"] is False and planned["would_bootstrap"] is True
    assert "bootstrap" in planned["msg"]
    assert not venv.exists() and not remote.exists() and not (site["tmp"] / "env").exists()


def test_snapshot_reports_changed_only_on_change(site: dict[str, Any]) -> None:
    done, _ = play(site)
    assert done.returncode == 0, done.stdout[-3000:]
    done, first = play(site, tfgpu_mode="snapshot", tfgpu_fetch_dir=str(site["tmp"] / "fetched"))
    assert done.returncode == 0, done.stdout[-3000:]
    assert first["changed"] is True and first["id"]
    kept = Path(first["path"]).read_text()
    done, second = play(site, tfgpu_mode="snapshot", tfgpu_fetch_dir=str(site["tmp"] / "fetched"))
    assert done.returncode == 0, done.stdout[-3000:]
    assert second["changed"] is False and second["id"] == first["id"]
    assert Path(second["path"]).read_text() == kept  # the unchanged env keeps its snapshot file
    # check mode exports to compare and writes nothing: still unchanged
    done, checked = play(site, "--check", tfgpu_mode="snapshot", tfgpu_fetch_dir=str(site["tmp"] / "fetched"))
    assert done.returncode == 0 and checked["changed"] is False


def test_facts_module_gives_group_by_its_keys(site: dict[str, Any]) -> None:
    playbook = site["tmp"] / "facts.yml"
    playbook.write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - tfgpu.install.tfgpu_facts:\n        tool_venv: '{{ tfgpu_tool_venv }}'\n"
        "        tool_env: '{{ tfgpu_env_vars }}'\n"
        "    - ansible.builtin.group_by:\n        key: \"tfgpu_tool_{{ ansible_facts.tfgpu.tool }}\"\n"
        "    - ansible.builtin.debug:\n"
        "        msg: \"FACTS={{ ansible_facts.tfgpu | to_json }} GROUPS={{ group_names }}\"\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_HOME=str(site["tmp"] / "ansible-home"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(REPO), PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
    done = subprocess.run(["ansible-playbook", "-i", str(site["hosts"]), str(playbook), "-e",
                           json.dumps(site["vars"])], env=env, capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "tfgpu_tool_True" in done.stdout
    line = next(x for x in done.stdout.splitlines() if "FACTS=" in x)
    facts = json.loads(line.split("FACTS=", 1)[1].split(" GROUPS=")[0].rstrip('"').replace('\\"', '"'))
    assert facts["tool"] is True and "gpus" in facts and "glibc" in facts and facts["machine_id"]
