"""hipfile: Python bindings for AMD hipFile, GPU-direct file I/O for ROCm."""

from hipfile import platforms as _platforms

_platforms._activate_from_environment()

__version__ = "0.1.0"
