"""minimap2 2.24's ksw2 kernels (extd2 / extz2 / ll_i16), bit-exact with the SSE builds minimap2 runs.

The SSE kernels of minimap2 fill the DP matrix one anti-diagonal ``r = t + j`` at a time (``t`` the
target position, ``j`` the query position) and keep the matrix as 8-bit *differences* between
neighbouring cells:

* ``u[t]`` - H(t, j) minus the cell one query base back, ``v[t]`` - H(t, j) minus one target base back,
* ``x[t]`` / ``y[t]`` - the gap states (deletion / insertion) relative to the same neighbours,
* ``x2``/``y2`` - the same for the second (long) gap model of extd2.

The band is cut on each anti-diagonal to ``[st0, en0]`` and then widened to whole 16-byte blocks
``[st, en]``; the cells of the widened part are computed as well (with stale scores and stale
neighbours) and both their values and their direction bits can reach the result, so this port
replays every 16-lane block cell by cell with 8-bit wrap-around arithmetic, the same scratch-array
life cycle (stale values included) and the same tie rules.  Absolute scores are rebuilt along the
anti-diagonal in 32 bits (exact max, with the 4-lane reduction order) or along one greedy path
(``KSW_EZ_APPROX_MAX``).  ``ll_i16`` is the striped 16-bit local aligner (ksw_ll_qinit(size=2) +
ksw_ll_i16) replayed lane by lane with saturating arithmetic.

Results (``ez`` indices from mm_types, CIGAR ``len << 4 | op``) equal minimap2's SSE4.1 build (the one
its runtime dispatch picks on any x86-64 CPU with SSE4.1), checked against a C harness on the
original sources (tests/test_ksw2.py, scripts/ksw2_harness.c).
"""
import numpy as np

from g3align.aligner.map.types import (
    EZ_MAX,
    EZ_MAX_Q,
    EZ_MAX_T,
    EZ_MQE,
    EZ_MQE_T,
    EZ_MTE,
    EZ_MTE_Q,
    EZ_N,
    EZ_REACH_END,
    EZ_SCORE,
    EZ_ZDROPPED,
    KSW_EZ_APPROX_DROP,
    KSW_EZ_APPROX_MAX,
    KSW_EZ_EXTZ_ONLY,
    KSW_EZ_GENERIC_SC,
    KSW_EZ_REV_CIGAR,
    KSW_EZ_RIGHT,
    KSW_EZ_SCORE_ONLY,
    KSW_NEG_INF,
)
from g3align.jit import njit

_NEG_INF = KSW_NEG_INF


# ----------------------------------------------------------------------------------------------
# small helpers
# ----------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def _s8(x):
    """Wrap an integer to a signed byte (what an 8-bit SSE lane holds)."""
    return ((x + 128) & 255) - 128


@njit(cache=True, nogil=True, inline="always")
def _cdiv(a, b):
    """C integer division (truncates toward zero)."""
    qq = abs(a) // abs(b)
    return qq if (a >= 0) == (b >= 0) else -qq


@njit(cache=True, nogil=True)
def gen_simple_mat(m, a, b, sc_ambi):
    """align.c's ksw_gen_simple_mat: m x m matrix (flattened int8), +|a| on the diagonal, -|b| off it,
    -|sc_ambi| on the last row and column (the wildcard N)."""
    a = _s8(a)
    b = _s8(b)
    sc_ambi = _s8(sc_ambi)
    a = _s8(-a) if a < 0 else a
    b = _s8(-b) if b > 0 else b
    sc_ambi = _s8(-sc_ambi) if sc_ambi > 0 else sc_ambi
    mat = np.empty(m * m, np.int8)
    for i in range(m - 1):
        for j in range(m - 1):
            mat[i * m + j] = a if i == j else b
        mat[i * m + m - 1] = sc_ambi
    for j in range(m):
        mat[(m - 1) * m + j] = sc_ambi
    return mat


@njit(cache=True, nogil=True)
def _new_ez():
    ez = np.zeros(EZ_N, np.int64)
    ez[EZ_MAX_Q] = -1
    ez[EZ_MAX_T] = -1
    ez[EZ_MQE_T] = -1
    ez[EZ_MTE_Q] = -1
    ez[EZ_SCORE] = _NEG_INF
    ez[EZ_MQE] = _NEG_INF
    ez[EZ_MTE] = _NEG_INF
    return ez


