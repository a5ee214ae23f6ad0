"""Region bookkeeping of minimap2 2.24: hit.c (parents, sub-optimal selection, filters, sorting, splitting,
MAPQ), pe.c's mm_select_sub_multi and esterr.c's divergence estimate.

Regions are rows of the int64 matrix of `aligner/map/types.py`; `n` is the number of live rows (rows
past n are garbage). Functions that delete or reorder regions do it in place and return the new n.
`HAS_P` says whether the region carries an alignment (`mm_extra_t *p` non-null); its `DP_MAX`,
`DP_MAX2` are then meaningful. Floating-point expressions follow C's promotions exactly (float where
minimap2 uses float, double where it mixes in double constants).
"""
import numpy as np

from g3align.aligner.map.lchain import U32, anchor_span, lo32s, radix_sort_128x, reg_set_coor, to_u64  # noqa: F401 (re-exported)
from g3align.aligner.map.types import (
    AS,
    BLEN,
    CIG_OFF,
    CNT,
    DIV,
    DP_MAX,
    DP_MAX2,
    DP_SCORE,
    HAS_P,
    HASH,
    ID,
    INV,
    IS_ALT,
    MAPQ,
    MLEN,
    N_AMBI,
    N_CIGAR,
    N_SUB,
    NR,
    PARENT,
    PE_THRU,
    PROPER_FRAG,
    QE,
    QS,
    RE,
    REV,
    RID,
    RS,
    SAM_PRI,
    SCORE,
    SCORE0,
    SEG_SPLIT,
    SPLIT,
    SPLIT_INV,
    STRAND_RETAINED,
    SUBSC,
    TRANS_STRAND,
    bits_f32,
    f32_bits,
)
from g3align.jit import njit

PARENT_UNSET = -1
PARENT_TMP_PRI = -2


@njit(cache=True, nogil=True, error_model="numpy")
def alt_score(score, alt_diff_frac):
    """mm_alt_score (double arithmetic on a float fraction)."""
    if score < 0:
        return score
    s = np.int64(score * (1.0 - np.float64(np.float32(alt_diff_frac))) + 0.499)
    return s if s > 0 else 1


@njit(cache=True, nogil=True, error_model="numpy")
def split_reg(R, r, r2, n_split, qlen, a, is_qstrand):
    """mm_split_reg: row r keeps its first n_split anchors, row r2 (already allocated by the caller)
    receives the rest. Nothing happens when n_split <= 0 or n_split >= cnt."""
    if n_split <= 0 or n_split >= R[r, CNT]:
        return
    for c in range(NR):
        R[r2, c] = R[r, c]
    R[r2, ID] = -1
    R[r2, SAM_PRI] = 0
    for c in (HAS_P, DP_SCORE, DP_MAX, DP_MAX2, N_AMBI, TRANS_STRAND, N_CIGAR, CIG_OFF):
        R[r2, c] = 0
    R[r2, SPLIT_INV] = 0
    R[r2, CNT] = R[r, CNT] - n_split
    ratio = np.float32(R[r2, CNT]) / np.float32(R[r, CNT])
    R[r2, SCORE] = lo32s(np.int64(np.float64(np.float32(R[r, SCORE]) * ratio) + 0.499))
    R[r2, AS] = R[r, AS] + n_split
    if R[r, PARENT] == R[r, ID]:
        R[r2, PARENT] = PARENT_TMP_PRI
    reg_set_coor(R, r2, qlen, a, is_qstrand)
    R[r, CNT] -= R[r2, CNT]
    R[r, SCORE] -= R[r2, SCORE]
    reg_set_coor(R, r, qlen, a, is_qstrand)
    R[r, SPLIT] |= 1
    R[r2, SPLIT] |= 2


