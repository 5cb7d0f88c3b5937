"""`--tensorflow X.Y[.Z]` and `upgrade`, on real envs from a local index that has two TensorFlow
releases: the pin picks the older one; installing the profile's choice over it says old -> new;
`upgrade` builds the new release in a new env with the package the user added, verified, makes it
the default and keeps the old env."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.install_kit import MATRIX, cli_env, computing_wheelhouse, run_cli, write_knowledge
from tests.support.wheelhouse import WheelSpec

OLDER = "2.97.5"
_OLDER_RELEASE = MATRIX.split("releases:\n", 1)[1].replace('"2.99.0"', f'"{OLDER}"').replace(
    '"2024-01-15"', '"2023-06-01"')
TWO_RELEASES = MATRIX + _OLDER_RELEASE


# Someone else's package on the index under the name of the user's private one: its .pth runs
# at every start of the env's Python (the upgrade's verify included) and leaves a mark.
IMPOSTOR = WheelSpec("mycorp-private", "1.0", files={
    "mycorp_private/__init__.py": b"VALUE = 'impostor'\n",
    "mycorp_private_hook.pth": b"import os, sys; open(os.path.join(sys.prefix, 'IMPOSTOR-RAN'), 'w').close()\n"})


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    user_lib = WheelSpec("user-lib", "3.1", files={"user_lib/__init__.py": b"VALUE = 31\n"})
    wh = computing_wheelhouse(tmp_path_factory.mktemp("wheelhouse"), extra_tf=[(OLDER, "12.3", "9")],
                              extra_specs=[user_lib, IMPOSTOR])
    with wh.serve() as srv:  # type: ignore[attr-defined]
        yield srv


@pytest.fixture(scope="module")
def knowledge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_knowledge(tmp_path_factory.mktemp("knowledge"), TWO_RELEASES)


def _json(done: "subprocess.CompletedProcess[str]") -> dict[str, Any]:
    assert done.returncode == 0, done.stderr + done.stdout
    return dict(json.loads(done.stdout))


def test_tensorflow_flag_checks_its_value(tmp_env: dict[str, str], index: Any, knowledge: Path) -> None:
    env = cli_env(tmp_env, knowledge, index.url)
    pinned = _json(run_cli(["plan", "--tensorflow", "2.97", "--allow-cpu", "--json"], env))
    assert pinned["choice"]["tensorflow"] == OLDER
    assert _json(run_cli(["plan", "--allow-cpu", "--json"], env))["choice"]["tensorflow"] == "2.99.0"
    unknown = run_cli(["plan", "--tensorflow", "2.50", "--allow-cpu"], env)
    assert unknown.returncode == 2 and "not in the knowledge tables" in unknown.stderr and "2.97" in unknown.stderr
    bad = run_cli(["install", "--tensorflow", "2.x", "--allow-cpu", "-y"], env)
    assert bad.returncode == 2 and "X.Y or X.Y.Z" in bad.stderr


def test_install_pinned_then_upgrade_carries_the_added_package(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env = cli_env(tmp_env, knowledge, index.url)
    old = tmp_path / "data" / "mine"
    common = ["--allow-cpu", "--python", sys.executable]
    first = _json(run_cli(["install", "--tensorflow", "2.97", "-y", "--env", str(old), "--json", *common], env))
    assert first["resolution"]["choice"]["tensorflow"] == OLDER and "tensorflow_change" not in first
    # the user adds a package with the env's own pip, from the same index
    added = subprocess.run([str(old / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "--index-url",
                            index.url, "user-lib==3.1"], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert added.returncode == 0, added.stderr

    # the profile's choice over it: the plan says which TensorFlow goes and which comes
    over = run_cli(["install", "--env", str(old), "--dry-run", *common], env)
    assert over.returncode == 0, over.stderr
    assert f"{OLDER} → 2.99.0" in over.stdout
    doc = _json(run_cli(["install", "--env", str(old), "--dry-run", "--json", *common], env))
    assert doc["tensorflow_change"] == {"from": OLDER, "to": "2.99.0"}

    up = _json(run_cli(["upgrade", "-y", "--json", *common], env))
    new = Path(up["env"])
    assert up["upgrade"]["from"] == {"env": str(old), "tensorflow": OLDER}
    assert up["upgrade"]["to"]["tensorflow"] == "2.99.0" and up["upgrade"]["carried"] == ["user-lib==3.1"]
    assert up["upgrade"]["profile"] == "stable" and up["upgrade"]["old_env_kept"] is True
    assert new != old and new.parent == tmp_path / "data" / "envs"
    probe = subprocess.run([str(new / "bin" / "python"), "-c", "import tensorflow, user_lib; "
                            "print(tensorflow.__version__, user_lib.VALUE)"], capture_output=True, text=True)
    assert probe.stdout.split() == ["2.99.0", "31"], probe.stderr
    rows = {r["path"]: r for r in _json(run_cli(["envs", "--json"], env))["envs"]}
    assert rows[str(new)]["default"] and rows[str(new)]["verified_ok"] is True
    assert rows[str(old)]["tensorflow"] == OLDER and not rows[str(old)]["default"]

    again = _json(run_cli(["upgrade", "--json", *common], env))
    assert again["changed"] is False and again["upgrade"]["to"] is None


def test_upgrade_reads_the_flags_the_env_was_installed_with(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """#43 item 7: an env installed with --allow-cpu on a machine without a GPU; `upgrade` without the flag
    stopped with exit 3 (no GPU) there. It reads --allow-cpu (and the index) from the env's record."""
    env = cli_env(tmp_env, knowledge, index.url)
    old = tmp_path / "data" / "cpu"
    _json(run_cli(["install", "--tensorflow", "2.97", "-y", "--env", str(old), "--allow-cpu", "--index-url",
                   index.url, "--python", sys.executable, "--json"], env))
    bare = {k: v for k, v in env.items() if k not in ("UV_INDEX_URL", "PIP_INDEX_URL")}  # only the record has it
    up = run_cli(["upgrade", "-y", "--python", sys.executable, "--json"], bare)
    doc = _json(up)
    assert doc["upgrade"]["flags_from_record"] == ["--allow-cpu", "--index-url", index.url]
    assert doc["upgrade"]["to"]["tensorflow"] == "2.99.0" and doc["gpu_verified"] is False
    assert doc["options"]["allow_cpu"] is True and doc["options"]["index_url"] == index.url
    shown = run_cli(["upgrade", "--dry-run", "--python", sys.executable, "--env", str(old)], bare)
    assert shown.returncode == 0 and f"as {old} was installed: --allow-cpu --index-url {index.url}" in shown.stdout


