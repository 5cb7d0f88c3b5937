"""One policy for env paths, checked before anything runs (exit 5 naming the character), and
each shell's block written in that shell's own quoting: sourced in real bash, zsh, fish, tcsh."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tfgpu_install.cli import main
from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.guard.envpath import check_env_path, env_path_problem
from tfgpu_install.steps.activation import csh_block, fish_block, sh_block
from tfgpu_install.steps.ldconfig import conf_name
from tfgpu_install.steps.shell_rc import WriteShellRc


@pytest.mark.parametrize("ch, named", [
    ("\n", "newline"), (":", "':'"), (";", "';'"), ("\x00", "NUL"), ("$", "'$'"), ("!", "'!'"),
    ("\x1b", "\\x1b"), ("\r", "carriage return"),
])
def test_refused_characters_are_named(ch: str, named: str) -> None:
    with pytest.raises(BadInputError) as info:
        check_env_path(f"/tmp/envs/a{ch}b")
    assert info.value.code == ExitCode.BAD_INPUT and named in info.value.message, info.value.message


@pytest.mark.parametrize("ch", ["\n", ":", ";"])
def test_the_cli_refuses_before_anything_runs(tmp_path: Path, ch: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import make_tmp_env

    environ = make_tmp_env(tmp_path)
    target = tmp_path / f"env{ch}x"
    code = main(["install", "--env", str(target), "--allow-cpu", "--dry-run"], environ=environ)
    assert code == ExitCode.BAD_INPUT, capsys.readouterr()
    assert not target.exists() and not (tmp_path / "env").exists()
    assert "cannot be used" in capsys.readouterr().err


def test_a_250_character_env_name_is_bad_input_not_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import make_tmp_env

    code = main(["install", "--env", str(tmp_path / ("e" * 250)), "--allow-cpu", "--dry-run"],
                environ=make_tmp_env(tmp_path))
    assert code == ExitCode.BAD_INPUT and "bytes long" in capsys.readouterr().err


def test_quotes_backslashes_and_spaces_are_allowed() -> None:
    assert env_path_problem("/home/u/it's a \"tf\" \\env` *") is None


HOSTILE = "tf 'q' end\\' (touch PWNED) ' \"dq\" back\\slash `touch PWNED` (x) * {a,b} ~u &"


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    env = tmp_path / HOSTILE
    lib = env / "lib" / "nvidia"
    (env / "bin").mkdir(parents=True)
    lib.mkdir(parents=True)
    return env, lib


def _run(argv: list[str], cwd: Path) -> str:
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(cwd), "LD_LIBRARY_PATH": "/old"})
    assert out.returncode == 0, (argv, out.stdout, out.stderr)
    return out.stdout


SHELLS = {
    "bash": (sh_block, lambda f: ["bash", "--norc", "-c", '. "$0"; printf "%s\\n" "$LD_LIBRARY_PATH"', f]),
    "zsh": (sh_block, lambda f: ["zsh", "-f", "-c", '. "$0"; printf "%s\\n" "$LD_LIBRARY_PATH"', f]),
    "fish": (fish_block, lambda f: ["fish", "--no-config", "-c", f"source {f}; printf '%s\\n' \"$LD_LIBRARY_PATH\""]),
    "tcsh": (csh_block, lambda f: ["tcsh", "-f", "-c", f'source {f}; printenv LD_LIBRARY_PATH']),
}


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_each_shells_block_carries_a_hostile_path_exactly(tmp_path: Path, shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} not installed")
    block, argv = SHELLS[shell]
    env, lib = _tree(tmp_path)
    script = tmp_path / "block"
    script.write_text(block([lib], []))
    out = _run(argv(str(script)), tmp_path)
    assert out.splitlines()[-1] == f"{lib}:/old"
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("rc_name, shell", [(".bashrc", "bash"), (".zshrc", "zsh"), ("config.fish", "fish"),
                                            (".tcshrc", "tcsh"), (".cshrc", "tcsh")])
def test_the_rc_block_is_in_the_rc_files_own_shell(tmp_path: Path, rc_name: str, shell: str) -> None:
    """`--shell-rc ~/.tcshrc` gets csh syntax; each block sources the env's activate for that shell."""
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} not installed")
    env, _ = _tree(tmp_path)
    for name in ("activate", "activate.fish", "activate.csh"):
        (env / "bin" / name).write_text(f"echo sourced-{name}\n")
    rc = tmp_path / rc_name
    rc.write_text(WriteShellRc(rc, env).body())
    cmd = {"bash": ["bash", "--norc", "-c", '. "$0"', str(rc)], "zsh": ["zsh", "-f", "-c", '. "$0"', str(rc)],
           "fish": ["fish", "--no-config", "-c", f"source {rc}"], "tcsh": ["tcsh", "-f", "-c", f"source {rc}"]}[shell]
    want = {"fish": "activate.fish", "tcsh": "activate.csh"}.get(shell, "activate")
    assert _run(cmd, tmp_path).strip() == f"sourced-{want}"
    assert not (tmp_path / "PWNED").exists()


def test_ld_conf_names_are_unique_per_env(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "tf", tmp_path / "b" / "tf"
    assert conf_name(a) != conf_name(b) and conf_name(a) == conf_name(a)
    assert conf_name(a).startswith("tfgpu-tf-") and conf_name(a).endswith(".conf")