@njit(cache=True, nogil=True)
def _mat_side(mat):
    m = 0
    while (m + 1) * (m + 1) <= mat.shape[0]:
        m += 1
    return m


@njit(cache=True, nogil=True, inline="always")
def _zdrop(ez, H, r, t, zdrop, e):
    """Track the best cell of anti-diagonal r (rotated coordinates) and test the Z-drop."""
    if H > ez[EZ_MAX]:
        ez[EZ_MAX] = H
        ez[EZ_MAX_T] = t
        ez[EZ_MAX_Q] = r - t
    elif t >= ez[EZ_MAX_T] and r - t >= ez[EZ_MAX_Q]:
        tl = t - ez[EZ_MAX_T]
        ql = (r - t) - ez[EZ_MAX_Q]
        gap = tl - ql if tl > ql else ql - tl
        if zdrop >= 0 and ez[EZ_MAX] - H > zdrop + gap * e:
            ez[EZ_ZDROPPED] = 1
            return True
    return False


@njit(cache=True, nogil=True)
def _band_rows(qlen, tlen, w):
    """Per anti-diagonal: widened block bounds st/en and the offset of its row in the direction matrix.
    Stops at the first anti-diagonal whose band is empty (the kernels stop there too)."""
    nr = qlen + tlen - 1
    bst = np.empty(nr, np.int64)
    ben = np.empty(nr, np.int64)
    poff = np.zeros(nr + 1, np.int64)
    for r in range(nr):
        st = 0
        en = tlen - 1
        if st < r - qlen + 1:
            st = r - qlen + 1
        if en > r:
            en = r
        if st < (r - w + 1) >> 1:
            st = (r - w + 1) >> 1
        if en > (r + w) >> 1:
            en = (r + w) >> 1
        if st > en:
            bst[r] = 0
            ben[r] = -1
            poff[r + 1] = poff[r]
            continue
        st = st // 16 * 16
        en = (en + 16) // 16 * 16 - 1
        bst[r] = st
        ben[r] = en
        poff[r + 1] = poff[r] + (en - st + 1)
    return bst, ben, poff


@njit(cache=True, nogil=True)
def _backtrack(p, poff, off, off_end, i0, j0, is_rev, cig_len):
    """Walk the direction bits back from target i0 / query j0 (rotated layout). Returns the CIGAR."""
    cig = np.empty(cig_len + 2, np.uint32)
    n = 0
    i = i0
    j = j0
    state = 0
    while i >= 0 and j >= 0:
        r = i + j
        force = -1
        if i < off[r]:
            force = 2
        if i > off_end[r]:
            force = 1
        tmp = 0
        if force < 0:
            tmp = np.int64(p[poff[r] + i - off[r]])
        if state == 0:
            state = tmp & 7
        elif not ((tmp >> (state + 2)) & 1):
            state = 0
        if state == 0:
            state = tmp & 7
        if force >= 0:
            state = force
        if state == 0:
            op = 0
            i -= 1
            j -= 1
        elif state == 1 or state == 3:
            op = 2
            i -= 1
        else:
            op = 1
            j -= 1
        if n > 0 and (cig[n - 1] & 0xF) == op:
            cig[n - 1] += np.uint32(16)
        else:
            cig[n] = np.uint32(16 | op)
            n += 1
    if i >= 0:
        if n > 0 and (cig[n - 1] & 0xF) == 2:
            cig[n - 1] += np.uint32((i + 1) << 4)
        else:
            cig[n] = np.uint32((i + 1) << 4 | 2)
            n += 1
    if j >= 0:
        if n > 0 and (cig[n - 1] & 0xF) == 1:
            cig[n - 1] += np.uint32((j + 1) << 4)
        else:
            cig[n] = np.uint32((j + 1) << 4 | 1)
            n += 1
    out = np.empty(n, np.uint32)
    if is_rev:
        for k in range(n):
            out[k] = cig[k]
    else:
        for k in range(n):
            out[k] = cig[n - 1 - k]
    return out


