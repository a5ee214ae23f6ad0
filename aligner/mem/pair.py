"""Paired-end bwa mem (bwamem_pair.c): insert-size statistics, mate rescue, pairing, pair MAPQ.

Batch flow (aligner/mem/pipeline.py):
  regions_range (per read, the SE core) -> pestat (per batch = bwa's -K chunk, between the stages)
  -> sam_pe_range (per pair: mate rescue, primary marking, pairing, SAM records).

* pestat       = mem_pestat: orientation FF/FR/RF/RR of unique pairs, quartiles, mean/std, bounds.
* matesw       = mem_matesw: local SW of the mate in the window the statistics allow.
* pair_score   = mem_pair: best pair by score + log-likelihood of the insert size.
* sam_pe       = mem_sam_pe.
Regions are the int64 rows of extend.py (one matrix per read, rows appended by mate rescue).
"""
import math
from collections import namedtuple

import numpy as np

from g3align.aligner.mem.bns import clip_to_contig, get_seq
from g3align.aligner.mem.extend import (
    CSUB,
    IS_ALT,
    LREP,
    NF,
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
)
from g3align.aligner.mem.ksort import STACK_ROWS, introsort_ws
from g3align.aligner.mem.ksw import KSW_XBYTE, KSW_XSTART, KSW_XSUBO, ksw_align2
from g3align.aligner.mem.options import F_ALL, F_NO_RESCUE, F_NOPAIRING, F_PRIMARY5
from g3align.aligner.mem.primary import approx_mapq_se, hash_64, mark_primary_se, sort_dedup_patch
from g3align.aligner.mem.samout import cg_empty, cg_slice, gen_alt_one, reg2aln, write_record
from g3align.aligner.mem.single import (
    align1_in_batch,
    reg2sam,
    reorder_primary5,
)
from g3align.aligner.runtime.nbshare import claim, keep_alive, owned_text, unowned
from g3align.jit import njit

MIN_RATIO = 0.8
MIN_DIR_CNT = 10
MIN_DIR_RATIO = 0.05
OUTLIER_BOUND = 2.0
MAPPING_BOUND = 3.0
MAX_STDDEV = 4.0


# ------------------------------------------------------------------ stage 1: regions of every read
@njit(cache=True, inline="always")
def _regions_into(R_cat, tot, fm, offsets, l_pac, pac, seq, seq_off, i0, i1, cnt, c0, opt, mat, pre):
    """The regions of reads [i0, i1) appended to R_cat's first `tot` rows (grown when full) and each read's
    count into cnt[i - c0]. Returns (R_cat, tot)."""
    for i in range(i0, i1):
        R, n, lrep = align1_in_batch(fm, offsets, l_pac, pac, seq, seq_off, i, opt, mat, pre)
        if tot + n > R_cat.shape[0]:
            R2 = np.empty((max(2 * R_cat.shape[0], tot + n), NF), np.int64)
            R2[:tot] = R_cat[:tot]
            R_cat = R2
        R_cat[tot:tot + n] = R[:n]
        tot += n
        cnt[i - c0] = n
    return R_cat, tot


@njit(cache=True, nogil=True)
def regions_range(fm, offsets, l_pac, pac, seq, seq_off, i0, i1, opt, mat, pre):
    """Regions of reads [i0, i1) concatenated: (R_cat, counts). Chains and seed extensions precomputed
    when `pre` is not empty (see core.align_range_se)."""
    fm, offsets, pac, seq, seq_off, mat, pre = unowned((fm, offsets, pac, seq, seq_off, mat, pre))
    cnt = np.zeros(i1 - i0, np.int64)
    R_cat, tot = _regions_into(np.empty((64, NF), np.int64), 0, fm, offsets, l_pac, pac, seq, seq_off, i0, i1,
                               cnt, i0, opt, mat, pre)
    return R_cat[:tot], cnt


@njit(cache=True, nogil=True)
def regions_claim(fm, offsets, l_pac, pac, seq, seq_off, bounds, counter, cnt, k_beg, k_end, k_own, t, opt, mat,
                  pre):
    """regions_range for the pool's threads with one call each per part: the read ranges [bounds[k],
    bounds[k + 1]) are claimed from the shared `counter` (nbshare.claim) until none is left, so a thread
    returns to Python (and waits for the GIL) once per part, not once per range, and the ranges still balance
    between the threads. Each read's region count goes to cnt[i]; range k's regions to this thread's buffer
    rows [k_beg[k], k_end[k]), with k_own[k] = t (this call's number). Returns the buffer: the ranges' rows
    concatenated in k order are regions_range's output whatever the threads' number and order."""
    fm, offsets, pac, seq, seq_off, mat, pre = unowned((fm, offsets, pac, seq, seq_off, mat, pre))
    bounds, cnt, k_beg, k_end, k_own = unowned((bounds, cnt, k_beg, k_end, k_own))  # disjoint items per thread
    R_cat = np.empty((64, NF), np.int64)
    tot = 0
    while True:
        k = claim(counter)
        if k >= bounds.shape[0] - 1:
            break
        k_beg[k] = tot
        R_cat, tot = _regions_into(R_cat, tot, fm, offsets, l_pac, pac, seq, seq_off, bounds[k], bounds[k + 1],
                                   cnt, 0, opt, mat, pre)
        k_end[k] = tot
        k_own[k] = t
    return R_cat[:tot]


# ------------------------------------------------------------------ insert-size statistics
@njit(cache=True, inline="always")
def infer_dir(l_pac, b1, b2):
    """(orientation 0..3 = FF FR RF RR, distance) of read 2 at b2 relative to read 1 at b1."""
    r1 = 1 if b1 >= l_pac else 0
    r2 = 1 if b2 >= l_pac else 0
    p2 = b2 if r1 == r2 else (l_pac << 1) - 1 - b2
    dist = p2 - b1 if p2 > b1 else b1 - p2
    d = (0 if r1 == r2 else 1) ^ (0 if p2 > b1 else 3)
    return d, dist


