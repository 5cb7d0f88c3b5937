"""The user's shell rc under `--shell-rc`, attacked through the real step and the real executor
(journal, pre-state backups, rollback): hand-broken markers, symlinked dotfiles, another owner,
CRLF, no final newline, an existing block, two envs in one rc, latin-1 bytes, a directory.

The promise: install + rollback gives the rc back byte for byte (content, link, owner, mode),
a second install changes nothing, and a file we cannot edit safely is refused unchanged.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import make_tmp_env
from tests.support.faults import fault_env
from tfgpu_install.context import Context, build_context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.errors import BadInputError, EnvironmentProblem, ExitCode
from tfgpu_install.files import MarkerError, render_block_bytes, scan_blocks
from tfgpu_install.steps.shell_rc import WriteShellRc, env_block_id, validate_shell_rc

NOBODY = 65534


def _install(ctx: Context, rc: Path, env: Path) -> None:
    Executor(ctx, env).run([WriteShellRc(rc, env)])


def _rollback(ctx: Context, rc: Path, env: Path) -> None:
    Executor(ctx, env).rollback([WriteShellRc(rc, env)])


def _identity(path: Path) -> tuple[object, ...]:
    """What must survive install + rollback: the link (if any), the file's bytes, owner, mode."""
    link = os.readlink(path) if path.is_symlink() else None
    st_ = os.stat(path)
    return link, Path(path).read_bytes(), st_.st_uid, st_.st_gid, stat.S_IMODE(st_.st_mode)


def _our_block(rc: Path, env: Path) -> bytes:
    data = rc.read_bytes()
    spans = [s for s in scan_blocks(data) if s.tag == env_block_id(env)]
    assert len(spans) == 1, data
    return data[spans[0].begin:spans[0].end]


@pytest.fixture
def env(tmp_path: Path) -> Path:
    return tmp_path / "data" / "tf-env"


@pytest.fixture
def rc(tmp_path: Path) -> Path:
    return tmp_path / "home" / ".bashrc"


def test_block_markers_carry_the_env_id(ctx: Context, rc: Path, env: Path) -> None:
    rc.write_bytes(b"export EDITOR=vi\n")
    _install(ctx, rc, env)
    block = _our_block(rc, env)
    assert block.startswith(f"# >>> tfgpu-install {env_block_id(env)} >>>\n".encode())
    assert block.endswith(f"# <<< tfgpu-install {env_block_id(env)} <<<\n".encode())
    assert env_block_id(env).startswith("tf-env-") and env_block_id(env) != env_block_id(env.parent / "other")


def test_begin_marker_without_end_is_refused_and_nothing_changes(ctx: Context, rc: Path, env: Path) -> None:
    tag = env_block_id(env)
    rc.write_bytes(f"alias ll='ls -l'\n# >>> tfgpu-install {tag} >>>\nexport KEEP=1\nalias la='ls -a'\n".encode())
    before = _identity(rc)
    with pytest.raises(BadInputError) as err:
        validate_shell_rc(rc, env)
    assert err.value.code == ExitCode.BAD_INPUT and "line 2" in err.value.message
    assert "without its end marker" in err.value.message and err.value.hint
    assert not WriteShellRc(rc, env).check(ctx)
    with pytest.raises(BadInputError):
        _install(ctx, rc, env)
    assert _identity(rc) == before
    # Another env's broken block is as unclear: refused too, unchanged.
    rc.write_bytes(b"x=1\n# <<< tfgpu-install other-0123456789ab <<<\ny=2\n")
    before = _identity(rc)
    with pytest.raises(BadInputError, match="without its begin marker"):
        _install(ctx, rc, env)
    assert _identity(rc) == before


def test_markers_broken_after_install_make_rollback_refuse_unchanged(ctx: Context, rc: Path, env: Path) -> None:
    rc.write_bytes(b"export A=1\n")
    _install(ctx, rc, env)
    end = f"# <<< tfgpu-install {env_block_id(env)} <<<\n".encode()
    rc.write_bytes(rc.read_bytes().replace(end, b"") + b"export USER_LINE=1\n")  # hand-edited
    broken = rc.read_bytes()
    with pytest.raises(BadInputError) as err:
        _rollback(ctx, rc, env)
    assert err.value.code == ExitCode.BAD_INPUT
    assert rc.read_bytes() == broken  # no user line lost
    rc.write_bytes(broken.replace(b"export USER_LINE=1\n", end + b"export USER_LINE=1\n"))  # the fix
    _rollback(ctx, rc, env)  # resumes
    assert rc.read_bytes() == b"export A=1\nexport USER_LINE=1\n"


