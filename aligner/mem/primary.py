"""Region post-processing: dedup/patch, primary/secondary marking, MAPQ (bwa 0.7.17 semantics).

* sort_dedup_patch  = mem_sort_dedup_patch (+ mem_patch_reg): drop redundant regions, merge colinear
  neighbours whose global alignment scores well.
* mark_primary_se   = mem_mark_primary_se: order by (score desc, is_alt, hash(read_id+i)) and mark
  each region secondary to the first significantly overlapping better region.
* approx_mapq_se    = mem_approx_mapq_se.
All operate on the region matrix R (fields from extend.py) in place, and return the new count.
"""
import numpy as np

from g3align.aligner.mem.extend import (
    ALT_SC,
    CSUB,
    HASH,
    IS_ALT,
    LREP,
    N_COMP,
    QB,
    QE,
    QLEN,
    RB,
    RE,
    RID,
    SCORE,
    SECONDARY,
    SECONDARY_ALL,
    SEEDCOV,
    SUB,
    SUB_N,
    TRUESC,
    W,
)
from g3align.aligner.mem.ksort import introsort
from g3align.aligner.mem.ksw import gen_cigar2
from g3align.jit import njit

INT_MAX = 2147483647


@njit(cache=True)
def hash_64(key):
    key = np.uint64(key)
    key += ~(key << np.uint64(32))
    key ^= (key >> np.uint64(22))
    key += ~(key << np.uint64(13))
    key ^= (key >> np.uint64(8))
    key += (key << np.uint64(3))
    key ^= (key >> np.uint64(15))
    key += ~(key << np.uint64(27))
    key ^= (key >> np.uint64(31))
    return key


SIGN = np.int64(-9223372036854775808)

KEY_RE, KEY_SCORE_RB_QB, KEY_HASH, KEY_HASH2 = 0, 1, 2, 3


@njit(cache=True, inline="always")
def _row_key(R, i, kind):
    """Row i's sort key for _sort_rows' `kind`, as the tuple that K[i] holds there."""
    if kind == KEY_RE:
        return (R[i, RE], np.int64(0), np.int64(0))
    if kind == KEY_SCORE_RB_QB:
        return (-R[i, SCORE], R[i, RB], R[i, QB])
    if kind == KEY_HASH:
        return (-R[i, SCORE], R[i, IS_ALT], R[i, HASH] ^ SIGN)
    return (R[i, IS_ALT], -R[i, SCORE], R[i, HASH] ^ SIGN)


@njit(cache=True, inline="always")
def _distinct_keys(R, n, kind):
    for i in range(1, n):
        ki = _row_key(R, i, kind)
        for j in range(i):
            if _row_key(R, j, kind) == ki:
                return False
    return True


@njit(cache=True)
def _sort_rows(R, n, kind):
    """Sort regions R[0:n] with bwa's introsort and one of its four region orders:
    KEY_RE (re asc: mem_ars2), KEY_SCORE_RB_QB (score desc, rb, qb: mem_ars),
    KEY_HASH (score desc, is_alt, hash: mem_ars_hash), KEY_HASH2 (is_alt, score desc, hash)."""
    if n <= 1:  # ks_introsort leaves one record where it is
        return
    # already in strictly increasing order: every sort (ks_introsort too) leaves it as it is; spares the
    # allocations below (most reads have few regions, often in order). Equal keys: introsort may swap them
    prev = _row_key(R, 0, kind)
    i = 1
    while i < n:
        cur = _row_key(R, i, kind)
        if not prev < cur:
            break
        prev = cur
        i += 1
    if i == n:
        return
    if n <= 16 and _distinct_keys(R, n, kind):
        # distinct keys: every sort gives ks_introsort's order; insertion sort of the rows allocates nothing
        for i in range(1, n):
            j = i
            while j > 0 and _row_key(R, j, kind) < _row_key(R, j - 1, kind):
                for f in range(R.shape[1]):
                    t = R[j, f]
                    R[j, f] = R[j - 1, f]
                    R[j - 1, f] = t
                j -= 1
        return
    K = np.empty((n, 3), np.int64)
    for i in range(n):
        K[i, 0], K[i, 1], K[i, 2] = _row_key(R, i, kind)
    idx = np.arange(n)
    introsort(idx, n, K)
    for i in range(n):
        if idx[i] != i:
            R[:n] = R[idx]
            return


