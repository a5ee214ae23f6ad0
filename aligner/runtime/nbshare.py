"""Read-only views of shared arrays for numba kernels that run on many threads at once.

Every numba array carries a pointer to its owner's reference count (a MemInfo). Slicing an array, or
passing it to another jitted function, increments and later decrements that count with atomic
instructions. The per-range CPU kernels (core.align_range_se, pair.regions_range, pair.sam_pe_range, ...)
slice the same batch arrays (reads, qualities, names, regions, the packed reference) for every read, on
16 threads at once: all threads then update the same few counters, whose cache lines bounce between
the cores. `unowned(x)` returns the same array (or a tuple / named tuple of arrays, recursively) with no
owner: views of it are counted nowhere. The caller must keep the original alive for as long as the views
are used, which holds when a kernel converts its arguments on entry and returns only arrays it allocated.
"""
from __future__ import annotations

import threading

from numba.core import cgutils, types
from numba.extending import intrinsic, overload

from g3align.jit import njit


def _strip(context, builder, ty, val):
    if isinstance(ty, types.Array):
        ary = cgutils.create_struct_proxy(ty)(context, builder, value=val)
        ary.meminfo = cgutils.get_null_value(ary.meminfo.type)
        ary.parent = cgutils.get_null_value(ary.parent.type)
        return ary._getvalue()
    if isinstance(ty, types.BaseTuple):
        out = val
        for k, t in enumerate(ty.types):
            out = builder.insert_value(out, _strip(context, builder, t, builder.extract_value(val, k)), k)
        return out
    return val


@intrinsic
def _strip_owner(typingctx, x):
    def codegen(context, builder, sig, args):
        return _strip(context, builder, sig.args[0], args[0])
    return x(x), codegen


def unowned(x):
    """x (array, or tuple / named tuple holding arrays) with the arrays' owner pointers cleared in jitted
    code; in plain Python (a kernel's py_func) x itself."""
    return x


@overload(unowned)
def _unowned_jit(x):
    return lambda x: _strip_owner(x)


@njit(cache=True, inline="never")
def keep_alive(a):
    """A use of the owned array `a` (or tuple of arrays) that ends its life no earlier than here: numba frees
    an owned array after its last use, and unowned views of it are safe only while it lives."""
    return 0


@njit(cache=True, inline="always")
def owned_text(own, buf, n):
    """The n bytes written so far to `buf`, which is an unowned view of `own` unless a writer regrew it (the
    record writers' buffers only grow, into new owned arrays), as an owned array that may be returned."""
    if buf.shape[0] == own.shape[0]:
        return own[:n]
    return buf[:n]


@intrinsic
def _fetch_add1(typingctx, counter):
    """Atomically counter[0] += 1; the old value (counter: a 1-D int64 array shared by threads)."""
    if not (isinstance(counter, types.Array) and counter.dtype == types.int64):
        return None

    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [context.get_constant(types.intp, 0)])
        return builder.atomic_rmw("add", ptr, context.get_constant(types.int64, 1), "seq_cst")
    return types.int64(counter), codegen


@intrinsic
def f32_as_u32(typingctx, x):
    """The bits of a float32 as a uint32 (a register bitcast: no array to view through)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.uint32))
    return types.uint32(x), codegen


@intrinsic
def u32_as_f32(typingctx, u):
    """The float32 whose bits are the uint32 u (f32_as_u32's inverse)."""
    if u != types.uint32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))
    return types.float32(u), codegen


@njit(cache=True, inline="always")
def claim(counter):
    """The next work item for the calling thread: counter[0] before an atomic increment. Threads running the
    same kernel on a shared counter take items 0, 1, 2, ... each exactly once, whatever their number and
    speed (the kernel stops at the first item past the end)."""
    return _fetch_add1(counter)


def preload(dispatchers) -> int:
    """Load the cached machine code of each numba dispatcher, for every signature its on-disk cache holds for
    this machine, now (in order), instead of at its first call: a first call blocks every thread that makes
    it until the load is done (on the GPU box 0.1-0.2 s for the big pool kernels, all 16 threads at once).
    Nothing is compiled that the cache does not hold; a dispatcher without a cache is skipped. Uses numba's
    cache index (an internal API): on any error it stops quietly (a speed-up only). Returns the loads done."""
    n = 0
    try:
        for d in dispatchers:
            cache = getattr(d, "_cache", None)
            index = getattr(getattr(cache, "_cache_file", None), "_load_index", None)
            if index is None:
                continue
            magic = d.targetctx.codegen().magic_tuple()
            for key in list(index()):
                if key[1] == magic:
                    d.compile(key[0])
                    n += 1
    except Exception:  # noqa: BLE001 (numba internals changed or a cache file went away: first calls load instead)
        pass
    return n


def preload_thread(dispatchers) -> threading.Thread:
    """preload(dispatchers) on a daemon thread started now (the pipelines' start-up, beside the CUDA start and
    the index load)."""
    th = threading.Thread(target=preload, args=(list(dispatchers),), name="g3align-preload", daemon=True)
    th.start()
    return th
