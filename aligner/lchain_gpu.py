"""DP chaining scores of a batch of reads (issue 6): kernels/lchain.cu (one thread per read) and its numba twin.

A batch is anchors in CSR form: read r's anchors are rows [off[r], off[r+1]) of `a` (uint64 (n, 2), minimap2's
layout, each read's rows sorted as lchain_dp expects), with per-read max_dist_x / max_dist_y / n_seg. Both
backends return f (best chain score ending at each anchor) and p (its predecessor, -1 for none), exactly
what lchain.dp_scores computes per read; lchain.dp_chains then backtracks each read on the CPU.
"""
from __future__ import annotations

import numba as nb
import numpy as np
from g3align.aligner.lchain import dp_limits, dp_scores


@nb.njit(cache=True, nogil=True)
def limits_batch(mdx, mdy, bw, is_cdna):
    """dp_limits per read -> (max_dist_x, max_dist_y) arrays."""
    n = mdx.shape[0]
    ox = np.empty(n, np.int64)
    oy = np.empty(n, np.int64)
    for r in range(n):
        x, y, _ = dp_limits(mdx[r], mdy[r], bw, is_cdna)
        ox[r] = x
        oy[r] = y
    return ox, oy


@nb.njit(cache=True, nogil=True)
def dp_scores_batch(a, off, mdx, mdy, nseg, bw, max_skip, max_iter, pg, ps, is_cdna):
    """CPU twin of lchain_dp_kernel over a batch (limits already from limits_batch) -> (f, p)."""
    n = a.shape[0]
    f = np.empty(n, np.int64)
    p = np.empty(n, np.int64)
    v = np.empty(n, np.int64)
    t = np.empty(n, np.int64)
    for r in range(off.shape[0] - 1):
        b, e = off[r], off[r + 1]
        dp_scores(mdx[r], mdy[r], bw, max_skip, max_iter, pg, ps, is_cdna, nseg[r], a[b:e], f[b:e], p[b:e],
                  v[b:e], t[b:e])
    return f, p


def dp_scores_gpu(a, off, mdx, mdy, nseg, bw, max_skip, max_iter, pg, ps, is_cdna, block: int = 64):
    """lchain_dp_kernel on the GPU (host or device inputs) -> (f, p) as numpy arrays."""
    import cupy as cp
    from g3align.kernels.loader import get_module

    n = int(a.shape[0])
    n_reads = int(off.shape[0]) - 1
    if n == 0 or n_reads == 0:
        return np.zeros(n, np.int64), np.zeros(n, np.int64)
    a_d = cp.asarray(a)
    ax = cp.ascontiguousarray(a_d[:, 0])
    ay = cp.ascontiguousarray(a_d[:, 1])
    f = cp.empty(n, cp.int64)
    p = cp.empty(n, cp.int64)
    t = cp.empty(n, cp.int64)
    k = get_module("lchain").get_function("lchain_dp_kernel")
    k(((n_reads + block - 1) // block,), (block,),
      (ax, ay, cp.asarray(off, dtype=cp.int64), np.int64(n_reads), cp.asarray(mdx, dtype=cp.int64),
       cp.asarray(mdy, dtype=cp.int64), cp.asarray(nseg, dtype=cp.int64), np.int32(bw), np.int32(max_skip),
       np.int32(max_iter), np.float32(pg), np.float32(ps), np.int32(is_cdna), f, p, t))
    return cp.asnumpy(f), cp.asnumpy(p)
