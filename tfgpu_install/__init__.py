"""tfgpu-install: a verified TensorFlow GPU environment from one command."""

__version__ = "0.2.0"
