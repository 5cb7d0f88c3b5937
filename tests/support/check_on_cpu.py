"""Run gpucheck/check.py with its TensorFlow layers pinned to /CPU:0 (tests only).

The seam is a Python argument of check.main (check.Seam), which no user can set from the
environment or the command line: this file, which only the tests put on a command line, is the
one way in. Usage: python check_on_cpu.py <check.py arguments>
"""

import os
import sys

CHECK_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "tfgpu_install", "verify", "gpucheck")
sys.path.insert(0, CHECK_DIR)

import check  # noqa: E402  (check.py's directory, as the target env sees it)

if __name__ == "__main__":
    sys.exit(check.main(sys.argv[1:], seam=check.Seam(device="/CPU:0", require_gpu_list=False)))