@njit(cache=True, nogil=True, error_model="numpy")
def set_parent(mask_level, mask_len, R, n, sub_diff, hard_mask_level, alt_diff_frac):
    """mm_set_parent: PARENT, SUBSC, N_SUB (and DP_MAX2 of primaries with alignments)."""
    if n <= 0:
        return
    ml = np.float32(mask_level)
    for i in range(n):
        R[i, ID] = i
    cov = np.empty(n, np.uint64)
    w = np.empty(n, np.int64)
    w[0] = 0
    R[0, PARENT] = 0
    k = 1
    for i in range(1, n):
        si = R[i, QS]
        ei = R[i, QE]
        n_cov = 0
        uncov_len = 0
        if not hard_mask_level:
            for j in range(k):
                rp = w[j]
                sj = R[rp, QS]
                ej = R[rp, QE]
                if ej <= si or sj >= ei:
                    continue
                if sj < si:
                    sj = si
                if ej > ei:
                    ej = ei
                cov[n_cov] = (to_u64(sj) << np.uint64(32)) | (to_u64(ej) & U32)
                n_cov += 1
            if n_cov == 0:
                w[k] = i
                k += 1
                R[i, PARENT] = i
                R[i, N_SUB] = 0
                continue
            cs = np.sort(cov[:n_cov])
            x = si
            for j in range(n_cov):
                c0 = np.int64(cs[j] >> np.uint64(32))
                if c0 > x:
                    uncov_len += c0 - x
                c1 = lo32s(cs[j])
                x = c1 if c1 > x else x
            if ei > x:
                uncov_len += ei - x
        found = False
        for j in range(k):
            rp = w[j]
            sj = R[rp, QS]
            ej = R[rp, QE]
            if ej <= si or sj >= ei:
                continue
            mn = ej - sj if ej - sj < ei - si else ei - si
            mx = ej - sj if ej - sj > ei - si else ei - si
            if si < sj:
                ol = 0 if ei < sj else (ei - sj if ei < ej else ej - sj)
            else:
                ol = 0 if ej < si else (ej - si if ej < ei else ei - si)
            if np.float32(ol) / np.float32(mn) - np.float32(uncov_len) / np.float32(mx) > ml \
                    and uncov_len <= mask_len:
                cnt_sub = 0
                sci = R[i, SCORE]
                R[i, PARENT] = R[rp, PARENT]
                if not R[rp, IS_ALT] and R[i, IS_ALT]:
                    sci = alt_score(sci, alt_diff_frac)
                R[rp, SUBSC] = R[rp, SUBSC] if R[rp, SUBSC] > sci else sci
                if R[i, CNT] >= R[rp, CNT]:
                    cnt_sub = 1
                if R[rp, HAS_P] and R[i, HAS_P] and (R[rp, RID] != R[i, RID] or R[rp, RS] != R[i, RS]
                                                     or R[rp, RE] != R[i, RE] or ol != mn):
                    sci = R[i, DP_MAX]
                    if not R[rp, IS_ALT] and R[i, IS_ALT]:
                        sci = alt_score(sci, alt_diff_frac)
                    R[rp, DP_MAX2] = R[rp, DP_MAX2] if R[rp, DP_MAX2] > sci else sci
                    if R[rp, DP_MAX] - R[i, DP_MAX] <= sub_diff:
                        cnt_sub = 1
                if cnt_sub:
                    R[rp, N_SUB] += 1
                found = True
                break
        if not found:
            w[k] = i
            k += 1
            R[i, PARENT] = i
            R[i, N_SUB] = 0


@njit(cache=True, nogil=True, error_model="numpy")
def hit_sort(R, n, alt_diff_frac):
    """mm_hit_sort: drop soft-deleted rows (cnt == 0 and not inversion) and order the rest by
    (dp_max if aligned else score, with ALT penalty) then hash, descending. Returns the new n."""
    if n <= 1:
        return n
    ax = np.empty(n, np.uint64)
    ay = np.empty(n, np.uint64)
    n_aux = 0
    for i in range(n):
        if R[i, INV] or R[i, CNT] > 0:
            score = R[i, DP_MAX] if R[i, HAS_P] else R[i, SCORE]
            if R[i, IS_ALT]:
                score = alt_score(score, alt_diff_frac)
            ax[n_aux] = (to_u64(score) << np.uint64(32)) | (np.uint64(R[i, HASH]) & U32)
            ay[n_aux] = np.uint64(i)
            n_aux += 1
    radix_sort_128x(ax, ay, 0, n_aux)
    t = np.empty((n_aux, NR), np.int64)
    for i in range(n_aux - 1, -1, -1):
        src = np.int64(ay[i])
        for c in range(NR):
            t[n_aux - 1 - i, c] = R[src, c]
    for i in range(n_aux):
        for c in range(NR):
            R[i, c] = t[i, c]
    return n_aux