@njit(cache=True, nogil=True)
def _fill_scores(s, sf, qr, qlen, r, st0, en0, T, mat, m, generic, sc_mch, sc_mis, sc_N):
    """Substitution scores of anti-diagonal r into s[], written in the same 16-cell chunks as the SSE
    code: cells past en0 get scores of the zero padding after the target (sf) or after the reversed
    query (qr); cells outside the chunks keep stale values.  qr[qlen-1-r+t] is query[r-t]."""
    if generic:
        for t in range(st0, en0 + 1):
            s[t] = np.int8(mat[np.int64(sf[t]) * m + np.int64(qr[qlen - 1 - r + t])])
        return
    nch = (en0 - st0 + 16) // 16
    tend = st0 + nch * 16
    if tend > T:
        tend = T
    n = tend - st0
    ss = s[st0:tend]
    sa = sf[st0:tend]
    qb = qr[qlen - 1 - r + st0:qlen - 1 - r + tend]
    m1 = m - 1
    for k in range(n):
        a = np.int32(sa[k])
        b = np.int32(qb[k])
        sc = sc_mch if a == b else sc_mis
        ss[k] = sc_N if (a == m1) | (b == m1) else sc


@njit(cache=True, nogil=True)
def _padded_seqs(qseq, tseq, T):
    """Target zero-padded to T and the reversed query zero-padded by 16 (the SSE loads read there)."""
    qlen = qseq.shape[0]
    tlen = tseq.shape[0]
    sf = np.zeros(T, np.uint8)
    sf[:tlen] = tseq
    qr = np.zeros(qlen + 16, np.uint8)
    for i in range(qlen):
        qr[i] = qseq[qlen - 1 - i]
    return sf, qr


@njit(cache=True, nogil=True)
def _exact_max(H, U, V, st0, en0, qe, is_unsigned):
    """32-bit scores of one anti-diagonal (r > 0) rebuilt from the stored differences; returns the max
    and its position with the SSE code's tie order: the last cell (computed first) wins ties, then the
    cells before en1 as 4 interleaved lanes (lowest lane, then earliest cell), then the tail cells
    only when strictly better."""
    mask = 255 if is_unsigned else -1
    if en0 > 0:
        uu = np.int64(U[en0])
        if is_unsigned:
            uu &= 255
        H[en0] = H[en0 - 1] + uu - qe
    else:
        vv = np.int64(V[en0])
        if is_unsigned:
            vv &= 255
        H[en0] = H[en0] + vv - qe
    max_H = np.int64(H[en0])
    max_t = en0
    en1 = st0 + (en0 - st0) // 4 * 4
    n = en0 - st0
    hh = H[st0:en0]
    vs = V[st0:en0]
    qe32 = np.int32(qe)
    for k in range(n):
        hh[k] = hh[k] + ((np.int32(vs[k]) & mask) if is_unsigned else np.int32(vs[k])) - qe32
    n1 = en1 - st0
    mv = max_H
    for k in range(n1):
        mv = max(mv, np.int64(hh[k]))
    if mv > max_H:
        best_lane = 4
        for k in range(n1):
            if hh[k] == mv:
                lane = k & 3
                if lane < best_lane:
                    best_lane = lane
                    max_t = st0 + k
        max_H = mv
    for k in range(n1, n):
        if hh[k] > max_H:
            max_H = np.int64(hh[k])
            max_t = st0 + k
    return max_H, max_t


