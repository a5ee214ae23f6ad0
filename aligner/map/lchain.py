"""Chaining of minimap2 2.24 (lchain.c, the chaining part of map.c, hit.c's region generation).

All functions are numba-compiled, work on one read and take plain arrays (see docs/MM_PORT.md):

* anchors `a` (n, 2) uint64 in minimap2's layout (`a[:,0] = rev<<63 | rid<<32 | rpos`,
  `a[:,1] = seg<<48 | flags<<40 | qspan<<32 | qpos`), sorted as minimap2 sorts them;
* chains `u` uint64 (`score<<32 | n_anchors`), whose anchors lie back to back in the returned `a`;
* regions: the int64 matrix of `aligner/map/types.py`.

Scores are computed with minimap2's single-precision arithmetic (the chaining penalties are C floats,
the log term is the bit-trick approximation of `mg_log2`), and every sort minimap2 does with its
in-place (unstable) radix sort is done with an exact emulation of that sort, so chain order and the
choice among equal scores match minimap2. The RMQ chainer keeps an exact emulation of klib's
augmented AVL tree (krmq.h), because which of several equal-priority anchors a range query returns
depends on the tree's shape.
"""
import numpy as np

from g3align.aligner.map.types import (
    AS,
    BLEN,
    CNT,
    DIV,
    HASH,
    ID,
    MLEN,
    NR,
    PARENT,
    QE,
    QS,
    RE,
    REV,
    RID,
    RS,
    SCORE,
    SCORE0,
    SEG_ID,
    SEG_SPLIT,
    f32_bits,
)
from g3align.aligner.runtime.nbshare import f32_as_u32, keep_alive, u32_as_f32, unowned
from g3align.jit import njit

INT32_MIN = -2147483648
INT32_MAX = 2147483647
U32 = np.uint64(0xFFFFFFFF)
SEG_MASK = np.uint64(0xFF) << np.uint64(48)


# ---------------------------------------------------------------------------------------------
# small integer helpers (C casts)
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def lo32s(v):
    """(int32_t) of a uint64: the low 32 bits as a signed value (returned as int64)."""
    w = np.int64(np.uint64(v) & U32)
    if w >= 2147483648:
        w -= 4294967296
    return w


@njit(cache=True, nogil=True, inline="always")
def anchor_span(y):
    return np.int64((np.uint64(y) >> np.uint64(32)) & np.uint64(0xFF))


@njit(cache=True, nogil=True, inline="always")
def _seg(y):
    return np.int64((np.uint64(y) & SEG_MASK) >> np.uint64(48))


@njit(cache=True, nogil=True, inline="always")
def to_u64(v):
    """An int64 (possibly negative) as the uint64 with the same bits (C's int -> uint64_t)."""
    return np.uint64(v) if v >= 0 else ~np.uint64(-(v + 1))


# ---------------------------------------------------------------------------------------------
# minimap2's radix sorts (ksort.h KRADIX_SORT_INIT with 8-bit digits, insertion sort below 65)
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _rs_insertsort(x, y, beg, end):
    for i in range(beg + 1, end):
        if x[i] < x[i - 1]:
            tx = x[i]
            ty = y[i]
            j = i
            while j > beg and tx < x[j - 1]:
                x[j] = x[j - 1]
                y[j] = y[j - 1]
                j -= 1
            x[j] = tx
            y[j] = ty


@njit(cache=True, nogil=True)
def radix_sort_128x(x, y, beg, end):
    """Sort pairs (x[k], y[k]) for k in [beg, end) by x, moving elements exactly as minimap2's
    radix_sort_128x does (so records with equal x end in minimap2's order)."""
    if end - beg <= 64:
        _rs_insertsort(x, y, beg, end)
        return
    stack = np.empty((8 * 256, 3), np.int64)  # at most 7 levels below the top, 255 pending buckets each
    sp = 0
    stack[0, 0] = beg
    stack[0, 1] = end
    stack[0, 2] = 56
    sp = 1
    bb = np.empty(256, np.int64)
    be = np.empty(256, np.int64)
    m = np.uint64(255)
    while sp > 0:
        sp -= 1
        b0 = stack[sp, 0]
        e0 = stack[sp, 1]
        s = stack[sp, 2]
        us = np.uint64(s)
        for k in range(256):
            bb[k] = b0
            be[k] = b0
        for i in range(b0, e0):
            be[np.int64((x[i] >> us) & m)] += 1
        for k in range(1, 256):
            be[k] += be[k - 1] - b0
            bb[k] = be[k - 1]
        k = 0
        while k != 256:
            if bb[k] != be[k]:
                l = np.int64((x[bb[k]] >> us) & m)
                if l != k:
                    tx = x[bb[k]]
                    ty = y[bb[k]]
                    while True:
                        sx = tx
                        sy = ty
                        tx = x[bb[l]]
                        ty = y[bb[l]]
                        x[bb[l]] = sx
                        y[bb[l]] = sy
                        bb[l] += 1
                        l = np.int64((tx >> us) & m)
                        if l == k:
                            break
                    x[bb[k]] = tx
                    y[bb[k]] = ty
                    bb[k] += 1
                else:
                    bb[k] += 1
            else:
                k += 1
        bb[0] = b0
        for k in range(1, 256):
            bb[k] = be[k - 1]
        if s:
            s2 = s - 8 if s > 8 else 0
            for k in range(256):
                sz = be[k] - bb[k]
                if sz > 64:
                    stack[sp, 0] = bb[k]
                    stack[sp, 1] = be[k]
                    stack[sp, 2] = s2
                    sp += 1
                elif sz > 1:
                    _rs_insertsort(x, y, bb[k], be[k])


@njit(cache=True, nogil=True)
def radix_sort_a(a):
    """radix_sort_128x applied to an anchor array a (n, 2) in place (sort by a[:,0])."""
    n = a.shape[0]
    x = a[:, 0].copy()
    y = a[:, 1].copy()
    radix_sort_128x(x, y, 0, n)
    for i in range(n):
        a[i, 0] = x[i]
        a[i, 1] = y[i]