@njit(cache=True, nogil=True, error_model="numpy")
def set_sam_pri(R, n):
    """mm_set_sam_pri; returns the number of primaries."""
    n_pri = 0
    for i in range(n):
        if R[i, ID] == R[i, PARENT]:
            n_pri += 1
            R[i, SAM_PRI] = 1 if n_pri == 1 else 0
        else:
            R[i, SAM_PRI] = 0
    return n_pri


@njit(cache=True, nogil=True, error_model="numpy")
def sync_regs(R, n):
    """mm_sync_regs: renumber ID to row order, remap PARENT (TMP_PRI -> itself, lost parents -> -1),
    then set_sam_pri."""
    if n <= 0:
        return
    max_id = -1
    for i in range(n):
        max_id = max_id if max_id > R[i, ID] else R[i, ID]
    tmp = np.full(max_id + 1, -1, np.int64)
    for i in range(n):
        if R[i, ID] >= 0:
            tmp[R[i, ID]] = i
    for i in range(n):
        R[i, ID] = i
        par = R[i, PARENT]
        if par == PARENT_TMP_PRI:
            R[i, PARENT] = i
        elif par >= 0 and par <= max_id and tmp[par] >= 0:
            R[i, PARENT] = tmp[par]
        else:
            R[i, PARENT] = PARENT_UNSET
    set_sam_pri(R, n)


@njit(cache=True, nogil=True, error_model="numpy")
def _copy_row(R, dst, src):
    if dst != src:
        for c in range(NR):
            R[dst, c] = R[src, c]


@njit(cache=True, nogil=True, error_model="numpy")
def select_sub(pri_ratio, min_diff, best_n, check_strand, min_strand_sc, R, n):
    """mm_select_sub; returns the new n. pri_ratio is a C float."""
    pr = np.float32(pri_ratio)
    if pr > 0.0 and n > 0:
        k = 0
        n_2nd = 0
        for i in range(n):
            p = R[i, PARENT]
            if p == i or R[i, INV]:
                _copy_row(R, k, i)
                k += 1
            elif (np.float32(R[i, SCORE]) >= np.float32(R[p, SCORE]) * pr or R[i, SCORE] + min_diff >= R[p, SCORE]) \
                    and n_2nd < best_n:
                if not (R[i, QS] == R[p, QS] and R[i, QE] == R[p, QE] and R[i, RID] == R[p, RID]
                        and R[i, RS] == R[p, RS] and R[i, RE] == R[p, RE]):
                    _copy_row(R, k, i)
                    k += 1
                    n_2nd += 1
            elif check_strand and n_2nd < best_n and R[i, SCORE] > min_strand_sc and R[i, REV] != R[p, REV]:
                R[i, STRAND_RETAINED] = 1
                _copy_row(R, k, i)
                k += 1
                n_2nd += 1
        if k != n:
            sync_regs(R, k)
        return k
    return n


