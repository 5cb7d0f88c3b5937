"""Fixtures for the GPU check: the gcc-built stub libraries and the real TensorFlow venv."""

from tests.support.stublibs import stubs  # noqa: F401  (fixtures)
from tests.support.tfenv import tf_env  # noqa: F401
