"""The Context's directories: XDG defaults, TFGPU_* overrides, and no other source."""

from __future__ import annotations

from pathlib import Path

from tfgpu_install.context import build_context


def test_xdg_defaults_under_home() -> None:
    ctx = build_context({"HOME": "/home/u", "PATH": "/usr/bin"})
    assert ctx.state_dir == Path("/home/u/.local/state/tfgpu-install")
    assert ctx.cache_dir == Path("/home/u/.cache/tfgpu-install")
    assert ctx.data_dir == Path("/home/u/.local/share/tfgpu-install")
    assert ctx.root == Path("/")


def test_xdg_variables_and_tfgpu_overrides() -> None:
    ctx = build_context({
        "HOME": "/home/u", "XDG_STATE_HOME": "/x/state", "XDG_CACHE_HOME": "relative/ignored",
        "TFGPU_DATA_DIR": "/d", "TFGPU_OVERRIDE_DRIVER": "535.104.05",
    })
    assert ctx.state_dir == Path("/x/state/tfgpu-install")
    assert ctx.cache_dir == Path("/home/u/.cache/tfgpu-install")  # XDG says: relative paths are invalid
    assert ctx.data_dir == Path("/d")
    assert ctx.overrides == {"driver": "535.104.05"}
    assert ctx.sys_path("/proc/version") == Path("/proc/version")


def test_root_prefix_maps_system_paths(tmp_path: Path) -> None:
    ctx = build_context({"HOME": str(tmp_path), "TFGPU_ROOT": str(tmp_path / "root")})
    assert ctx.sys_path("/proc/driver/nvidia/version") == tmp_path / "root" / "proc/driver/nvidia/version"