# ---------------------------------------------------------------------------------------------
# scores
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def mg_log2(x):
    """minimap2's fast single-precision log2 approximation (mmpriv.h; only meaningful for x >= 2), in float32
    step by step as the C code computes it. The float's bits are moved through registers, not a scratch array
    (an allocation per call in update_extra's and the chain scores' loops)."""
    zi = f32_as_u32(np.float32(x))
    log_2 = np.float32(np.int64((zi >> np.uint32(23)) & np.uint32(255)) - 128)
    zf = u32_as_f32(np.uint32((zi & np.uint32(~(255 << 23) & 0xFFFFFFFF)) + np.uint32(127 << 23)))
    t = np.float32(np.float32(-0.34484843) * zf)
    t = np.float32(t + np.float32(2.02466578))
    t = np.float32(t * zf)
    t = np.float32(t - np.float32(0.67487759))
    return np.float32(log_2 + t)


@njit(cache=True, nogil=True)
def chain_pens(chain_gap_scale, chain_skip_scale, k):
    """(chn_pen_gap, chn_pen_skip) as mm_map_frag computes them: float scale * 0.01 * k in double,
    stored into a float."""
    g = np.float32(np.float64(np.float32(chain_gap_scale)) * 0.01 * k)
    s = np.float32(np.float64(np.float32(chain_skip_scale)) * 0.01 * k)
    return g, s


@njit(cache=True, nogil=True)
def comput_sc(a, i, j, max_dist_x, max_dist_y, bw, pg, ps, is_cdna, n_seg):
    dq = lo32s(a[i, 1]) - lo32s(a[j, 1])
    sidi = _seg(a[i, 1])
    sidj = _seg(a[j, 1])
    if dq <= 0 or dq > max_dist_x:
        return INT32_MIN
    dr = lo32s(a[i, 0] - a[j, 0])
    if sidi == sidj and (dr == 0 or dq > max_dist_y):
        return INT32_MIN
    dd = dr - dq if dr > dq else dq - dr
    if sidi == sidj and dd > bw:
        return INT32_MIN
    if n_seg > 1 and not is_cdna and sidi == sidj and dr > max_dist_y:
        return INT32_MIN
    dg = dr if dr < dq else dq
    q_span = anchor_span(a[j, 1])
    sc = q_span if q_span < dg else dg
    if dd or dg > q_span:
        lin_pen = pg * np.float32(dd) + ps * np.float32(dg)
        log_pen = mg_log2(dd + 1) if dd >= 1 else np.float32(0.0)
        if is_cdna or sidi != sidj:
            if sidi != sidj and dr == 0:
                sc += 1
            elif dr > dq or sidi != sidj:
                sc -= np.int64(lin_pen if lin_pen < log_pen else log_pen)
            else:
                sc -= np.int64(lin_pen + np.float32(0.5) * log_pen)
        else:
            sc -= np.int64(lin_pen + np.float32(0.5) * log_pen)
    return sc


@njit(cache=True, nogil=True)
def _comput_sc_simple(a, i, j, pg, ps):
    """(score, exact, width) of the RMQ chainer's gap cost."""
    dq = lo32s(a[i, 1]) - lo32s(a[j, 1])
    dr = lo32s(a[i, 0] - a[j, 0])
    dd = dr - dq if dr > dq else dq - dr
    dg = dr if dr < dq else dq
    q_span = anchor_span(a[j, 1])
    sc = q_span if q_span < dg else dg
    exact = 1 if (dd == 0 and dg <= q_span) else 0
    if dd or dq > q_span:
        lin_pen = pg * np.float32(dd) + ps * np.float32(dg)
        log_pen = mg_log2(dd + 1) if dd >= 1 else np.float32(0.0)
        sc -= np.int64(lin_pen + np.float32(0.5) * log_pen)
    return sc, exact, dd


# ---------------------------------------------------------------------------------------------
# backtracking (shared by the DP and the RMQ chainer)
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def _bk_end(max_drop, zx, zy, f, p, t, k):
    i = zy[k]
    end_i = -1
    max_i = i
    max_s = 0
    if i < 0 or t[i] != 0:
        return i
    zk = lo32s(zx[k])
    while True:
        t[i] = 2
        i = p[i]
        end_i = i
        s = zk if i < 0 else zk - f[i]
        if s > max_s:
            max_s = s
            max_i = i
        elif max_s - s > max_drop:
            break
        if not (i >= 0 and t[i] == 0):
            break
    i = zy[k]
    while i >= 0 and i != end_i:
        t[i] = 0
        i = p[i]
    return max_i


@njit(cache=True, nogil=True)
def chain_backtrack(f, p, t, min_cnt, min_sc, max_drop):
    """mg_chain_backtrack: returns (u, v) -- chains (score<<32|count) and their anchor indices,
    each chain's anchors listed from its end to its start."""
    n = f.shape[0]
    n_z = 0
    for i in range(n):
        if f[i] >= min_sc:
            n_z += 1
    if n_z == 0:
        return np.empty(0, np.uint64), np.empty(0, np.int64)
    zx = np.empty(n_z, np.uint64)
    zy = np.empty(n_z, np.uint64)
    k = 0
    for i in range(n):
        if f[i] >= min_sc:
            zx[k] = to_u64(f[i])
            zy[k] = np.uint64(i)
            k += 1
    radix_sort_128x(zx, zy, 0, n_z)
    zyi = np.empty(n_z, np.int64)
    for k in range(n_z):
        zyi[k] = np.int64(zy[k])
    u = np.empty(n_z, np.uint64)
    v = np.empty(n, np.int64)
    for i in range(n):
        t[i] = 0
    n_v = 0
    n_u = 0
    for k in range(n_z - 1, -1, -1):
        if t[zyi[k]] == 0:
            n_v0 = n_v
            end_i = _bk_end(max_drop, zx, zyi, f, p, t, k)
            i = zyi[k]
            while i != end_i:
                v[n_v] = i
                n_v += 1
                t[i] = 1
                i = p[i]
            zk = lo32s(zx[k])
            sc = zk if i < 0 else zk - f[i]
            if sc >= min_sc and n_v > n_v0 and n_v - n_v0 >= min_cnt:
                u[n_u] = (np.uint64(sc) << np.uint64(32)) | np.uint64(n_v - n_v0)
                n_u += 1
            else:
                n_v = n_v0
    return u[:n_u].copy(), v[:n_v].copy()


