"""An env's size split by inode into its own bytes (every link inside it: removing it frees them) and
shared ones (linked from outside too: uv's cache, another env), each tree measured alone (#43 item 4:
`envs` counted a file uv links into every env for whichever env it listed first, and `envs remove` said
"5.2 GiB freed" for an env listed at 93 MiB). Real files and hard links in a temp dir."""

from __future__ import annotations

import os
from pathlib import Path

from tfgpu_install.env.disksize import disk_usage, tree_usage


def _file(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))
    return path


def _blocks(path: Path) -> int:
    return os.lstat(path).st_blocks * 512


def test_own_and_shared_by_link_count(tmp_path: Path) -> None:
    cache = _file(tmp_path / "uv-cache" / "numpy" / "core.so", 256 * 1024)
    a, b = tmp_path / "env-a", tmp_path / "env-b"
    for env in (a, b):  # uv links the cache's file into each env
        (env / "lib").mkdir(parents=True)
        os.link(cache, env / "lib" / "core.so")
    own_a = _file(a / "lib" / "mine.py", 64 * 1024)
    os.link(own_a, a / "lib" / "mine-again.py")  # linked twice inside the env: still its own
    a_usage = tree_usage(a)
    assert a_usage.shared == _blocks(cache)
    assert a_usage.own == _blocks(own_a) + sum(_blocks(d) for d in (a, a / "lib"))
    assert tree_usage(b).shared == _blocks(cache) and tree_usage(b).own == _blocks(b) + _blocks(b / "lib")
    assert tree_usage(tmp_path / "gone").total == 0


def test_an_envs_figures_do_not_depend_on_which_env_was_measured_first(tmp_path: Path) -> None:
    """The old way (one `seen` set across envs, disk_usage): the shared file went to the first env only."""
    cache = _file(tmp_path / "cache" / "big.so", 512 * 1024)
    envs = [tmp_path / "one", tmp_path / "two"]
    for env in envs:
        env.mkdir()
        os.link(cache, env / "big.so")
    forward = [tree_usage(e) for e in envs]
    backward = list(reversed([tree_usage(e) for e in reversed(envs)]))
    assert forward == backward and forward[0].shared == forward[1].shared == _blocks(cache)
    seen: set[tuple[int, int]] = set()
    old = [disk_usage(e, seen) for e in envs]
    assert old[0] != old[1]  # what `envs` showed before: the order decided


def test_removing_the_tree_frees_its_own_bytes_and_leaves_the_shared(tmp_path: Path) -> None:
    cache = _file(tmp_path / "cache" / "lib.so", 128 * 1024)
    env = tmp_path / "env"
    env.mkdir()
    os.link(cache, env / "lib.so")
    _file(env / "own.bin", 96 * 1024)
    before = tree_usage(env)
    import shutil

    shutil.rmtree(env)
    assert cache.exists() and os.lstat(cache).st_nlink == 1  # the shared inode stays, held by the cache
    assert before.own > 0 and before.shared == _blocks(cache)
