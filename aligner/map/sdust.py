"""SDUST low-complexity masking of query minimizers (minimap2 2.24's sdust.c and map.c's mm_dust_minier; `map -T`).

* :func:`sdust` — the symmetric DUST regions of a sequence: windows of W bases whose triplet-repeat score exceeds
  T/10 per triplet, as half-open [start, finish) pairs in order, adjacent or overlapping ones merged. A base that
  is not A/C/G/T (code 4) ends the current run of triplets; as in sdust.c, the window's counts carry over it.
* :func:`dust_minimizers` — mm_dust_minier: drop the minimizers of one segment more than half of whose span lies in
  SDUST regions (W = 64).
* :func:`dust_segments` (the per-read path, after collect_minimizers) and :func:`dust_batch` (the batch path,
  minimizers in CSR form per read).
Sequences are codes 0-4. Positions are minimap2's: a minimizer's query position (y >> 1, low 32 bits) is its last
base. In a multi-segment fragment minimap2 masks segment s with positions already shifted by the lengths of the
segments before it; so does dust_segments.
"""
import numpy as np

from g3align.jit import njit

SD_WLEN = 3
SD_WTOT = 1 << (SD_WLEN << 1)
SD_WMSK = SD_WTOT - 1
DUST_W = 64  # mm_dust_minier's window


@njit(cache=True, nogil=True)
def _save(res, nres, ps, pf, pn, start):
    """save_masked_regions: the last perfect interval (the one with the smallest start) is saved once it starts
    before `start`, merged with the last saved region if they touch; the intervals before `start` are dropped.
    Returns (res, nres, pn)."""
    if pn == 0 or ps[pn - 1] >= start:
        return res, nres, pn
    s0 = ps[pn - 1]
    f0 = pf[pn - 1]
    saved = False
    if nres > 0:
        f = res[nres - 1, 1]
        if s0 <= f:
            saved = True
            res[nres - 1, 1] = f if f > f0 else f0
    if not saved:
        if nres == res.shape[0]:
            grown = np.empty((2 * res.shape[0] + 8, 2), np.int64)
            grown[:nres] = res[:nres]
            res = grown
        res[nres, 0] = s0
        res[nres, 1] = f0
        nres += 1
    i = pn - 1
    while i >= 0 and ps[i] < start:
        i -= 1
    return res, nres, i + 1


@njit(cache=True, nogil=True)
def sdust(seq, st, en, T, W):
    """SDUST regions of seq[st:en] (codes 0-4), relative to st: an (n, 2) int64 array of [start, finish)."""
    cap = W + 4
    q = np.zeros(cap, np.int64)  # the window's triplets: a ring of `qn` items from `qf`
    qf = 0
    qn = 0
    cv = np.zeros(SD_WTOT, np.int64)
    cw = np.zeros(SD_WTOT, np.int64)
    c = np.zeros(SD_WTOT, np.int64)
    rv = 0
    rw = 0
    L = 0
    # perfect intervals of the current window, by descending start then ascending finish
    ps = np.zeros(16, np.int64)
    pf = np.zeros(16, np.int64)
    pr = np.zeros(16, np.int64)
    pl = np.zeros(16, np.int64)
    pn = 0
    res = np.zeros((8, 2), np.int64)
    nres = 0
    ln = 0
    t = 0
    n = en - st
    for i in range(n + 1):
        b = seq[st + i] if i < n else 4
        if b < 4:
            ln += 1
            t = ((t << 2) | b) & SD_WMSK
            if ln >= SD_WLEN:
                start = (ln - W if ln - W > 0 else 0) + (i + 1 - ln)
                res, nres, pn = _save(res, nres, ps, pf, pn, start)
                # shift_window
                if qn >= W - SD_WLEN + 1:
                    s = q[qf]
                    qf = (qf + 1) % cap
                    qn -= 1
                    cw[s] -= 1
                    rw -= cw[s]
                    if L > qn:
                        L -= 1
                        cv[s] -= 1
                        rv -= cv[s]
                q[(qf + qn) % cap] = t
                qn += 1
                L += 1
                rw += cw[t]
                cw[t] += 1
                rv += cv[t]
                cv[t] += 1
                if cv[t] * 10 > T << 1:
                    while True:
                        s = q[(qf + qn - L) % cap]
                        cv[s] -= 1
                        rv -= cv[s]
                        L -= 1
                        if s == t:
                            break
                if rw * 10 > L * T:  # find_perfect
                    c[:] = cv
                    r = rv
                    max_r = 0
                    max_l = 0
                    for k in range(qn - L - 1, -1, -1):
                        tk = q[(qf + k) % cap]
                        r += c[tk]
                        c[tk] += 1
                        new_r = r
                        new_l = qn - k - 1
                        if new_r * 10 > T * new_l:
                            j = 0
                            while j < pn and ps[j] >= k + start:
                                if max_r == 0 or pr[j] * max_l > max_r * pl[j]:
                                    max_r = pr[j]
                                    max_l = pl[j]
                                j += 1
                            if max_r == 0 or new_r * max_l >= max_r * new_l:
                                max_r = new_r
                                max_l = new_l
                                if pn == ps.shape[0]:
                                    m = 2 * pn
                                    ps2 = np.zeros(m, np.int64)
                                    pf2 = np.zeros(m, np.int64)
                                    pr2 = np.zeros(m, np.int64)
                                    pl2 = np.zeros(m, np.int64)
                                    ps2[:pn] = ps[:pn]
                                    pf2[:pn] = pf[:pn]
                                    pr2[:pn] = pr[:pn]
                                    pl2[:pn] = pl[:pn]
                                    ps, pf, pr, pl = ps2, pf2, pr2, pl2
                                for x in range(pn, j, -1):
                                    ps[x] = ps[x - 1]
                                    pf[x] = pf[x - 1]
                                    pr[x] = pr[x - 1]
                                    pl[x] = pl[x - 1]
                                pn += 1
                                ps[j] = k + start
                                pf[j] = qn + (SD_WLEN - 1) + start
                                pr[j] = new_r
                                pl[j] = new_l
        else:  # not A/C/G/T, or the end: save what is left
            start = (ln - W + 1 if ln - W + 1 > 0 else 0) + (i + 1 - ln)
            while pn > 0:
                res, nres, pn = _save(res, nres, ps, pf, pn, start)
                start += 1
            ln = 0
            t = 0
    return res[:nres]


