"""The one place that builds CuPy RawModules from kernels/*.cu.

``get_module(name, defines)`` reads ``kernels/<name>.cu`` (package data, or the source tree),
prepends the compile-time constants as ``#define`` lines and compiles it with NVRTC for the
current device.  Modules are memoized per (device, name, defines), as cupyx does.
"""
from __future__ import annotations

import importlib.resources
import re
import threading
import time
from pathlib import Path

_CACHE: dict = {}
_LOCKS: dict = {}  # one lock per module key (dict.setdefault is atomic)
LOAD_TIMES: list = []  # (name, t0, t1) perf_counter times of each module build (g3align mem's G3ALIGN_TRACE)
# G3ALIGN_KTIME=1 beside G3ALIGN_TRACE (the CLI sets a list here): (module.kernel, start, end) CUDA events recorded on
# the launching stream around every launch of a get_module kernel; kernel_times() sums them at the end of the run
KTIME: list | None = None


class _TimedKernel:
    """A module function whose launches are bracketed by CUDA events into KTIME (same call signature)."""

    def __init__(self, f, name: str):
        self._f, self._name = f, name

    def __call__(self, *args, **kw):
        import cupy
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record()
        self._f(*args, **kw)
        e1.record()
        KTIME.append((self._name, e0, e1))

    def __getattr__(self, k):
        return getattr(self._f, k)


class _TimedModule:
    """get_module's module with its functions timed (_TimedKernel); everything else passed through."""

    def __init__(self, mod, name: str):
        self._mod, self._name = mod, name

    def get_function(self, fn: str):
        return _TimedKernel(self._mod.get_function(fn), f"{self._name}.{fn}")

    def __getattr__(self, k):
        return getattr(self._mod, k)


def kernel_times() -> dict:
    """{module.kernel: [launches, GPU ms]} of KTIME's launches (waits for the last of them)."""
    out: dict = {}
    if not KTIME:
        return out
    import cupy
    for name, e0, e1 in KTIME:
        e1.synchronize()
        c = out.setdefault(name, [0, 0.0])
        c[0] += 1
        c[1] += cupy.cuda.get_elapsed_time(e0, e1)
    return out


def _read(fname: str) -> str:
    try:
        return importlib.resources.files("g3align.kernels").joinpath(fname).read_text()
    except (ModuleNotFoundError, FileNotFoundError, TypeError):
        return (Path(__file__).parent / fname).read_text()


# `#include "x.cuh"` of a header in kernels/: inlined here (NVRTC compiles a string and has no file of
# it); nvcc and the host-C++ test builds resolve the same line next to the .cu file.
_INCLUDE = re.compile(r'^#include "([A-Za-z0-9_]+\.cuh)"[ \t]*$', re.M)


def kernel_source(name: str) -> str:
    """Text of kernels/<name>.cu, its kernels/*.cuh includes inlined."""
    return _INCLUDE.sub(lambda m: _read(m.group(1)), _read(f"{name}.cu"))


def define_lines(defines: dict | None) -> str:
    """``#define K V`` lines, sorted by key so equal dicts give equal sources."""
    return "".join(f"#define {k} {int(v) if isinstance(v, bool) else v}\n"
                   for k, v in sorted((defines or {}).items()))


def get_module(name: str, defines: dict | None = None, options: tuple = ("-std=c++17",)):
    """cupy.RawModule for kernels/<name>.cu with ``defines`` prepended; memoized per device."""
    import cupy

    dev = cupy.cuda.Device().id
    key = (dev, name, tuple(sorted((defines or {}).items())), tuple(options))
    mod = _CACHE.get(key)
    if mod is None:
        with _LOCKS.setdefault(key, threading.Lock()):  # threads asking at once: one load, the others wait
            mod = _CACHE.get(key)
            if mod is None:
                t = time.perf_counter()
                mod = cupy.RawModule(code=define_lines(defines) + kernel_source(name), options=options)
                mod.compile()  # now rather than at the first get_function: NVRTC or CuPy's disk cache, then load
                _CACHE[key] = mod
                LOAD_TIMES.append((name, t, time.perf_counter()))
    return mod if KTIME is None else _TimedModule(mod, name)
