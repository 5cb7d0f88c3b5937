"""The process entry (`tfgpu-install`, `python -m installer`): start-up that belongs to a real
run only, then the command line. Tests call installer.cli.main in-process, without this."""

from __future__ import annotations

import os
import sys


def run() -> None:
    from installer import codecache
    from installer.dirs import home_of, user_dirs

    # before the first model class is defined (installer/codecache.py says why)
    codecache.enable(user_dirs(os.environ, home_of(os.environ))[1])
    from installer.cli import main

    sys.exit(main())
