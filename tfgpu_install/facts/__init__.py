"""Facts about this machine: gathered once, plain data, each value with its source."""

from tfgpu_install.facts.model import CudaInstall, Driver, Facts, Gpu, Host, Problem, PythonInterp, Tools

__all__ = ["CudaInstall", "Driver", "Facts", "Gpu", "Host", "Problem", "PythonInterp", "Tools"]