def test_symlinked_rc_stays_a_link_and_its_target_comes_back(ctx: Context, tmp_path: Path, rc: Path,
                                                            env: Path) -> None:
    dotfiles = tmp_path / "home" / "dotfiles"
    dotfiles.mkdir(parents=True)
    (dotfiles / "bashrc").write_bytes(b"# my dotfiles\nexport PAGER=less\n")
    rc.symlink_to("dotfiles/bashrc")  # relative, as dotfiles managers make them
    before = _identity(rc)
    _install(ctx, rc, env)
    assert rc.is_symlink() and os.readlink(rc) == "dotfiles/bashrc"
    assert b"tfgpu-install" in (dotfiles / "bashrc").read_bytes()
    assert WriteShellRc(rc, env).check(ctx)
    _rollback(ctx, rc, env)
    assert _identity(rc) == before


def test_killed_mid_edit_of_a_symlinked_rc_rolls_back_the_target(tmp_path: Path, rc: Path, env: Path) -> None:
    """The executor's pre-state covers the link's target too (touches() names it)."""
    (tmp_path / "home" / "dotfiles").mkdir(parents=True)
    target = tmp_path / "home" / "dotfiles" / "bashrc"
    target.write_bytes(b"export PAGER=less")
    rc.symlink_to(target)
    before = _identity(rc)
    code = subprocess.run(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from tfgpu_install.context import build_context;"
         "from tfgpu_install.engine.executor import Executor; from tfgpu_install.steps.shell_rc import WriteShellRc;"
         f"rc, env = Path({str(rc)!r}), Path({str(env)!r});"
         "Executor(build_context(dict(__import__('os').environ)), env).run([WriteShellRc(rc, env)])"],
        env=fault_env({**make_tmp_env(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
                      kill_at="shell-rc.write:after"),
    ).returncode
    assert code == -9 and b"tfgpu-install" in target.read_bytes()
    _rollback(build_context(make_tmp_env(tmp_path)), rc, env)
    assert _identity(rc) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_owner_and_mode_are_kept(ctx: Context, rc: Path, env: Path) -> None:
    rc.write_bytes(b"umask 027\n")
    os.chown(rc, NOBODY, NOBODY)
    rc.chmod(0o640)
    before = _identity(rc)
    _install(ctx, rc, env)
    st_ = rc.stat()
    assert (st_.st_uid, st_.st_gid, stat.S_IMODE(st_.st_mode)) == (NOBODY, NOBODY, 0o640)
    _rollback(ctx, rc, env)
    assert _identity(rc) == before


def test_crlf_file_gets_a_crlf_block(ctx: Context, rc: Path, env: Path) -> None:
    rc.write_bytes(b"export A=1\r\nexport B=2\r\n")
    _install(ctx, rc, env)
    data = rc.read_bytes()
    assert data.count(b"\n") == data.count(b"\r\n") and b"tfgpu-install" in data
    assert WriteShellRc(rc, env).check(ctx)
    _rollback(ctx, rc, env)
    assert rc.read_bytes() == b"export A=1\r\nexport B=2\r\n"


@pytest.mark.parametrize("content", [b"export EDITOR=vi", b"a=1\r\nb=2", b"", b"\n", b"only\r"])
def test_no_final_newline(ctx: Context, rc: Path, env: Path, content: bytes) -> None:
    rc.write_bytes(content)
    _install(ctx, rc, env)
    assert content in rc.read_bytes() and rc.read_bytes().count(b">>> tfgpu-install") == 1
    _install(ctx, rc, env)  # idempotent
    assert rc.read_bytes().count(b">>> tfgpu-install") == 1
    _rollback(ctx, rc, env)
    assert rc.read_bytes() == content


def test_existing_block_of_this_env_is_replaced_once_and_restored(ctx: Context, rc: Path, env: Path) -> None:
    tag = env_block_id(env)
    old_block = f"# >>> tfgpu-install {tag} >>>\n. /somewhere/else/bin/activate  # a user's tweak\n" \
                f"# <<< tfgpu-install {tag} <<<\n".encode()
    original = b"export A=1\n" + old_block + b"export B=2\n"
    rc.write_bytes(original)
    _install(ctx, rc, env)
    data = rc.read_bytes()
    assert data.count(b">>> tfgpu-install") == 1 and b"/somewhere/else" not in data
    assert data.startswith(b"export A=1\n# >>> tfgpu-install") and data.endswith(b"<<<\nexport B=2\n")
    _rollback(ctx, rc, env)
    assert rc.read_bytes() == original


def test_unmarked_block_of_an_earlier_version(ctx: Context, rc: Path, env: Path, tmp_path: Path) -> None:
    """Decided: a block without an id belongs to this env when it is exactly what an earlier
    version wrote for this env; it is then adopted (given our id) and rollback puts it back.
    Any other un-id'd block (another env's, or edited) is left alone."""
    legacy = render_block_bytes(WriteShellRc(rc, env).body())
    other = render_block_bytes(WriteShellRc(rc, tmp_path / "other-env").body())
    original = b"export A=1\n" + other + legacy
    rc.write_bytes(original)
    _install(ctx, rc, env)
    data = rc.read_bytes()
    assert data.startswith(b"export A=1\n" + other) and data.count(b">>> tfgpu-install >>>") == 1
    assert _our_block(rc, env)
    _rollback(ctx, rc, env)
    assert rc.read_bytes() == original


def test_undo_record_of_an_earlier_version_removes_only_this_envs_block(ctx: Context, rc: Path, env: Path,
                                                                         tmp_path: Path) -> None:
    """A journal written by an earlier version ({"existed": ...}, blocks without ids): rollback
    removes this env's block, never another env's un-id'd one."""
    other = render_block_bytes(WriteShellRc(rc, tmp_path / "other-env").body())
    rc.write_bytes(b"export A=1\n" + other + render_block_bytes(WriteShellRc(rc, env).body()))
    WriteShellRc(rc, env).undo(ctx, {"existed": True})
    assert rc.read_bytes() == b"export A=1\n" + other


@pytest.mark.parametrize("content", [b"export A=1\n", b"export A=1", b"a=1\r\nb=2"])
@pytest.mark.parametrize("order", ["first-first", "last-first"])
def test_two_envs_in_one_rc(ctx: Context, tmp_path: Path, rc: Path, content: bytes, order: str) -> None:
    a, b = tmp_path / "envs" / "a", tmp_path / "envs" / "b"
    rc.write_bytes(content)
    _install(ctx, rc, a)
    _install(ctx, rc, b)
    b_block = _our_block(rc, b)
    first, second = (a, b) if order == "first-first" else (b, a)
    kept = _our_block(rc, second)
    _rollback(ctx, rc, first)
    assert env_block_id(first).encode() not in rc.read_bytes()
    # The other env's block: same lines (its begin marker may take over the " +nl" note).
    assert _our_block(rc, second).replace(b" +nl", b"") == kept.replace(b" +nl", b"")
    assert WriteShellRc(rc, second).check(ctx)
    _rollback(ctx, rc, second)
    assert rc.read_bytes() == content
    assert b_block


def test_latin1_rc_is_edited_as_bytes(ctx: Context, rc: Path, env: Path) -> None:
    original = b"# Jos\xe9's rc \xff\xfe\nexport NAME='Fran\xe7ois'\n\x00binary\x80\n"
    rc.write_bytes(original)
    validate_shell_rc(rc, env)
    _install(ctx, rc, env)
    assert rc.read_bytes().startswith(original)
    _rollback(ctx, rc, env)
    assert rc.read_bytes() == original


def test_rc_that_is_a_directory_or_not_a_file_is_refused(ctx: Context, tmp_path: Path, env: Path) -> None:
    d = tmp_path / "home" / "rc-dir"
    d.mkdir(parents=True)
    (tmp_path / "home" / "shared").write_bytes(b"x=1\n")
    os.link(tmp_path / "home" / "shared", tmp_path / "home" / "linked")
    for bad, words in [(d, "is a directory"), (tmp_path / "home" / "fifo", "not a regular file"),
                       (tmp_path / "home" / "dangling", "does not exist"),
                       (tmp_path / "home" / "linked", "has 2 hard links")]:
        if bad.name == "fifo":
            os.mkfifo(bad)
        elif bad.name == "dangling":
            bad.symlink_to(tmp_path / "home" / "nowhere")
        with pytest.raises(EnvironmentProblem, match=words) as err:
            validate_shell_rc(bad, env)
        assert err.value.code == ExitCode.ENVIRONMENT and err.value.ref == "shell-rc-unusable"
        with pytest.raises(EnvironmentProblem):
            _install(ctx, bad, env)
    assert d.is_dir() and list(d.iterdir()) == [] and not (tmp_path / "home" / "nowhere").exists()
    linked = tmp_path / "home" / "linked"
    assert linked.read_bytes() == b"x=1\n" and os.stat(linked).st_nlink == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another user needs root")
def test_unreadable_rc_is_refused(env: Path) -> None:
    """As a user who owns an rc it cannot read (mode 000): exit 6 with the cause, not a crash."""
    home = Path(tempfile.mkdtemp(prefix="tfgpu-rc-"))
    try:
        home.chmod(0o755)
        os.chown(home, NOBODY, NOBODY)  # their home takes new files: only the rc's mode is in the way
        rc = home / ".bashrc"
        rc.write_bytes(b"secret\n")
        os.chown(rc, NOBODY, NOBODY)
        rc.chmod(0)
        # tempfile before the uid changes: the interpreter's standard library may be unreadable to
        # nobody (pyenv's under /root), and read_rc imports it where it asks whether a file can be made
        script = ("import os, sys, tempfile; from pathlib import Path; from tfgpu_install.steps.shell_rc import "
                  "validate_shell_rc;"
                  "from tfgpu_install.errors import TfgpuError\nos.setgid(65534); os.setuid(65534)\n"
                  f"try:\n    validate_shell_rc(Path({str(rc)!r}), Path({str(env)!r}))\n"
                  "except TfgpuError as e:\n    print(int(e.code), e.message); sys.exit(0)\nsys.exit(3)")
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                             env={"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("6 cannot read") and "Permission denied" in out.stdout
    finally:
        subprocess.run(["rm", "-rf", str(home)], check=True)


# --- the property: install + rollback is the identity; install twice is idempotent -------------

_TAG_A = "tf-env-aaaaaaaaaaaa"  # stand-in ids for other envs' blocks in generated files


def _other_block(tag: str, crlf: bool) -> bytes:
    nl = b"\r\n" if crlf else b"\n"
    return nl.join([f"# >>> tfgpu-install {tag} >>>".encode(), b". /other/bin/activate",
                    f"# <<< tfgpu-install {tag} <<<".encode()]) + nl


_chunks = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"\n", b"\r\n", b"\r", b"export A=1\n", b"export B=2\r\n", b"caf\xe9\n", b"\xff\xfe\x00"]),
    st.builds(_other_block, st.sampled_from([_TAG_A, "x-0123456789ab", ""]), st.booleans()),
    st.sampled_from([b"# >>> tfgpu-install >>>\n", b"# <<< tfgpu-install x-0123456789ab <<<\n"]),  # strays
)
rc_contents = st.lists(_chunks, max_size=8).map(b"".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=rc_contents, symlinked=st.booleans(), own_block=st.sampled_from([None, "same", "legacy"]),
       mode=st.sampled_from([0o600, 0o640, 0o644, 0o664]), nobody=st.booleans())