@njit(cache=True)
def _cal_sub(opt, R, s, e):
    for j in range(s + 1, e):
        b_max = max(R[j, QB], R[s, QB])
        e_min = min(R[j, QE], R[s, QE])
        if e_min > b_max:
            min_l = min(R[j, QE] - R[j, QB], R[s, QE] - R[s, QB])
            if np.float32(e_min - b_max) >= np.float32(min_l) * opt.mask_level:
                return R[j, SCORE]
    return opt.min_seed_len * opt.a


@njit(cache=True, nogil=True)
def pestat_sizes(opt, l_pac, R_cat, reg_off, n_pairs):
    """Insert sizes of unique pairs per orientation: (sizes, dir) arrays (bwa's isize[4] lists)."""
    sizes = np.empty(n_pairs, np.int64)
    dirs = np.empty(n_pairs, np.int64)
    m = 0
    for i in range(n_pairs):
        s0, e0 = reg_off[2 * i], reg_off[2 * i + 1]
        s1, e1 = reg_off[2 * i + 1], reg_off[2 * i + 2]
        if e0 == s0 or e1 == s1:
            continue
        if _cal_sub(opt, R_cat, s0, e0) > MIN_RATIO * R_cat[s0, SCORE]:
            continue
        if _cal_sub(opt, R_cat, s1, e1) > MIN_RATIO * R_cat[s1, SCORE]:
            continue
        if R_cat[s0, RID] != R_cat[s1, RID]:
            continue
        d, dist = infer_dir(l_pac, R_cat[s0, RB], R_cat[s1, RB])
        if dist and dist <= opt.max_ins:
            sizes[m] = dist
            dirs[m] = d
            m += 1
    return sizes[:m], dirs[:m]


@njit(cache=True)
def mean_std(sel):
    """bwa's mean and standard deviation of the kept insert sizes: double sums in input order (numba does
    not reassociate floating-point additions, so this is bwa's arithmetic exactly)."""
    a = 0.0
    for i in range(sel.shape[0]):
        a += sel[i]
    a /= sel.shape[0]
    s = 0.0
    for i in range(sel.shape[0]):
        s += (sel[i] - a) * (sel[i] - a)
    return a, math.sqrt(s / sel.shape[0])


def pestat(opt, l_pac, R_cat, reg_off, n_pairs, log=None):
    """mem_pestat (opt: MemParams): per orientation (low, high, failed, avg, std) as numpy arrays;
    bwa's log lines go to `log` (a callable taking one line)."""
    sizes, dirs = pestat_sizes(opt, l_pac, R_cat, reg_off, n_pairs)
    return pestat_of_sizes(sizes, dirs, log)


def pestat_of_sizes(sizes, dirs, log=None):
    """mem_pestat from the unique pairs' insert sizes and orientations (pestat_sizes, in pair order)."""
    say = log or (lambda s: None)
    low = np.zeros(4, np.int64)
    high = np.zeros(4, np.int64)
    failed = np.zeros(4, np.int64)
    avg = np.zeros(4, np.float64)
    std = np.zeros(4, np.float64)
    counts = [int((dirs == d).sum()) for d in range(4)]
    say("[M::mem_pestat] # candidate unique pairs for (FF, FR, RF, RR): (%d, %d, %d, %d)" % tuple(counts))
    for d in range(4):
        q = np.sort(sizes[dirs == d])
        name = "FR"[d >> 1 & 1] + "FR"[d & 1]
        if len(q) < MIN_DIR_CNT:
            say(f"[M::mem_pestat] skip orientation {name} as there are not enough pairs")
            failed[d] = 1
            continue
        say(f"[M::mem_pestat] analyzing insert size distribution for orientation {name}...")
        n = len(q)
        p25 = int(q[int(.25 * n + .499)])
        p50 = int(q[int(.50 * n + .499)])
        p75 = int(q[int(.75 * n + .499)])
        lo = int(p25 - OUTLIER_BOUND * (p75 - p25) + .499)
        if lo < 1:
            lo = 1
        hi = int(p75 + OUTLIER_BOUND * (p75 - p25) + .499)
        say(f"[M::mem_pestat] (25, 50, 75) percentile: ({p25}, {p50}, {p75})")
        say(f"[M::mem_pestat] low and high boundaries for computing mean and std.dev: ({lo}, {hi})")
        sel = q[(q >= lo) & (q <= hi)]
        a, s = mean_std(sel)
        avg[d], std[d] = a, s
        say(f"[M::mem_pestat] mean and std.dev: ({a:.2f}, {s:.2f})")
        lo = int(p25 - MAPPING_BOUND * (p75 - p25) + .499)
        hi = int(p75 + MAPPING_BOUND * (p75 - p25) + .499)
        if lo > a - MAX_STDDEV * s:
            lo = int(a - MAX_STDDEV * s + .499)
        if hi < a + MAX_STDDEV * s:
            hi = int(a + MAX_STDDEV * s + .499)
        if lo < 1:
            lo = 1
        low[d], high[d] = lo, hi
        say(f"[M::mem_pestat] low and high boundaries for proper pairs: ({lo}, {hi})")
    mx = max(counts)
    for d in range(4):
        if failed[d] == 0 and counts[d] < mx * MIN_DIR_RATIO:
            failed[d] = 1
            say(f"[M::mem_pestat] skip orientation {'FR'[d >> 1 & 1] + 'FR'[d & 1]}")
    return low, high, failed, avg, std


# ------------------------------------------------------------------ mate rescue
@njit(cache=True)
def _push_region(R, n):
    if n == R.shape[0]:
        R2 = np.zeros((2 * R.shape[0] + 4, NF), np.int64)
        R2[:n] = R[:n]
        R = R2
    return R


