"""G3ALIGN_TRACE=FILE: the start-up steps, the pipelines' stage laps, the CuPy builds and allocations, numba's cache
loads and each thread's CPU time of one run, written as JSON for scripts/trace_timeline.py."""
from __future__ import annotations

import os
import threading
import time

from g3align.aligner.cli import startup


def trace_on():
    """G3ALIGN_TRACE=FILE: record the start-up steps and g3align.aligner.TRACE's stage laps and reader items of
    this run (the list returned; None without the variable), written to FILE by trace_write as JSON [stage,
    thread, t0, t1] with times in seconds from the process start (scripts/trace_timeline.py and
    gpu_cli_profile.py draw them)."""
    if not os.environ.get("G3ALIGN_TRACE"):
        return None
    import g3align.aligner as ag
    ag.TRACE = []
    if os.environ.get("G3ALIGN_KTIME") == "1":  # every kernel launch timed by CUDA events (loader.KTIME)
        from g3align.kernels import loader
        loader.KTIME = []
    _CpuSampler.start()
    _numba_loads_traced()
    return ag.TRACE


def cupy_compiles_traced():
    """With G3ALIGN_TRACE: each CuPy module build (NVRTC or its disk cache, then the load) as a trace event "cupy
    compile", and its NVRTC version pass (once per set of options, by each thread asking before the first is done)
    as "cupy nvrtc pass", on the thread that waited for it."""
    import re

    from cupy.cuda import compiler

    from g3align.aligner import trace_event
    kname = re.compile(r"__global__\s+void\s+(\w+)")

    def traced(fn, stage):
        def run(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:  # the module's first kernel named: "cupy compile: NAME"
                m = kname.search(a[0]) if a and isinstance(a[0], str) else None
                trace_event(f"{stage}: {m.group(1)}" if m else stage, t0, time.perf_counter())
        run.traced = True
        return run
    if not getattr(compiler._compile_module_with_cache, "traced", False):
        compiler._compile_module_with_cache = traced(compiler._compile_module_with_cache, "cupy compile")
        compiler._preprocess = traced(compiler._preprocess, "cupy nvrtc pass")


def cupy_allocs_traced(min_s: float = 2e-4):
    """With G3ALIGN_TRACE: each request to CuPy's device or pinned memory pool that took at least min_s
    seconds (a cudaMalloc or cudaHostAlloc behind it, or a wait for the pool's lock) as a trace event "cuda
    alloc: device" or "cuda alloc: pinned" on the thread that waited for it."""
    import cupy as cp

    from g3align.aligner import trace_event

    def timed(pool, name):
        def alloc(nbytes):
            t0 = time.perf_counter()
            try:
                return pool.malloc(nbytes)
            finally:
                t1 = time.perf_counter()
                if t1 - t0 >= min_s:
                    trace_event(name, t0, t1)
        return alloc
    cp.cuda.set_allocator(timed(cp.get_default_memory_pool(), "cuda alloc: device"))
    cp.cuda.set_pinned_memory_allocator(timed(cp.get_default_pinned_memory_pool(), "cuda alloc: pinned"))


def _numba_loads_traced():
    """With G3ALIGN_TRACE: every numba dispatcher's load from its cache (or compile: its first call with new
    argument types) as a trace event "numba MODULE.NAME" on the thread that waited for it."""
    from numba.core.dispatcher import Dispatcher

    from g3align.aligner import trace_event
    compile_ = Dispatcher.compile

    def compile_traced(self, sig):
        t = time.perf_counter()
        try:
            return compile_(self, sig)
        finally:
            f = self.py_func
            trace_event(f"numba {f.__module__.rsplit('.', 1)[-1]}.{f.__qualname__}", t, time.perf_counter())
    Dispatcher.compile = compile_traced


class _CpuSampler:
    """With G3ALIGN_TRACE: every 50 ms, each thread's CPU seconds from /proc/self/task (a thread spinning on a
    GPU wait counts there, not in a stage lap), written beside the trace as FILE.cpu: JSON [t, {thread: cpu
    s}] with t in seconds from the process start (scripts/trace_timeline.py draws cores per thread group)."""
    samples: list = []
    _stop = threading.Event()
    _th = None

    @classmethod
    def start(cls):
        cls._th = threading.Thread(target=cls._run, name="g3align-cpu-sampler", daemon=True)
        cls._th.start()

    @classmethod
    def _run(cls):
        tck = os.sysconf("SC_CLK_TCK")
        while True:
            names = {t.native_id: t.name for t in threading.enumerate()}
            row = {}
            try:
                for tid in os.listdir("/proc/self/task"):
                    try:
                        with open(f"/proc/self/task/{tid}/stat") as fh:
                            f = fh.read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    name = names.get(int(tid), f"tid-{tid}")
                    row[name] = row.get(name, 0.0) + (int(f[11]) + int(f[12])) / tck
            except OSError:
                return
            cls.samples.append((time.perf_counter(), row))
            if cls._stop.wait(0.05):
                return

    @classmethod
    def write(cls, path, t0):
        cls._stop.set()
        if cls._th is not None:
            cls._th.join()
        import json
        with open(path, "w") as fh:
            json.dump([(t - t0, row) for t, row in cls.samples], fh)


def trace_write(trace, t_enter):
    from g3align.kernels import loader
    t0 = startup.process_t0()
    if t0 is None:
        t0 = min((e[2] for e in trace), default=0.0)
    ev = list(trace) + [("module " + n, "loader", a, b) for n, a, b in loader.LOAD_TIMES]
    ev += loader.kernel_timeline() if loader.KTIME is not None else []
    ev.append(("start-up: interpreter, cli import", "MainThread", t0, t_enter))
    import json
    with open(os.environ["G3ALIGN_TRACE"], "w") as fh:
        json.dump([(s, th, a - t0, b - t0) for s, th, a, b in ev], fh)
    _CpuSampler.write(os.environ["G3ALIGN_TRACE"] + ".cpu", t0)
    if loader.KTIME is not None:  # G3ALIGN_KTIME: {module.kernel: [launches, GPU ms]}
        with open(os.environ["G3ALIGN_TRACE"] + ".kernels", "w") as fh:
            json.dump(loader.kernel_times(), fh)