@njit(cache=True, nogil=True)
def dust_minimizers(mv, n0, n, seq, st, en, T):
    """mm_dust_minier on minimizers mv[n0:n] of the segment seq[st:en]: those with more than half of their span in
    an SDUST region are squeezed out, in place. Returns the new end (n0 + kept)."""
    if T <= 0:
        return n
    dreg = sdust(seq, st, en, T, DUST_W)
    nd = dreg.shape[0]
    u = 0
    k = n0
    for j in range(n0, n):
        qpos = np.int64(np.uint32(mv[j, 1] & np.uint64(0xFFFFFFFF)) >> np.uint32(1))
        span = np.int64(mv[j, 0] & np.uint64(0xFF))
        s = qpos - (span - 1)
        e = s + span
        while u < nd and dreg[u, 1] <= s:
            u += 1
        keep = True
        if u < nd and dreg[u, 0] < e:
            ln = 0
            v = u
            while v < nd and dreg[v, 0] < e:
                ss = s if s > dreg[v, 0] else dreg[v, 0]
                ee = e if e < dreg[v, 1] else dreg[v, 1]
                ln += ee - ss
                v += 1
            keep = ln <= (span >> 1)
        if keep:
            mv[k, 0] = mv[j, 0]
            mv[k, 1] = mv[j, 1]
            k += 1
    return k


@njit(cache=True, nogil=True)
def _dust_groups(mv, off, seq, st, en, T):
    """Rows [off[g], off[g+1]) of mv are the minimizers of seq[st[g]:en[g]]: each group masked (dust_minimizers).
    Returns the kept rows and their group offsets (new arrays)."""
    n = off.shape[0] - 1
    out = np.empty_like(mv)
    new_off = np.zeros(n + 1, np.int64)
    m = 0
    for g in range(n):
        a = off[g]
        b = off[g + 1]
        out[m:m + b - a] = mv[a:b]
        m = dust_minimizers(out, m, m + b - a, seq, st[g], en[g], T)
        new_off[g + 1] = m
    return out[:m].copy(), new_off


@njit(cache=True, nogil=True)
def dust_segments(mv, seq, seg_off, T):
    """SDUST masking of collect_minimizers' output for a fragment (segment s: the rows whose y >> 32 is s, in
    order). Returns the kept rows."""
    n_seg = seg_off.shape[0] - 1
    off = np.zeros(n_seg + 1, np.int64)
    for j in range(mv.shape[0]):
        off[np.int64(mv[j, 1] >> np.uint64(32)) + 1] += 1
    for s in range(n_seg):
        off[s + 1] += off[s]
    return _dust_groups(mv, off, seq, seg_off[:n_seg], seg_off[1:], T)[0]


@njit(cache=True, nogil=True)
def dust_batch(mz, off, seq, seq_off, T):
    """SDUST masking of a batch's minimizers (CSR per read, each read one segment). Returns (mz, off) new arrays."""
    return _dust_groups(mz, off, seq, seq_off[:-1], seq_off[1:], T)