@njit(cache=True)
def rescue_window(opt, offsets, l_pac, p_low, p_high, a_row, l_ms, r):
    """mem_matesw's reference window for orientation r around region a_row, clipped as bns_fetch_seq
    clips it: (rb, re, rid, is_rev, xtra); rid = -1 when the window is empty. The SW runs when
    rid == a_row[RID] and re - rb >= min_seed_len."""
    is_rev = (r >> 1) != (r & 1)
    is_larger = not (r >> 1)
    if not is_rev:
        rb = a_row[RB] + p_low[r] if is_larger else a_row[RB] - p_high[r]
        re = (a_row[RB] + p_high[r] if is_larger else a_row[RB] - p_low[r]) + l_ms
    else:
        rb = (a_row[RB] + p_low[r] if is_larger else a_row[RB] - p_high[r]) - l_ms
        re = a_row[RB] + p_high[r] if is_larger else a_row[RB] - p_low[r]
    if rb < 0:
        rb = 0
    if re > (l_pac << 1):
        re = l_pac << 1
    rid = -1
    if rb < re:
        rb, re, rid = clip_to_contig(offsets, l_pac, rb, (rb + re) >> 1, re)
    xtra = KSW_XSUBO | KSW_XSTART | (KSW_XBYTE if l_ms * opt.a < 250 else 0) | (opt.min_seed_len * opt.a)
    return rb, re, rid, is_rev, xtra


@njit(cache=True)
def _rc(ms):
    l_ms = ms.shape[0]
    rev = np.empty(l_ms, np.uint8)
    for i in range(l_ms):
        c = ms[l_ms - 1 - i]
        rev[i] = 3 - c if c < 4 else 4
    return rev


@njit(cache=True)
def _seen_orientations(l_pac, p_low, p_high, p_failed, a_row, Rm, nm):
    """mem_matesw's skip[r] as bits: bit r set when orientation r needs no rescue (no statistics for it, or
    a mate region Rm[:nm] already lies within its insert-size bounds of a_row). 15: none needs one."""
    skip = 0
    for r in range(4):
        if p_failed[r]:
            skip |= 1 << r
    for i in range(nm):
        r, dist = infer_dir(l_pac, a_row[RB], Rm[i, RB])
        if dist >= p_low[r] and dist <= p_high[r]:
            skip |= 1 << r
    return skip


@njit(cache=True)
def matesw(opt, mat, offsets, l_pac, pac, p_low, p_high, p_failed, a_row, l_ms, ms, Rm, nm, sw_key, sw_res, key0):
    """mem_matesw: rescue the mate near region a_row in the orientations not yet seen.
    sw_key/sw_res: precomputed local alignments of this pair (rescue_jobs_range keys, key0 + r for
    orientation r; from the GPU or its twin); an alignment not among them is computed here.
    Returns (Rm, nm, n_attempts)."""
    skip = _seen_orientations(l_pac, p_low, p_high, p_failed, a_row, Rm, nm)
    if skip == 15:
        return Rm, nm, 0
    n = 0
    for r in range(4):
        if (skip >> r) & 1:
            continue
        rb, re, rid, is_rev, xtra = rescue_window(opt, offsets, l_pac, p_low, p_high, a_row, l_ms, r)
        if a_row[RID] == rid and re - rb >= opt.min_seed_len:
            k = 0
            while k < sw_key.shape[0] and sw_key[k] != key0 + r:
                k += 1
            if k < sw_key.shape[0]:
                score, te, qe, score2, te2, tb, qb = (sw_res[k, 0], sw_res[k, 1], sw_res[k, 2], sw_res[k, 3],
                                                      sw_res[k, 4], sw_res[k, 5], sw_res[k, 6])
            else:
                ref = np.empty(re - rb, np.uint8)
                get_seq(l_pac, pac, rb, re, ref)
                score, te, qe, score2, te2, tb, qb = ksw_align2(l_ms, _rc(ms) if is_rev else ms, re - rb, ref, 5, mat,
                                                               opt.o_del, opt.e_del, opt.o_ins, opt.e_ins, xtra)
            if score >= opt.min_seed_len and qb >= 0:
                Rm = _push_region(Rm, nm)
                b = np.zeros(NF, np.int64)
                b[RID] = a_row[RID]
                b[IS_ALT] = a_row[IS_ALT]
                b[QB] = l_ms - (qe + 1) if is_rev else qb
                b[QE] = l_ms - qb if is_rev else qe + 1
                b[RB] = (l_pac << 1) - (rb + te + 1) if is_rev else rb + tb
                b[RE] = (l_pac << 1) - (rb + tb) if is_rev else rb + te + 1
                b[SCORE] = score
                b[CSUB] = score2
                b[SECONDARY] = -1
                b[SEEDCOV] = min(b[RE] - b[RB], b[QE] - b[QB]) >> 1
                b[QLEN] = 0  # frac_rep 0 for rescued hits
                nm += 1
                i = 0
                while i < nm - 1:  # insertion point: keep Rm sorted by score
                    if Rm[i, SCORE] < b[SCORE]:
                        break
                    i += 1
                tmp = i
                i = nm - 1
                while i > tmp:
                    Rm[i] = Rm[i - 1]
                    i -= 1
                Rm[i] = b
            n += 1
        if n:
            nm = sort_dedup_patch(opt, mat, l_pac, pac, ms, Rm, nm, False)
    return Rm, nm, n


@njit(cache=True)
def _candidates(opt, R, n, out):
    """Rescue anchors of one read: regions within pen_unpaired of its best, at most max_matesw, written to
    out (max_matesw long). Returns how many."""
    m = 0
    for j in range(n):
        if m == opt.max_matesw:
            break
        if R[j, SCORE] >= R[0, SCORE] - opt.pen_unpaired:
            out[m] = j
            m += 1
    return m