@njit(cache=True, nogil=True)
def _compact_a(u, v, a):
    """compact_a: gather each chain's anchors (start to end) and order chains by their first anchor's
    target coordinate; u is reordered to match."""
    n_u = u.shape[0]
    n_v = v.shape[0]
    b = np.empty((n_v, 2), np.uint64)
    k = 0
    for i in range(n_u):
        k0 = k
        ni = np.int64(u[i] & U32)
        for j in range(ni):
            idx = v[k0 + (ni - j - 1)]
            b[k, 0] = a[idx, 0]
            b[k, 1] = a[idx, 1]
            k += 1
    wx = np.empty(n_u, np.uint64)
    wy = np.empty(n_u, np.uint64)
    k = 0
    for i in range(n_u):
        wx[i] = b[k, 0]
        wy[i] = (np.uint64(k) << np.uint64(32)) | np.uint64(i)
        k += np.int64(u[i] & U32)
    radix_sort_128x(wx, wy, 0, n_u)
    u2 = np.empty(n_u, np.uint64)
    out = np.empty((n_v, 2), np.uint64)
    k = 0
    for i in range(n_u):
        j = np.int64(wy[i] & U32)
        nn = np.int64(u[j] & U32)
        u2[i] = u[j]
        src = np.int64(wy[i] >> np.uint64(32))
        for q in range(nn):
            out[k + q, 0] = b[src + q, 0]
            out[k + q, 1] = b[src + q, 1]
        k += nn
    return out, u2


# ---------------------------------------------------------------------------------------------
# the DP chainer
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def dp_limits(max_dist_x, max_dist_y, bw, is_cdna):
    """mg_lchain_dp's adjusted (max_dist_x, max_dist_y, max_drop)."""
    max_drop = bw
    if max_dist_x < bw:
        max_dist_x = bw
    if max_dist_y < bw and not is_cdna:
        max_dist_y = bw
    if is_cdna:
        max_drop = INT32_MAX
    return max_dist_x, max_dist_y, max_drop


@njit(cache=True, nogil=True)
def dp_scores(max_dist_x, max_dist_y, bw, max_skip, max_iter, pg, ps, is_cdna, n_seg, a, f, p, v, t):
    """The DP of mg_lchain_dp over anchors a (sorted, limits from dp_limits): best chain score f[i] ending
    at anchor i, its predecessor p[i] (-1: none) and v[i], the peak score on that chain; t is scratch.
    kernels/lchain.cu's lchain_dp_kernel computes the same per read."""
    n = a.shape[0]
    for i in range(n):
        t[i] = 0
    umdx = np.uint64(max_dist_x)
    st = 0
    max_ii = -1
    for i in range(n):
        max_j = -1
        max_f = anchor_span(a[i, 1])
        n_skip = 0
        xi = a[i, 0]
        while st < i and ((xi >> np.uint64(32)) != (a[st, 0] >> np.uint64(32)) or xi > a[st, 0] + umdx):
            st += 1
        if i - st > max_iter:
            st = i - max_iter
        j = i - 1
        while j >= st:
            sc = comput_sc(a, i, j, max_dist_x, max_dist_y, bw, pg, ps, is_cdna, n_seg)
            if sc != INT32_MIN:
                sc += f[j]
                if sc > max_f:
                    max_f = sc
                    max_j = j
                    if n_skip > 0:
                        n_skip -= 1
                elif t[j] == i:
                    n_skip += 1
                    if n_skip > max_skip:
                        break
                if p[j] >= 0:
                    t[p[j]] = i
            j -= 1
        end_j = j
        if max_ii < 0 or xi - a[max_ii, 0] > umdx:
            mx = INT32_MIN
            max_ii = -1
            for jj in range(i - 1, st - 1, -1):
                if mx < f[jj]:
                    mx = f[jj]
                    max_ii = jj
        if max_ii >= 0 and max_ii < end_j:
            tmp = comput_sc(a, i, max_ii, max_dist_x, max_dist_y, bw, pg, ps, is_cdna, n_seg)
            if tmp != INT32_MIN and max_f < tmp + f[max_ii]:
                max_f = tmp + f[max_ii]
                max_j = max_ii
        f[i] = max_f
        p[i] = max_j
        v[i] = v[max_j] if (max_j >= 0 and v[max_j] > max_f) else max_f
        if max_ii < 0 or (xi - a[max_ii, 0] <= umdx and f[max_ii] < f[i]):
            max_ii = i


@njit(cache=True, nogil=True)
def dp_chains(max_drop, min_cnt, min_sc, a, f, p, v, t):
    """mg_lchain_dp after its DP: backtracking and the chained anchors (see lchain_dp)."""
    u, vv = chain_backtrack(f, p, t, min_cnt, min_sc, max_drop)
    if u.shape[0] == 0:
        return np.empty((0, 2), np.uint64), u
    return _compact_a(u, vv, a)


@njit(cache=True, nogil=True)
def lchain_dp(max_dist_x, max_dist_y, bw, max_skip, max_iter, min_cnt, min_sc, chn_pen_gap, chn_pen_skip,
              is_cdna, n_seg, a):
    """mg_lchain_dp. a: anchors sorted by a[:,0]. Returns (a_chained, u) as minimap2 leaves them:
    chains ordered by target position of their first anchor, anchors of chain k back to back."""
    n = a.shape[0]
    if n == 0:
        return np.empty((0, 2), np.uint64), np.empty(0, np.uint64)
    max_dist_x, max_dist_y, max_drop = dp_limits(max_dist_x, max_dist_y, bw, is_cdna)
    f = np.empty(n, np.int64)
    p = np.empty(n, np.int64)
    v = np.empty(n, np.int64)
    t = np.empty(n, np.int64)
    dp_scores(max_dist_x, max_dist_y, bw, max_skip, max_iter, np.float32(chn_pen_gap), np.float32(chn_pen_skip),
              is_cdna, n_seg, a, f, p, v, t)
    return dp_chains(max_drop, min_cnt, min_sc, a, f, p, v, t)


