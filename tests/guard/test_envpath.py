"""One policy for env paths, checked before anything runs (exit 5 naming the character), and
each shell's block written in that shell's own quoting: sourced in real bash, zsh, fish, tcsh."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.promised import require_tool
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


def test_single_quotes_and_spaces_are_allowed() -> None:
    # (This test allowed backslashes, double quotes and backquotes too: #39 item 21 found that venv's
    # and uv's own activate scripts cannot carry them; see the next tests.)
    assert env_path_problem("/home/u/it's a tf env (x) & y *") is None


@pytest.mark.parametrize("ch, named", [("\\", "fish"), ('"', "unquoted"), ("`", "unquoted")])
def test_what_the_shells_own_activation_cannot_carry_is_refused(ch: str, named: str) -> None:
    with pytest.raises(BadInputError) as info:
        check_env_path(f"/tmp/envs/x{ch}y")
    assert info.value.code == ExitCode.BAD_INPUT and named in info.value.message, info.value.message


# Characters a path can hold, the ones the policy refuses among them: every one it lets through
# must activate a real venv (stdlib's and uv's activate scripts) in each real shell.
CANDIDATES = [" ", "'", '"', "\\", "\\\\", "\\'", "`", "&", "|", "(", ")", "<", ">", "*", "?", "[", "]", "{", "}",
              "#", "~", "%", "^", "=", "@", "é", ","]
ACTIVATE = {
    "bash": ["bash", "--norc", "-c", '. "$0/bin/activate"; printf "%s\\n" "$VIRTUAL_ENV"; command -v python'],
    "zsh": ["zsh", "-f", "-c", '. "$0/bin/activate"; printf "%s\\n" "$VIRTUAL_ENV"; command -v python'],
    "dash": ["dash", "-c", '. "$0/bin/activate"; printf "%s\\n" "$VIRTUAL_ENV"; command -v python'],
    "fish": ["fish", "--no-config", "-c", 'source "$argv[1]/bin/activate.fish"; printf "%s\\n" "$VIRTUAL_ENV"; '
             "command -v python"],
    "tcsh": ["tcsh", "-f", "-c", 'source "$1/bin/activate.csh"; printf "%s\\n" "$VIRTUAL_ENV"; which python'],
}


def test_every_path_the_policy_lets_through_activates_in_every_shell(tmp_path: Path) -> None:
    """#39 item 21: `x\\\\y` was built and called done, yet venv's and uv's activate.fish set
    VIRTUAL_ENV and PATH with one backslash, so the env never activated in fish. Each candidate
    character in a real venv (stdlib's and uv's): what the policy lets through activates in every
    shell; the control: each character it refuses breaks a real activation somewhere."""
    import sys

    shells = [name for name in ACTIVATE if shutil.which(name)]
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    broken: dict[str, list[str]] = {}
    for maker in ("venv", "uv"):
        for i, ch in enumerate(CANDIDATES):
            env = tmp_path / f"{maker}{i}" / f"a{ch}b"
            env.parent.mkdir()
            argv = ([sys.executable, "-m", "venv", "--without-pip", str(env)] if maker == "venv"
                    else [uv, "venv", "-q", "--python", sys.executable, str(env)])
            subprocess.run(argv, check=True, capture_output=True, timeout=120)
            for name in shells:
                cmd = ACTIVATE[name]
                if name == "tcsh":
                    cmd = [*cmd[:-1], cmd[-1].replace("$1", "$argv[1]")]
                out = subprocess.run([*cmd, str(env)], capture_output=True, text=True, timeout=60,
                                     env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"})
                if out.stdout.splitlines()[-2:] != [str(env), str(env / "bin" / "python")]:
                    broken.setdefault(ch, []).append(f"{maker}/{name}")
    allowed_but_broken = {ch: how for ch, how in broken.items() if env_path_problem(f"/x/a{ch}b") is None}
    assert not allowed_but_broken, allowed_but_broken
    # The characters the policy refuses for the activate scripts. A double quote or backquote breaks the
    # stdlib venv's scripts where they paste the path between double quotes (CPython before the fix of
    # CVE-2024-9287, e.g. 3.11.7); a Python with the fix (Debian 12's 3.11.2-6+deb12u6) quotes it, so there
    # only the backslash breaks (fish): users have both, the policy refuses all three (#43 item 10: this
    # control failed on a fresh Debian machine, whose own Python is the fixed one).
    pasted = 'VIRTUAL_ENV="' in (tmp_path / "venv0" / "a b" / "bin" / "activate").read_text()
    for ch in ("\\", '"', "`") if pasted else ("\\",):
        assert any(ch in cand for cand in broken), (ch, broken)


def test_the_cli_refuses_a_backslash_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import make_tmp_env

    target = tmp_path / "x\\y"
    code = main(["install", "--env", str(target), "--allow-cpu", "--dry-run"], environ=make_tmp_env(tmp_path))
    assert code == ExitCode.BAD_INPUT and "fish" in capsys.readouterr().err
    assert not target.exists()


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
    require_tool(shell, "the activate script is sourced in that shell")
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
    require_tool(shell, "the activate script is sourced in that shell")
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