@njit(cache=True, nogil=True)
def rescue_jobs_range(opt, offsets, l_pac, p_low, p_high, p_failed, seq_off, R_cat, reg_off, j0, j1):
    """Speculative mate-rescue alignments of pairs [j0, j1): every (side, anchor, orientation) that
    mem_matesw could align given the regions before any rescue (a superset of the calls it makes:
    a rescue only adds skipped orientations, and a call missing here is computed in matesw).
    Returns (jobs per pair, J) with J rows (key, mate read, rb, re, is_rev, xtra);
    key = (side*max_matesw + anchor)*4 + r."""
    offsets, p_low, p_high, p_failed, seq_off, R_cat, reg_off = unowned(
        (offsets, p_low, p_high, p_failed, seq_off, R_cat, reg_off))
    cnt = np.zeros(j1 - j0, np.int64)
    J = np.empty((64, 6), np.int64)
    n = 0
    if opt.flag & F_NO_RESCUE:
        return cnt, J[:0]
    cand = np.empty(max(opt.max_matesw, 0), np.int64)
    for j in range(j0, j1):
        for side in range(2):
            a = 2 * j + side
            b = 2 * j + 1 - side
            Ra = R_cat[reg_off[a]:reg_off[a + 1]]
            Rm = R_cat[reg_off[b]:reg_off[b + 1]]
            l_ms = seq_off[b + 1] - seq_off[b]
            for jj in range(_candidates(opt, Ra, Ra.shape[0], cand)):
                a_row = Ra[cand[jj]]
                skip = _seen_orientations(l_pac, p_low, p_high, p_failed, a_row, Rm, Rm.shape[0])
                for r in range(4):
                    if (skip >> r) & 1:
                        continue
                    rb, re, rid, is_rev, xtra = rescue_window(opt, offsets, l_pac, p_low, p_high, a_row, l_ms, r)
                    if a_row[RID] != rid or re - rb < opt.min_seed_len:
                        continue
                    if n == J.shape[0]:
                        J2 = np.empty((2 * n, 6), np.int64)
                        J2[:n] = J[:n]
                        J = J2
                    J[n, 0] = (side * opt.max_matesw + jj) * 4 + r
                    J[n, 1] = b
                    J[n, 2] = rb
                    J[n, 3] = re
                    J[n, 4] = 1 if is_rev else 0
                    J[n, 5] = xtra
                    n += 1
                    cnt[j - j0] += 1
    return cnt, J[:n]


@njit(cache=True, nogil=True)
def rescue_sw_range(opt, mat, l_pac, pac, seq, seq_off, mate, wrb, wre, wrev, wx, k0, k1, res):
    """CPU twin of kernels/memext.cu's mem_sw_kernel: ksw_align2 of rescue jobs [k0, k1) into res[k, 0:7]
    (score, te, qe, score2, te2, tb, qb)."""
    mat, pac, seq, seq_off, mate, wrb, wre, wrev, wx, res = unowned(
        (mat, pac, seq, seq_off, mate, wrb, wre, wrev, wx, res))
    for k in range(k0, k1):
        ms = seq[seq_off[mate[k]]:seq_off[mate[k] + 1]]
        qs = _rc(ms) if wrev[k] else ms
        ref = np.empty(wre[k] - wrb[k], np.uint8)
        get_seq(l_pac, pac, wrb[k], wre[k], ref)
        x = ksw_align2(ms.shape[0], qs, wre[k] - wrb[k], ref, 5, mat, opt.o_del, opt.e_del, opt.o_ins, opt.e_ins,
                       wx[k])
        for f in range(7):
            res[k, f] = x[f]


# ------------------------------------------------------------------ pairing
@njit(cache=True)
def pair_salt(pair_id):
    """bwa's `id<<8` in mem_pair, whose `int id` makes it 32-bit arithmetic: the pair number's low 24 bits shifted
    (from pair 2^23 on the top bits fall off and the sign may flip), then widened with its sign to 64 bits where it
    meets the uint64 it is XORed with. Returns the 64-bit pattern as an int64."""
    salt = (np.int64(pair_id) & 0xffffff) << 8
    if salt >= 0x80000000:
        salt -= 0x100000000
    return salt


