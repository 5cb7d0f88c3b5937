"""Small real steps for executor tests: they write, edit and remove real files.

They follow the Step contract exactly as the real steps do (check/apply/undo/touches,
a checkpoint in the middle of apply), so the executor's journal, resume, rollback and
kill handling are exercised on the file system, not on mocks.

Run as a script it is a tiny CLI (`python engine.py ROOT install|rollback [--dry-run]`)
so fault tests can kill a real process at each checkpoint.
"""

from __future__ import annotations

import base64
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: make the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tfgpu_install.context import Context
from tfgpu_install.files import atomic_write, read_block, remove_block, remove_file, set_block
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint


class CreateTree(Step):
    """Creates a directory with a few files (like a venv): undo removes it if it made it."""

    def __init__(self, step_id: str, root: Path, files: int = 3) -> None:
        self.id = step_id
        self.root = Path(root)
        self.files = files

    def describe(self) -> str:
        return f"create {self.root}"

    def _names(self) -> list[Path]:
        return [self.root / f"f{i}.txt" for i in range(self.files)]

    def check(self, ctx: Context) -> bool:
        return all(p.is_file() and p.read_text() == f"{p.name}\n" for p in self._names())

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.root)]

    def apply(self, ctx: Context) -> UndoRecord:
        created = not self.root.exists()
        self.root.mkdir(parents=True, exist_ok=True)
        for i, p in enumerate(self._names()):
            atomic_write(p, f"{p.name}\n")
            if i == 0:
                checkpoint(ctx, self.id, "middle")
        return {"created": created}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        import shutil

        if record.get("created") and self.root.exists():
            shutil.rmtree(self.root)


class WriteFile(Step):
    """Writes a whole file; undo puts back the old bytes (or removes it)."""

    def __init__(self, step_id: str, path: Path, content: str) -> None:
        self.id = step_id
        self.path = Path(path)
        self.content = content

    def describe(self) -> str:
        return f"write {self.path}"

    def check(self, ctx: Context) -> bool:
        return self.path.is_file() and self.path.read_text() == self.content

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.path)]

    def apply(self, ctx: Context) -> UndoRecord:
        old = self.path.read_bytes() if self.path.is_file() else None
        # Half the content first, so a kill in the middle leaves a changed file behind.
        atomic_write(self.path, self.content[: len(self.content) // 2])
        checkpoint(ctx, self.id, "middle")
        atomic_write(self.path, self.content)
        return {"old": base64.b64encode(old).decode() if old is not None else None}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        if record.get("partial"):
            return  # the executor restored the file from its pre-state backup
        if record.get("old") is None:
            remove_file(self.path)
        else:
            atomic_write(self.path, base64.b64decode(record["old"]))


class EditBlock(Step):
    """Keeps a marked block in someone else's file; undo removes only the block."""

    def __init__(self, step_id: str, path: Path, body: str) -> None:
        self.id = step_id
        self.path = Path(path)
        self.body = body

    def describe(self) -> str:
        return f"marked block in {self.path}"

    def _text(self) -> str:
        return self.path.read_text() if self.path.is_file() else ""

    def check(self, ctx: Context) -> bool:
        return read_block(self._text()) == read_block(set_block("", self.body))

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.path)]

    def apply(self, ctx: Context) -> UndoRecord:
        existed = self.path.is_file()
        checkpoint(ctx, self.id, "middle")
        atomic_write(self.path, set_block(self._text(), self.body))
        return {"existed": existed}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        if not self.path.is_file():
            return
        text = remove_block(self._text())
        if not text and not record.get("existed", True):
            remove_file(self.path)
        else:
            atomic_write(self.path, text)


class CountingCheck(Step):
    """A step that records each apply in a file (to see re-runs), fingerprinted like verify."""

    fingerprinted = True

    def __init__(self, step_id: str, log: Path) -> None:
        self.id = step_id
        self.log = Path(log)

    def describe(self) -> str:
        return "verify (counted)"

    def check(self, ctx: Context) -> bool:
        return False  # like a real verify: only the fingerprint lets it skip

    def apply(self, ctx: Context) -> UndoRecord:
        with open(self.log, "a") as fh:
            fh.write("ran\n")
        return {"ok": True}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        return None


def demo_steps(root: Path) -> list[Step]:
    """An install-shaped chain over a temp root: env dir, a file, an rc edit, a system file."""
    return [
        CreateTree("env.create", root / "env"),
        WriteFile("packages.install", root / "env" / "pkgs.txt", "tensorflow==2.15.1\nnumpy==1.26.4\n"),
        EditBlock("activation.write", root / "home" / ".bashrc", "export LD_LIBRARY_PATH=/x\n"),
        WriteFile("ldconfig.system", root / "etc" / "ld.so.conf.d" / "tfgpu.conf", "/x/lib\n"),
    ]


def _main(argv: list[str]) -> int:
    """ROOT install|rollback [--dry-run]: run demo_steps through the real executor."""
    import os

    from tfgpu_install.context import build_context
    from tfgpu_install.engine.executor import Executor
    from tfgpu_install.errors import TfgpuError

    root = Path(argv[0])
    ctx = build_context(dict(os.environ))
    ex = Executor(ctx, root / "env", plan={"demo": True})
    try:
        with ex.lock(wait="--wait" in argv):
            if argv[1] == "install":
                rep = ex.run(demo_steps(root), dry_run="--dry-run" in argv)
            else:
                rep = ex.rollback(demo_steps(root))
    except TfgpuError as err:
        sys.stderr.write(f"{err.ref}: {err.message}\nfix: {err.hint}\n")
        return int(err.code)
    for s in rep.steps:
        print(s.id, s.status)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
