"""Which CUDA devices this process can use: the one check every command and test asks (CuPy imports and the driver
sees a device), made without creating a CUDA context."""
from __future__ import annotations


def gpu_count() -> int:
    """CUDA devices CuPy sees (0 without CuPy, a driver or a device)."""
    try:
        import cupy
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no CuPy, no driver, no device
        return 0


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    return gpu_count() > 0