@njit(cache=True)
def pair_score(opt, offsets, l_pac, p_low, p_high, p_failed, p_avg, p_std, Ra, na, Rb, nb_, n_pri0, n_pri1,
               pair_id, ws):
    """mem_pair: (best pair score o, subo, n_sub, z0, z1). ws: the caller's scratch (pair_ws): the work
    arrays are views of it when they fit, so that a pair allocates nothing."""
    offsets, p_low, p_high, p_failed, p_avg, p_std, Ra, Rb = unowned((offsets, p_low, p_high, p_failed, p_avg, p_std,
                                                                      Ra, Rb))  # as sam_pe
    w1, w2, stack = ws.ints, ws.pairs, ws.stack
    salt = pair_salt(pair_id)
    nv = n_pri0 + n_pri1
    fits = nv <= w1.shape[0] and 2 * nv + 16 <= w2.shape[0]
    # (x, y) of every primary hit of both reads (K), sorted (idx) into V
    K = w2[:nv] if fits else np.empty((nv, 2), np.int64)
    idx = w1[:nv] if fits else np.empty(nv, np.int64)
    V = w2[nv:2 * nv] if fits else np.empty((nv, 2), np.int64)
    m = 0
    for r in range(2):
        npri = n_pri0 if r == 0 else n_pri1
        for i in range(npri):
            if r == 0:
                rb = Ra[i, RB]
                rid = Ra[i, RID]
                sc = Ra[i, SCORE]
            else:
                rb = Rb[i, RB]
                rid = Rb[i, RID]
                sc = Rb[i, SCORE]
            x = rb if rb < l_pac else (l_pac << 1) - 1 - rb
            K[m, 0] = (rid << 32) | (x - offsets[rid])
            K[m, 1] = (sc << 32) | (i << 2) | ((1 if rb >= l_pac else 0) << 1) | r
            m += 1
    for i in range(nv):
        idx[i] = i
    introsort_ws(idx, nv, K, stack)
    for i in range(nv):
        V[i, 0] = K[idx[i], 0]
        V[i, 1] = K[idx[i], 1]
    y0 = -1  # last index seen per (strand, read) class 0..3
    y1 = -1
    y2 = -1
    y3 = -1
    # (score<<32 | hash, k<<32 | i) per candidate pair (U, the rest of w2), sorted by idx2 (in w1 after idx)
    cap0 = w2.shape[0] - 2 * nv if fits else 16
    cap = cap0
    U = w2[2 * nv:] if fits else np.empty((cap, 2), np.int64)
    nu = 0
    for i in range(nv):
        vyi = V[i, 1]
        for r in range(2):
            d = (r << 1) | ((vyi >> 1) & 1)
            if p_failed[d]:
                continue
            which = (r << 1) | ((vyi & 1) ^ 1)
            k = y0 if which == 0 else (y1 if which == 1 else (y2 if which == 2 else y3))
            if k < 0:
                continue
            while k >= 0:
                if (V[k, 1] & 3) != which:
                    k -= 1
                    continue
                dist = V[i, 0] - V[k, 0]
                if dist > p_high[d]:
                    break
                if dist < p_low[d]:
                    k -= 1
                    continue
                ns = (dist - p_avg[d]) / p_std[d]
                q = int((vyi >> 32) + (V[k, 1] >> 32)
                        + .721 * math.log(2. * math.erfc(abs(ns) * 0.7071067811865476)) * opt.a + .499)
                if q < 0:
                    q = 0
                if nu == cap:
                    cap *= 2
                    U2 = np.empty((cap, 2), np.int64)
                    U2[:nu] = U[:nu]
                    U = U2
                py = (np.int64(k) << 32) | i
                h = hash_64(np.uint64(py) ^ np.uint64(salt)) & np.uint64(0xffffffff)
                U[nu, 1] = py
                U[nu, 0] = (np.int64(q) << 32) | np.int64(h)
                nu += 1
                k -= 1
        c = vyi & 3
        if c == 0:
            y0 = i
        elif c == 1:
            y1 = i
        elif c == 2:
            y2 = i
        else:
            y3 = i
    if nu == 0:
        return 0, 0, 0, 0, 0
    tmp = max(opt.a + opt.b, opt.o_del + opt.e_del, opt.o_ins + opt.e_ins)
    idx2 = w1[nv:nv + nu] if fits and nv + nu <= w1.shape[0] else np.empty(nu, np.int64)
    for i in range(nu):
        idx2[i] = i
    introsort_ws(idx2, nu, U, stack)
    best = idx2[nu - 1]
    i = U[best, 1] >> 32
    k = U[best, 1] & 0xffffffff
    z0 = 0
    z1 = 0
    for t in (i, k):
        zv = (V[t, 1] & 0xffffffff) >> 2
        if V[t, 1] & 1:
            z1 = zv
        else:
            z0 = zv
    ret = U[best, 0] >> 32
    sub = U[idx2[nu - 2], 0] >> 32 if nu > 1 else 0
    n_sub = 0
    for j in range(nu - 2, -1, -1):
        if sub - (U[idx2[j], 0] >> 32) <= tmp:
            n_sub += 1
    return ret, sub, n_sub, z0, z1


@njit(cache=True, inline="always")
def raw_mapq(diff, a):
    return int(6.02 * diff / a + .499)


@njit(cache=True, inline="always")
def _mate_which(opt, R, n, n_pri):
    """The region a read shows its mate when the two are not paired: its best, or its best ALT hit (the first
    after the n_pri primary-assembly ones) when the best scores below -T; -1: none."""
    if n > 0:
        if R[0, SCORE] >= opt.T:
            return 0
        if n_pri < n and R[n_pri, SCORE] >= opt.T:
            return n_pri
    return -1


@njit(cache=True)
def _aln_for_mate(opt, mat, offsets, l_pac, pac, q, R, which, cg):
    """h = mem_reg2aln(region `which`) or an unmapped placeholder: (rid, pos, is_rev, cigar)."""
    if which < 0:
        return -1, -1, 0, np.empty(0, np.uint32)
    rid, pos, is_rev, mapq, flag, nm, cig, md, sc, sub, alt = reg2aln(opt, mat, offsets, l_pac, pac, q.shape[0],
                                                                     q, R, which, cg)
    return rid, pos, is_rev, cig


