"""The process entry (`tfgpu-install`, `python -m tfgpu_install`). Tests call
tfgpu_install.cli.main in-process, without this."""

from __future__ import annotations

import sys


def run() -> None:
    from tfgpu_install.cli import main

    sys.exit(main())