@njit(cache=True, nogil=True)
def lchain_dp_fp(max_dist_x, max_dist_y, bw, min_cnt, min_sc, is_cdna, a, f, p):
    """lchain_dp with the scores f / predecessors p already computed for a's anchors (a batch's DP on the
    GPU, aligner/map/gpu/lchain.py, or its CPU twin): backtracking as lchain_dp does (the peak scores v of
    dp_scores are not used by it)."""
    n = a.shape[0]
    if n == 0:
        return np.empty((0, 2), np.uint64), np.empty(0, np.uint64)
    _, _, max_drop = dp_limits(max_dist_x, max_dist_y, bw, is_cdna)
    return dp_chains(max_drop, min_cnt, min_sc, a, f, p, f[:0], np.empty(n, np.int64))


# ---------------------------------------------------------------------------------------------
# krmq.h: AVL tree augmented with the subtree minimum of `pri`, emulated on arrays
# node fields in T[node, :]: left, right, min-node, balance, size, y, i
# ---------------------------------------------------------------------------------------------
_L, _R, _S, _B, _SZ, _Y, _I = 0, 1, 2, 3, 4, 5, 6


@njit(cache=True, nogil=True, inline="always")
def _kcmp(y1, i1, y2, i2):
    if y1 < y2:
        return -1
    if y1 > y2:
        return 1
    return (1 if i1 > i2 else 0) - (1 if i1 < i2 else 0)


@njit(cache=True, nogil=True, inline="always")
def _ncmp(T, x, p):
    return _kcmp(T[x, _Y], T[x, _I], T[p, _Y], T[p, _I])


@njit(cache=True, nogil=True, inline="always")
def _csize(T, q, d):
    c = T[q, d]
    return T[c, _SZ] if c >= 0 else 0


@njit(cache=True, nogil=True, inline="always")
def _update_min(T, P, p, q, r):
    T[p, _S] = p if (q < 0 or P[p] < P[T[q, _S]]) else T[q, _S]
    T[p, _S] = T[p, _S] if (r < 0 or P[T[p, _S]] < P[T[r, _S]]) else T[r, _S]


@njit(cache=True, nogil=True)
def _rotate1(T, P, p, dr):
    opp = 1 - dr
    q = T[p, opp]
    s = T[p, _S]
    size_p = T[p, _SZ]
    T[p, _SZ] -= T[q, _SZ] - _csize(T, q, dr)
    T[q, _SZ] = size_p
    _update_min(T, P, p, T[p, dr], T[q, dr])
    T[q, _S] = s
    T[p, opp] = T[q, dr]
    T[q, dr] = p
    return q


@njit(cache=True, nogil=True)
def _rotate2(T, P, p, dr):
    opp = 1 - dr
    q = T[p, opp]
    r = T[q, dr]
    s = T[p, _S]
    size_x_dir = _csize(T, r, dr)
    T[r, _SZ] = T[p, _SZ]
    T[p, _SZ] -= T[q, _SZ] - size_x_dir
    T[q, _SZ] -= size_x_dir + 1
    _update_min(T, P, p, T[p, dr], T[r, dr])
    _update_min(T, P, q, T[q, opp], T[r, opp])
    T[r, _S] = s
    T[p, opp] = T[r, dr]
    T[r, dr] = p
    T[q, dr] = T[r, opp]
    T[r, opp] = q
    b1 = 1 if dr == 0 else -1
    if T[r, _B] == b1:
        T[q, _B] = 0
        T[p, _B] = -b1
    elif T[r, _B] == 0:
        T[q, _B] = 0
        T[p, _B] = 0
    else:
        T[q, _B] = b1
        T[p, _B] = 0
    T[r, _B] = 0
    return r


@njit(cache=True, nogil=True)
def _krmq_insert(T, P, root, x, stack, path):
    """Insert node x; returns the new root (x must not be present). stack, path: scratch int64[64]."""
    bp = root
    bq = -1
    p = bp
    q = bq
    top = 0
    path_len = 0
    which = 0
    while p >= 0:
        cmp = _ncmp(T, x, p)
        if cmp == 0:
            return root
        if T[p, _B] != 0:
            bq = q
            bp = p
            top = 0
        which = 1 if cmp > 0 else 0
        stack[top] = which
        top += 1
        path[path_len] = p
        path_len += 1
        q = p
        p = T[p, which]
    T[x, _B] = 0
    T[x, _SZ] = 1
    T[x, _L] = -1
    T[x, _R] = -1
    T[x, _S] = x
    if q < 0:
        root = x
    else:
        T[q, which] = x
    if bp < 0:
        return root
    for i in range(path_len):
        T[path[i], _SZ] += 1
    for i in range(path_len - 1, -1, -1):
        _update_min(T, P, path[i], T[path[i], _L], T[path[i], _R])
        if T[path[i], _S] != x:
            break
    p = bp
    top = 0
    while p != x:
        if stack[top] == 0:
            T[p, _B] -= 1
        else:
            T[p, _B] += 1
        p = T[p, stack[top]]
        top += 1
    if T[bp, _B] > -2 and T[bp, _B] < 2:
        return root
    which = 1 if T[bp, _B] < 0 else 0
    b1 = 1 if which == 0 else -1
    q = T[bp, 1 - which]
    if T[q, _B] == b1:
        r = _rotate1(T, P, bp, which)
        T[q, _B] = 0
        T[bp, _B] = 0
    else:
        r = _rotate2(T, P, bp, which)
    if bq < 0:
        root = r
    else:
        T[bq, 0 if bp == T[bq, _L] else 1] = r
    return root


@njit(cache=True, nogil=True)
def _krmq_find(T, root, y, i):
    p = root
    while p >= 0:
        cmp = _kcmp(y, i, T[p, _Y], T[p, _I])
        if cmp < 0:
            p = T[p, _L]
        elif cmp > 0:
            p = T[p, _R]
        else:
            break
    return p