@njit(cache=True)
def sam_pe(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, p_low, p_high, p_failed, p_avg, p_std,
           q0, q1, name0, name1, qual0, qual1, has_qual, com0, com1, rg_id, Ra, na, Rb, nb_, pair_id, sw_key, sw_res,
           cg0, cg1, ws):
    """mem_sam_pe for one pair: appends read 1's then read 2's records. sw_key/sw_res: the pair's
    precomputed rescue alignments (empty: computed in matesw); cg0/cg1: each read's precomputed region
    alignments (samout.reg2aln); ws: scratch for the rescue anchors and pair_score (pair_ws)."""
    # inputs held by the caller for the call, none returned: unowned views (no reference counting per hand-over)
    (mat, offsets, pac, ctg_names, ctg_off, p_low, p_high, p_failed, p_avg, p_std, q0, q1, name0, name1, qual0, qual1,
     com0, com1, rg_id, Ra, Rb, sw_key, sw_res, cg0, cg1) = unowned(
        (mat, offsets, pac, ctg_names, ctg_off, p_low, p_high, p_failed, p_avg, p_std, q0, q1, name0, name1, qual0,
         qual1, com0, com1, rg_id, Ra, Rb, sw_key, sw_res, cg0, cg1))
    if not (opt.flag & F_NO_RESCUE):
        # candidate anchors for rescue: regions within pen_unpaired of each read's best (taken before any
        # rescue modifies the other read's list)
        # (in ws, which pair_score uses only after the rescue; allocated when -m is too large for it)
        w1, wr = ws.ints, ws.anchors
        mx = max(opt.max_matesw, 0)
        small = 2 * mx <= w1.shape[0] and mx <= wr.shape[0]
        ba = w1[:mx] if small else np.empty(mx, np.int64)
        bb = w1[mx:2 * mx] if small else np.empty(mx, np.int64)
        Rb0 = wr[:mx] if small else np.empty((mx, NF), np.int64)
        n_ba = _candidates(opt, Ra, na, ba)
        n_bb = _candidates(opt, Rb, nb_, bb)
        # read 2's anchors as they were before read 2's list gains rescued hits (read 1's list does not
        # change until the second loop, whose anchors are these copies)
        for j in range(n_bb):
            for f in range(NF):
                Rb0[j, f] = Rb[bb[j], f]
        for j in range(n_ba):
            Rb, nb_, _ = matesw(opt, mat, offsets, l_pac, pac, p_low, p_high, p_failed, Ra[ba[j]], q1.shape[0], q1,
                                Rb, nb_, sw_key, sw_res, j * 4)
        for j in range(n_bb):
            Ra, na, _ = matesw(opt, mat, offsets, l_pac, pac, p_low, p_high, p_failed, Rb0[j], q0.shape[0], q0,
                               Ra, na, sw_key, sw_res, (opt.max_matesw + j) * 4)
    n_pri0 = mark_primary_se(opt, Ra, na, pair_id << 1)
    n_pri1 = mark_primary_se(opt, Rb, nb_, (pair_id << 1) | 1)
    if opt.flag & F_PRIMARY5:
        reorder_primary5(opt, Ra, na)
        reorder_primary5(opt, Rb, nb_)
    paired = False
    if not (opt.flag & F_NOPAIRING) and n_pri0 > 0 and n_pri1 > 0:
        o, subo, n_sub, z0, z1 = pair_score(opt, offsets, l_pac, p_low, p_high, p_failed, p_avg, p_std, Ra, na, Rb,
                                            nb_, n_pri0, n_pri1, pair_id, ws)
        if o > 0:
            multi = False
            for j in range(1, n_pri0):
                if Ra[j, SECONDARY] < 0 and Ra[j, SCORE] >= opt.T:
                    multi = True
                    break
            for j in range(1, n_pri1):
                if Rb[j, SECONDARY] < 0 and Rb[j, SCORE] >= opt.T:
                    multi = True
                    break
            if not multi:
                paired = True
    if paired:
        return _write_paired(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, q0, q1, name0, name1,
                             qual0, qual1, has_qual, com0, com1, rg_id, Ra, na, Rb, nb_, n_pri0, n_pri1, o, subo,
                             n_sub, z0, z1, cg0, cg1, ws)
    # no pairing: each read's best hit, the proper-pair flag if the two best hits form one
    w0 = _mate_which(opt, Ra, na, n_pri0)
    w1 = _mate_which(opt, Rb, nb_, n_pri1)
    h0_rid, h0_pos, h0_rev, h0_cig = _aln_for_mate(opt, mat, offsets, l_pac, pac, q0, Ra, w0, cg0)
    h1_rid, h1_pos, h1_rev, h1_cig = _aln_for_mate(opt, mat, offsets, l_pac, pac, q1, Rb, w1, cg1)
    extra = 1
    if not (opt.flag & F_NOPAIRING) and h0_rid == h1_rid and h0_rid >= 0:
        d, dist = infer_dir(l_pac, Ra[0, RB], Rb[0, RB])
        if not p_failed[d] and dist >= p_low[d] and dist <= p_high[d]:
            extra |= 2
    buf, nbuf = reg2sam(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, q0, name0, qual0, has_qual,
                        com0, rg_id, Ra, na, 0x41 | extra, True, h1_rid, h1_pos, h1_rev, h1_cig, cg0)
    buf, nbuf = reg2sam(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, q1, name1, qual1, has_qual,
                        com1, rg_id, Rb, nb_, 0x81 | extra, True, h0_rid, h0_pos, h0_rev, h0_cig, cg1)
    return buf, nbuf