@njit(cache=True, nogil=True)
def _d2_cells(st, en, x1, v1, x21, u, v, x, y, x2, y2, s, p, pbase, mode, q_v, q2_v, qe_v, qe2_v, sc_mch, xs, vs, x2s):
    """One anti-diagonal of extd2 over the widened band [st, en]: every cell reads the previous
    anti-diagonal's values (x, v, x2 one target base back; u, y, y2 at the same target base) and
    overwrites them in place; mode 0/1/2 = left-aligned gaps / right-aligned gaps / score only.
    Written branch-free (max/min and 0/1 products) so that LLVM vectorizes it."""
    # slices indexed from 0 let LLVM drop the negative-index checks and vectorize the loops
    n = en - st + 1
    uu = u[st:en + 1]
    vv = v[st:en + 1]
    xx = x[st:en + 1]
    yy = y[st:en + 1]
    xx2 = x2[st:en + 1]
    yy2 = y2[st:en + 1]
    ss = s[st:en + 1]
    pp = p[pbase + st:pbase + en + 1] if mode != 2 else p[0:0]
    xs[0] = x1
    vs[0] = v1
    x2s[0] = x21
    for k in range(n - 1):
        xs[k + 1] = xx[k]
        vs[k + 1] = vv[k]
        x2s[k + 1] = xx2[k]
    for k in range(n):
        vp = np.int32(vs[k])
        ut = np.int32(uu[k])
        z = np.int32(ss[k])
        a = np.int32(np.int8(xs[k] + vp))
        b = np.int32(np.int8(yy[k] + ut))
        a2 = np.int32(np.int8(x2s[k] + vp))
        b2 = np.int32(np.int8(yy2[k] + ut))
        if mode == 0:  # a state wins only when strictly better
            d = np.int32(a > z)
            z = max(z, a)
            c = np.int32(b > z)
            d += c * (2 - d)
            z = max(z, b)
            c = np.int32(a2 > z)
            d += c * (3 - d)
            z = max(z, a2)
            c = np.int32(b2 > z)
            d += c * (4 - d)
            z = max(z, b2)
        else:  # a later state wins ties
            d = np.int32(a >= z)
            z = max(z, a)
            c = np.int32(b >= z)
            d += c * (2 - d)
            z = max(z, b)
            c = np.int32(a2 >= z)
            d += c * (3 - d)
            z = max(z, a2)
            c = np.int32(b2 >= z)
            d += c * (4 - d)
            z = max(z, b2)
        z = min(z, sc_mch)
        uu[k] = np.int8(z - vp)
        vv[k] = np.int8(z - ut)
        tq = np.int32(np.int8(z - q_v))
        a = np.int32(np.int8(a - tq))
        b = np.int32(np.int8(b - tq))
        tq = np.int32(np.int8(z - q2_v))
        a2 = np.int32(np.int8(a2 - tq))
        b2 = np.int32(np.int8(b2 - tq))
        xx[k] = np.int8(max(a, 0) - qe_v)
        yy[k] = np.int8(max(b, 0) - qe_v)
        xx2[k] = np.int8(max(a2, 0) - qe2_v)
        yy2[k] = np.int8(max(b2, 0) - qe2_v)
        if mode == 0:
            d |= np.int32(a > 0) << 3 | np.int32(b > 0) << 4 | np.int32(a2 > 0) << 5 | np.int32(b2 > 0) << 6
            pp[k] = d
        elif mode == 1:
            d |= np.int32(a >= 0) << 3 | np.int32(b >= 0) << 4 | np.int32(a2 >= 0) << 5 | np.int32(b2 >= 0) << 6
            pp[k] = d