def test_install_then_rollback_is_the_identity(content: bytes, symlinked: bool, own_block: Optional[str],
                                               mode: int, nobody: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        ctx = build_context(make_tmp_env(base))
        env = base / "data" / "tf-env"
        rc = base / "home" / ".bashrc"
        target = base / "home" / "dotfiles" / "bashrc" if symlinked else rc
        target.parent.mkdir(parents=True, exist_ok=True)
        if own_block == "same":
            content += render_block_bytes(". /old/bin/activate\n", env_block_id(env))
        elif own_block == "legacy":
            content = render_block_bytes(WriteShellRc(rc, env).body()) + content
        target.write_bytes(content)
        target.chmod(mode)
        if nobody and os.geteuid() == 0:
            os.chown(target, NOBODY, NOBODY)
        if symlinked:
            rc.symlink_to(target)
        before = _identity(rc)
        try:
            scan_blocks(content)
        except MarkerError:
            with pytest.raises(BadInputError):
                _install(ctx, rc, env)
            assert _identity(rc) == before
            return
        _install(ctx, rc, env)
        once = _identity(rc)
        assert WriteShellRc(rc, env).check(ctx)
        _install(ctx, rc, env)
        assert _identity(rc) == once
        _rollback(ctx, rc, env)
        assert _identity(rc) == before
        # Two envs in this rc, undone in install order: each rollback leaves the other's lines.
        other = base / "data" / "other-env"
        _install(ctx, rc, env)
        _install(ctx, rc, other)
        kept = _our_block(rc, other).replace(b" +nl", b"")
        _rollback(ctx, rc, env)
        assert _our_block(rc, other).replace(b" +nl", b"") == kept
        _rollback(ctx, rc, other)
        assert _identity(rc) == before