@njit(cache=True)
def patch_reg(opt, mat, l_pac, pac, q, R, a, b):
    """mem_patch_reg: score of merging region a (left) into b, 0 if not mergeable. Returns (score, w)."""
    if R[a, RB] < l_pac and R[b, RB] >= l_pac:
        return 0, 0
    if R[a, QB] >= R[b, QB] or R[a, QE] >= R[b, QE] or R[a, RE] >= R[b, RE]:
        return 0, 0
    w = (R[a, RE] - R[b, RB]) - (R[a, QE] - R[b, QB])
    w = w if w > 0 else -w
    r = (R[a, RE] - R[b, RB]) / (R[b, RE] - R[a, RB]) - (R[a, QE] - R[b, QB]) / (R[b, QE] - R[a, QB])
    r = r if r > 0. else -r
    if R[a, RE] < R[b, RB] or R[a, QE] < R[b, QB]:
        if w > (opt.w << 1) or r >= np.float32(0.05):
            return 0, 0
    elif w > (opt.w << 2) or r >= np.float32(0.05) * 2:
        return 0, 0
    w += R[a, W] + R[b, W]
    w = w if w < (opt.w << 2) else (opt.w << 2)
    qb = R[a, QB]
    qe = R[b, QE]
    score, _cig, _nm, _md = gen_cigar2(mat, opt.o_del, opt.e_del, opt.o_ins, opt.e_ins, w, l_pac, pac,
                                       qe - qb, q[qb:qe], R[a, RB], R[b, RE])
    q_s = int((R[b, QE] - R[a, QB]) / ((R[b, QE] - R[b, QB]) + (R[a, QE] - R[a, QB]))
              * (R[b, SCORE] + R[a, SCORE]) + .499)
    r_s = int((R[b, RE] - R[a, RB]) / ((R[b, RE] - R[b, RB]) + (R[a, RE] - R[a, RB]))
              * (R[b, SCORE] + R[a, SCORE]) + .499)
    mx = q_s if q_s > r_s else r_s
    if score / mx < np.float32(0.90):
        return 0, 0
    return score, w


@njit(cache=True)
def sort_dedup_patch(opt, mat, l_pac, pac, q, R, n, patch=True):
    """patch=False: no merging of colinear hits (bwa calls it with bns == NULL after mate rescue)."""
    if n <= 1:
        return n
    _sort_rows(R, n, KEY_RE)
    for i in range(n):
        R[i, N_COMP] = 1
    for i in range(1, n):
        p = i
        if R[p, RID] != R[i - 1, RID] or R[p, RB] >= R[i - 1, RE] + opt.max_chain_gap:
            continue
        j = i - 1
        while j >= 0 and R[p, RID] == R[j, RID] and R[p, RB] < R[j, RE] + opt.max_chain_gap:
            qq = j
            if R[qq, QE] == R[qq, QB]:
                j -= 1
                continue
            orr = R[qq, RE] - R[p, RB]
            oq = R[qq, QE] - R[p, QB] if R[qq, QB] < R[p, QB] else R[p, QE] - R[qq, QB]
            lq_r = R[qq, RE] - R[qq, RB]
            lp_r = R[p, RE] - R[p, RB]
            mr = lq_r if lq_r < lp_r else lp_r
            lq_q = R[qq, QE] - R[qq, QB]
            lp_q = R[p, QE] - R[p, QB]
            mq = lq_q if lq_q < lp_q else lp_q
            if (np.float32(orr) > opt.mask_level_redun * np.float32(mr)
                    and np.float32(oq) > opt.mask_level_redun * np.float32(mq)):
                if R[p, SCORE] < R[qq, SCORE]:
                    R[p, QE] = R[p, QB]
                    break
                else:
                    R[qq, QE] = R[qq, QB]
            elif patch and R[qq, RB] < R[p, RB]:
                score, w = patch_reg(opt, mat, l_pac, pac, q, R, qq, p)
                if score > 0:
                    R[p, N_COMP] += R[qq, N_COMP] + 1
                    R[p, SEEDCOV] = max(R[p, SEEDCOV], R[qq, SEEDCOV])
                    R[p, SUB] = max(R[p, SUB], R[qq, SUB])
                    R[p, CSUB] = max(R[p, CSUB], R[qq, CSUB])
                    R[p, QB] = R[qq, QB]
                    R[p, RB] = R[qq, RB]
                    R[p, TRUESC] = score
                    R[p, SCORE] = score
                    R[p, W] = w
                    R[qq, QB] = R[qq, QE]
            j -= 1
    m = 0
    for i in range(n):
        if R[i, QE] > R[i, QB]:
            if m != i:
                R[m] = R[i]
            m += 1
    n = m
    _sort_rows(R, n, KEY_SCORE_RB_QB)
    for i in range(1, n):
        if R[i, SCORE] == R[i - 1, SCORE] and R[i, RB] == R[i - 1, RB] and R[i, QB] == R[i - 1, QB]:
            R[i, QE] = R[i, QB]
    m = 1 if n > 0 else 0
    for i in range(1, n):
        if R[i, QE] > R[i, QB]:
            if m != i:
                R[m] = R[i]
            m += 1
    return m