# ----------------------------------------------------------------------------------------------
# extd2: dual affine gaps
# ----------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def extd2(qseq, tseq, mat, q, e, q2, e2, w, zdrop, end_bonus, flag):
    """ksw_extd2_sse: global/extension alignment with two affine gap models (cost min of
    q+l*e and q2+l*e2).  Returns (ez int64[EZ_N], cigar uint32[:])."""
    ez = _new_ez()
    cigar = np.empty(0, np.uint32)
    qlen = qseq.shape[0]
    tlen = tseq.shape[0]
    m = _mat_side(mat)
    q = _s8(q)
    e = _s8(e)
    q2 = _s8(q2)
    e2 = _s8(e2)
    qe = q + e  # taken before the swap below, as the C code does
    if m <= 1 or qlen <= 0 or tlen <= 0:
        return ez, cigar
    if q2 + e2 < q + e:
        q, q2 = q2, q
        e, e2 = e2, e
    with_cigar = (flag & KSW_EZ_SCORE_ONLY) == 0
    approx_max = (flag & KSW_EZ_APPROX_MAX) != 0
    right = (flag & KSW_EZ_RIGHT) != 0
    generic = (flag & KSW_EZ_GENERIC_SC) != 0
    sc_mch = _s8(mat[0])
    sc_mis = _s8(mat[1])
    sc_N = _s8(-e2) if mat[m * m - 1] == 0 else _s8(mat[m * m - 1])
    qe_v = _s8(q + e)
    qe2_v = _s8(q2 + e2)
    q_v = _s8(q)
    q2_v = _s8(q2)
    if w < 0:
        w = tlen if tlen > qlen else qlen
    tlen_ = (tlen + 15) // 16
    T = tlen_ * 16
    min_sc = np.int64(mat[1])
    for k in range(1, m * m):
        if mat[k] < min_sc:
            min_sc = np.int64(mat[k])
    if -min_sc > 2 * (q + e):
        return ez, cigar
    long_thres = _cdiv(q2 - q, e - e2) - 1 if e != e2 else 0
    if q2 + e2 + long_thres * e2 > q + e + long_thres * e:
        long_thres += 1
    long_diff = long_thres * (e - e2) - (q2 - q) - e2

    init1 = _s8(-q - e)
    init2 = _s8(-q2 - e2)
    u = np.full(T, init1, np.int8)
    v = np.full(T, init1, np.int8)
    x = np.full(T, init1, np.int8)
    y = np.full(T, init1, np.int8)
    x2 = np.full(T, init2, np.int8)
    y2 = np.full(T, init2, np.int8)
    s = np.zeros(T, np.int8)
    sf, qr = _padded_seqs(qseq, tseq, T)
    H = np.full(T if not approx_max else 1, _NEG_INF, np.int32)
    nr = qlen + tlen - 1
    bst, ben, poff = _band_rows(qlen, tlen, w)
    if with_cigar:
        p = np.empty(poff[nr], np.uint8)
    else:
        p = np.empty(0, np.uint8)
    xs = np.empty(T, np.int8)
    vs = np.empty(T, np.int8)
    x2s = np.empty(T, np.int8)
    H0 = np.int64(0)
    last_H0_t = np.int64(0)
    last_st = -1
    last_en = -1
    for r in range(nr):
        st0 = 0
        en0 = tlen - 1
        if st0 < r - qlen + 1:
            st0 = r - qlen + 1
        if en0 > r:
            en0 = r
        if st0 < (r - w + 1) >> 1:
            st0 = (r - w + 1) >> 1
        if en0 > (r + w) >> 1:
            en0 = (r + w) >> 1
        if st0 > en0:
            ez[EZ_ZDROPPED] = 1
            break
        st = bst[r]
        en = ben[r]
        # values of the cell left of the block's first lane
        if st > 0:
            if st - 1 >= last_st and st - 1 <= last_en:
                x1 = np.int64(x[st - 1])
                x21 = np.int64(x2[st - 1])
                v1 = np.int64(v[st - 1])
            else:
                x1 = init1
                x21 = init2
                v1 = init1
        else:
            x1 = init1
            x21 = init2
            if r == 0:
                v1 = init1
            elif r < long_thres:
                v1 = _s8(-e)
            elif r == long_thres:
                v1 = _s8(long_diff)
            else:
                v1 = _s8(-e2)
        if en >= r:
            y[r] = init1
            y2[r] = init2
            if r == 0:
                u[r] = init1
            elif r < long_thres:
                u[r] = _s8(-e)
            elif r == long_thres:
                u[r] = _s8(long_diff)
            else:
                u[r] = _s8(-e2)
        _fill_scores(s, sf, qr, qlen, r, st0, en0, T, mat, m, generic, sc_mch, sc_mis, sc_N)
        # the DP cells of the widened band
        mode = 2 if not with_cigar else (1 if right else 0)
        _d2_cells(st, en, x1, v1, x21, u, v, x, y, x2, y2, s, p, poff[r] - st, mode, q_v, q2_v, qe_v, qe2_v,
                  sc_mch, xs, vs, x2s)
        # scores, max and Z-drop
        if not approx_max:
            if r > 0:
                max_H, max_t = _exact_max(H, u, v, st0, en0, 0, False)
            else:
                H[0] = np.int64(v[0]) - qe
                max_H = np.int64(H[0])
                max_t = 0
            if en0 == tlen - 1 and H[en0] > ez[EZ_MTE]:
                ez[EZ_MTE] = H[en0]
                ez[EZ_MTE_Q] = r - en
            if r - st0 == qlen - 1 and H[st0] > ez[EZ_MQE]:
                ez[EZ_MQE] = H[st0]
                ez[EZ_MQE_T] = st0
            if _zdrop(ez, max_H, r, max_t, zdrop, e2):
                break
            if r == qlen + tlen - 2 and en0 == tlen - 1:
                ez[EZ_SCORE] = H[tlen - 1]
        else:
            if r > 0:
                if last_H0_t >= st0 and last_H0_t <= en0 and last_H0_t + 1 >= st0 and last_H0_t + 1 <= en0:
                    d0 = np.int64(v[last_H0_t])
                    d1 = np.int64(u[last_H0_t + 1])
                    if d0 > d1:
                        H0 += d0
                    else:
                        H0 += d1
                        last_H0_t += 1
                elif last_H0_t >= st0 and last_H0_t <= en0:
                    H0 += np.int64(v[last_H0_t])
                else:
                    last_H0_t += 1
                    H0 += np.int64(u[last_H0_t])
            else:
                H0 = np.int64(v[0]) - qe
                last_H0_t = 0
            if (flag & KSW_EZ_APPROX_DROP) != 0 and _zdrop(ez, H0, r, last_H0_t, zdrop, e2):
                break
            if r == qlen + tlen - 2 and en0 == tlen - 1:
                ez[EZ_SCORE] = H0
        last_st = st
        last_en = en
    if with_cigar:
        cigar = _final_backtrack(ez, p, poff, bst, ben, qlen, tlen, end_bonus, flag)
    return ez, cigar


