"""Chain -> alignment regions: banded extension with z-drop and end bonus (bwa's mem_chain2aln).

For every kept chain (in bwa's chain order) the seeds are tried longest-score first; a seed already
covered by an earlier region of the same read is skipped unless an overlapping seed of the chain
disagrees in diagonal. Each extension runs ksw_extend2 to the left (reversed sequences) and right of
the seed, retrying with a doubled band when the best cell lies near the band edge.

Regions are rows of an int64 matrix `R` (fields below, bwa's mem_alnreg_t); coordinates are in the
forward-reverse reference space, half-open: query [QB, QE), reference [RB, RE).
"""
import numpy as np

from g3align.aligner.mem.bns import clip_to_contig, fetch_seq, get_seq
from g3align.aligner.mem.ksort import sort_distinct_u64
from g3align.aligner.mem.ksw import KSW_XSTART, ksw_align2, ksw_extend2
from g3align.jit import njit

# region fields
RB, RE, QB, QE, RID, SCORE, TRUESC, SUB, ALT_SC, CSUB, SUB_N, W, SEEDCOV, SECONDARY, SECONDARY_ALL, \
    SEEDLEN0, N_COMP, IS_ALT, HASH, LREP, QLEN = range(21)
NF = 21  # LREP/QLEN: the region's frac_rep is float32(LREP)/float32(QLEN) (bwa's float frac_rep)

MEM_SHORT_EXT = 50
MEM_SHORT_LEN = 200


@njit(cache=True, inline="always")
def cal_max_gap(opt, qlen):
    l_del = int((qlen * opt.a - opt.o_del) / opt.e_del + 1.)
    l_ins = int((qlen * opt.a - opt.o_ins) / opt.e_ins + 1.)
    l = l_del if l_del > l_ins else l_ins
    l = l if l > 1 else 1
    return l if l < (opt.w << 1) else (opt.w << 1)


@njit(cache=True)
def seed_sw(opt, mat, offsets, l_pac, pac, L, q, rbeg, qbeg, slen):
    """bwa's mem_seed_sw: local SW score around a short seed, -1 when not needed."""
    if slen >= MEM_SHORT_LEN:
        return -1
    qb = qbeg
    qe = qbeg + slen
    rb = rbeg
    re = rbeg + slen
    mid = (rb + re) >> 1
    qb -= MEM_SHORT_EXT
    qb = qb if qb > 0 else 0
    qe += MEM_SHORT_EXT
    qe = qe if qe < L else L
    rb -= MEM_SHORT_EXT
    rb = rb if rb > 0 else 0
    re += MEM_SHORT_EXT
    re = re if re < (l_pac << 1) else (l_pac << 1)
    if rb < l_pac and l_pac < re:
        if mid < l_pac:
            re = l_pac
        else:
            rb = l_pac
    if qe - qb >= MEM_SHORT_LEN or re - rb >= MEM_SHORT_LEN:
        return -1
    rseq, rb, re, rid = fetch_seq(offsets, l_pac, pac, rb, mid, re)
    r = ksw_align2(qe - qb, q[qb:qe], re - rb, rseq, 5, mat, opt.o_del, opt.e_del, opt.o_ins, opt.e_ins,
                   KSW_XSTART)
    return r[0]


@njit(cache=True)
def flt_chained_seeds(opt, mat, offsets, l_pac, pac, L, q, s_rbeg, s_qbeg, s_len, s_score, ch_off, ch_seed):
    """bwa's mem_flt_chained_seeds (only active for long reads). Returns the new ch_off/ch_seed."""
    if opt.min_chain_weight:
        min_l = 1.1 * opt.min_chain_weight
    else:
        min_l = np.float32(5.5) * np.log(L)
    min_hsp = int(opt.a * min_l + .499)
    if min_l > np.float32(0.05) * L:
        return ch_off, ch_seed
    n_ch = ch_off.shape[0] - 1
    new_off = np.zeros(n_ch + 1, np.int64)
    new_seed = np.empty(ch_seed.shape[0], np.int64)
    m = 0
    for c in range(n_ch):
        for j in range(ch_off[c], ch_off[c + 1]):
            s = ch_seed[j]
            sc = seed_sw(opt, mat, offsets, l_pac, pac, L, q, s_rbeg[s], s_qbeg[s], s_len[s])
            if sc < 0 or sc >= min_hsp:
                s_score[s] = s_len[s] * opt.a if sc < 0 else sc
                new_seed[m] = s
                m += 1
            else:
                s_score[s] = sc
        new_off[c + 1] = m
    return new_off, new_seed[:m]


# fields of a precomputed seed extension (one row per chain seed, see ext_seed)
X_QB, X_RB, X_QE, X_RE, X_SCORE, X_TRUESC, X_W = range(7)
XF = 8