@njit(cache=True, nogil=True)
def _krmq_erase(T, P, root, x, fake, path, dirs):
    """Erase node x (present in the tree); returns the new root. `fake` is a scratch node id; path, dirs:
    scratch int64[64]."""
    for c in range(7):
        T[fake, c] = T[root, c]
    P[fake] = P[root]
    T[fake, _L] = root
    T[fake, _R] = -1
    d = 0
    cmp = -1
    p = fake
    while cmp != 0:
        which = 1 if cmp > 0 else 0
        dirs[d] = which
        path[d] = p
        d += 1
        p = T[p, which]
        if p < 0:
            return root
        cmp = _ncmp(T, x, p)
    for i in range(1, d):
        T[path[i], _SZ] -= 1
    if T[p, _R] < 0:
        T[path[d - 1], dirs[d - 1]] = T[p, _L]
    else:
        q = T[p, _R]
        if T[q, _L] < 0:
            T[q, _L] = T[p, _L]
            T[q, _B] = T[p, _B]
            T[path[d - 1], dirs[d - 1]] = q
            path[d] = q
            dirs[d] = 1
            d += 1
            T[q, _SZ] = T[p, _SZ] - 1
        else:
            e = d
            d += 1
            while True:
                dirs[d] = 0
                path[d] = q
                d += 1
                r = T[q, _L]
                if T[r, _L] < 0:
                    break
                q = r
            T[r, _L] = T[p, _L]
            T[q, _L] = T[r, _R]
            T[r, _R] = T[p, _R]
            T[r, _B] = T[p, _B]
            T[path[e - 1], dirs[e - 1]] = r
            path[e] = r
            dirs[e] = 1
            for i in range(e + 1, d):
                T[path[i], _SZ] -= 1
            T[r, _SZ] = T[p, _SZ] - 1
    for i in range(d - 1, -1, -1):
        _update_min(T, P, path[i], T[path[i], _L], T[path[i], _R])
    d -= 1
    while d > 0:
        q = path[d]
        which = dirs[d]
        other = 1 - which
        b1 = 1
        b2 = 2
        if which:
            b1 = -b1
            b2 = -b2
        T[q, _B] += b1
        if T[q, _B] == b1:
            break
        elif T[q, _B] == b2:
            r = T[q, other]
            if T[r, _B] == -b1:
                T[path[d - 1], dirs[d - 1]] = _rotate2(T, P, q, which)
            else:
                T[path[d - 1], dirs[d - 1]] = _rotate1(T, P, q, which)
                if T[r, _B] == 0:
                    T[r, _B] = -b1
                    T[q, _B] = b1
                    break
                else:
                    T[r, _B] = 0
                    T[q, _B] = 0
        d -= 1
    return T[fake, _L]


@njit(cache=True, nogil=True)
def _krmq_rmq(T, P, root, lo_y, lo_i, up_y, up_i, path0, path1, pc0, pc1):
    """Node of minimum pri among nodes with lo <= key <= up (closed), as krmq_rmq picks it; -1 if none."""
    if root < 0:
        return -1
    n0 = 0
    n1 = 0
    p = root
    while p >= 0:
        cmp = _kcmp(lo_y, lo_i, T[p, _Y], T[p, _I])
        path0[n0] = p
        pc0[n0] = cmp
        n0 += 1
        if cmp < 0:
            p = T[p, _L]
        elif cmp > 0:
            p = T[p, _R]
        else:
            break
    p = root
    while p >= 0:
        cmp = _kcmp(up_y, up_i, T[p, _Y], T[p, _I])
        path1[n1] = p
        pc1[n1] = cmp
        n1 += 1
        if cmp < 0:
            p = T[p, _L]
        elif cmp > 0:
            p = T[p, _R]
        else:
            break
    i = 0
    while i < n0 and i < n1:
        if path0[i] == path1[i] and pc0[i] <= 0 and pc1[i] >= 0:
            break
        i += 1
    if i == n0 or i == n1:
        return -1
    lca = i
    mn = path0[lca]
    for i in range(lca + 1, n0):
        if pc0[i] <= 0:
            if P[path0[i]] < P[mn]:
                mn = path0[i]
            c = T[path0[i], _R]
            if c >= 0 and P[T[c, _S]] < P[mn]:
                mn = T[c, _S]
    for i in range(lca + 1, n1):
        if pc1[i] >= 0:
            if P[path1[i]] < P[mn]:
                mn = path1[i]
            c = T[path1[i], _L]
            if c >= 0 and P[T[c, _S]] < P[mn]:
                mn = T[c, _S]
    return mn


@njit(cache=True, nogil=True)
def _krmq_lower(T, root, y, i):
    """krmq_interval's lower bound: the last node with key <= (y, i), or -1."""
    p = root
    l = -1
    while p >= 0:
        cmp = _kcmp(y, i, T[p, _Y], T[p, _I])
        if cmp < 0:
            p = T[p, _L]
        elif cmp > 0:
            l = p
            p = T[p, _R]
        else:
            l = p
            break
    return l