@njit(cache=True, nogil=True)
def _final_backtrack(ez, p, poff, bst, ben, qlen, tlen, end_bonus, flag):
    rev = (flag & KSW_EZ_REV_CIGAR) != 0
    if ez[EZ_ZDROPPED] == 0 and (flag & KSW_EZ_EXTZ_ONLY) == 0:
        return _backtrack(p, poff, bst, ben, tlen - 1, qlen - 1, rev, qlen + tlen)
    if ez[EZ_ZDROPPED] == 0 and (flag & KSW_EZ_EXTZ_ONLY) != 0 and ez[EZ_MQE] + end_bonus > ez[EZ_MAX]:
        ez[EZ_REACH_END] = 1
        return _backtrack(p, poff, bst, ben, ez[EZ_MQE_T], qlen - 1, rev, qlen + tlen)
    if ez[EZ_MAX_T] >= 0 and ez[EZ_MAX_Q] >= 0:
        return _backtrack(p, poff, bst, ben, ez[EZ_MAX_T], ez[EZ_MAX_Q], rev, qlen + tlen)
    return np.empty(0, np.uint32)


@njit(cache=True, nogil=True)
def _z2_cells(st, en, x1, v1, u, v, x, y, s, p, pbase, mode, q_v, qe2_v, max_sc_u, xs, vs):
    """One anti-diagonal of extz2 over the widened band [st, en] (see _d2_cells).  Here scores are
    offset by 2(q+e) so that they are non-negative; some maxima are unsigned byte maxima."""
    n = en - st + 1
    uu = u[st:en + 1]
    vv = v[st:en + 1]
    xx = x[st:en + 1]
    yy = y[st:en + 1]
    ss = s[st:en + 1]
    pp = p[pbase + st:pbase + en + 1] if mode != 2 else p[0:0]
    xs[0] = x1
    vs[0] = v1
    for k in range(n - 1):
        xs[k + 1] = xx[k]
        vs[k + 1] = vv[k]
    # the boundary bytes enter the first vector sign-extended to 32 bits: when negative they also
    # set lanes 1..3 of the shifted x / v vectors to 0xff
    if x1 < 0:
        for k in range(1, 4):
            xs[k] = -1
    if v1 < 0:
        for k in range(1, 4):
            vs[k] = -1
    for k in range(n):
        vp = np.int32(vs[k])
        ut = np.int32(uu[k])
        z = np.int32(np.int8(ss[k] + qe2_v))
        a = np.int32(np.int8(xs[k] + vp))
        b = np.int32(np.int8(yy[k] + ut))
        if mode == 0:
            d = np.int32(a > z)
            z = max(z, a)
            c = np.int32(b > z)
        else:
            d = np.int32(a >= z)
            z = max(z, a)
            c = np.int32(b >= z)
        d += c * (2 - d)
        zu = max(z & 255, b & 255)
        zu = min(zu, max_sc_u)
        z = np.int32(np.int8(zu))
        uu[k] = np.int8(z - vp)
        vv[k] = np.int8(z - ut)
        z = np.int32(np.int8(z - q_v))
        a = np.int32(np.int8(a - z))
        b = np.int32(np.int8(b - z))
        xx[k] = np.int8(max(a, 0))
        yy[k] = np.int8(max(b, 0))
        if mode == 0:
            pp[k] = d | np.int32(a > 0) << 3 | np.int32(b > 0) << 4
        elif mode == 1:
            pp[k] = d | np.int32(a >= 0) << 3 | np.int32(b >= 0) << 4