@njit(cache=True, nogil=True, error_model="numpy")
def select_sub_multi(pri_ratio, pri1, pri2, max_gap_ref, min_diff, best_n, n_segs, qlens, R, n):
    """pe.c's mm_select_sub_multi (minimap2 calls it with pri1 = 0.2f, pri2 = 0.7f); returns the new n."""
    pr = np.float32(pri_ratio)
    p1 = np.float32(pri1)
    p2 = np.float32(pri2)
    if pr > 0.0 and n > 0:
        k = 0
        n_2nd = 0
        max_dist = qlens[0] + qlens[1] + max_gap_ref if n_segs == 2 else 0
        for i in range(n):
            to_keep = False
            p = R[i, PARENT]
            if p == i:
                to_keep = True
            elif R[i, SCORE] + min_diff >= R[p, SCORE]:
                to_keep = True
            else:
                qsc = np.float32(R[i, SCORE])
                psc = np.float32(R[p, SCORE])
                if R[p, REV] == R[i, REV] and R[p, RID] == R[i, RID] and R[i, RE] - R[p, RS] < max_dist \
                        and R[p, RE] - R[i, RS] < max_dist:
                    if qsc >= psc * p1:
                        to_keep = True
                else:
                    is_par_both = n_segs == 2 and R[p, QS] < qlens[0] and R[p, QE] > qlens[0]
                    is_chi_both = n_segs == 2 and R[i, QS] < qlens[0] and R[i, QE] > qlens[0]
                    if is_chi_both or is_chi_both == is_par_both:
                        if qsc >= psc * pr:
                            to_keep = True
                    else:
                        if qsc >= psc * p2:
                            to_keep = True
            if to_keep and p != i:
                if n_2nd >= best_n:
                    to_keep = False
                n_2nd += 1
            if to_keep:
                _copy_row(R, k, i)
                k += 1
        if k != n:
            sync_regs(R, k)
        return k
    return n


@njit(cache=True, nogil=True, error_model="numpy")
def filter_strand_retained(R, n):
    """mm_filter_strand_retained; returns the new n (PARENT is not re-synced, as in minimap2)."""
    k = 0
    for i in range(n):
        p = R[i, PARENT]
        d = bits_f32(R[i, DIV])
        if not R[i, STRAND_RETAINED] or d < bits_f32(R[p, DIV]) * np.float32(5.0) or d < np.float32(0.01):
            _copy_row(R, k, i)
            k += 1
    return k


@njit(cache=True, nogil=True, error_model="numpy")
def filter_regs(min_cnt, min_chain_score, min_dp_max, max_clip_ratio, qlen, R, n):
    """mm_filter_regs (its opt fields passed one by one; max_clip_ratio is a C float); returns the new n.
    PARENT may point at a filtered row afterwards, as in minimap2."""
    mcr = np.float32(max_clip_ratio)
    k = 0
    for i in range(n):
        flt = False
        if not R[i, INV] and not R[i, SEG_SPLIT] and R[i, CNT] < min_cnt:
            flt = True
        if R[i, HAS_P]:
            if R[i, MLEN] < min_chain_score:
                flt = True
            elif R[i, DP_MAX] < min_dp_max:
                flt = True
            elif np.float32(R[i, QS]) > np.float32(qlen) * mcr and np.float32(qlen - R[i, QE]) > np.float32(qlen) * mcr:
                flt = True
        if not flt:
            _copy_row(R, k, i)
            k += 1
    return k


@njit(cache=True, nogil=True, error_model="numpy")
def squeeze_a(R, n, a):
    """mm_squeeze_a: move the anchors referenced by the regions to the front of a (in order of AS),
    updating AS; returns the number of anchors kept."""
    aux = np.empty(n, np.uint64)
    for i in range(n):
        aux[i] = (np.uint64(R[i, AS]) << np.uint64(32)) | np.uint64(i)
    aux = np.sort(aux)
    as_ = 0
    for i in range(n):
        r = np.int64(aux[i] & U32)
        if R[r, AS] != as_:
            src = R[r, AS]
            for q in range(R[r, CNT]):
                a[as_ + q, 0] = a[src + q, 0]
                a[as_ + q, 1] = a[src + q, 1]
            R[r, AS] = as_
        as_ += R[r, CNT]
    return as_


# ---------------------------------------------------------------------------------------------
# esterr.c
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def _for_qpos(qlen, a, k):
    x = lo32s(a[k, 1])
    q_span = anchor_span(a[k, 1])
    if a[k, 0] >> np.uint64(63):
        x = qlen - 1 - (x + 1 - q_span)
    return x


