"""The layered GPU check that runs inside the target environment (stdlib + ctypes only)."""