# ----------------------------------------------------------------------------------------------
# extz2: single affine gap
# ----------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def extz2(qseq, tseq, mat, q, e, w, zdrop, end_bonus, flag):
    """ksw_extz2_sse: global/extension alignment with one affine gap model (gap of l costs q+l*e).
    Returns (ez int64[EZ_N], cigar uint32[:])."""
    ez = _new_ez()
    cigar = np.empty(0, np.uint32)
    qlen = qseq.shape[0]
    tlen = tseq.shape[0]
    m = _mat_side(mat)
    q = _s8(q)
    e = _s8(e)
    qe = q + e
    if m <= 0 or qlen <= 0 or tlen <= 0:
        return ez, cigar
    with_cigar = (flag & KSW_EZ_SCORE_ONLY) == 0
    approx_max = (flag & KSW_EZ_APPROX_MAX) != 0
    right = (flag & KSW_EZ_RIGHT) != 0
    generic = (flag & KSW_EZ_GENERIC_SC) != 0
    q_v = _s8(q)
    qe2_v = _s8((q + e) * 2)
    sc_mch = _s8(mat[0])
    sc_mis = _s8(mat[1])
    sc_N = _s8(-e) if mat[m * m - 1] == 0 else _s8(mat[m * m - 1])
    max_sc_u = (mat[0] + (q + e) * 2) & 255  # compared unsigned
    if w < 0:
        w = tlen if tlen > qlen else qlen
    tlen_ = (tlen + 15) // 16
    T = tlen_ * 16
    min_sc = np.int64(mat[1])
    for k in range(1, m * m):
        if mat[k] < min_sc:
            min_sc = np.int64(mat[k])
    if -min_sc > 2 * (q + e):
        return ez, cigar

    u = np.zeros(T, np.int8)
    v = np.zeros(T, np.int8)
    x = np.zeros(T, np.int8)
    y = np.zeros(T, np.int8)
    s = np.zeros(T, np.int8)
    sf, qr = _padded_seqs(qseq, tseq, T)
    H = np.full(T if not approx_max else 1, _NEG_INF, np.int32)
    nr = qlen + tlen - 1
    bst, ben, poff = _band_rows(qlen, tlen, w)
    if with_cigar:
        p = np.empty(poff[nr], np.uint8)
    else:
        p = np.empty(0, np.uint8)
    xs = np.empty(T, np.int8)
    vs = np.empty(T, np.int8)
    H0 = np.int64(0)
    last_H0_t = np.int64(0)
    last_st = -1
    last_en = -1
    for r in range(nr):
        st0 = 0
        en0 = tlen - 1
        if st0 < r - qlen + 1:
            st0 = r - qlen + 1
        if en0 > r:
            en0 = r
        if st0 < (r - w + 1) >> 1:
            st0 = (r - w + 1) >> 1
        if en0 > (r + w) >> 1:
            en0 = (r + w) >> 1
        if st0 > en0:
            ez[EZ_ZDROPPED] = 1
            break
        st = bst[r]
        en = ben[r]
        if st > 0:
            if st - 1 >= last_st and st - 1 <= last_en:
                x1 = np.int64(x[st - 1])
                v1 = np.int64(v[st - 1])
            else:
                x1 = 0
                v1 = 0
        else:
            x1 = 0
            v1 = q_v if r > 0 else 0
        if en >= r:
            y[r] = 0
            u[r] = q_v if r > 0 else 0
        _fill_scores(s, sf, qr, qlen, r, st0, en0, T, mat, m, generic, sc_mch, sc_mis, sc_N)
        mode = 2 if not with_cigar else (1 if right else 0)
        _z2_cells(st, en, x1, v1, u, v, x, y, s, p, poff[r] - st, mode, q_v, qe2_v, max_sc_u, xs, vs)
        if not approx_max:
            if r > 0:
                max_H, max_t = _exact_max(H, u, v, st0, en0, qe, True)
            else:
                H[0] = (np.int64(v[0]) & 255) - qe - qe
                max_H = np.int64(H[0])
                max_t = 0
            if en0 == tlen - 1 and H[en0] > ez[EZ_MTE]:
                ez[EZ_MTE] = H[en0]
                ez[EZ_MTE_Q] = r - en
            if r - st0 == qlen - 1 and H[st0] > ez[EZ_MQE]:
                ez[EZ_MQE] = H[st0]
                ez[EZ_MQE_T] = st0
            if _zdrop(ez, max_H, r, max_t, zdrop, e):
                break
            if r == qlen + tlen - 2 and en0 == tlen - 1:
                ez[EZ_SCORE] = H[tlen - 1]
        else:
            if r > 0:
                if last_H0_t >= st0 and last_H0_t <= en0 and last_H0_t + 1 >= st0 and last_H0_t + 1 <= en0:
                    d0 = (np.int64(v[last_H0_t]) & 255) - qe
                    d1 = (np.int64(u[last_H0_t + 1]) & 255) - qe
                    if d0 > d1:
                        H0 += d0
                    else:
                        H0 += d1
                        last_H0_t += 1
                elif last_H0_t >= st0 and last_H0_t <= en0:
                    H0 += (np.int64(v[last_H0_t]) & 255) - qe
                else:
                    last_H0_t += 1
                    H0 += (np.int64(u[last_H0_t]) & 255) - qe
                if (flag & KSW_EZ_APPROX_DROP) != 0 and _zdrop(ez, H0, r, last_H0_t, zdrop, e):
                    break
            else:
                H0 = (np.int64(v[0]) & 255) - qe - qe
                last_H0_t = 0
            if r == qlen + tlen - 2 and en0 == tlen - 1:
                ez[EZ_SCORE] = H0
        last_st = st
        last_en = en
    if with_cigar:
        cigar = _final_backtrack(ez, p, poff, bst, ben, qlen, tlen, end_bonus, flag)
    return ez, cigar


