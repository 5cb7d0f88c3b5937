"""The process entry (`tfgpu-install`, `python -m tfgpu_install`). Tests call
tfgpu_install.cli.main in-process, without this."""

from __future__ import annotations

import sys


def run() -> None:
    import os

    if "_ARGCOMPLETE" in os.environ:  # a shell's completion request (tfgpu_install/completion.py)
        from tfgpu_install.cli import complete

        sys.exit(complete(os.environ))
    from tfgpu_install.cli import main

    sys.exit(main())
