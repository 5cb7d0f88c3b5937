"""The env lifecycle on real envs installed from the local wheelhouse: `envs` lists them (what is
installed now, the last verification, drift from the known-good snapshot, size, the default),
`envs remove` takes one away through its journal (its shell-rc block too), and `self uninstall`
shows the sizes first and then leaves no file of ours, never touching the user's uv cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.install_kit import cli_env, run_cli
from tests.support.wheelhouse import WheelSpec, build_wheel

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux envs")


def _install(env: dict[str, str], env_dir: Path, *extra: str) -> dict[str, Any]:
    done = run_cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(env_dir),
                    "--json", *extra], env)
    assert done.returncode == 0, done.stderr + done.stdout
    return dict(json.loads(done.stdout))


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


@pytest.fixture
def two_envs(tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path) -> dict[str, Any]:
    uv_cache = tmp_path / "user-uv-cache"
    env = cli_env(tmp_env, knowledge, index.url, UV_CACHE_DIR=str(uv_cache))
    rc = Path(tmp_env["HOME"]) / ".bashrc"
    rc.write_text("export EDITOR=vi\n")
    first = tmp_path / "data" / "envs" / "first"
    second = tmp_path / "elsewhere" / "second"
    _install(env, first, "--shell-rc", str(rc))
    _install(env, second, "--no-pip")
    # the user adds a package on top of the snapshot: drift
    added = build_wheel(WheelSpec("user-added", "1.0", files={"user_added/__init__.py": b"X = 1\n"}), tmp_path / "w")
    uv = str(Path(sys.executable).parent / "uv")  # the uv the tool depends on
    subprocess.run([uv, "pip", "install", "-q", "--python", str(second / "bin" / "python"), str(added)],
                   env={**env, "VIRTUAL_ENV": ""}, check=True, capture_output=True)
    return {"env": env, "first": first, "second": second, "rc": rc, "uv_cache": uv_cache}


def test_pip_is_in_every_env_unless_no_pip(tmp_path: Path, two_envs: dict[str, Any]) -> None:
    first, second = two_envs["first"], two_envs["second"]
    wheel = build_wheel(WheelSpec("by-pip", "2.0", files={"by_pip/__init__.py": b"Y = 2\n"}), tmp_path / "w2")
    # pip works inside the env, offline, with no activation (the env's own pip, not the system's)
    done = subprocess.run([str(first / "bin" / "pip"), "install", "--no-index", "--disable-pip-version-check", "-q",
                           str(wheel)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert subprocess.run([str(first / "bin" / "python"), "-c", "import by_pip"], capture_output=True).returncode == 0
    assert not (second / "bin" / "pip").exists()
    from tfgpu_install.commands.install import add_packages_hint

    assert "`pip install PACKAGE`" in add_packages_hint(first)
    assert "no pip" in add_packages_hint(second) and f"--python {second}/bin/python" in add_packages_hint(second)


def test_envs_list_remove_and_self_uninstall(tmp_path: Path, two_envs: dict[str, Any]) -> None:
    env, first, second, rc = two_envs["env"], two_envs["first"], two_envs["second"], two_envs["rc"]
    listing = run_cli(["envs", "--json"], env)
    assert listing.returncode == 0, listing.stderr
    rows = {r["path"]: r for r in json.loads(listing.stdout)["envs"]}
    assert set(rows) == {str(first), str(second)}
    for path in (first, second):
        row = rows[str(path)]
        assert row["tensorflow"] == "2.99.0" and row["sources"]["tensorflow"] == "installed"
        # CUDA is not in the env's metadata: the install's record says it (its known-good snapshot here).
        assert (row["cuda"], row["sources"]["cuda"]) == ("12.3", "recorded")
        assert row["python"] and row["python"].startswith(f"{sys.version_info[0]}.{sys.version_info[1]}")
        assert row["verified"] and row["verified_ok"] is True
        assert row["size_bytes"] > 0
    assert rows[str(second)]["default"] and not rows[str(first)]["default"]
    assert rows[str(first)]["drift"] == "clean"
    assert rows[str(second)]["drift"] != "clean"
    assert any("user-added==1.0" in line for line in rows[str(second)]["drift_lines"])
    human = run_cli(["envs"], {**env, "COLUMNS": "80"})
    assert human.returncode == 0 and str(first) in human.stdout and "*" in human.stdout

    # remove: refused for a path it did not make; a dry run changes nothing; then through the journal
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    refused = run_cli(["envs", "remove", str(stranger), "-y"], env)
    assert refused.returncode == 5 and "not an env tfgpu-install made" in refused.stderr and stranger.is_dir()
    dry = run_cli(["envs", "remove", str(first), "--dry-run", "--json"], env)
    assert dry.returncode == 0 and json.loads(dry.stdout)["removed"] is False and first.is_dir()
    unasked = run_cli(["envs", "remove", str(first)], env)  # stdin is not a terminal: no silent removal
    assert unasked.returncode == 2 and first.is_dir()
    assert str(first) in rc.read_text()
    gone = run_cli(["envs", "remove", str(first), "-y", "--json"], env)
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["removed"] is True and not first.exists()
    assert rc.read_text() == "export EDITOR=vi\n"  # its activation block went with it
    after = json.loads(run_cli(["envs", "--json"], env).stdout)["envs"]
    assert [r["path"] for r in after] == [str(second)]
    every = {r["path"]: r for r in json.loads(run_cli(["envs", "--all", "--json"], env).stdout)["envs"]}
    assert every[str(first)]["exists"] is False and every[str(first)]["drift"].startswith("unknown")

    # self uninstall: the sizes first (dry run), then nothing of ours, the user's uv cache untouched
    uv_before = _tree(two_envs["uv_cache"])
    assert uv_before, "the installs used the user's uv cache"
    plan = run_cli(["self", "uninstall", "--envs", "--dry-run", "--json"], env)
    assert plan.returncode == 0, plan.stderr
    doc = json.loads(plan.stdout)
    assert doc["total_bytes"] > 0 and doc["envs"] == [str(second)]
    assert {r["path"] for r in doc["remove"]} == {env["TFGPU_STATE_DIR"], env["TFGPU_CACHE_DIR"], env["TFGPU_DATA_DIR"]}
    assert second.is_dir() and Path(env["TFGPU_STATE_DIR"]).is_dir()
    done = run_cli(["self", "uninstall", "--envs", "-y"], env)
    assert done.returncode == 0, done.stderr
    assert "uninstalled" in done.stdout
    for key in ("TFGPU_STATE_DIR", "TFGPU_CACHE_DIR", "TFGPU_DATA_DIR"):
        assert not Path(env[key]).exists(), key
    assert not second.exists() and tmp_path.is_dir()
    assert rc.read_text() == "export EDITOR=vi\n"
    assert _tree(two_envs["uv_cache"]) == uv_before


def test_self_uninstall_keeps_envs_unless_asked(tmp_path: Path, two_envs: dict[str, Any]) -> None:
    env, first = two_envs["env"], two_envs["first"]
    # what scripts/install leaves: the tool's venv in the data dir and a link to its command
    tool = Path(env["TFGPU_DATA_DIR"]) / "tool" / "bin"
    tool.mkdir(parents=True)
    (tool / "tfgpu-install").write_text("#!/bin/sh\n")
    bindir = Path(env["HOME"]) / ".local" / "bin"
    bindir.mkdir(parents=True)
    (bindir / "tfgpu-install").symlink_to(tool / "tfgpu-install")
    (bindir / "other").symlink_to(tool / "tfgpu-install")  # not the link it made: kept
    done = run_cli(["self", "uninstall", "-y", "--json"], env)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert set(doc["kept_envs"]) == {str(first), str(two_envs["second"])} and doc["envs"] == []
    assert not Path(env["TFGPU_STATE_DIR"]).exists() and not Path(env["TFGPU_CACHE_DIR"]).exists()
    assert (first / "bin" / "python").exists() and two_envs["second"].is_dir()
    assert sorted(os.listdir(env["TFGPU_DATA_DIR"])) == ["envs"]
    assert sorted(os.listdir(bindir)) == ["other"]


def test_self_uninstall_refuses_a_dir_that_holds_home(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    env = {**tmp_env, "TFGPU_CACHE_DIR": str(tmp_path)}  # home is under it
    done = run_cli(["self", "uninstall", "-y"], env)
    assert done.returncode == 6 and "holds your home directory" in done.stderr
    assert Path(tmp_env["HOME"]).is_dir() and Path(tmp_env["TFGPU_STATE_DIR"]).is_dir()


def test_self_uninstall_with_shared_parents_removes_only_what_the_tool_wrote(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    """#39 item 8: with TFGPU_DATA_DIR=~/.local/share (and the state and cache dirs at the shared
    parents too), `self uninstall --envs -y` deleted other applications' data. Now only the
    entries the tool wrote there go (an env it made, its journals, snapshots, caches); the
    parents and everything else in them stay, pixi's ~/.cache/rattler and another app's envs/
    included. (The control, dirs of the tool's own: test_envs_list_remove_and_self_uninstall.)"""
    home = Path(tmp_env["HOME"])
    share, state, cache = home / ".local" / "share", home / ".local" / "state", home / ".cache"
    theirs = {share / "otherapp" / "data.db": b"irreplaceable", share / "applications" / "x.desktop": b"[Desktop]",
              share / "envs" / "theirs" / "bin" / "python": b"#!", state / "otherapp" / "history": b"h",
              cache / "rattler" / "cache" / "pkg.conda": b"pixi", cache / "pip" / "http" / "x": b"pip",
              cache / "downloads" / "holiday.jpg": b"jpg"}
    for path, data in theirs.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    env = cli_env({**tmp_env, "TFGPU_DATA_DIR": str(share), "TFGPU_STATE_DIR": str(state),
                   "TFGPU_CACHE_DIR": str(cache)}, knowledge, index.url)
    done = run_cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--json"], env)
    assert done.returncode == 0, done.stderr + done.stdout
    made = Path(json.loads(done.stdout)["env"])
    assert made.parent == share / "envs" and made.is_dir()
    assert (state / "envs").is_dir() and (state / "snapshots").is_dir()

    plan = json.loads(run_cli(["self", "uninstall", "--envs", "--dry-run", "--json"], env).stdout)
    listed = {r["path"] for r in plan["remove"]}
    assert not listed & {str(share), str(state), str(cache)}, listed
    gone = run_cli(["self", "uninstall", "--envs", "-y", "--json"], env)
    assert gone.returncode == 0, gone.stderr + gone.stdout
    for path, data in theirs.items():
        assert path.read_bytes() == data, path
    assert not made.exists() and not (state / "envs").exists() and not (state / "snapshots").exists()
    assert not (state / "last-env").exists() and not (cache / "knowledge").exists()
    assert sorted(os.listdir(share / "envs")) == ["theirs"]


def test_env_sizes_are_own_and_shared_and_remove_says_what_it_freed(two_envs: dict[str, Any]) -> None:
    """#43 item 4, on envs uv installed from one cache (it links the cache's files into each): each env's
    size is its own bytes plus what it shares, measured alone (the listing order used to decide which env
    a linked file was counted for), and `envs remove` says it freed the env's own bytes, not its apparent
    size (it said "5.2 GiB freed" for an env listed at 93 MiB)."""
    from tfgpu_install.env.disksize import tree_usage

    env, first, second = two_envs["env"], two_envs["first"], two_envs["second"]
    rows = {r["path"]: r for r in json.loads(run_cli(["envs", "--json"], env).stdout)["envs"]}
    for path in (first, second):
        row, alone = rows[str(path)], tree_usage(path)
        assert (row["own_bytes"], row["shared_bytes"]) == (alone.own, alone.shared)
        assert row["shared_bytes"] > 0 and row["size_bytes"] == row["own_bytes"] + row["shared_bytes"]
    human = run_cli(["envs"], {**env, "COLUMNS": "200"})
    assert "shared" in human.stdout
    planned = json.loads(run_cli(["envs", "remove", str(first), "--dry-run", "--json"], env).stdout)
    assert (planned["own_bytes"], planned["shared_bytes"]) == (rows[str(first)]["own_bytes"],
                                                              rows[str(first)]["shared_bytes"])
    done = run_cli(["envs", "remove", str(first), "-y", "--json"], env)
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["removed"] is True, done.stderr
    assert doc["freed_bytes"] == rows[str(first)]["own_bytes"] < rows[str(first)]["size_bytes"]
    # what it shared is still on disk: the other env's files (linked from the same cache) are whole
    assert tree_usage(second).total == rows[str(second)]["size_bytes"]