# ----------------------------------------------------------------------------------------------
# ll_i16: striped local alignment score (16-bit lanes)
# ----------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def _adds16(a, b):
    return min(max(a + b, -32768), 32767)


@njit(cache=True, nogil=True, inline="always")
def _subs_u16(a, b):
    c = max((a & 0xFFFF) - (b & 0xFFFF), 0)
    return c - ((c >> 15) << 16)


@njit(cache=True, nogil=True)
def ll_i16(qseq, tseq, mat, gapo, gape):
    """ksw_ll_qinit(km, 2, ...) + ksw_ll_i16: best local score, query end qe and target end te
    (both -1 when unset).  Returns (score, qe, te)."""
    qlen = qseq.shape[0]
    tlen = tseq.shape[0]
    m = _mat_side(mat)
    slen = (qlen + 7) // 8
    qp = np.zeros((m, slen, 8), np.int32)
    for a in range(m):
        for i in range(slen):
            for k in range(8):
                pos = i + k * slen
                qp[a, i, k] = 0 if pos >= qlen else np.int64(mat[a * m + qseq[pos]])
    gapoe = (gapo + gape) & 0xFFFF
    gapoe = gapoe - 65536 if gapoe >= 32768 else gapoe
    ge = gape & 0xFFFF
    ge = ge - 65536 if ge >= 32768 else ge
    Ha = np.zeros((slen, 8), np.int32)
    Hb = np.zeros((slen, 8), np.int32)
    E = np.zeros((slen, 8), np.int32)
    Hmax = np.zeros((slen, 8), np.int32)
    h = np.zeros(8, np.int32)
    f = np.zeros(8, np.int32)
    mx = np.zeros(8, np.int32)
    gmax = 0
    qe = -1
    te = -1
    H0 = Ha
    H1 = Hb
    for i in range(tlen):
        tb = np.int64(tseq[i])
        h[0] = 0
        for k in range(1, 8):
            h[k] = H0[slen - 1, k - 1] if slen > 0 else 0
        for k in range(8):
            f[k] = 0
            mx[k] = 0
        for j in range(slen):
            for k in range(8):
                ee = E[j, k]
                hh = max(max(_adds16(h[k], qp[tb, j, k]), ee), f[k])
                mx[k] = max(mx[k], hh)
                H1[j, k] = hh
                hh = _subs_u16(hh, gapoe)
                E[j, k] = max(_subs_u16(ee, ge), hh)
                f[k] = max(_subs_u16(f[k], ge), hh)
                h[k] = H0[j, k]
        done = False
        for _ in range(8):
            for k in range(7, 0, -1):
                f[k] = f[k - 1]
            f[0] = 0
            for j in range(slen):
                anygt = False
                for k in range(8):
                    hh = max(H1[j, k], f[k])
                    H1[j, k] = hh
                    hh = _subs_u16(hh, gapoe)
                    f[k] = _subs_u16(f[k], ge)
                    anygt |= f[k] > hh
                if not anygt:
                    done = True
                    break
            if done:
                break
        imax = mx[0]
        for k in range(1, 8):
            if mx[k] > imax:
                imax = mx[k]
        imax &= 0xFFFF
        if imax >= gmax:
            gmax = imax
            te = i
            Hmax[:, :] = H1
        H0, H1 = H1, H0
    for i in range(slen * 8):
        if (Hmax[i // 8, i % 8] & 0xFFFF) == gmax:
            qe = i // 8 + i % 8 * slen
    return gmax, qe, te