@njit(cache=True, nogil=True, error_model="numpy")
def _mini_idx(qlen, a, k, mini_pos):
    x = _for_qpos(qlen, a, k)
    L = 0
    Rr = mini_pos.shape[0] - 1
    while L <= Rr:
        m = (L + Rr) >> 1
        y = lo32s(mini_pos[m])
        if y < x:
            L = m + 1
        elif y > x:
            Rr = m - 1
        else:
            return m
    return -1


@njit(cache=True, nogil=True, error_model="numpy")
def est_err(qlen, R, n, a, mini_pos, ref_len):
    """mm_est_err: DIV (float32 bits) of each region from the fraction of the read's minimizers
    (mini_pos: q_span<<32 | q_pos, as mm_collect_matches gives them) found in its chain.
    ref_len: lengths of the reference sequences."""
    nm = mini_pos.shape[0]
    if nm == 0:
        return
    sum_k = np.uint64(0)
    for i in range(nm):
        sum_k += (mini_pos[i] >> np.uint64(32)) & np.uint64(0xFF)
    avg_k = np.float32(sum_k) / np.float32(nm)
    for i in range(n):
        R[i, DIV] = f32_bits(np.float32(-1.0))
        cnt = R[i, CNT]
        if cnt == 0:
            continue
        s = R[i, AS]
        rev = R[i, REV]
        st = _mini_idx(qlen, a, s + cnt - 1 if rev else s, mini_pos)
        en = st
        if st < 0:
            continue
        l_ref = ref_len[R[i, RID]]
        k = 1
        n_match = 1
        j = st + 1
        while j < nm and k < cnt:
            x = _for_qpos(qlen, a, s + cnt - 1 - k if rev else s + k)
            if x == lo32s(mini_pos[j]):
                k += 1
                en = j
                n_match += 1
            j += 1
        n_tot = en - st + 1
        if np.float32(R[i, QS]) > avg_k and np.float32(R[i, RS]) > avg_k:
            n_tot += 1
        if np.float32(qlen - R[i, QS]) > avg_k and np.float32(l_ref - R[i, RE]) > avg_k:
            n_tot += 1
        if n_match >= n_tot:
            d = np.float32(0.0)
        else:
            d = np.float32(1.0 - (np.float64(n_match) / np.float64(n_tot)) ** (1.0 / np.float64(avg_k)))
        R[i, DIV] = f32_bits(d)


# ---------------------------------------------------------------------------------------------
# MAPQ
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def _f2i(x):
    """C's (int) of a float on x86: truncation; NaN and out-of-range values give INT32_MIN."""
    if not (x > -2147483649.0 and x < 2147483648.0):
        return np.int64(-2147483648)
    return np.int64(x)


@njit(cache=True, nogil=True, error_model="numpy")
def _i32(v):
    return lo32s(np.int64(v))


@njit(cache=True, nogil=True, error_model="numpy")
def _set_inv_mapq(R, n):
    if n < 3:
        return
    has = False
    for i in range(n):
        if R[i, INV]:
            has = True
            break
    if not has:
        return
    ax = np.empty(n, np.uint64)
    ay = np.empty(n, np.uint64)
    n_aux = 0
    for i in range(n):
        if R[i, PARENT] == i or R[i, PARENT] < 0:
            ay[n_aux] = np.uint64(i)
            ax[n_aux] = (to_u64(R[i, RID]) << np.uint64(32)) | (to_u64(R[i, RS]) & U32)
            n_aux += 1
    radix_sort_128x(ax, ay, 0, n_aux)
    for i in range(1, n_aux - 1):
        v = np.int64(ay[i])
        if R[v, INV]:
            lq = R[np.int64(ay[i - 1]), MAPQ]
            rq = R[np.int64(ay[i + 1]), MAPQ]
            R[v, MAPQ] = lq if lq < rq else rq