# The steps an upgrade's new env runs (env.create .. snapshot.record), each killed before it,
# in its middle and after it: the checkpoints tests/support/faults.py arms.
UPGRADE_STEPS = ["env.create", "packages.install", "activation.write", "verify.run", "snapshot.record"]
KILL_POINTS = [f"{step}:{where}" for step in UPGRADE_STEPS for where in ("before", "middle", "after")]


def _default(env: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """(the envs marked default by `envs --json`, its rows by path)."""
    rows = {r["path"]: r for r in _json(run_cli(["envs", "--json"], env))["envs"]}
    return [p for p, r in rows.items() if r["default"]], rows


def test_a_killed_upgrade_moves_nothing_and_resumes(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """SIGKILL at each step of `upgrade`: `verify` and `status` without --env still answer for the
    old env, `envs` marks the old one default and the new one incomplete; `upgrade` again finishes
    the new env and only then makes it the default. (Before: the default moved when the new env's
    run began, so `verify` checked the half-built env and exited 9.)"""
    from tests.support.faults import fault_env

    env = cli_env(tmp_env, knowledge, index.url)
    old = tmp_path / "data" / "old"
    common = ["--allow-cpu", "--python", sys.executable]
    _json(run_cli(["install", "--tensorflow", "2.97", "-y", "--env", str(old), "--json", *common], env))
    new = Path(_json(run_cli(["upgrade", "--dry-run", "--json", *common], env))["env"])
    assert new != old and not new.exists()
    for point in KILL_POINTS:
        killed = run_cli(["upgrade", "-y", "--json", *common], fault_env(env, kill_at=point))
        assert killed.returncode == -9, (point, killed.stdout, killed.stderr)
        defaults, rows = _default(env)
        assert defaults == [str(old)], point
        status = _json(run_cli(["status", "--json"], env))
        assert status["env"] == str(old), point
        verified = run_cli(["verify", "--json"], env)
        assert verified.returncode == 0 and json.loads(verified.stdout)["env"] == str(old), (point, verified.stdout)
        if new.exists() or point.startswith("env.create"):
            assert rows[str(new)]["incomplete"] is True and not rows[str(new)]["default"], (point, rows)
        assert rows[str(old)]["incomplete"] is False
        # run again: the new env is finished from where it stopped, verified, then the default
        up = _json(run_cli(["upgrade", "-y", "--json", *common], env))
        assert up["env"] == str(new) and up["upgrade"]["to"]["tensorflow"] == "2.99.0", point
        defaults, rows = _default(env)
        assert defaults == [str(new)] and rows[str(new)]["incomplete"] is False, (point, rows)
        assert _json(run_cli(["status", "--json"], env))["env"] == str(new)
        # back to the start for the next point: the old env the default (by hand), the new one gone
        assert _json(run_cli(["envs", "default", str(old), "--json"], env))["env"] == str(old)
        assert _json(run_cli(["envs", "remove", str(new), "-y", "--json"], env))["removed"] is True
        assert _default(env)[0] == [str(old)] and not new.exists()


def test_upgrade_never_takes_a_package_from_the_index_that_came_from_a_file(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """#39 item 2: the user installed `mycorp-private==1.0` from a local wheel; upgrade carried it by
    name and the index's impostor of that name was installed, its .pth running during the upgrade's
    verify (exit 0). Now it is not carried, the result says so (with the command that installs the
    same file, still there with the same sha256); user-lib from the index is carried (the control)."""
    from tests.support.wheelhouse import build_wheel

    env = cli_env(tmp_env, knowledge, index.url)
    old = tmp_path / "data" / "mine"
    common = ["--allow-cpu", "--python", sys.executable]
    _json(run_cli(["install", "--tensorflow", "2.97", "-y", "--env", str(old), "--json", *common], env))
    private = build_wheel(WheelSpec("mycorp-private", "1.0", files={"mycorp_private/__init__.py": b"VALUE = 'mine'\n"}),
                          tmp_path / "private")
    pip = [str(old / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", "--index-url", index.url]
    for what in (["user-lib==3.1"], ["--no-index", str(private)]):
        done = subprocess.run(pip + what, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr

    dry = _json(run_cli(["upgrade", "--dry-run", "--json", *common], env))
    assert dry["upgrade"]["carried"] == ["user-lib==3.1"]
    assert [n["package"] for n in dry["upgrade"]["not_carried"]] == ["mycorp-private==1.0"]
    up = run_cli(["upgrade", "-y", *common], {**env, "COLUMNS": "400"})
    assert up.returncode == 0, up.stderr + up.stdout
    new = Path(_json(run_cli(["status", "--json"], env))["env"])
    assert new != old and not (new / "IMPOSTOR-RAN").exists()
    assert "not carried over: mycorp-private==1.0" in up.stdout
    # The command that adds the same file is offered only when the install recorded the file's sha256: pip
    # 23.2 records it for a local wheel, Debian's pip 23.0.1 (bookworm's python3 venv) records none.
    recorded = dry["upgrade"]["not_carried"][0]["sha256"]
    if recorded is not None:
        assert f"--python {new}/bin/python {private}" in up.stdout
    else:
        assert "same sha256" not in up.stdout and "install it again from where you got it" in up.stdout
    probe = subprocess.run([str(new / "bin" / "python"), "-c", "import user_lib; print(user_lib.VALUE)\n"
                            "try:\n import mycorp_private\nexcept ImportError: print('absent')"],
                           capture_output=True, text=True)
    assert probe.stdout.split() == ["31", "absent"], probe.stderr


def test_upgrade_carries_the_hash_pins_of_what_it_carries(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """A --with-file line's --hash (#39 item 9) goes with the requirement to the new release's env."""
    import hashlib
    import re
    from urllib.request import urlopen

    env = cli_env(tmp_env, knowledge, index.url)
    page = urlopen(f"{index.url}/user-lib/").read().decode()
    href = re.search(r'href="([^"#]+user_lib-3\.1[^"#]*\.whl)', page)
    assert href, page
    url = href.group(1) if href.group(1).startswith("http") else f"{index.url}/user-lib/{href.group(1)}"
    pin = f"sha256:{hashlib.sha256(urlopen(url).read()).hexdigest()}"
    reqs = tmp_path / "requirements.txt"
    reqs.write_text(f"user-lib==3.1 --hash={pin}\n")
    old = tmp_path / "data" / "pinned"
    common = ["--allow-cpu", "--python", sys.executable]
    first = _json(run_cli(["install", "--tensorflow", "2.97", "-y", "--env", str(old), "--with-file", str(reqs),
                           "--json", *common], env))
    assert first["options"]["with_hashes"] == {"user-lib": [pin]}
    dry = _json(run_cli(["upgrade", "--env", str(old), "--dry-run", "--json", *common], env))
    assert dry["upgrade"]["carried"] == ["user-lib==3.1"] and dry["options"]["with_hashes"] == {"user-lib": [pin]}