# ---------------------------------------------------------------------------------------------
# the RMQ chainer
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def lchain_rmq(max_dist, max_dist_inner, bw, max_chn_skip, cap_rmq_size, min_cnt, min_sc, chn_pen_gap,
               chn_pen_skip, a):
    """mg_lchain_rmq. a: anchors sorted by a[:,0]. Returns (a_chained, u) like lchain_dp."""
    n = a.shape[0]
    if n == 0:
        return np.empty((0, 2), np.uint64), np.empty(0, np.uint64)
    pg = np.float32(chn_pen_gap)
    ps = np.float32(chn_pen_skip)
    max_drop = bw
    if max_dist < bw:
        max_dist = bw
    if max_dist_inner <= 0 or max_dist_inner >= max_dist:
        max_dist_inner = 0
    p = np.empty(n, np.int64)
    f = np.empty(n, np.int64)
    t = np.zeros(n, np.int64)
    v = np.empty(n, np.int64)
    # nodes 0..n-1: main tree; n..2n-1: inner tree; 2n: scratch for erase
    T = np.full((2 * n + 1, 7), -1, np.int64)
    P = np.zeros(2 * n + 1, np.float64)
    fake = 2 * n
    sc1 = np.empty(64, np.int64)
    sc2 = np.empty(64, np.int64)
    sc3 = np.empty(64, np.int64)
    sc4 = np.empty(64, np.int64)
    stk = np.empty(64, np.int64)
    # the tree's node walks pass these arrays to their helpers at every step: views without owners
    # (nbshare.unowned) spare each pass its reference counts; `own` keeps the arrays alive, and a is the caller's
    own = (p, f, t, v, T, P, sc1, sc2, sc3, sc4, stk)
    p, f, t, v, T, P, sc1, sc2, sc3, sc4, stk = unowned(own)
    a = unowned(a)
    root = -1
    root_inner = -1
    umd = np.uint64(max_dist)
    umdi = np.uint64(max_dist_inner)
    dpg = np.float64(pg)
    st = 0
    st_inner = 0
    i0 = 0
    for i in range(n):
        max_j = -1
        q_span = anchor_span(a[i, 1])
        max_f = q_span
        xi = a[i, 0]
        yi = lo32s(a[i, 1])
        if i0 < i and a[i0, 0] != xi:
            for j in range(i0, i):
                T[j, _Y] = lo32s(a[j, 1])
                T[j, _I] = j
                P[j] = -(f[j] + 0.5 * dpg * np.float64(lo32s(lo32s(a[j, 0]) + lo32s(a[j, 1]))))
                root = _krmq_insert(T, P, root, j, sc1, sc2)
                if max_dist_inner > 0:
                    r = n + j
                    T[r, _Y] = T[j, _Y]
                    T[r, _I] = j
                    P[r] = P[j]
                    root_inner = _krmq_insert(T, P, root_inner, r, sc1, sc2)
            i0 = i
        while st < i and ((xi >> np.uint64(32)) != (a[st, 0] >> np.uint64(32)) or xi > a[st, 0] + umd
                          or (T[root, _SZ] if root >= 0 else 0) > cap_rmq_size):
            q = _krmq_find(T, root, lo32s(a[st, 1]), st)
            if q >= 0:
                root = _krmq_erase(T, P, root, q, fake, sc1, sc2)
            st += 1
        if max_dist_inner > 0:
            while st_inner < i and ((xi >> np.uint64(32)) != (a[st_inner, 0] >> np.uint64(32))
                                    or xi > a[st_inner, 0] + umdi
                                    or (T[root_inner, _SZ] if root_inner >= 0 else 0) > cap_rmq_size):
                q = _krmq_find(T, root_inner, lo32s(a[st_inner, 1]), st_inner)
                if q >= 0:
                    root_inner = _krmq_erase(T, P, root_inner, q, fake, sc1, sc2)
                st_inner += 1
        q = _krmq_rmq(T, P, root, lo32s(yi - max_dist), INT32_MAX, yi, 0, sc1, sc2, sc3, sc4)
        if q >= 0:
            n_skip = 0
            j = T[q, _I]
            sc0, exact, width = _comput_sc_simple(a, i, j, pg, ps)
            sc = f[j] + sc0
            if width <= bw and sc > max_f:
                max_f = sc
                max_j = j
            if exact == 0 and root_inner >= 0 and yi > 0:
                lo = _krmq_lower(T, root_inner, yi - 1, n)
                if lo >= 0:
                    # iterator placed at lo: the search path from the root down to lo
                    top = -1
                    pp = root_inner
                    while pp >= 0:
                        top += 1
                        stk[top] = pp
                        cmp = _ncmp(T, lo, pp)
                        if cmp < 0:
                            pp = T[pp, _L]
                        elif cmp > 0:
                            pp = T[pp, _R]
                        else:
                            break
                    while top >= 0:
                        qq = stk[top]
                        if T[qq, _Y] < yi - max_dist_inner:
                            break
                        j = T[qq, _I]
                        sc0, exact2, width = _comput_sc_simple(a, i, j, pg, ps)
                        sc = f[j] + sc0
                        if width <= bw:
                            if sc > max_f:
                                max_f = sc
                                max_j = j
                                if n_skip > 0:
                                    n_skip -= 1
                            elif t[j] == i:
                                n_skip += 1
                                if n_skip > max_chn_skip:
                                    break
                            if p[j] >= 0:
                                t[p[j]] = i
                        # step to the in-order predecessor
                        c = T[stk[top], _L]
                        if c >= 0:
                            while c >= 0:
                                top += 1
                                stk[top] = c
                                c = T[c, _R]
                        else:
                            while True:
                                pv = stk[top]
                                top -= 1
                                if not (top >= 0 and pv == T[stk[top], _L]):
                                    break
                            if top < 0:
                                break
        f[i] = max_f
        p[i] = max_j
        v[i] = v[max_j] if (max_j >= 0 and v[max_j] > max_f) else max_f
    u, vv = chain_backtrack(f, p, t, min_cnt, min_sc, max_drop)  # new arrays: nothing returned is a view
    keep_alive(own)
    if u.shape[0] == 0:
        return np.empty((0, 2), np.uint64), u
    return _compact_a(u, vv, a)


# ---------------------------------------------------------------------------------------------
# re-chaining decision of mm_map_frag
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def need_long_rechain(bw, bw_long, no_ljoin_flags, n_segs, qlen_sum, rmq_rescue_size, rmq_rescue_ratio, a, u):
    """True when mm_map_frag redoes chaining with RMQ and bw_long. no_ljoin_flags: nonzero when any of
    MM_F_SPLICE, MM_F_SR, MM_F_NO_LJOIN is set. rmq_rescue_ratio is a C float."""
    if not (bw_long > bw and no_ljoin_flags == 0 and n_segs == 1 and u.shape[0] > 1):
        return False
    st = lo32s(a[0, 1])
    en = lo32s(a[np.int64(u[0] & U32) - 1, 1])
    # qlen_sum * ratio: int * float -> float
    return qlen_sum - (en - st) > rmq_rescue_size or \
        np.float32(en - st) > np.float32(qlen_sum) * np.float32(rmq_rescue_ratio)