@njit(cache=True)
def chain_window(opt, offsets, l_pac, L, s_rbeg, s_qbeg, s_len, seeds):
    """The reference window [rmax0, rmax1) of one chain (mem_chain2aln's rmax, clipped to the contig
    and strand of the chain's first seed as bns_fetch_seq clips it)."""
    rmax0 = l_pac << 1
    rmax1 = np.int64(0)
    for i in range(seeds.shape[0]):
        t = seeds[i]
        b = s_rbeg[t] - (s_qbeg[t] + cal_max_gap(opt, s_qbeg[t]))
        rest = L - s_qbeg[t] - s_len[t]
        e = s_rbeg[t] + s_len[t] + (rest + cal_max_gap(opt, rest))
        rmax0 = rmax0 if rmax0 < b else b
        rmax1 = rmax1 if rmax1 > e else e
    rmax0 = rmax0 if rmax0 > 0 else 0
    rmax1 = rmax1 if rmax1 < (l_pac << 1) else (l_pac << 1)
    if rmax0 < l_pac and l_pac < rmax1:
        if s_rbeg[seeds[0]] < l_pac:
            rmax1 = l_pac
        else:
            rmax0 = l_pac
    rmax0, rmax1, _ = clip_to_contig(offsets, l_pac, rmax0, s_rbeg[seeds[0]], rmax1)
    return rmax0, rmax1


@njit(cache=True)
def ext_seed(opt, mat, L, q, rseq, rmax0, rmax1, sq, sr, sl, qs, rs, out):
    """Extend one seed (query [sq, sq+sl) at reference sr) to the left and right inside the chain's
    window rseq = reference [rmax0, rmax1): ksw_extend2 with bwa's band doubling (at most two tries),
    clipping penalties and end-to-end choice. Writes out[X_QB..X_W]. qs/rs are scratch buffers of
    at least L and rmax1-rmax0 bytes. kernels/memext.cu computes the same per job."""
    aw0 = opt.w
    aw1 = opt.w
    score = np.int64(-1)
    truesc = np.int64(-1)
    if sq > 0:  # left extension on reversed sequences
        for i in range(sq):
            qs[i] = q[sq - 1 - i]
        tmp = sr - rmax0
        for i in range(tmp):
            rs[i] = rseq[tmp - 1 - i]
        qle = tle = gtle = gscore = 0
        for i in range(2):
            prev = score
            aw0 = opt.w << i
            score, qle, tle, gtle, gscore, max_off0 = ksw_extend2(
                sq, qs, tmp, rs, 5, mat, opt.o_del, opt.e_del, opt.o_ins, opt.e_ins, aw0, opt.pen_clip5,
                opt.zdrop, sl * opt.a)
            if score == prev or max_off0 < (aw0 >> 1) + (aw0 >> 2):
                break
        if gscore <= 0 or gscore <= score - opt.pen_clip5:
            out[X_QB] = sq - qle
            out[X_RB] = sr - tle
            truesc = score
        else:
            out[X_QB] = 0
            out[X_RB] = sr - gtle
            truesc = gscore
    else:
        score = sl * opt.a
        truesc = score
        out[X_QB] = 0
        out[X_RB] = sr
    if sq + sl != L:  # right extension
        qe = sq + sl
        re = sr + sl - rmax0
        sc0 = score
        qle = tle = gtle = gscore = 0
        for i in range(2):
            prev = score
            aw1 = opt.w << i
            score, qle, tle, gtle, gscore, max_off1 = ksw_extend2(
                L - qe, q[qe:], rmax1 - rmax0 - re, rseq[re:], 5, mat, opt.o_del, opt.e_del, opt.o_ins,
                opt.e_ins, aw1, opt.pen_clip3, opt.zdrop, sc0)
            if score == prev or max_off1 < (aw1 >> 1) + (aw1 >> 2):
                break
        if gscore <= 0 or gscore <= score - opt.pen_clip3:
            out[X_QE] = qe + qle
            out[X_RE] = rmax0 + re + tle
            truesc += score - sc0
        else:
            out[X_QE] = L
            out[X_RE] = rmax0 + re + gtle
            truesc += gscore - sc0
    else:
        out[X_QE] = L
        out[X_RE] = sr + sl
    out[X_SCORE] = score
    out[X_TRUESC] = truesc
    out[X_W] = aw0 if aw0 > aw1 else aw1


