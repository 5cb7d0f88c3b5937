"""The layered GPU check that runs inside the target environment (stdlib + ctypes only).

check.py is run as a script by the env's own interpreter (tfgpu_install/verify.py does that):
the env does not have this package, so check.py and its sibling modules (tfgpucheck_cuda,
tfgpucheck_tf) never import from `tfgpu_install`.
"""