@njit(cache=True)
def _mark_core(opt, R, n, z):
    tmp = opt.a + opt.b
    if opt.o_del + opt.e_del > tmp:
        tmp = opt.o_del + opt.e_del
    if opt.o_ins + opt.e_ins > tmp:
        tmp = opt.o_ins + opt.e_ins
    nz = 1
    z[0] = 0
    for i in range(1, n):
        k = 0
        while k < nz:
            j = z[k]
            b_max = R[j, QB] if R[j, QB] > R[i, QB] else R[i, QB]
            e_min = R[j, QE] if R[j, QE] < R[i, QE] else R[i, QE]
            if e_min > b_max:
                li = R[i, QE] - R[i, QB]
                lj = R[j, QE] - R[j, QB]
                min_l = li if li < lj else lj
                if np.float32(e_min - b_max) >= np.float32(min_l) * opt.mask_level:
                    if R[j, SUB] == 0:
                        R[j, SUB] = R[i, SCORE]
                    if R[j, SCORE] - R[i, SCORE] <= tmp and (R[j, IS_ALT] != 0 or R[i, IS_ALT] == 0):
                        R[j, SUB_N] += 1
                    break
            k += 1
        if k == nz:
            z[nz] = i
            nz += 1
        else:
            R[i, SECONDARY] = z[k]
    return nz


@njit(cache=True)
def mark_primary_se(opt, R, n, read_id):
    if n == 0:
        return 0
    n_pri = 0
    for i in range(n):
        R[i, SUB] = 0
        R[i, ALT_SC] = 0
        R[i, SECONDARY] = -1
        R[i, SECONDARY_ALL] = -1
        R[i, HASH] = np.int64(hash_64(np.uint64(read_id + i)))
        if R[i, IS_ALT] == 0:
            n_pri += 1
    _sort_rows(R, n, KEY_HASH)
    z = np.empty(n, np.int64)
    _mark_core(opt, R, n, z)
    for i in range(n):
        R[i, SECONDARY_ALL] = i
        if R[i, IS_ALT] == 0 and R[i, SECONDARY] >= 0 and R[R[i, SECONDARY], IS_ALT] != 0:
            R[i, ALT_SC] = R[R[i, SECONDARY], SCORE]
    if n_pri >= 0 and n_pri < n:
        if n_pri > 0:
            _sort_rows(R, n, KEY_HASH2)
        for i in range(n):
            z[R[i, SECONDARY_ALL]] = i
        for i in range(n):
            if R[i, SECONDARY] >= 0:
                R[i, SECONDARY_ALL] = z[R[i, SECONDARY]]
                if R[i, IS_ALT] != 0:
                    R[i, SECONDARY] = INT_MAX
            else:
                R[i, SECONDARY_ALL] = -1
        if n_pri > 0:
            for i in range(n_pri):
                R[i, SUB] = 0
                R[i, SECONDARY] = -1
            _mark_core(opt, R, n_pri, z)
    else:
        for i in range(n):
            R[i, SECONDARY_ALL] = R[i, SECONDARY]
    return n_pri


@njit(cache=True)
def approx_mapq_se(opt, R, i):
    sub = R[i, SUB] if R[i, SUB] else opt.min_seed_len * opt.a
    if R[i, CSUB] > sub:
        sub = R[i, CSUB]
    if sub >= R[i, SCORE]:
        return 0
    lq = R[i, QE] - R[i, QB]
    lr = R[i, RE] - R[i, RB]
    l = lq if lq > lr else lr
    identity = 1. - (l * opt.a - R[i, SCORE]) / (opt.a + opt.b) / l
    if R[i, SCORE] == 0:
        mapq = 0
    elif opt.mapQ_coef_len > 0:
        tmp = 1. if l < opt.mapQ_coef_len else opt.mapQ_coef_fac / np.log(l)
        tmp *= identity * identity
        mapq = int(6.02 * (R[i, SCORE] - sub) / opt.a * tmp * tmp + .499)
    else:
        mapq = int(30.0 * (1. - sub / R[i, SCORE]) * np.log(R[i, SEEDCOV]) + .499)
        mapq = int(mapq * identity * identity + .499) if identity < 0.95 else mapq
    if R[i, SUB_N] > 0:
        mapq -= int(4.343 * np.log(R[i, SUB_N] + 1) + .499)
    if mapq > 60:
        mapq = 60
    if mapq < 0:
        mapq = 0
    frac_rep = np.float32(R[i, LREP]) / np.float32(R[i, QLEN]) if R[i, QLEN] > 0 else np.float32(0.0)
    mapq = int(mapq * (1. - np.float64(frac_rep)) + .499)
    return mapq