@njit(cache=True)
def chain2aln(opt, mat, offsets, l_pac, pac, L, q, s_rbeg, s_qbeg, s_len, s_score, seeds, rid, l_rep,
              R, nreg, X):
    """Extend one chain; regions are appended to R from row nreg. Returns (R, nreg).
    X: empty, or the chain's precomputed seed extensions (row i for seeds[i], from ext_seed on the CPU
    or kernels/memext.cu on the GPU); then no extension runs here."""
    nseed = seeds.shape[0]
    if nseed == 0:
        return R, nreg
    pre = X.shape[0] > 0
    if pre:  # the extensions are given: no reference window, no scratch (views, not allocations)
        rmax0 = rmax1 = np.int64(0)
        rseq = qs = rs = q[:0]
        xa = R[0]  # unused (x is X's row), typed as the scratch row below
    else:
        rmax0, rmax1 = chain_window(opt, offsets, l_pac, L, s_rbeg, s_qbeg, s_len, seeds)
        rseq = np.empty(rmax1 - rmax0, np.uint8)
        get_seq(l_pac, pac, rmax0, rmax1, rseq)
        xa = np.empty(XF, np.int64)
        qs = np.empty(L, np.uint8)
        rs = np.empty(rmax1 - rmax0 + 1, np.uint8)

    # bwa's ks_introsort_64 on score<<32|index: the keys are distinct, so any sort orders them alike
    srt = np.empty(nseed, np.uint64)
    for i in range(nseed):
        srt[i] = (np.uint64(s_score[seeds[i]]) << np.uint64(32)) | np.uint64(i)
    sort_distinct_u64(srt)

    for k in range(nseed - 1, -1, -1):
        ks = np.int64(srt[k] & np.uint64(0xffffffff))
        si = seeds[ks]
        sq = np.int64(s_qbeg[si])
        sr = s_rbeg[si]
        sl = np.int64(s_len[si])
        i = 0
        while i < nreg:  # is the seed already covered by a region?
            if sr < R[i, RB] or sr + sl > R[i, RE] or sq < R[i, QB] or sq + sl > R[i, QE]:
                i += 1
                continue
            if sl - R[i, SEEDLEN0] > .1 * L:
                i += 1
                continue
            qd = sq - R[i, QB]
            rd = sr - R[i, RB]
            max_gap = cal_max_gap(opt, qd if qd < rd else rd)
            w = max_gap if max_gap < R[i, W] else R[i, W]
            if qd - rd < w and rd - qd < w:
                break
            qd = R[i, QE] - (sq + sl)
            rd = R[i, RE] - (sr + sl)
            max_gap = cal_max_gap(opt, qd if qd < rd else rd)
            w = max_gap if max_gap < R[i, W] else R[i, W]
            if qd - rd < w and rd - qd < w:
                break
            i += 1
        if i < nreg:  # almost contained: extend only if an overlapping seed disagrees in diagonal
            i = k + 1
            while i < nseed:
                if srt[i] == 0:
                    i += 1
                    continue
                t = seeds[np.int64(srt[i] & np.uint64(0xffffffff))]
                tq = np.int64(s_qbeg[t])
                tl = np.int64(s_len[t])
                if tl < sl * .95:
                    i += 1
                    continue
                if sq <= tq and sq + sl - tq >= (sl >> 2) and tq - sq != s_rbeg[t] - sr:
                    break
                if tq <= sq and tq + tl - sq >= (sl >> 2) and sq - tq != sr - s_rbeg[t]:
                    break
                i += 1
            if i == nseed:
                srt[k] = 0
                continue
        if nreg == R.shape[0]:
            R2 = np.zeros((R.shape[0] * 2 + 4, NF), np.int64)
            R2[:nreg] = R[:nreg]
            R = R2
        a = nreg
        nreg += 1
        for f in range(NF):
            R[a, f] = 0
        R[a, RID] = rid
        x = X[ks] if pre else xa
        if not pre:
            ext_seed(opt, mat, L, q, rseq, rmax0, rmax1, sq, sr, sl, qs, rs, xa)
        R[a, QB] = x[X_QB]
        R[a, RB] = x[X_RB]
        R[a, QE] = x[X_QE]
        R[a, RE] = x[X_RE]
        R[a, SCORE] = x[X_SCORE]
        R[a, TRUESC] = x[X_TRUESC]
        cov = 0
        for i in range(nseed):
            t = seeds[i]
            if (s_qbeg[t] >= R[a, QB] and s_qbeg[t] + s_len[t] <= R[a, QE] and s_rbeg[t] >= R[a, RB]
                    and s_rbeg[t] + s_len[t] <= R[a, RE]):
                cov += s_len[t]
        R[a, SEEDCOV] = cov
        R[a, W] = x[X_W]
        R[a, SEEDLEN0] = sl
        R[a, LREP] = l_rep
        R[a, QLEN] = L
    return R, nreg
