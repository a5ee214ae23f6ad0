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

import numba as nb
from numba.core import cgutils, types
from numba.extending import intrinsic, overload


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


@nb.njit(cache=True, inline="never")
def keep_alive(a):
    """A use of the owned array `a` (or tuple of arrays) that ends its life no earlier than here: numba frees
    an owned array after its last use, and unowned views of it are safe only while it lives."""
    return 0


@nb.njit(cache=True, inline="always")
def owned_text(own, buf, n):
    """The n bytes written so far to `buf`, which is an unowned view of `own` unless a writer regrew it (the
    record writers' buffers only grow, into new owned arrays), as an owned array that may be returned."""
    if buf.shape[0] == own.shape[0]:
        return own[:n]
    return buf[:n]