@njit(cache=True, nogil=True)
def maybe_rechain_long(bw, bw_long, no_ljoin_flags, n_segs, qlen_sum, rmq_rescue_size, rmq_rescue_ratio,
                       max_gap, rmq_inner_dist, max_chain_skip, rmq_size_cap, min_cnt, min_chain_score,
                       chn_pen_gap, chn_pen_skip, a, u):
    """The long-join re-chaining step of mm_map_frag: if need_long_rechain, sort the chained anchors
    (radix_sort_128x) and chain them again with lchain_rmq(max_gap, rmq_inner_dist, bw_long, ...).
    Returns (a, u, rechained)."""
    if need_long_rechain(bw, bw_long, no_ljoin_flags, n_segs, qlen_sum, rmq_rescue_size, rmq_rescue_ratio, a, u):
        n_a = 0
        for i in range(u.shape[0]):
            n_a += np.int64(u[i] & U32)
        b = a[:n_a].copy()
        radix_sort_a(b)
        a2, u2 = lchain_rmq(max_gap, rmq_inner_dist, bw_long, max_chain_skip, rmq_size_cap, min_cnt,
                            min_chain_score, chn_pen_gap, chn_pen_skip, b)
        return a2, u2, True
    return a, u, False


@njit(cache=True, nogil=True)
def need_occ_rechain(max_occ, mid_occ, rep_len, is_rmq, n_segs, a, u):
    """The short-read re-chaining test of mm_map_frag (only reached when the long-join branch was not
    taken): True when seeds should be collected again with max_occ and chained with lchain_dp."""
    if not (max_occ > mid_occ and rep_len > 0 and not is_rmq):
        return False
    n_u = u.shape[0]
    if n_u == 0:
        return True
    mx = 0
    max_i = -1
    max_off = -1
    off = 0
    for i in range(n_u):
        sc = np.int64(u[i] >> np.uint64(32))
        if mx < sc:
            mx = sc
            max_i = i
            max_off = off
        off += np.int64(u[i] & U32)
    n_chained = 1
    for i in range(1, np.int64(u[max_i] & U32)):
        if (a[max_off + i, 1] & SEG_MASK) != (a[max_off + i - 1, 1] & SEG_MASK):
            n_chained += 1
    return n_chained < n_segs


# ---------------------------------------------------------------------------------------------
# hashes and region generation (hit.c)
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def wang_hash(key):
    """khash's __ac_Wang_hash on uint32."""
    m = np.uint64(0xFFFFFFFF)
    k = np.uint64(key) & m
    k = (k + ((~(k << np.uint64(15))) & m)) & m
    k ^= k >> np.uint64(10)
    k = (k + (k << np.uint64(3))) & m
    k ^= k >> np.uint64(6)
    k = (k + ((~(k << np.uint64(11))) & m)) & m
    k ^= k >> np.uint64(16)
    return k


@njit(cache=True, nogil=True)
def x31_hash(name):
    """khash's __ac_X31_hash_string over a uint8 array (bytes of the name; chars are signed)."""
    m = np.uint64(0xFFFFFFFF)
    if name.shape[0] == 0 or name[0] == 0:
        return np.uint64(0)
    h = to_u64(np.int64(name[0]) - 256 if name[0] >= 128 else np.int64(name[0])) & m
    for k in range(1, name.shape[0]):
        c = name[k]
        if c == 0:
            break
        cv = to_u64(np.int64(c) - 256 if c >= 128 else np.int64(c)) & m
        h = ((h << np.uint64(5)) - h + cv) & m
    return h


@njit(cache=True, nogil=True)
def read_hash(name, qlen_sum, seed):
    """The per-read hash of mm_map_frag. name: uint8 bytes of the read name (empty when there is no
    name or MM_F_NO_HASH_NAME is set); seed: opt->seed (11)."""
    m = np.uint64(0xFFFFFFFF)
    h = x31_hash(name)
    h ^= (wang_hash(np.uint64(qlen_sum) & m) + wang_hash(np.uint64(seed) & m)) & m
    return wang_hash(h)


@njit(cache=True, nogil=True)
def hash64(key):
    k = np.uint64(key)
    k = (~k) + (k << np.uint64(21))
    k = k ^ (k >> np.uint64(24))
    k = (k + (k << np.uint64(3))) + (k << np.uint64(8))
    k = k ^ (k >> np.uint64(14))
    k = (k + (k << np.uint64(2))) + (k << np.uint64(4))
    k = k ^ (k >> np.uint64(28))
    k = k + (k << np.uint64(31))
    return k


@njit(cache=True, nogil=True)
def cal_fuzzy_len(R, r, a):
    """mm_cal_fuzzy_len: MLEN and BLEN of row r from its anchors."""
    R[r, MLEN] = 0
    R[r, BLEN] = 0
    if R[r, CNT] <= 0:
        return
    s = R[r, AS]
    mlen = anchor_span(a[s, 1])
    blen = mlen
    for i in range(s + 1, s + R[r, CNT]):
        span = anchor_span(a[i, 1])
        tl = lo32s(a[i, 0]) - lo32s(a[i - 1, 0])
        ql = lo32s(a[i, 1]) - lo32s(a[i - 1, 1])
        blen += tl if tl > ql else ql
        if tl > span and ql > span:
            mlen += span
        else:
            mlen += tl if tl < ql else ql
    R[r, MLEN] = lo32s(mlen)
    R[r, BLEN] = lo32s(blen)


