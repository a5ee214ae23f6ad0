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
# G3ALIGN_KTIME=1 beside G3ALIGN_TRACE (the CLI sets a list here): (module.kernel, start, end, thread name), CUDA events
# recorded on the launching stream around every launch of a get_module kernel; kernel_times() sums them at the end of
# the run, kernel_timeline() places them on the trace's clock
KTIME: list | None = None
KTIME_BASE: tuple | None = None  # (CUDA event, its host perf_counter time): kernel_timeline's origin


class _TimedKernel:
    """A module function whose launches are bracketed by CUDA events into KTIME (same call signature)."""

    def __init__(self, f, name: str):
        self._f, self._name = f, name

    def __call__(self, *args, **kw):
        import cupy
        global KTIME_BASE
        if KTIME_BASE is None:  # the timeline's origin: an event whose host time is known (synchronised once)
            b = cupy.cuda.Event()
            b.record()
            b.synchronize()
            KTIME_BASE = (b, time.perf_counter())
        e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
        e0.record()
        self._f(*args, **kw)
        e1.record()
        KTIME.append((self._name, e0, e1, threading.current_thread().name))

    def __getattr__(self, k):
        return getattr(self._f, k)

    def __setattr__(self, k, v):  # kernel attributes (max_dynamic_shared_size_bytes, ...) go to the kernel
        if k.startswith("_"):
            object.__setattr__(self, k, v)
        else:
            setattr(self._f, k, v)


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
    for name, e0, e1, _ in KTIME:
        e1.synchronize()
        c = out.setdefault(name, [0, 0.0])
        c[0] += 1
        c[1] += cupy.cuda.get_elapsed_time(e0, e1)
    return out


def kernel_timeline() -> list:
    """KTIME's launches as trace events ("gpu " + module.kernel, launching thread, t0, t1), times on perf_counter's
    clock (from the base event's host time; a launch sharing the GPU with other streams' is drawn for its whole
    time on its stream)."""
    if not KTIME or KTIME_BASE is None:
        return []
    import cupy
    base, t_host = KTIME_BASE
    ev = []
    for name, e0, e1, th in KTIME:
        e1.synchronize()
        ev.append(("gpu " + name, th, t_host + cupy.cuda.get_elapsed_time(base, e0) / 1e3,
                   t_host + cupy.cuda.get_elapsed_time(base, e1) / 1e3))
    return ev


def fit_shared(f, smem: int, most: int = 0) -> None:
    """Let kernel ``f`` take ``smem`` bytes of dynamic shared memory: its limit raised to max(smem, most) when it is
    lower. A kernel's default limit is 48 KiB *less its static shared memory*, so a request just under 48 KiB can
    need it too. Every thread asks for the same value: no race."""
    if smem > f.max_dynamic_shared_size_bytes:
        f.max_dynamic_shared_size_bytes = max(smem, most)


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


def cupy_cache_dir(compiler) -> str:
    """CuPy's kernel cache directory: its compiler's get_cache_dir where it has one (CuPy 14.2 has none), else
    CuPy's own setting, $CUPY_CACHE_DIR or ~/.cupy/kernel_cache."""
    import os
    if hasattr(compiler, "get_cache_dir"):
        return compiler.get_cache_dir()
    return os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))


_ONCE_LOCK = threading.Lock()


def cupy_compile_once() -> None:
    """Each CuPy kernel build made once per process, and CuPy's NVRTC version pass once per machine
    (idempotent).

    CuPy builds a kernel (its elementwise and reduction kernels, our RawModules) at its first use: the
    cubin from its disk cache (hash, read, check) and then the load. Its per-device memo is filled only
    when the build returns, so the three prepare threads of `g3align mem`, which meet the same ~20 kernels
    at the same time, each built them all (traces: ~60 builds, 0.3 s in the first parts). Here one thread
    builds a given kernel; the others wait for it and get the same module.

    Before its first build with a set of options CuPy also compiles an empty program with NVRTC (20-80 ms)
    whose version comments enter its cache key. That text depends only on the options, the architecture
    and the NVRTC version, so it is kept in a file in CuPy's cache directory, named by a hash of those,
    and read from there in later processes. A wrong or stale text could only change the cache key (a
    compile), never a kernel."""
    from cupy.cuda import compiler
    with _ONCE_LOCK:
        if getattr(compiler, "_g3align_once", False):
            return
        build, pre = compiler._compile_module_with_cache, compiler._preprocess
        built: dict = {}
        locks: dict = {}

        def build_once(*a, **kw):  # CuPy's own arguments, passed on as given (they differ between versions)
            import cupy
            try:
                key = (cupy.cuda.Device().id, a, tuple(sorted(kw.items())))
                hash(key)
            except TypeError:  # an argument we cannot key on: CuPy's own path
                return build(*a, **kw)
            mod = built.get(key)
            if mod is None:
                with locks.setdefault(key, threading.Lock()):
                    mod = built.get(key)
                    if mod is None:
                        mod = built[key] = build(*a, **kw)
            return mod

        def preprocess_once(*a, **kw):  # (source, options, arch, backend)
            if (a[0] if a else kw.get("source")) != "":
                return pre(*a, **kw)
            import hashlib
            import os
            try:
                import cupy
                from cupy.cuda import nvrtc
                tag = repr((a[1:], sorted(kw.items()), nvrtc.getVersion(), cupy.__version__))
                cache_dir = cupy_cache_dir(compiler)
            except Exception:  # CuPy internals not as expected: its own path
                return pre(*a, **kw)
            path = os.path.join(cache_dir, "g3align-empty-" + hashlib.sha1(tag.encode()).hexdigest() + ".txt")
            with locks.setdefault(path, threading.Lock()):
                try:
                    with open(path, encoding="utf-8") as fh:
                        return fh.read()
                except OSError:
                    pass
                text = pre(*a, **kw)
                try:  # written whole, then renamed: a reader sees all of it or nothing
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}"
                    with open(tmp, "w", encoding="utf-8") as fh:
                        fh.write(text)
                    os.replace(tmp, path)
                except OSError:  # a read-only cache directory: no file, same result
                    pass
                return text
        compiler._compile_module_with_cache = build_once
        compiler._preprocess = preprocess_once
        compiler._g3align_once = True


def get_module(name: str, defines: dict | None = None, options: tuple = ("-std=c++17",)):
    """cupy.RawModule for kernels/<name>.cu with ``defines`` prepended; memoized per device."""
    import cupy
    cupy_compile_once()

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
                from g3align.jit import RECORD
                if "cupy" in RECORD:  # G3ALIGN_JIT_RECORD (scripts/jit_manifest.py)
                    RECORD["cupy"](name, defines, options, time.perf_counter() - t)
    return mod if KTIME is None else _TimedModule(mod, name)