@njit(cache=True)
def _write_paired(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, q0, q1, name0, name1, qual0, qual1,
                  has_qual, com0, com1, rg_id, Ra, na, Rb, nb_, n_pri0, n_pri1, o, subo, n_sub, z0, z1, cg0, cg1, ws):
    (mat, offsets, pac, ctg_names, ctg_off, q0, q1, name0, name1, qual0, qual1, com0, com1, rg_id, Ra, Rb, cg0,
     cg1) = unowned((mat, offsets, pac, ctg_names, ctg_off, q0, q1, name0, name1, qual0, qual1, com0, com1, rg_id, Ra,
                     Rb, cg0, cg1))  # as sam_pe
    score_un = Ra[0, SCORE] + Rb[0, SCORE] - opt.pen_unpaired
    subo = subo if subo > score_un else score_un
    q_pe = raw_mapq(o - subo, opt.a)
    if n_sub > 0:
        q_pe -= int(4.343 * math.log(n_sub + 1) + .499)
    if q_pe < 0:
        q_pe = 0
    if q_pe > 60:
        q_pe = 60
    fr0 = np.float32(Ra[0, LREP]) / np.float32(Ra[0, QLEN]) if Ra[0, QLEN] > 0 else np.float32(0.0)
    fr1 = np.float32(Rb[0, LREP]) / np.float32(Rb[0, QLEN]) if Rb[0, QLEN] > 0 else np.float32(0.0)
    q_pe = int(q_pe * (1. - .5 * (np.float64(fr0) + np.float64(fr1))) + .499)
    extra = 1
    if o > score_un:
        for i in range(2):
            R = Ra if i == 0 else Rb
            zi = z0 if i == 0 else z1
            if R[zi, SECONDARY] >= 0:
                R[zi, SUB] = R[R[zi, SECONDARY], SCORE]
                R[zi, SECONDARY] = -2
        qse0 = approx_mapq_se(opt, Ra, z0)
        qse1 = approx_mapq_se(opt, Rb, z1)
        qse0 = qse0 if qse0 > q_pe else (q_pe if q_pe < qse0 + 40 else qse0 + 40)
        qse1 = qse1 if qse1 > q_pe else (q_pe if q_pe < qse1 + 40 else qse1 + 40)
        extra |= 2
        qse0 = min(qse0, raw_mapq(Ra[z0, SCORE] - Ra[z0, CSUB], opt.a))
        qse1 = min(qse1, raw_mapq(Rb[z1, SCORE] - Rb[z1, CSUB], opt.a))
    else:
        z0 = 0
        z1 = 0
        qse0 = approx_mapq_se(opt, Ra, 0)
        qse1 = approx_mapq_se(opt, Rb, 0)
    for i in range(2):  # switch secondary and primary
        R = Ra if i == 0 else Rb
        n = na if i == 0 else nb_
        npri = n_pri0 if i == 0 else n_pri1
        zi = z0 if i == 0 else z1
        k = R[zi, SECONDARY_ALL]
        if k >= 0 and k < npri:
            for j in range(n):
                if R[j, SECONDARY_ALL] == k or j == k:
                    R[j, SECONDARY_ALL] = zi
            R[zi, SECONDARY_ALL] = -1
    # each record carries only its own region's XA (bwa builds them for every region, then uses XA[i][z[i]])
    xa_a_own = q0[:0]
    xa_b_own = q1[:0]
    if not (opt.flag & F_ALL):
        xa_a_own = gen_alt_one(opt, mat, offsets, l_pac, pac, q0.shape[0], q0, Ra, na, z0, ctg_names, ctg_off, cg0)
        xa_b_own = gen_alt_one(opt, mat, offsets, l_pac, pac, q1.shape[0], q1, Rb, nb_, z1, ctg_names, ctg_off, cg1)
    r0_own = reg2aln(opt, mat, offsets, l_pac, pac, q0.shape[0], q0, Ra, z0, cg0)
    r1_own = reg2aln(opt, mat, offsets, l_pac, pac, q1.shape[0], q1, Rb, z1, cg1)
    # unowned views of them below (choosing one of two per read would count references); kept alive at the end
    xa_a, xa_b, r0, r1 = unowned((xa_a_own, xa_b_own, r0_own, r1_own))
    aux = ws.ints[:4]  # one-record lists for write_record: cigar offsets [0, n], flag, a zero
    aux[0] = 0
    aux[3] = 0
    co = aux[0:2]
    fl = aux[2:3]
    one = aux[3:4]
    # read 1 (mate = read 2's primary), then read 2
    for i in range(2):
        rr = r0 if i == 0 else r1
        mm = r1 if i == 0 else r0
        rid, pos, is_rev, mapq, flag, nm, cig, md, sc, sub, alt = rr
        mapq = qse0 if i == 0 else qse1
        flag |= (0x40 << i) | extra
        co[1] = cig.shape[0]
        fl[0] = flag
        name = name0 if i == 0 else name1  # chosen before the call: numba rejects conditionals in long calls
        q = q0 if i == 0 else q1
        qual = qual0 if i == 0 else qual1
        com = com0 if i == 0 else com1
        xa = xa_a if i == 0 else xa_b
        R = Ra if i == 0 else Rb
        n = na if i == 0 else nb_
        npri = n_pri0 if i == 0 else n_pri1
        if npri < n and R[npri, SCORE] >= opt.T and R[npri, SECONDARY] < 0 and R[npri, IS_ALT] != 0:
            # the best ALT hit, not shadowed by a primary-assembly hit: a supplementary record after the pair's
            cg = cg0 if i == 0 else cg1
            g_flag = 0x800 | (0x40 << i) | extra
            buf, nbuf = _write_with_alt(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, name, q, qual,
                                        has_qual, com, rg_id, rr, mapq, flag, xa, R, n, npri, g_flag, mm, cg)
            continue
        buf, nbuf = write_record(buf, nbuf, opt, name, q, qual, has_qual, com, rg_id, ctg_names, ctg_off,
                                 rid, pos, is_rev, mapq, flag, nm, cig, md, sc, sub, alt, xa, 0,
                                 one, one, one, co, cig, one, one, fl, 1, True, mm[0], mm[1], mm[2], mm[6])
    keep_alive((xa_a_own, xa_b_own, r0_own, r1_own))
    return buf, nbuf


@njit(cache=True)
def _write_with_alt(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, name, q, qual, has_qual, com,
                    rg_id, h, h_mapq, h_flag, h_xa, R, n, k, g_flag, mate, cg):
    """A paired read's two records when its best ALT hit (region k) is not shadowed: the pair's record h, then the
    ALT hit as a supplementary record (mem_sam_pe's g[i]); each names the other in SA, both carry the mate h[!i]."""
    rid, pos, is_rev, mapq, flag, nm, cig, md, sc, sub, alt = h
    g_rid, g_pos, g_rev, g_mapq, gf, g_nm, g_cig, g_md, g_sc, g_sub, g_alt = reg2aln(
        opt, mat, offsets, l_pac, pac, q.shape[0], q, R, k, cg)
    g_xa = q[:0]
    if not (opt.flag & F_ALL):
        g_xa = gen_alt_one(opt, mat, offsets, l_pac, pac, q.shape[0], q, R, n, k, ctg_names, ctg_off, cg)
    l_rid = np.array([rid, g_rid], np.int64)
    l_pos = np.array([pos, g_pos], np.int64)
    l_rev = np.array([is_rev, g_rev], np.int64)
    l_mapq = np.array([h_mapq, g_mapq], np.int64)
    l_nm = np.array([nm, g_nm], np.int64)
    l_flag = np.array([h_flag, gf | g_flag], np.int64)
    cig_off = np.array([0, cig.shape[0], cig.shape[0] + g_cig.shape[0]], np.int64)
    cigs = np.concatenate((cig, g_cig))
    buf, nbuf = write_record(buf, nbuf, opt, name, q, qual, has_qual, com, rg_id, ctg_names, ctg_off,
                             rid, pos, is_rev, h_mapq, h_flag, nm, cig, md, sc, sub, alt, h_xa, 0,
                             l_rid, l_pos, l_rev, cig_off, cigs, l_mapq, l_nm, l_flag, 2,
                             True, mate[0], mate[1], mate[2], mate[6])
    buf, nbuf = write_record(buf, nbuf, opt, name, q, qual, has_qual, com, rg_id, ctg_names, ctg_off,
                             g_rid, g_pos, g_rev, g_mapq, l_flag[1], g_nm, g_cig, g_md, g_sc, g_sub, g_alt, g_xa, 1,
                             l_rid, l_pos, l_rev, cig_off, cigs, l_mapq, l_nm, l_flag, 2,
                             True, mate[0], mate[1], mate[2], mate[6])
    return buf, nbuf


