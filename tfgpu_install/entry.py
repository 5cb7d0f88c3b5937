"""The process entry (`tfgpu-install`, `python -m tfgpu_install`): start-up that belongs to a real
run only, then the command line. Tests call tfgpu_install.cli.main in-process, without this."""

from __future__ import annotations

import os
import sys


def run() -> None:
    from tfgpu_install import codecache
    from tfgpu_install.dirs import home_of, user_dirs

    # before the first model class is defined (tfgpu_install/codecache.py says why)
    codecache.enable(user_dirs(os.environ, home_of(os.environ))[1])
    from tfgpu_install.cli import main

    sys.exit(main())