@njit(cache=True, nogil=True)
def reg_set_coor(R, r, qlen, a, is_qstrand):
    """mm_reg_set_coor: REV RID RS RE QS QE (and MLEN/BLEN) of row r from AS and CNT."""
    k = R[r, AS]
    q_span = anchor_span(a[k, 1])
    rev = np.int64(a[k, 0] >> np.uint64(63))
    R[r, REV] = rev
    R[r, RID] = np.int64((a[k, 0] << np.uint64(1)) >> np.uint64(33))
    x0 = lo32s(a[k, 0])
    R[r, RS] = x0 + 1 - q_span if x0 + 1 > q_span else 0
    last = k + R[r, CNT] - 1
    R[r, RE] = lo32s(a[last, 0]) + 1
    if rev == 0 or is_qstrand:
        R[r, QS] = lo32s(a[k, 1]) + 1 - q_span
        R[r, QE] = lo32s(a[last, 1]) + 1
    else:
        R[r, QS] = qlen - (lo32s(a[last, 1]) + 1)
        R[r, QE] = qlen - (lo32s(a[k, 1]) + 1 - q_span)
    cal_fuzzy_len(R, r, a)


@njit(cache=True, nogil=True)
def gen_regs(hash, qlen, u, a, is_qstrand):
    """mm_gen_regs: one region per chain, ordered by score (ties broken by a hash of the chain's first
    anchor and the read hash), with coordinates from the anchors. Returns R int64[n_u, NR]."""
    n_u = u.shape[0]
    R = np.zeros((n_u, NR), np.int64)
    if n_u == 0:
        return R
    h32 = np.uint64(hash) & U32
    zx = np.empty(n_u, np.uint64)
    zy = np.empty(n_u, np.uint64)
    k = 0
    for i in range(n_u):
        h = (hash64((hash64(a[k, 0]) + hash64(a[k, 1])) ^ h32)) & U32
        zx[i] = u[i] ^ h
        zy[i] = (np.uint64(k) << np.uint64(32)) | (u[i] & U32)
        k += np.int64(u[i] & U32)
    radix_sort_128x(zx, zy, 0, n_u)
    for i in range(n_u >> 1):
        tx = zx[i]
        ty = zy[i]
        zx[i] = zx[n_u - 1 - i]
        zy[i] = zy[n_u - 1 - i]
        zx[n_u - 1 - i] = tx
        zy[n_u - 1 - i] = ty
    div = f32_bits(np.float32(-1.0))
    for i in range(n_u):
        R[i, ID] = i
        R[i, PARENT] = -1
        sc = lo32s(zx[i] >> np.uint64(32))
        R[i, SCORE] = sc
        R[i, SCORE0] = sc
        R[i, HASH] = np.int64(zx[i] & U32)
        R[i, CNT] = lo32s(zy[i])
        R[i, AS] = np.int64(zy[i] >> np.uint64(32))
        R[i, DIV] = div
        reg_set_coor(R, i, qlen, a, is_qstrand)
    return R


@njit(cache=True, nogil=True)
def chain_gaps(is_sr, qlen_sum, max_gap, max_gap_ref, max_frag_len):
    """(max_chain_gap_qry, max_chain_gap_ref) of mm_map_frag; lchain_dp takes them as
    (max_dist_x = gap_ref, max_dist_y = gap_qry)."""
    if is_sr:
        gq = qlen_sum if qlen_sum > max_gap else max_gap
    else:
        gq = max_gap
    if max_gap_ref > 0:
        gr = max_gap_ref
    elif max_frag_len > 0:
        gr = max_frag_len - qlen_sum
        if gr < max_gap:
            gr = max_gap
    else:
        gr = max_gap
    return gq, gr


@njit(cache=True, nogil=True)
def seg_gen(hash, qlens, R0, n0, a):
    """mm_seg_gen: split the fragment chains R0[:n0] (anchors in a) into per-segment chains.
    Returns (a_cat, a_off, R_cat, r_off): segment s has anchors a_cat[a_off[s]:a_off[s+1]] (query
    coordinates of the segment) and regions R_cat[r_off[s]:r_off[s+1]] (from gen_regs, AS relative to
    its own anchors, SEG_SPLIT = 1, SEG_ID = s)."""
    n_segs = qlens.shape[0]
    acc = np.zeros(n_segs + 1, np.int64)
    for s in range(1, n_segs + 1):
        acc[s] = acc[s - 1] + qlens[s - 1]
    qlen_sum = acc[n_segs]
    us = np.empty((n_segs, n0), np.uint64)
    na = np.zeros(n_segs, np.int64)
    for s in range(n_segs):
        for i in range(n0):
            us[s, i] = to_u64(R0[i, SCORE]) << np.uint64(32)
    for i in range(n0):
        for j in range(R0[i, CNT]):
            sid = _seg(a[R0[i, AS] + j, 1])
            us[sid, i] += np.uint64(1)
            na[sid] += 1
    a_off = np.zeros(n_segs + 1, np.int64)
    for s in range(n_segs):
        a_off[s + 1] = a_off[s] + na[s]
    a_cat = np.empty((a_off[n_segs], 2), np.uint64)
    fill = a_off[:n_segs].copy()
    for i in range(n0):
        for j in range(R0[i, CNT]):
            x = a[R0[i, AS] + j, 0]
            y = a[R0[i, AS] + j, 1]
            sid = _seg(y)
            if x >> np.uint64(63):
                y -= np.uint64(qlen_sum - (qlens[sid] + acc[sid]))
            else:
                y -= np.uint64(acc[sid])
            a_cat[fill[sid], 0] = x
            a_cat[fill[sid], 1] = y
            fill[sid] += 1
    r_off = np.zeros(n_segs + 1, np.int64)
    n_us = np.zeros(n_segs, np.int64)
    for s in range(n_segs):
        k = 0
        for i in range(n0):
            if (us[s, i] & U32) != 0:
                us[s, k] = us[s, i]
                k += 1
        n_us[s] = k
        r_off[s + 1] = r_off[s] + k
    R_cat = np.zeros((r_off[n_segs], NR), np.int64)
    for s in range(n_segs):
        Rs = gen_regs(hash, qlens[s], us[s, :n_us[s]].copy(), a_cat[a_off[s]:a_off[s + 1]], 0)
        for i in range(n_us[s]):
            for c in range(NR):
                R_cat[r_off[s] + i, c] = Rs[i, c]
            R_cat[r_off[s] + i, SEG_SPLIT] = 1
            R_cat[r_off[s] + i, SEG_ID] = s
    return a_cat, a_off, R_cat, r_off
