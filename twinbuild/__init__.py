"""twinbuild: one pin manifest, every GPU image variant (CUDA and ROCm, amd64 and arm64)."""

__version__ = "0.1.0"
