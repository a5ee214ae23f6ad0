"""Clocks inside a pool task's kernel, for traces only (G3ALIGN_TRACE with G3ALIGN_TUNE='TASK_CLOCK=1').

A pool task's wall time in a trace ("task stage1") is: the Python call and numba's dispatch with the GIL
held, the kernel itself (nogil), then waiting for the GIL again to box the result and return. The clocked
kernels here read the monotonic clock on entry to and exit from the kernel, in nogil code, and the calling
thread's CPU time between them. `clocked(name)` calls one and adds two trace events: "kernel NAME" (entry
to exit) and "kcpu NAME" (entry to entry + the thread's CPU seconds in the kernel). Against the task's own
event they split its time into: before the kernel (dispatch, GIL), the kernel on a CPU, the kernel off a
CPU (page faults, allocator locks, preemption), after the kernel (GIL, boxing); see
scripts/trace_timeline.py's task_clock_lines.
"""
from __future__ import annotations

from g3align.aligner import trace_event
from g3align.aligner.mem.pair import regions_claim, regions_range, sam_pe_range
from g3align.aligner.mem.single import sam_se_range
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from g3align.jit import njit

CLOCK_MONOTONIC = 1          # Linux clock ids (time.perf_counter reads CLOCK_MONOTONIC there)
CLOCK_THREAD_CPUTIME_ID = 3


@intrinsic
def _clock_ns(typingctx, clk):
    """libc's clock_gettime(clk) in ns (an external call resolved when the code loads: cacheable)."""
    def codegen(context, builder, sig, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        ts_t = ir.LiteralStructType([i64, i64])
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32, ts_t.as_pointer()]),
                                            "clock_gettime")
        ts = cgutils.alloca_once(builder, ts_t)
        builder.call(fn, [builder.trunc(args[0], i32), ts])
        sec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nsec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(sec, ir.Constant(i64, 1_000_000_000)), nsec)
    return types.int64(clk), codegen


@njit(cache=True, nogil=True)
def clock_ns(clk):
    return _clock_ns(clk)


@njit(cache=True, nogil=True)
def _regions_range(*args):
    t0 = clock_ns(CLOCK_MONOTONIC)
    c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID)
    r = regions_range(*args)
    c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID)
    return r, t0, clock_ns(CLOCK_MONOTONIC), c1 - c0


@njit(cache=True, nogil=True)
def _regions_claim(*args):
    t0 = clock_ns(CLOCK_MONOTONIC)
    c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID)
    r = regions_claim(*args)
    c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID)
    return r, t0, clock_ns(CLOCK_MONOTONIC), c1 - c0


@njit(cache=True, nogil=True)
def _sam_pe_range(*args):
    t0 = clock_ns(CLOCK_MONOTONIC)
    c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID)
    r = sam_pe_range(*args)
    c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID)
    return r, t0, clock_ns(CLOCK_MONOTONIC), c1 - c0


@njit(cache=True, nogil=True)
def _sam_se_range(*args):
    t0 = clock_ns(CLOCK_MONOTONIC)
    c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID)
    r = sam_se_range(*args)
    c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID)
    return r, t0, clock_ns(CLOCK_MONOTONIC), c1 - c0


CLOCKED = {regions_range: _regions_range, regions_claim: _regions_claim, sam_pe_range: _sam_pe_range,
           sam_se_range: _sam_se_range}


def clocked(kernel, name: str):
    """kernel (one of CLOCKED's) as a Python callable that also records "kernel NAME" and "kcpu NAME" trace
    events per call (see the module's doc)."""
    run = CLOCKED[kernel]

    def call(*args):
        r, t0, t1, cpu = run(*args)
        trace_event("kernel " + name, t0 * 1e-9, t1 * 1e-9)
        trace_event("kcpu " + name, t0 * 1e-9, (t0 + cpu) * 1e-9)
        return r
    return call
