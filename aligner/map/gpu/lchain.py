"""DP chaining scores of a batch of reads: kernels/lchain.cu (one thread per read) and its numba twin.

A batch is anchors in CSR form: read r's anchors are rows [off[r], off[r+1]) of `a` (uint64 (n, 2), minimap2's
layout, each read's rows sorted as lchain_dp expects), with per-read max_dist_x / max_dist_y / n_seg. Both
backends return f (best chain score ending at each anchor) and p (its predecessor, -1 for none), exactly
what lchain.dp_scores computes per read; lchain.dp_chains then backtracks each read on the CPU.
"""
from __future__ import annotations

import numpy as np

from g3align.aligner.map.lchain import INT32_MIN, anchor_span, comput_sc, dp_limits, dp_scores
from g3align.jit import njit


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
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


def dp_scores_gpu_warp(a, off, mdx, mdy, nseg, bw, max_skip, max_iter, pg, ps, is_cdna, block: int = 128):
    """lchain_dp_warp_kernel (a warp per read, reads with the most anchors first) -> (f, p) as numpy arrays;
    the same results as dp_scores_gpu and the twin."""
    import cupy as cp

    from g3align.kernels.loader import get_module

    n = int(a.shape[0])
    n_reads = int(off.shape[0]) - 1
    if n == 0 or n_reads == 0:
        return np.zeros(n, np.int64), np.zeros(n, np.int64)
    a_d = cp.asarray(a)
    off_d = cp.asarray(off, dtype=cp.int64)
    order = cp.argsort(-(off_d[1:] - off_d[:-1]), kind="stable").astype(cp.int64)
    f = cp.empty(n, cp.int64)
    p = cp.empty(n, cp.int64)
    t = cp.empty(n, cp.int64)
    k = get_module("lchain").get_function("lchain_dp_warp_kernel")
    warps = block // 32
    k(((n_reads + warps - 1) // warps,), (block,),
      (cp.ascontiguousarray(a_d[:, 0]), cp.ascontiguousarray(a_d[:, 1]), off_d, order, np.int64(n_reads),
       cp.asarray(mdx, dtype=cp.int64), cp.asarray(mdy, dtype=cp.int64), cp.asarray(nseg, dtype=cp.int64),
       np.int32(bw), np.int32(max_skip), np.int32(max_iter), np.float32(pg), np.float32(ps), np.int32(is_cdna), f, p,
       t))
    from g3align.aligner.gpu.pinned import fetch
    return fetch(f), fetch(p)


@njit(cache=True, nogil=True)
def warp_emulate(mdx, mdy, bw, max_skip, max_iter, pg, ps, is_cdna, n_seg, a, f, p, t):
    """lchain_dp_warp_kernel's algorithm for one read, its 32 lanes run one after the other between the
    kernel's synchronisation points (the test oracle of the warp kernel's logic: == dp_scores)."""
    n = a.shape[0]
    umdx = np.uint64(mdx)
    s = np.zeros(32, np.int64)
    valid = np.zeros(32, np.bool_)
    mark = np.zeros(32, np.bool_)
    for k in range(n):
        t[k] = 0
    st = 0
    max_ii = -1
    for i in range(n):
        xi = a[i, 0]
        while st < i and ((xi >> np.uint64(32)) != (a[st, 0] >> np.uint64(32)) or xi > a[st, 0] + umdx):
            st += 1
        if i - st > max_iter:
            st = i - max_iter
        max_f = anchor_span(a[i, 1])
        max_j = -1
        end_j = st - 1
        n_skip = 0
        brk = False
        jb = i - 1
        while jb >= st and not brk:
            for ln in range(32):  # phase 1: scores, t writes
                j = jb - ln
                valid[ln] = False
                s[ln] = 0
                if j >= st:
                    sc = comput_sc(a, i, j, mdx, mdy, bw, pg, ps, is_cdna, n_seg)
                    if sc != INT32_MIN:
                        valid[ln] = True
                        s[ln] = sc + f[j]
                        if p[j] >= 0:
                            t[p[j]] = i
            for ln in range(32):  # after __syncwarp: marks
                j = jb - ln
                mark[ln] = j >= st and t[j] == i
            m0 = max_f
            for ln in range(32):  # the ballot's lanes in order
                if not (valid[ln] and (s[ln] > m0 or mark[ln])):
                    continue
                if s[ln] > max_f:
                    max_f = s[ln]
                    max_j = jb - ln
                    if n_skip > 0:
                        n_skip -= 1
                elif mark[ln]:
                    n_skip += 1
                    if n_skip > max_skip:
                        brk = True
                        end_j = jb - ln
                        break
            jb -= 32
        if max_ii < 0 or xi - a[max_ii, 0] > umdx:
            bm = INT32_MIN
            bi = -1
            for ln in range(32):  # per-lane strided scans, then the reduction (ties: larger index)
                mx = INT32_MIN
                mi = -1
                jj = i - 1 - ln
                while jj >= st:
                    if mx < f[jj]:
                        mx = f[jj]
                        mi = jj
                    jj -= 32
                if mx > bm or (mx == bm and mi > bi):
                    bm = mx
                    bi = mi
            max_ii = bi
        if max_ii >= 0 and max_ii < end_j:
            tmp = comput_sc(a, i, max_ii, mdx, mdy, bw, pg, ps, is_cdna, n_seg)
            if tmp != INT32_MIN and max_f < tmp + f[max_ii]:
                max_f = tmp + f[max_ii]
                max_j = max_ii
        f[i] = max_f
        p[i] = max_j
        if max_ii < 0 or (xi - a[max_ii, 0] <= umdx and f[max_ii] < max_f):
            max_ii = i