@njit(cache=True, nogil=True, error_model="numpy")
def set_mapq(R, n, min_chain_sc, match_sc, rep_len, is_sr):
    """mm_set_mapq (with mm_set_inv_mapq): MAPQ of every region."""
    if n == 0:
        return
    q_coef = np.float32(40.0)
    sum_sc = 0
    for i in range(n):
        if R[i, PARENT] == R[i, ID]:
            sum_sc += R[i, SCORE]
    uniq_ratio = np.float32(sum_sc) / np.float32(sum_sc + rep_len)
    msc = np.float32(match_sc)
    for i in range(n):
        if R[i, INV]:
            R[i, MAPQ] = 0
        elif R[i, PARENT] == R[i, ID]:
            sc = R[i, SCORE]
            pen_s1 = (np.float32(1.0) if sc > 100 else np.float32(0.01) * np.float32(sc)) * uniq_ratio
            cnt = R[i, CNT]
            pen_cm = np.float32(1.0) if cnt > 10 else np.float32(0.1) * np.float32(cnt)
            pen_cm = pen_s1 if pen_s1 < pen_cm else pen_cm
            subsc = R[i, SUBSC] if R[i, SUBSC] > min_chain_sc else min_chain_sc
            has_p = R[i, HAS_P] != 0
            dp_max = R[i, DP_MAX]
            dp_max2 = R[i, DP_MAX2]
            if has_p and dp_max2 > 0 and dp_max > 0:
                identity = np.float32(R[i, MLEN]) / np.float32(R[i, BLEN])
                x = np.float32(dp_max2) * np.float32(subsc) / np.float32(dp_max) / np.float32(R[i, SCORE0])
                mapq = _f2i(identity * pen_cm * q_coef * (np.float32(1.0) - x * x)
                            * np.log(np.float32(dp_max) / msc))
                if not is_sr:
                    mapq_alt = _f2i(np.float32(6.02) * identity * identity * np.float32(dp_max - dp_max2) / msc
                                    + np.float32(0.499))
                    mapq = mapq if mapq < mapq_alt else mapq_alt
            else:
                x = np.float32(subsc) / np.float32(R[i, SCORE0])
                if has_p:
                    identity = np.float32(R[i, MLEN]) / np.float32(R[i, BLEN])
                    mapq = _f2i(identity * pen_cm * q_coef * (np.float32(1.0) - x)
                                * np.log(np.float32(dp_max) / msc))
                else:
                    mapq = _f2i(pen_cm * q_coef * (np.float32(1.0) - x) * np.log(np.float32(sc)))
            mapq = _i32(mapq - _f2i(np.float32(4.343) * np.log(np.float32(R[i, N_SUB] + 1)) + np.float32(0.499)))
            mapq = mapq if mapq > 0 else 0
            mq = mapq if mapq < 60 else 60
            if has_p and dp_max > dp_max2 and mq == 0:
                mq = 1
            R[i, MAPQ] = mq
        else:
            R[i, MAPQ] = 0
    _set_inv_mapq(R, n)


# ---------------------------------------------------------------------------------------------
# the two fixed call sequences of map.c
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def chain_post(all_chains, mask_level, mask_len, sub_diff, hard_mask_level, alt_drop, pri_ratio, k, best_n, max_gap,
               n_segs, qlens, max_chain_gap_ref, R, n):
    """map.c's chain_post: set_parent, then select_sub (one segment; strand check on, min_strand_sc =
    (int)(max_gap * 0.8)) or select_sub_multi (pri1 0.2f, pri2 0.7f). sub_diff = opt->a * 2 + opt->b,
    k = the index's k. Returns the new n."""
    if all_chains:
        return n
    set_parent(mask_level, mask_len, R, n, sub_diff, hard_mask_level, alt_drop)
    if n_segs <= 1:
        return select_sub(pri_ratio, k * 2, best_n, 1, np.int64(max_gap * 0.8), R, n)
    return select_sub_multi(pri_ratio, np.float32(0.2), np.float32(0.7), max_chain_gap_ref, k * 2, best_n, n_segs,
                            qlens, R, n)