PAIR_WS = 2048  # rows of each array of pair_ws
PAIR_REGS = 64  # a read's regions held in pair_ws (more: an array of their own)
# pair_ws: int64 (PAIR_WS): pair_score's index arrays, the rescue anchors, _write_paired's one-record lists;
# (PAIR_WS, 2): pair_score's keys and candidate pairs; introsort's stack (STACK_ROWS, 3); (max_matesw, NF): the
# rescue anchors' rows; (PAIR_REGS, NF) twice: the two reads' working regions
PairWS = namedtuple("PairWS", ["ints", "pairs", "stack", "anchors", "regs0", "regs1"])


@njit(cache=True, inline="always")
def _regions_of(R_cat, r0, n, w):
    """A read's n regions R_cat[r0:r0+n] as a working copy of max(n, 4) rows (zeros after n): a view of the
    scratch w when they fit, else an array of their own (sam_pe may append rescued hits, regrowing it)."""
    m = max(n, 4)
    R = w[:m] if m <= w.shape[0] else np.empty((m, NF), np.int64)
    R[:n] = R_cat[r0:r0 + n]
    R[n:] = 0
    return R


@njit(cache=True)
def pair_ws(opt):
    """sam_pe's scratch (PairWS), one per range of pairs; views of it are handed down unowned."""
    return PairWS(np.empty(PAIR_WS, np.int64), np.empty((PAIR_WS, 2), np.int64), np.empty((STACK_ROWS, 3), np.int64),
                  np.empty((min(max(opt.max_matesw, 1), PAIR_WS), NF), np.int64), np.empty((PAIR_REGS, NF), np.int64),
                  np.empty((PAIR_REGS, NF), np.int64))


@njit(cache=True, nogil=True)
def sam_pe_range(fm, offsets, l_pac, pac, ctg_names, ctg_off, seq, seq_off, qual, has_qual, names, name_off,
                 comments, com_off, rg_id, R_cat, reg_off, p_low, p_high, p_failed, p_avg, p_std, first_pair,
                 j0, j1, opt, mat, sw_off, sw_key, sw_res, cg):
    """CPU kernel: SAM bytes for pairs [j0, j1) of an interleaved batch (reads 2j, 2j+1). sw_off (CSR over
    the batch's pairs, or empty), sw_key, sw_res: precomputed rescue alignments (rescue_jobs_range). cg:
    precomputed region alignments, one per row of R_cat (memcigar.py), or cg_empty()."""
    (offsets, pac, ctg_names, ctg_off, seq, seq_off, qual, names, name_off, comments, com_off, rg_id, R_cat,
     reg_off, p_low, p_high, p_failed, p_avg, p_std, mat, sw_off, sw_key, sw_res, cg) = unowned(
        (offsets, pac, ctg_names, ctg_off, seq, seq_off, qual, names, name_off, comments, com_off, rg_id, R_cat,
         reg_off, p_low, p_high, p_failed, p_avg, p_std, mat, sw_off, sw_key, sw_res, cg))
    has_cg = cg[0].shape[0] > 0
    none = cg_empty()
    # the SAM text goes to an unowned view of buf_own: the record writers rebind it at every field (two atomic
    # reference-count updates each for an owned array); a buffer regrown on the way is owned (owned_text)
    buf_own = np.empty(2048 + 1200 * (j1 - j0), np.uint8)
    buf = unowned(buf_own)
    nbuf = 0
    ws_own = pair_ws(opt)  # scratch reused by every pair
    ws = unowned(ws_own)
    for j in range(j0, j1):
        a = 2 * j
        b = 2 * j + 1
        na = reg_off[a + 1] - reg_off[a]
        nb_ = reg_off[b + 1] - reg_off[b]
        Ra = _regions_of(R_cat, reg_off[a], na, ws.regs0)
        Rb = _regions_of(R_cat, reg_off[b], nb_, ws.regs1)
        q0 = seq[seq_off[a]:seq_off[a + 1]]
        q1 = seq[seq_off[b]:seq_off[b + 1]]
        qa = qual[seq_off[a]:seq_off[a + 1]] if has_qual else np.empty(0, np.uint8)
        qb = qual[seq_off[b]:seq_off[b + 1]] if has_qual else np.empty(0, np.uint8)
        u, v = (sw_off[j], sw_off[j + 1]) if sw_off.shape[0] else (0, 0)
        cg0 = cg_slice(cg, reg_off[a], reg_off[a + 1]) if has_cg else none
        cg1 = cg_slice(cg, reg_off[b], reg_off[b + 1]) if has_cg else none
        buf, nbuf = sam_pe(buf, nbuf, opt, mat, offsets, l_pac, pac, ctg_names, ctg_off, p_low, p_high, p_failed,
                           p_avg, p_std, q0, q1, names[name_off[a]:name_off[a + 1]],
                           names[name_off[b]:name_off[b + 1]], qa, qb, has_qual,
                           comments[com_off[a]:com_off[a + 1]], comments[com_off[b]:com_off[b + 1]], rg_id,
                           Ra, na, Rb, nb_, first_pair + j, sw_key[u:v], sw_res[u:v], cg0, cg1, ws)
    keep_alive(ws_own)
    return owned_text(buf_own, buf, nbuf)
