"""twinbuild: one pin manifest, two GPU images (CUDA and ROCm)."""

__version__ = "0.1.0"