@njit(cache=True, nogil=True, error_model="numpy")
def align_post(all_chains, mask_level, mask_len, sub_diff, hard_mask_level, alt_drop, pri_ratio, k, best_n, max_gap,
               R, n):
    """What map.c's align_regs does after mm_align_skeleton: set_parent, select_sub (no strand check),
    set_sam_pri. Returns the new n."""
    if all_chains:
        return n
    set_parent(mask_level, mask_len, R, n, sub_diff, hard_mask_level, alt_drop)
    n = select_sub(pri_ratio, k * 2, best_n, 0, np.int64(max_gap * 0.8), R, n)
    set_sam_pri(R, n)
    return n


# ---------------------------------------------------------------------------------------------
# pe.c: pairing the two segments of a fragment
# ---------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True, error_model="numpy")
def pair_regs(max_gap_ref, pe_bonus, sub_diff, match_sc, qlens, R0, n0, R1, n1):
    """pe.c's mm_pair (then mm_set_pe_thru) on the aligned regions of segment 0 (R0[:n0]) and 1 (R1[:n1]): the
    best pair of a forward and a reverse region within max_gap_ref on one contig (sum of DP maxima, ties by the
    32-bit sum of their hashes) becomes both segments' primary (PROPER_FRAG, SAM_PRI, parents lifted), and their
    MAPQ is raised toward the pair's."""
    if n0 == 0 or n1 == 0:
        return
    n = n0 + n1
    key = np.empty(n, np.uint64)
    who = np.empty(n, np.uint64)  # s << 32 | row
    dp_thres = 0
    m = 0
    for s in range(2):
        R = R0 if s == 0 else R1
        ns = n0 if s == 0 else n1
        mx = 0
        for i in range(ns):
            rs2 = (R[i, RS] << 1) & 0xFFFFFFFF  # minimap2's int `rs<<1`, widened with its sign
            if rs2 >= 0x80000000:
                rs2 -= 0x100000000
            key[m] = (np.uint64(R[i, RID]) << np.uint64(32)) | np.uint64(rs2) | np.uint64(s ^ R[i, REV])
            who[m] = (np.uint64(s) << np.uint64(32)) | np.uint64(i)
            if R[i, DP_MAX] > mx:
                mx = R[i, DP_MAX]
            m += 1
        dp_thres += mx
    dp_thres -= pe_bonus
    if dp_thres < 0:
        dp_thres = 0
    radix_sort_128x(key, who, 0, n)
    seg = np.empty(n, np.int64)
    row = np.empty(n, np.int64)
    rev = np.empty(n, np.int64)
    for k in range(n):
        seg[k] = np.int64(who[k] >> np.uint64(32))
        row[k] = np.int64(who[k] & U32)
        rev[k] = R0[row[k], REV] if seg[k] == 0 else R1[row[k], REV]
    best = np.int64(-1)
    best_idx = np.full(2, -1, np.int64)
    last = np.full(2, -1, np.int64)
    sc = np.empty(max(16, n), np.int64)
    n_sc = 0
    for i in range(n):
        if key[i] & np.uint64(1):
            if last[rev[i]] < 0:
                continue
            Ri = R0 if seg[i] == 0 else R1
            ri = row[i]
            j0 = last[rev[i]]
            Rq = R0 if seg[j0] == 0 else R1
            if Ri[ri, RID] != Rq[row[j0], RID] or Ri[ri, RS] - Rq[row[j0], RE] > max_gap_ref:
                continue
            for j in range(j0, -1, -1):
                if rev[j] != rev[i] or seg[j] == seg[i]:
                    continue
                Rj = R0 if seg[j] == 0 else R1
                rj = row[j]
                if Ri[ri, RID] != Rj[rj, RID] or Ri[ri, RS] - Rj[rj, RE] > max_gap_ref:
                    break
                dps = Ri[ri, DP_MAX] + Rj[rj, DP_MAX]
                if dps < dp_thres:
                    continue
                score = (np.int64(dps) << 32) | ((Ri[ri, HASH] + Rj[rj, HASH]) & 0xFFFFFFFF)
                if score > best:
                    best = score
                    best_idx[seg[j]] = j
                    best_idx[seg[i]] = i
                if n_sc == sc.shape[0]:
                    sc2 = np.empty(2 * n_sc, np.int64)
                    sc2[:n_sc] = sc[:n_sc]
                    sc = sc2
                sc[n_sc] = score
                n_sc += 1
        else:
            last[rev[i]] = i
    if n_sc > 0 and best > 0:
        scu = np.sort(sc[:n_sc].view(np.uint64))
        r = np.array([row[best_idx[0]], row[best_idx[1]]], np.int64)
        for s in range(2):
            R = R0 if s == 0 else R1
            ns = n0 if s == 0 else n1
            R[r[s], PROPER_FRAG] = 1
            if R[r[s], ID] != R[r[s], PARENT]:  # lift to primary: its parent's children follow, the parent gets 0
                p = R[r[s], PARENT]
                pid = R[p, ID]
                for i in range(ns):
                    if R[i, PARENT] == pid:
                        R[i, PARENT] = R[r[s], ID]
                R[p, MAPQ] = 0
            if R[r[s], SAM_PRI] == 0:
                for i in range(ns):
                    R[i, SAM_PRI] = 0
                R[r[s], SAM_PRI] = 1
        q0 = R0[r[0], MAPQ]
        q1 = R1[r[1], MAPQ]
        mapq_pe = q0 if q0 > q1 else q1
        top = np.uint64(best) >> np.uint64(32)
        n_sub = 0
        for i in range(n_sc):
            if (scu[i] >> np.uint64(32)) + np.uint64(sub_diff) >= top:
                n_sub += 1
        second = scu[n_sc - 2] >> np.uint64(32) if n_sc > 1 else np.uint64(0)
        if n_sc > 1:
            alt = _f2i(np.float32(6.02) * np.float32(top - second) / np.float32(match_sc)
                       - np.float32(4.343) * np.float32(np.log(np.float64(n_sub))))
            if alt < mapq_pe:
                mapq_pe = alt
        for s in range(2):
            R = R0 if s == 0 else R1
            if R[r[s], MAPQ] < mapq_pe:
                R[r[s], MAPQ] = _f2i(np.float32(0.2) * np.float32(R[r[s], MAPQ]) + np.float32(0.8) * np.float32(mapq_pe)
                                     + np.float32(0.499))
            if n_sc == 1:
                if R[r[s], MAPQ] < 2:
                    R[r[s], MAPQ] = 2
            elif top > second:
                if R[r[s], MAPQ] < 1:
                    R[r[s], MAPQ] = 1
    set_pe_thru(qlens, R0, n0, R1, n1)


@njit(cache=True, nogil=True)
def set_pe_thru(qlens, R0, n0, R1, n1):
    """pe.c's mm_set_pe_thru: with one primary per segment, on the same contig and strand, ends within 3 bases
    and the reads running through each other (one starts where the other's query ends), both get PE_THRU."""
    n_pri0 = 0
    n_pri1 = 0
    p = -1
    q = -1
    for i in range(n0):
        if R0[i, ID] == R0[i, PARENT]:
            n_pri0 += 1
            p = i
    for i in range(n1):
        if R1[i, ID] == R1[i, PARENT]:
            n_pri1 += 1
            q = i
    if n_pri0 == 1 and n_pri1 == 1:
        if (R0[p, RID] == R1[q, RID] and R0[p, REV] == R1[q, REV] and abs(R0[p, RS] - R1[q, RS]) < 3
                and abs(R0[p, RE] - R1[q, RE]) < 3
                and ((R0[p, QS] == 0 and qlens[1] - R1[q, QE] == 0) or (R1[q, QS] == 0 and qlens[0] - R0[p, QE] == 0))):
            R0[p, PE_THRU] = 1
            R1[q, PE_THRU] = 1
