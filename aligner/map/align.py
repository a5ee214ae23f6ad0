"""Base-level alignment of the long-read path: minimap2 2.24's align.c (mm_align_skeleton and below).

For every region of one read this fills the gaps between the chain's anchors with ksw2, extends both
ends with Z-drop, splits a region where the alignment Z-drops in the middle (the tail becomes a new
region right after it), tries the inversion rescue between the two halves of a split, then left-aligns
indels and computes mlen/blen/dp_max (``update_extra``), drops weak regions, recalibrates dp_max on
long reads and sorts the regions by dp_max -- with results identical to minimap2's (CIGARs included).

Entry point (all per read, Numba ``@njit``; plain arrays and scalars only)::

    align_skeleton(flag, k, idx_flag, sc_a, sc_b, q, e, q2, e2, sc_ambi, zdrop, zdrop_inv, end_bonus,
                   bw, bw_long, max_gap, min_cnt, min_chain_score, min_dp_max, min_ksw_len,
                   max_clip_ratio, rank_min_len, rank_frac, alt_drop, max_sw_mat, split_prefix,
                   ref_seq, ref_off, qseq, R, n_regs, a, cigbuf, cig_used)
        -> (R, n_regs, cigbuf, cig_used)

* ``flag`` is mm_mapopt_t.flag (``MM_F_*`` bits; SR, EQX, NO_END_FLT, QSTRAND, NO_INV, FOR/REV_ONLY
  are read here; SPLICE -- ksw_exts2, junctions, the two-strand rounds -- is not ported and
  ``align_skeleton_opt`` refuses it), ``k`` and ``idx_flag`` the index's k and flag (bit 1 = HPC);
  the other scalars are the mm_mapopt_t fields of the same names (``sc_a``/``sc_b`` are ``a``/``b``;
  ``split_prefix`` is 1 when ``--split-prefix`` is set).  The three ``float`` options are rounded to
  float32 inside, as minimap2 stores them.
* ``ref_seq`` uint8 codes (A0 C1 G2 T3, other 4) of all contigs back to back, ``ref_off`` int64[n_seq+1]
  (contig ``rid`` is ``ref_seq[ref_off[rid]:ref_off[rid+1]]``) -- what mm_idx_getseq reads.
* ``qseq`` uint8 codes of the read (forward strand, length qlen).
* ``R`` the region matrix (mm_types; rows ``[0, n_regs)`` used, extra rows are capacity) as it comes
  out of chain_post / est_err / filter_strand_retained (no ``p`` yet), ``a`` the anchors (n, 2) uint64;
  the function changes ``a`` in place (squeezed, MM_SEED_IGNORE / LONG_JOIN bits) as minimap2 does.
* ``cigbuf`` / ``cig_used`` the read's uint32 CIGAR buffer and its used length.

Returned: the (possibly reallocated) region matrix with ``n_regs`` valid rows -- ``HAS_P`` set for
aligned regions, ``DP_SCORE DP_MAX DP_MAX2 N_AMBI N_CIGAR CIG_OFF`` filled, ``QS QE RS RE MLEN BLEN``
updated, split tails / inversion regions inserted -- and the CIGAR buffer.  Rows are in minimap2's
order after mm_filter_regs + mm_update_dp_max + mm_hit_sort; parents are not yet set (align_regs'
mm_set_parent / mm_select_sub come after this).  ``align_skeleton_opt`` takes an ``MapOpt``-like object.

Memory stays bounded on ultra-long reads: every DP goes through ksw2's banded kernels on one gap or
one end at a time (at most ``max_sw_mat`` cells, as in minimap2).
"""
import numpy as np

from g3align.aligner.map.hit import filter_regs, hit_sort, split_reg, squeeze_a
from g3align.aligner.map.ksw2 import extd2, extz2, gen_simple_mat, ll_i16
from g3align.aligner.map.lchain import mg_log2
from g3align.aligner.map.options import (
    F_EQX,
    F_FOR_ONLY,
    F_NO_END_FLT,
    F_NO_INV,
    F_QSTRAND,
    F_REV_ONLY,
    F_SPLICE,
    F_SR,
    I_HPC,
)
from g3align.aligner.map.types import (
    AS,
    BLEN,
    CIG_D,
    CIG_EQ,
    CIG_I,
    CIG_M,
    CIG_N,
    CIG_OFF,
    CIG_X,
    CNT,
    DIV,
    DP_MAX,
    DP_MAX2,
    DP_SCORE,
    EZ_MAX,
    EZ_MAX_Q,
    EZ_MAX_T,
    EZ_MQE_T,
    EZ_N,
    EZ_REACH_END,
    EZ_SCORE,
    EZ_ZDROPPED,
    HAS_P,
    ID,
    INV,
    KSW_EZ_APPROX_MAX,
    KSW_EZ_EXTZ_ONLY,
    KSW_EZ_REV_CIGAR,
    KSW_EZ_RIGHT,
    KSW_NEG_INF,
    MLEN,
    N_AMBI,
    N_CIGAR,
    NR,
    PARENT,
    QE,
    QS,
    RE,
    REV,
    RID,
    RS,
    SEED_IGNORE,
    SEED_LONG_JOIN,
    SEED_SELF,
    SEED_TANDEM,
    SPLIT,
    SPLIT_INV,
    TRANS_STRAND,
    f32_bits,
)
from g3align.aligner.runtime.nbshare import keep_alive, unowned
from g3align.jit import njit

PARENT_UNSET = -1
PARENT_TMP_PRI = -2

_M32 = np.uint64(0xFFFFFFFF)
_U32 = np.uint64(32)
_U33 = np.uint64(33)
_U63 = np.uint64(63)
_U1 = np.uint64(1)
_UFF = np.uint64(0xFF)


# ----------------------------------------------------------------------------------------------
# anchor fields
@njit(cache=True, nogil=True, inline="always")
def _lo(v):
    """(int32_t) of a uint64: the low 32 bits as a signed value."""
    return np.int64(np.int32(np.int64(v & _M32)))


@njit(cache=True, nogil=True, inline="always")
def _span(a, i):
    return np.int64((a[i, 1] >> _U32) & _UFF)


@njit(cache=True, nogil=True, inline="always")
def _arev(a, i):
    return np.int64(a[i, 0] >> _U63)


@njit(cache=True, nogil=True, inline="always")
def _arid(a, i):
    return np.int64((a[i, 0] << _U1) >> _U33)


@njit(cache=True, nogil=True, inline="always")
def _cdiv(x, y):
    """C integer division (truncation toward zero)."""
    qq = abs(x) // abs(y)
    return qq if (x >= 0) == (y >= 0) else -qq


# ----------------------------------------------------------------------------------------------
# small numeric helpers
@njit(cache=True, nogil=True)
def _new_ez():
    """ksw_reset_extz."""
    ez = np.zeros(EZ_N, np.int64)
    ez[EZ_MAX_Q] = -1
    ez[EZ_MAX_T] = -1
    ez[EZ_MQE_T] = -1
    ez[7] = -1  # EZ_MTE_Q
    ez[EZ_SCORE] = KSW_NEG_INF
    ez[4] = KSW_NEG_INF  # EZ_MQE
    ez[6] = KSW_NEG_INF  # EZ_MTE
    return ez


@njit(cache=True, nogil=True)
def _getseq(ref_seq, ref_off, rid, st, en, out):
    """mm_idx_getseq: ref[rid][st:en] (en clipped to the contig) into out; -1 (nothing written) if
    st is past the end."""
    if rid < 0 or rid >= ref_off.shape[0] - 1:
        return -1
    ln = ref_off[rid + 1] - ref_off[rid]
    if st >= ln:
        return -1
    if en > ln:
        en = ln
    o = ref_off[rid]
    for i in range(st, en):
        out[i - st] = ref_seq[o + i]
    return en - st


@njit(cache=True, nogil=True)
def getseq2(ref_seq, ref_off, is_rev, rid, st, en, out):
    """mm_idx_getseq2: as _getseq, or reverse-complemented in reverse-strand coordinates."""
    if not is_rev:
        return _getseq(ref_seq, ref_off, rid, st, en, out)
    if rid < 0 or rid >= ref_off.shape[0] - 1:
        return -1
    ln = ref_off[rid + 1] - ref_off[rid]
    if st >= ln:
        return -1
    if en > ln:
        en = ln
    o = ref_off[rid]
    st1 = o + (ln - en)
    en1 = o + (ln - st)
    for i in range(st1, en1):
        c = ref_seq[i]
        out[en1 - i - 1] = 3 - c if c < 4 else c
    return en - st


@njit(cache=True, nogil=True)
def _tbuf(tseq, n):
    """The target buffer, grown (content kept) if n bytes do not fit -- minimap2 sizes it re0 - rs0,
    which every window stays within except in corner cases it leaves undefined."""
    if n <= tseq.shape[0]:
        return tseq
    t = np.zeros(n, np.uint8)
    t[:tseq.shape[0]] = tseq
    return t


@njit(cache=True, nogil=True)
def _reserve(cigbuf, need):
    if need <= cigbuf.shape[0]:
        return cigbuf
    n = 2 * cigbuf.shape[0]
    if n < need:
        n = need
    if n < 64:
        n = 64
    nb = np.empty(n, np.uint32)
    nb[:cigbuf.shape[0]] = cigbuf
    return nb


@njit(cache=True, nogil=True)
def _new_p(R, i, cig_used):
    """Give region i an empty mm_extra_t (calloc'ed: all zero) whose CIGAR starts at the buffer's end."""
    R[i, HAS_P] = 1
    R[i, DP_SCORE] = 0
    R[i, DP_MAX] = 0
    R[i, DP_MAX2] = 0
    R[i, N_AMBI] = 0
    R[i, TRANS_STRAND] = 0
    R[i, N_CIGAR] = 0
    R[i, CIG_OFF] = cig_used


@njit(cache=True, nogil=True)
def append_cigar(R, i, cigbuf, cig_used, cig, n):
    """mm_append_cigar: append cig[:n] to region i's CIGAR (merging equal ops at the junction).
    Returns (cigbuf, cig_used)."""
    if n == 0:
        return cigbuf, cig_used
    if R[i, HAS_P] == 0:
        _new_p(R, i, cig_used)
    off = R[i, CIG_OFF]
    nc = R[i, N_CIGAR]
    if off + nc != cig_used:  # not at the tail: move it there
        cigbuf = _reserve(cigbuf, cig_used + nc + n)
        for k in range(nc):
            cigbuf[cig_used + k] = cigbuf[off + k]
        off = cig_used
        R[i, CIG_OFF] = off
    else:
        cigbuf = _reserve(cigbuf, off + nc + n)
    if nc > 0 and (cigbuf[off + nc - 1] & 0xF) == (cig[0] & 0xF):
        cigbuf[off + nc - 1] = np.uint32(np.int64(cigbuf[off + nc - 1]) + (np.int64(cig[0]) >> 4 << 4))
        for k in range(1, n):
            cigbuf[off + nc + k - 1] = cig[k]
        nc += n - 1
    else:
        for k in range(n):
            cigbuf[off + nc + k] = cig[k]
        nc += n
    R[i, N_CIGAR] = nc
    return cigbuf, off + nc


# ----------------------------------------------------------------------------------------------
# pairwise DP dispatch and Z-drop test
#
# job context of align_pair (the staged path of aligner/map/pipeline.py): how its ksw calls are served.
#   JC_DIRECT  computed here (the per-read path);
#   JC_PLAN    the call's key is recorded (when the GPU batch takes it) and a placeholder result is returned
#              that never Z-drops, so align1 walks every gap and both ends of the chain: the calls it
#              would make unless an alignment Z-drops;
#   JC_REPLAY  the result is looked up among the read's precomputed jobs by key, else computed here.
# A key (rev, q_lo, q_hi, rid, t_lo, t_hi, w, zdrop, end_bonus, flag) fixes every input of the call: the
# query is qseq0[q_lo:q_hi] and the target ref[rid][t_lo:t_hi] (both reversed when rev = 1, the left
# extension), so any job with an equal key has the result the call would compute.
# jc = (ctl int64[4]: mode, cursor, number of keys, plan: overflow / replay: hits; keys (cap, KJ);
#       ez (n, EZ_N); cig uint32; cig_off (n + 1, offsets into cig); n_cig (n)).
JC_DIRECT = 0
JC_PLAN = 1
JC_REPLAY = 2
(K_REV, K_QLO, K_QHI, K_RID, K_TLO, K_THI, K_W, K_ZDROP, K_EB, K_FLAG) = range(10)
KJ = 10


@njit(cache=True, nogil=True)
def jc_new(mode, cap):
    """A job context with room for cap keys and no results."""
    ctl = np.zeros(4, np.int64)
    ctl[0] = mode
    return (ctl, np.zeros((cap, KJ), np.int64), np.zeros((0, EZ_N), np.int64), np.zeros(0, np.uint32),
            np.zeros(1, np.int64), np.zeros(0, np.int64))


@njit(cache=True, nogil=True)
def _jc_find(jc, kr, qlo, qhi, rid, tlo, thi, w, end_bonus, zdrop, flag):
    ctl, keys = jc[0], jc[1]
    n = ctl[2]
    for s in range(n):
        k = ctl[1] + s
        if k >= n:
            k -= n
        if keys[k, K_QLO] == qlo and keys[k, K_TLO] == tlo and keys[k, K_QHI] == qhi and keys[k, K_THI] == thi \
                and keys[k, K_REV] == kr and keys[k, K_RID] == rid and keys[k, K_W] == w \
                and keys[k, K_ZDROP] == zdrop and keys[k, K_EB] == end_bonus and keys[k, K_FLAG] == flag:
            ctl[1] = k + 1 if k + 1 < n else 0
            return k
    return -1


@njit(cache=True, nogil=True)
def align_pair(jc, kr, qlo, qhi, rid, tlo, thi, q, e, q2, e2, max_sw_mat, qseq, tseq, mat, w, end_bonus, zdrop,
               flag):
    """mm_align_pair without splicing: extz2 when both gap models are equal, extd2 otherwise; a
    DP larger than max_sw_mat cells is skipped and reported as Z-dropped.  jc / kr..thi: the job context
    and the call's key (kr < 0: no key, always computed here)."""
    mode = jc[0][0]
    qlen = qseq.shape[0]
    tlen = tseq.shape[0]
    big = max_sw_mat > 0 and np.int64(tlen) * qlen > max_sw_mat
    if mode == JC_PLAN:
        ctl, keys = jc[0], jc[1]
        if kr >= 0 and not big and not (q == q2 and e == e2) and qlen > 0 and tlen > 0:
            if ctl[2] < keys.shape[0]:
                r = keys[ctl[2]]
                r[K_REV], r[K_QLO], r[K_QHI], r[K_RID], r[K_TLO], r[K_THI] = kr, qlo, qhi, rid, tlo, thi
                r[K_W], r[K_ZDROP], r[K_EB], r[K_FLAG] = w, zdrop, end_bonus, flag
                ctl[2] += 1
            else:
                ctl[3] = 1
        ez = _new_ez()
        ez[EZ_SCORE] = 0
        return ez, np.empty(0, np.uint32)
    if mode == JC_REPLAY and kr >= 0:
        k = _jc_find(jc, kr, qlo, qhi, rid, tlo, thi, w, end_bonus, zdrop, flag)
        if k >= 0:
            jc[0][3] += 1  # replay hits
            o = jc[4][k]
            return jc[2][k].copy(), jc[3][o:o + jc[5][k]].copy()
    if big:
        ez = _new_ez()
        ez[EZ_ZDROPPED] = 1
        return ez, np.empty(0, np.uint32)
    if q == q2 and e == e2:
        return extz2(qseq, tseq, mat, q, e, w, zdrop, end_bonus, flag)
    return extd2(qseq, tseq, mat, q, e, q2, e2, w, zdrop, end_bonus, flag)


@njit(cache=True, nogil=True)
def test_zdrop(flag, q, e, zdrop, zdrop_inv, max_gap, min_chain_score, sc_a, min_dp_max, qseq, tseq, cigar, mat):
    """mm_test_zdrop: 1 if the score along the CIGAR drops by more than zdrop (diagonal-corrected),
    2 if moreover the most dropped stretch aligns well to the reverse complement (an inversion)."""
    score = 0
    mx = -(1 << 31)
    max_i = -1
    max_j = -1
    i = 0
    j = 0
    max_zdrop = 0
    p00 = -1
    p01 = -1
    p10 = -1
    p11 = -1
    for k in range(cigar.shape[0]):
        op = cigar[k] & 0xF
        ln = np.int64(cigar[k] >> 4)
        if op == CIG_M:
            # along a match run the diagonal distance to the maximum stays (i - j) - (max_i - max_j) until a
            # new maximum, which lies on the run's own diagonal (distance 0). z is computed at every base (at
            # or above the maximum it is <= 0 and never recorded) and the maximum moves by selects: no branch
            # on the score's ups and downs.
            d = (i - j) - (max_i - max_j)
            de = (d if d >= 0 else -d) * e
            for l in range(ln):
                score += mat[tseq[i + l] * 5 + qseq[j + l]]
                z = mx - score - de
                if z > max_zdrop:
                    max_zdrop = z
                    p00 = max_i
                    p01 = i + l
                    p10 = max_j
                    p11 = j + l
                up = score >= mx
                mx = score if up else mx
                max_i = i + l if up else max_i
                max_j = j + l if up else max_j
                de = 0 if up else de
            i += ln
            j += ln
        elif op == CIG_I or op == CIG_D or op == CIG_N:
            score -= q + e * ln
            if op == CIG_I:
                j += ln
            else:
                i += ln
            if score < mx:
                li = i - max_i
                lj = j - max_j
                diff = li - lj if li > lj else lj - li
                z = mx - score - diff * e
                if z > max_zdrop:
                    max_zdrop = z
                    p00 = max_i
                    p01 = i
                    p10 = max_j
                    p11 = j
            else:
                mx = score
                max_i = i
                max_j = j
    q_len = p11 - p10
    t_len = p01 - p00
    if (flag & (F_SPLICE | F_SR | F_FOR_ONLY | F_REV_ONLY)) == 0 and max_zdrop > zdrop_inv \
            and q_len < max_gap and t_len < max_gap:
        qseq2 = np.empty(q_len, np.uint8)
        for ii in range(q_len):
            c = qseq[p11 - ii - 1]
            qseq2[ii] = 4 if c >= 4 else 3 - c
        sc, _qo, _to = ll_i16(qseq2, tseq[p00:p00 + t_len], mat, q, e)
        if sc >= min_chain_score * sc_a and sc >= min_dp_max:
            return 2
    return 1 if max_zdrop > zdrop else 0


# ----------------------------------------------------------------------------------------------
# CIGAR post-processing
@njit(cache=True, nogil=True)
def fix_cigar(R, i, cigbuf, qseq, tseq):
    """mm_fix_cigar on region i: left-align indels, merge runs like 5I6D7I into one I and one D, drop
    zero-length ops and a leading I/D (moving qs/qe/rs).  Returns (qshift, tshift)."""
    n = R[i, N_CIGAR]
    if n <= 1:
        return 0, 0
    off = R[i, CIG_OFF]
    c = cigbuf[off:off + n].astype(np.int64)
    qshift = 0
    tshift = 0
    toff = 0
    qoff = 0
    to_shrink = False
    for k in range(n):
        op = c[k] & 0xF
        ln = c[k] >> 4
        if ln == 0:
            to_shrink = True
        if op == CIG_M:
            toff += ln
            qoff += ln
        elif op == CIG_I or op == CIG_D:
            if k > 0 and k < n - 1 and (c[k - 1] & 0xF) == 0 and (c[k + 1] & 0xF) == 0:
                prev_len = c[k - 1] >> 4
                l = 0
                if op == CIG_I:
                    while l < prev_len and qseq[qoff - 1 - l] == qseq[qoff + ln - 1 - l]:
                        l += 1
                else:
                    while l < prev_len and tseq[toff - 1 - l] == tseq[toff + ln - 1 - l]:
                        l += 1
                if l > 0:
                    c[k - 1] -= l << 4
                    c[k + 1] += l << 4
                    qoff -= l
                    toff -= l
                if l == prev_len:
                    to_shrink = True
            if op == CIG_I:
                qoff += ln
            else:
                toff += ln
        elif op == CIG_N:
            toff += ln
    s = np.zeros(16, np.int64)
    k = 0
    while k < n - 2:
        opk = c[k] & 0xF
        if opk > 0 and opk + (c[k + 1] & 0xF) == 3:
            s[:] = 0
            l = k
            while l < n:
                op = c[l] & 0xF
                if op == CIG_I or op == CIG_D or (c[l] >> 4) == 0:
                    s[op] += c[l] >> 4
                else:
                    break
                l += 1
            if s[1] > 0 and s[2] > 0 and l - k > 2:
                c[k] = s[1] << 4 | CIG_I
                c[k + 1] = s[2] << 4 | CIG_D
                for kk in range(k + 2, l):
                    c[kk] &= 0xF
                to_shrink = True
            k = l
        k += 1
    if to_shrink:
        l = 0
        for k in range(n):
            if (c[k] >> 4) != 0:
                c[l] = c[k]
                l += 1
        n = l
        l = 0
        for k in range(n):
            if k == n - 1 or (c[k] & 0xF) != (c[k + 1] & 0xF):
                c[l] = c[k]
                l += 1
            else:
                c[k + 1] += c[k] >> 4 << 4
        n = l
    op0 = c[0] & 0xF
    if n > 0 and (op0 == CIG_I or op0 == CIG_D):
        l = c[0] >> 4
        if op0 == CIG_I:
            if R[i, REV]:
                R[i, QE] -= l
            else:
                R[i, QS] += l
            qshift = l
        else:
            R[i, RS] += l
            tshift = l
        n -= 1
        for k in range(n):
            c[k] = c[k + 1]
    for k in range(n):
        cigbuf[off + k] = np.uint32(c[k] & 0xFFFFFFFF)
    R[i, N_CIGAR] = n
    return qshift, tshift


@njit(cache=True, nogil=True)
def update_cigar_eqx(R, i, cigbuf, cig_used, qseq, tseq):
    """mm_update_cigar_eqx: turn M into =/X runs (in place when every M is a single run -- then, as
    in minimap2, it becomes '=' even if that run mismatches).  Returns (cigbuf, cig_used)."""
    if R[i, HAS_P] == 0:
        return cigbuf, cig_used
    n = R[i, N_CIGAR]
    off = R[i, CIG_OFF]
    n_eqx = 0
    n_m = 0
    toff = 0
    qoff = 0
    for k in range(n):
        op = cigbuf[off + k] & 0xF
        ln = np.int64(cigbuf[off + k] >> 4)
        if op == CIG_M:
            while ln > 0:
                l = 0
                while l < ln and qseq[qoff + l] == tseq[toff + l]:
                    l += 1
                if l > 0:
                    n_eqx += 1
                    ln -= l
                    toff += l
                    qoff += l
                l = 0
                while l < ln and qseq[qoff + l] != tseq[toff + l]:
                    l += 1
                if l > 0:
                    n_eqx += 1
                    ln -= l
                    toff += l
                    qoff += l
            n_m += 1
        elif op == CIG_I:
            qoff += ln
        elif op == CIG_D or op == CIG_N:
            toff += ln
    if n_eqx == n_m:
        for k in range(n):
            if (cigbuf[off + k] & 0xF) == CIG_M:
                cigbuf[off + k] = np.uint32((np.int64(cigbuf[off + k]) >> 4) << 4 | CIG_EQ)
        return cigbuf, cig_used
    nn = n + n_eqx - n_m
    cigbuf = _reserve(cigbuf, cig_used + nn)
    noff = cig_used
    toff = 0
    qoff = 0
    m = 0
    for k in range(n):
        v = cigbuf[off + k]
        op = v & 0xF
        ln = np.int64(v >> 4)
        if op == CIG_M:
            while ln > 0:
                l = 0
                while l < ln and qseq[qoff + l] == tseq[toff + l]:
                    l += 1
                if l > 0:
                    cigbuf[noff + m] = np.uint32(l << 4 | CIG_EQ)
                    m += 1
                ln -= l
                toff += l
                qoff += l
                l = 0
                while l < ln and qseq[qoff + l] != tseq[toff + l]:
                    l += 1
                if l > 0:
                    cigbuf[noff + m] = np.uint32(l << 4 | CIG_X)
                    m += 1
                ln -= l
                toff += l
                qoff += l
            continue
        elif op == CIG_I:
            qoff += ln
        elif op == CIG_D or op == CIG_N:
            toff += ln
        cigbuf[noff + m] = v
        m += 1
    R[i, CIG_OFF] = noff
    R[i, N_CIGAR] = m
    return cigbuf, noff + m


_FIX = 23  # update_extra's fixed point: the running score in units of 2^-23
_FIX_ONE = float(1 << _FIX)


@njit(cache=True, nogil=True)
def update_extra(R, i, cigbuf, cig_used, qseq, tseq, mat, q, e, is_eqx, log_gap):
    """mm_update_extra on region i (qseq/tseq: the aligned stretch, both from qs/rs on the region's
    strand): fix the CIGAR, then mlen, blen, n_ambi and dp_max (best-scoring segment along the
    CIGAR, gaps costed q+e*log2(1+len) when log_gap).  Returns (cigbuf, cig_used)."""
    if R[i, HAS_P] == 0:
        return cigbuf, cig_used
    qshift, tshift = fix_cigar(R, i, cigbuf, qseq, tseq)
    qs = qseq[qshift:]
    ts = tseq[tshift:]
    blen = 0
    mlen = 0
    n_ambi_tot = 0
    toff = 0
    qoff = 0
    # mm_update_extra's running score is a double: integer match scores, minus gap costs q + e * mg_log2(1 + len)
    # (a float32 >= 1 for len >= 1, so a multiple of 2^-23) or q + e. Every value it takes is then a multiple of
    # 2^-23 far below 2^30, which a double holds exactly: the same sums are exact in int64 in units of 2^-23
    # (S = s * 2^23), and the maximum converts back to the very same double. Integer adds and selects instead
    # of a chain of dependent float adds and branches.
    S = np.int64(0)
    mxS = np.int64(0)
    off = R[i, CIG_OFF]
    for k in range(R[i, N_CIGAR]):
        op = cigbuf[off + k] & 0xF
        ln = np.int64(cigbuf[off + k] >> 4)
        if op == CIG_M:
            n_ambi = 0
            n_diff = 0
            for l in range(ln):
                cq = qs[qoff + l]
                ct = ts[toff + l]
                amb = (ct > 3) | (cq > 3)
                n_ambi += amb
                n_diff += (ct != cq) & (not amb)
                S += np.int64(mat[ct * 5 + cq]) << _FIX
                S = S if S > 0 else np.int64(0)
                mxS = S if S > mxS else mxS
            blen += ln - n_ambi
            mlen += ln - (n_ambi + n_diff)
            n_ambi_tot += n_ambi
            toff += ln
            qoff += ln
        elif op == CIG_I or op == CIG_D:
            n_ambi = 0
            for l in range(ln):
                if op == CIG_I:
                    if qs[qoff + l] > 3:
                        n_ambi += 1
                elif ts[toff + l] > 3:
                    n_ambi += 1
            blen += ln - n_ambi
            n_ambi_tot += n_ambi
            if log_gap:
                S -= np.int64((q + np.float64(e) * np.float64(mg_log2(1.0 + ln))) * _FIX_ONE)
            else:
                S -= np.int64(q + e) << _FIX
            S = S if S > 0 else np.int64(0)
            if op == CIG_I:
                qoff += ln
            else:
                toff += ln
        elif op == CIG_N:
            toff += ln
    R[i, BLEN] = blen
    R[i, MLEN] = mlen
    R[i, N_AMBI] = (R[i, N_AMBI] + n_ambi_tot) & 0x3FFFFFFF
    R[i, DP_MAX] = np.int64(np.int32(np.float64(mxS) / _FIX_ONE + 0.499))
    if is_eqx:
        return update_cigar_eqx(R, i, cigbuf, cig_used, qs, ts)
    return cigbuf, cig_used


# ----------------------------------------------------------------------------------------------
# anchor filters
@njit(cache=True, nogil=True)
def get_hplen_back(ref_seq, ref_off, rid, x):
    """mm_get_hplen_back: length of the homopolymer run ending at x on contig rid."""
    off0 = ref_off[rid]
    off = off0 + x
    c = ref_seq[off]
    i = off - 1
    while i >= off0:
        if ref_seq[i] != c:
            break
        i -= 1
    return off - i


@njit(cache=True, nogil=True)
def adjust_minier(is_hpc, k, ref_seq, ref_off, qseq0, qlen, a, i):
    """mm_adjust_minier: (r, q) start of the alignment at anchor i (k/2 back from the end, or the start
    of the homopolymer runs with HPC)."""
    if is_hpc:
        base = _arev(a, i) * qlen
        qq = _lo(a[i, 1])
        c = qseq0[base + qq]
        j = qq - 1
        while j > 0:
            if qseq0[base + j] != c:
                break
            j -= 1
        qq = j + 1
        cc = get_hplen_back(ref_seq, ref_off, _arid(a, i), _lo(a[i, 0]))
        return _lo(a[i, 0]) + 1 - cc, qq
    return _lo(a[i, 0]) - (k >> 1), _lo(a[i, 1]) - (k >> 1)


@njit(cache=True, nogil=True)
def _gap(a, i, j):
    """((int32)y_i - y_j) - ((int32)x_i - x_j), wrapped to int32 as the C expression is."""
    return np.int64(np.int32((_lo(a[i, 1]) - _lo(a[j, 1])) - (_lo(a[i, 0]) - _lo(a[j, 0]))))


@njit(cache=True, nogil=True)
def collect_long_gaps(as1, cnt1, a, min_gap):
    """Indices i (1 <= i < cnt1) of anchors preceded by an indel longer than min_gap; empty if <= 1."""
    n = 0
    for i in range(1, cnt1):
        g = _gap(a, as1 + i, as1 + i - 1)
        if g < -min_gap or g > min_gap:
            n += 1
    if n <= 1:
        return np.empty(0, np.int64)
    K = np.empty(n, np.int64)
    n = 0
    for i in range(1, cnt1):
        g = _gap(a, as1 + i, as1 + i - 1)
        if g < -min_gap or g > min_gap:
            K[n] = i
            n += 1
    return K


@njit(cache=True, nogil=True)
def filter_bad_seeds(as1, cnt1, a, min_gap, diff_thres, max_ext_len, max_ext_cnt):
    """mm_filter_bad_seeds: mark MM_SEED_IGNORE on anchors between nearby long gaps whose insertions and
    deletions cancel out (a likely misplaced seed stretch)."""
    K = collect_long_gaps(as1, cnt1, a, min_gap)
    n = K.shape[0]
    if n == 0:
        return
    mx = 0
    max_st = -1
    max_en = -1
    k = 0
    while True:
        if k == n or k >= max_en:
            if max_en > 0:
                for i in range(K[max_st], K[max_en]):
                    a[as1 + i, 1] |= SEED_IGNORE
            mx = 0
            max_st = -1
            max_en = -1
            if k == n:
                break
        i = K[k]
        n_ins = 0
        n_del = 0
        g = _gap(a, as1 + i, as1 + i - 1)
        if g > 0:
            n_ins += g
        else:
            n_del += -g
        qs = _lo(a[as1 + i - 1, 1])
        rs = _lo(a[as1 + i - 1, 0])
        max_diff = 0
        max_diff_l = -1
        l = k + 1
        while l < n and l <= k + max_ext_cnt:
            j = K[l]
            if _lo(a[as1 + j, 1]) - qs > max_ext_len or _lo(a[as1 + j, 0]) - rs > max_ext_len:
                break
            g = _gap(a, as1 + j, as1 + j - 1)
            if g > 0:
                n_ins += g
            else:
                n_del += -g
            diff = n_ins + n_del - abs(n_ins - n_del)
            if max_diff < diff:
                max_diff = diff
                max_diff_l = l
            l += 1
        if max_diff > diff_thres and max_diff > mx:
            mx = max_diff
            max_st = k
            max_en = max_diff_l
        k += 1


@njit(cache=True, nogil=True)
def filter_bad_seeds_alt(as1, cnt1, a, min_gap, max_ext):
    """mm_filter_bad_seeds_alt: runs of closely spaced long gaps are bridged -- their anchors get
    MM_SEED_IGNORE and the last one MM_SEED_LONG_JOIN."""
    K = collect_long_gaps(as1, cnt1, a, min_gap)
    n = K.shape[0]
    if n == 0:
        return
    k = 0
    while k < n:
        i = K[k]
        gap1 = _gap(a, as1 + i, as1 + i - 1)
        re1 = _lo(a[as1 + i, 0])
        qe1 = _lo(a[as1 + i, 1])
        gap1 = gap1 if gap1 > 0 else -gap1
        l = k + 1
        while l < n:
            j = K[l]
            if _lo(a[as1 + j, 1]) - qe1 > max_ext or _lo(a[as1 + j, 0]) - re1 > max_ext:
                break
            gap2 = _gap(a, as1 + j, as1 + j - 1)
            q_span_pre = _span(a, as1 + j - 1)
            rs2 = _lo(a[as1 + j - 1, 0]) + q_span_pre
            qs2 = _lo(a[as1 + j - 1, 1]) + q_span_pre
            m = rs2 - re1 if rs2 - re1 < qs2 - qe1 else qs2 - qe1
            gap2 = gap2 if gap2 > 0 else -gap2
            if m > gap1 + gap2:
                break
            re1 = _lo(a[as1 + j, 0])
            qe1 = _lo(a[as1 + j, 1])
            gap1 = gap2
            l += 1
        if l > k + 1:
            end = K[l - 1]
            for j in range(K[k], end):
                a[as1 + j, 1] |= SEED_IGNORE
            a[as1 + end, 1] |= SEED_LONG_JOIN
        k = l


@njit(cache=True, nogil=True)
def fix_bad_ends(r_as, r_cnt, r_mlen, a, bw, min_match):
    """mm_fix_bad_ends: trim anchors at either end of a chain that sit off the diagonal of the rest.
    Returns (as1, cnt1)."""
    as1 = r_as
    cnt1 = r_cnt
    if r_cnt < 3:
        return as1, cnt1
    l = _span(a, r_as)
    m = l
    for i in range(r_as + 1, r_as + r_cnt - 1):
        q_span = _span(a, i)
        if a[i, 1] & SEED_LONG_JOIN:
            break
        lr = _lo(a[i, 0]) - _lo(a[i - 1, 0])
        lq = _lo(a[i, 1]) - _lo(a[i - 1, 1])
        mn = lr if lr < lq else lq
        mx = lr if lr > lq else lq
        if mx - mn > l >> 1:
            as1 = i
        l += mn
        m += mn if mn < q_span else q_span
        if l >= bw << 1 or (m >= min_match and m >= bw) or m >= r_mlen >> 1:
            break
    cnt1 = r_as + r_cnt - as1
    l = _span(a, r_as + r_cnt - 1)
    m = l
    i = r_as + r_cnt - 2
    while i > as1:
        q_span = _span(a, i + 1)
        if a[i + 1, 1] & SEED_LONG_JOIN:
            break
        lr = _lo(a[i + 1, 0]) - _lo(a[i, 0])
        lq = _lo(a[i + 1, 1]) - _lo(a[i, 1])
        mn = lr if lr < lq else lq
        mx = lr if lr > lq else lq
        if mx - mn > l >> 1:
            cnt1 = i + 1 - as1
        l += mn
        m += mn if mn < q_span else q_span
        if l >= bw << 1 or (m >= min_match and m >= bw) or m >= r_mlen >> 1:
            break
        i -= 1
    return as1, cnt1


@njit(cache=True, nogil=True)
def max_stretch(r_as, r_cnt, a):
    """mm_max_stretch (short reads): the best run of anchors on one diagonal.  Returns (as1, cnt1)."""
    if r_cnt < 2:
        return r_as, r_cnt
    max_score = -1
    max_i = -1
    max_len = 0
    score = _span(a, r_as)
    ln = 1
    i = r_as + 1
    while i < r_as + r_cnt:
        q_span = _span(a, i)
        lr = _lo(a[i, 0]) - _lo(a[i - 1, 0])
        lq = _lo(a[i, 1]) - _lo(a[i - 1, 1])
        if lq == lr:
            score += lq if lq < q_span else q_span
            ln += 1
        else:
            if score > max_score:
                max_score = score
                max_len = ln
                max_i = i - ln
            score = q_span
            ln = 1
        i += 1
    if score > max_score:
        max_len = ln
        max_i = i - ln
    return max_i, max_len


# ----------------------------------------------------------------------------------------------
# one region
@njit(cache=True, nogil=True)
def align1(flag, k, idx_flag, sc_a, sc_b, q, e, q2, e2, zdrop, zdrop_inv, end_bonus, bw_opt, bw_long_opt,
           max_gap, min_cnt, min_chain_score, min_dp_max, min_ksw_len, max_sw_mat,
           ref_seq, ref_off, qseq0, qlen, mat, R, ri, r2, n_a, a, cigbuf, cig_used, jc):
    """mm_align1 on region ri: base alignment through its anchors.  A split-off tail (Z-drop in the
    middle) is written to row r2 of R (a scratch row) with CNT > 0.  jc: the ksw calls' job context
    (JC_PLAN: only the calls are recorded, R is left half-done).  Returns (cigbuf, cig_used)."""
    plan = jc[0][0] == JC_PLAN
    is_sr = (flag & F_SR) != 0
    is_hpc = (idx_flag & I_HPC) != 0
    qstrand = (flag & F_QSTRAND) != 0
    R[r2, CNT] = 0
    if R[ri, CNT] == 0:
        return cigbuf, cig_used
    r_as = R[ri, AS]
    r_cnt = R[ri, CNT]
    rid = _arid(a, r_as)
    rev = _arev(a, r_as)
    rlen = ref_off[rid + 1] - ref_off[rid]
    bw = np.int64(np.int32(bw_opt * 1.5 + 1.0))
    bw_long = np.int64(np.int32(bw_long_opt * 1.5 + 1.0))
    if bw_long < bw:
        bw_long = bw
    dropped = False

    if is_sr and not is_hpc:
        as1, cnt1 = max_stretch(r_as, r_cnt, a)
        rs = _lo(a[as1, 0]) + 1 - _span(a, as1)
        qs = _lo(a[as1, 1]) + 1 - _span(a, as1)
        re = _lo(a[as1 + cnt1 - 1, 0]) + 1
        qe = _lo(a[as1 + cnt1 - 1, 1]) + 1
    else:
        if (flag & F_NO_END_FLT) == 0:
            as1, cnt1 = fix_bad_ends(r_as, r_cnt, R[ri, MLEN], a, bw_opt, min_chain_score * 2)
        else:
            as1 = r_as
            cnt1 = r_cnt
        filter_bad_seeds(as1, cnt1, a, 10, 40, max_gap >> 1, 10)
        filter_bad_seeds_alt(as1, cnt1, a, 30, max_gap >> 1)
        rs, qs = adjust_minier(is_hpc, k, ref_seq, ref_off, qseq0, qlen, a, as1)
        re, qe = adjust_minier(is_hpc, k, ref_seq, ref_off, qseq0, qlen, a, as1 + cnt1 - 1)

    # the DP window [rs0, re0) x [qs0, qe0)
    if is_sr:
        qs0 = 0
        qe0 = qlen
        l = qs
        l += _cdiv(l * sc_a + end_bonus - q, e) if l * sc_a + end_bonus > q else 0
        rs0 = rs - l if rs - l > 0 else 0
        l = qlen - qe
        l += _cdiv(l * sc_a + end_bonus - q, e) if l * sc_a + end_bonus > q else 0
        re0 = re + l if re + l < rlen else rlen
    else:
        rs0 = _lo(a[r_as, 0]) + 1 - _span(a, r_as)
        qs0 = _lo(a[r_as, 1]) + 1 - _span(a, r_as)
        if rs0 < 0:
            rs0 = 0
        rs1 = 0
        qs1 = 0
        l = 0
        hi = a[r_as, 0] >> _U32
        i = r_as - 1
        while i >= 0 and (a[i, 0] >> _U32) == hi:
            x = _lo(a[i, 0]) + 1 - _span(a, i)
            y = _lo(a[i, 1]) + 1 - _span(a, i)
            if x < rs0 and y < qs0:
                l += 1
                if l > min_cnt:
                    l = rs0 - x if rs0 - x > qs0 - y else qs0 - y
                    rs1 = rs0 - l
                    qs1 = qs0 - l
                    if rs1 < 0:
                        rs1 = 0
                    break
            i -= 1
        if qs > 0 and rs > 0:
            l = qs if qs < max_gap else max_gap
            qs1 = qs1 if qs1 > qs - l else qs - l
            qs0 = qs0 if qs0 < qs1 else qs1
            l += _cdiv(l * sc_a - q, e) if l * sc_a > q else 0
            l = l if l < max_gap else max_gap
            l = l if l < rs else rs
            rs1 = rs1 if rs1 > rs - l else rs - l
            rs0 = rs0 if rs0 < rs1 else rs1
            rs0 = rs0 if rs0 < rs else rs
        else:
            rs0 = rs
            qs0 = qs
        re0 = _lo(a[r_as + r_cnt - 1, 0]) + 1
        qe0 = _lo(a[r_as + r_cnt - 1, 1]) + 1
        re1 = rlen
        qe1 = qlen
        l = 0
        i = r_as + r_cnt
        while i < n_a and (a[i, 0] >> _U32) == hi:
            x = _lo(a[i, 0]) + 1
            y = _lo(a[i, 1]) + 1
            if x > re0 and y > qe0:
                l += 1
                if l > min_cnt:
                    l = x - re0 if x - re0 > y - qe0 else y - qe0
                    re1 = re0 + l
                    qe1 = qe0 + l
                    break
            i += 1
        if qe < qlen and re < rlen:
            l = qlen - qe if qlen - qe < max_gap else max_gap
            qe1 = qe1 if qe1 < qe + l else qe + l
            qe0 = qe0 if qe0 > qe1 else qe1
            l += _cdiv(l * sc_a - q, e) if l * sc_a > q else 0
            l = l if l < max_gap else max_gap
            l = l if l < rlen - re else rlen - re
            re1 = re1 if re1 < re + l else re + l
            re0 = re0 if re0 > re1 else re1
        else:
            re0 = re
            qe0 = qe
    if a[r_as, 1] & SEED_SELF:
        max_ext = R[ri, QS] - R[ri, RS] if R[ri, QS] > R[ri, RS] else R[ri, RS] - R[ri, QS]
        if R[ri, RS] - rs0 > max_ext:
            rs0 = R[ri, RS] - max_ext
        if R[ri, QS] - qs0 > max_ext:
            qs0 = R[ri, QS] - max_ext
        max_ext = R[ri, QE] - R[ri, RE] if R[ri, QE] > R[ri, RE] else R[ri, RE] - R[ri, QE]
        if re0 - R[ri, RE] > max_ext:
            re0 = R[ri, RE] + max_ext
        if qe0 - R[ri, QE] > max_ext:
            qe0 = R[ri, QE] + max_ext

    tseq = np.zeros(re0 - rs0 if re0 > rs0 else 1, np.uint8)
    qb = 0 if qstrand else rev * qlen  # offset of the query strand used in qseq0
    t_rev = rev if qstrand else 0  # the target reverse-complemented (only with the query kept on its own strand)
    fwd = not qstrand  # the staged path keys forward-strand targets only (key rev: 1 left extension, else 0)

    # a plan (JC_PLAN) records each ksw call's key and sizes only (align_pair): no sequence is copied for it
    if qs > 0 and rs > 0:  # left extension
        if plan:
            qrev = qseq0[qb + qs0:qb + qs]
            trev = tseq[:rs - rs0]
        else:
            getseq2(ref_seq, ref_off, t_rev, rid, rs0, rs, tseq)
            qrev = qseq0[qb + qs0:qb + qs][::-1].copy()
            trev = tseq[:rs - rs0][::-1].copy()
        zd = zdrop_inv if R[ri, SPLIT_INV] else zdrop
        kr = 1 if fwd and rs <= rlen else -1
        ez, cig = align_pair(jc, kr, qb + qs0, qb + qs, rid, rs0, rs, q, e, q2, e2, max_sw_mat, qrev, trev, mat, bw,
                             end_bonus, zd, KSW_EZ_EXTZ_ONLY | KSW_EZ_RIGHT | KSW_EZ_REV_CIGAR)
        if cig.shape[0] > 0:
            cigbuf, cig_used = append_cigar(R, ri, cigbuf, cig_used, cig, cig.shape[0])
            R[ri, DP_SCORE] += ez[EZ_MAX]
        rs1 = rs - (ez[EZ_MQE_T] + 1 if ez[EZ_REACH_END] else ez[EZ_MAX_T] + 1)
        qs1 = qs - (qs - qs0 if ez[EZ_REACH_END] else ez[EZ_MAX_Q] + 1)
    else:
        rs1 = rs
        qs1 = qs
    re1 = rs
    qe1 = qs

    i = cnt1 - 1 if is_sr else 1
    while i < cnt1:  # gap filling
        yi = a[as1 + i, 1]
        if (yi & (SEED_IGNORE | SEED_TANDEM)) != 0 and i != cnt1 - 1:
            i += 1
            continue
        if is_sr and not is_hpc:
            re = _lo(a[as1 + i, 0]) + 1
            qe = _lo(a[as1 + i, 1]) + 1
        else:
            re, qe = adjust_minier(is_hpc, k, ref_seq, ref_off, qseq0, qlen, a, as1 + i)
        re1 = re
        qe1 = qe
        long_join = (yi & SEED_LONG_JOIN) != 0
        if i == cnt1 - 1 or long_join or (qe - qs >= min_ksw_len and re - rs >= min_ksw_len):
            bw1 = bw_long
            if long_join:
                bw1 = qe - qs if qe - qs > re - rs else re - rs
            tseq = _tbuf(tseq, re - rs)
            if not plan:
                getseq2(ref_seq, ref_off, t_rev, rid, rs, re, tseq)
            qv = qseq0[qb + qs:qb + qe]
            tv = tseq[:re - rs]
            if is_sr:  # ungapped
                ez = _new_ez()
                sc = 0
                for j in range(qe - qs):
                    if qv[j] >= 4 or tv[j] >= 4:
                        sc += e2
                    elif qv[j] == tv[j]:
                        sc += sc_a
                    else:
                        sc -= sc_b
                ez[EZ_SCORE] = sc
                cig = np.empty(1, np.uint32)
                cig[0] = np.uint32((qe - qs) << 4 | CIG_M)
            else:
                kr = 0 if fwd and re <= rlen else -1
                ez, cig = align_pair(jc, kr, qb + qs, qb + qe, rid, rs, re, q, e, q2, e2, max_sw_mat, qv, tv, mat,
                                     bw1, -1, zdrop, KSW_EZ_APPROX_MAX)
            zdrop_code = 0
            if not plan:
                zdrop_code = test_zdrop(flag, q, e, zdrop, zdrop_inv, max_gap, min_chain_score, sc_a, min_dp_max,
                                        qv, tv, cig, mat)
            if zdrop_code != 0:
                ez, cig = align_pair(jc, -1, 0, 0, 0, 0, 0, q, e, q2, e2, max_sw_mat, qv, tv, mat, bw1, -1,
                                     zdrop_inv if zdrop_code == 2 else zdrop, 0)
            if cig.shape[0] > 0:
                cigbuf, cig_used = append_cigar(R, ri, cigbuf, cig_used, cig, cig.shape[0])
            if ez[EZ_ZDROPPED]:
                if R[ri, HAS_P] == 0:
                    _new_p(R, ri, cig_used)
                j = i - 1
                while j >= 0:
                    if _lo(a[as1 + j, 0]) <= rs + ez[EZ_MAX_T]:
                        break
                    j -= 1
                dropped = True
                if j < 0:
                    j = 0
                R[ri, DP_SCORE] += ez[EZ_MAX]
                re1 = rs + (ez[EZ_MAX_T] + 1)
                qe1 = qs + (ez[EZ_MAX_Q] + 1)
                if cnt1 - (j + 1) >= min_cnt:
                    split_reg(R, ri, r2, as1 + j + 1 - r_as, qlen, a, qstrand)
                    if zdrop_code == 2:
                        R[r2, SPLIT_INV] = 1
                break
            else:
                if R[ri, HAS_P] == 0:  # cannot happen with a non-empty gap (minimap2 would crash)
                    _new_p(R, ri, cig_used)
                R[ri, DP_SCORE] += ez[EZ_SCORE]
            rs = re
            qs = qe
        i += 1

    if not dropped and qe < qe0 and re < re0:  # right extension
        tseq = _tbuf(tseq, re0 - re)
        if not plan:
            getseq2(ref_seq, ref_off, t_rev, rid, re, re0, tseq)
        kr = 0 if fwd and re0 <= rlen else -1
        ez, cig = align_pair(jc, kr, qb + qe, qb + qe0, rid, re, re0, q, e, q2, e2, max_sw_mat,
                             qseq0[qb + qe:qb + qe0], tseq[:re0 - re], mat, bw, end_bonus, zdrop, KSW_EZ_EXTZ_ONLY)
        if cig.shape[0] > 0:
            cigbuf, cig_used = append_cigar(R, ri, cigbuf, cig_used, cig, cig.shape[0])
            R[ri, DP_SCORE] += ez[EZ_MAX]
        re1 = re + (ez[EZ_MQE_T] + 1 if ez[EZ_REACH_END] else ez[EZ_MAX_T] + 1)
        qe1 = qe + (qe0 - qe if ez[EZ_REACH_END] else ez[EZ_MAX_Q] + 1)

    if plan:
        return cigbuf, cig_used
    R[ri, RS] = rs1
    R[ri, RE] = re1
    if not rev or qstrand:
        R[ri, QS] = qs1
        R[ri, QE] = qe1
    else:
        R[ri, QS] = qlen - qe1
        R[ri, QE] = qlen - qs1
    if R[ri, HAS_P]:
        tseq = _tbuf(tseq, re1 - rs1)
        if qstrand:
            getseq2(ref_seq, ref_off, R[ri, REV], rid, rs1, re1, tseq)
            qv = qseq0[qs1:]
        else:
            _getseq(ref_seq, ref_off, rid, rs1, re1, tseq)
            qv = qseq0[R[ri, REV] * qlen + qs1:]
        cigbuf, cig_used = update_extra(R, ri, cigbuf, cig_used, qv, tseq, mat, q, e,
                                        (flag & F_EQX) != 0, (flag & F_SR) == 0)
        if rev and R[ri, TRANS_STRAND]:
            R[ri, TRANS_STRAND] ^= 3
    return cigbuf, cig_used


@njit(cache=True, nogil=True)
def align1_inv(flag, sc_a, q, e, q2, e2, zdrop, bw_opt, max_gap, min_chain_score, min_dp_max, max_sw_mat,
               ref_seq, ref_off, qseq0, qlen, mat, R, i1, i2, ri, cigbuf, cig_used, jc):
    """mm_align1_inv: between the two halves i1, i2 of a split region, look for the reverse complement
    of the query gap in the reference gap; on success row ri of R (a scratch row) is the inversion
    region.  Returns (found, cigbuf, cig_used)."""
    R[ri, :] = 0
    if not (R[i1, SPLIT] & 1) or not (R[i2, SPLIT] & 2):
        return False, cigbuf, cig_used
    if R[i1, ID] != R[i1, PARENT] and R[i1, PARENT] != PARENT_TMP_PRI:
        return False, cigbuf, cig_used
    if R[i2, ID] != R[i2, PARENT] and R[i2, PARENT] != PARENT_TMP_PRI:
        return False, cigbuf, cig_used
    if R[i1, RID] != R[i2, RID] or R[i1, REV] != R[i2, REV]:
        return False, cigbuf, cig_used
    ql = R[i1, QS] - R[i2, QE] if R[i1, REV] else R[i2, QS] - R[i1, QE]
    tl = R[i2, RS] - R[i1, RE]
    if ql < min_chain_score or ql > max_gap:
        return False, cigbuf, cig_used
    if tl < min_chain_score or tl > max_gap:
        return False, cigbuf, cig_used
    tseq = np.zeros(tl, np.uint8)
    _getseq(ref_seq, ref_off, R[i1, RID], R[i1, RE], R[i2, RS], tseq)
    qb = R[i2, QE] if R[i1, REV] else qlen + qlen - R[i2, QS]
    qv = qseq0[qb:qb + ql]
    score, q_off, t_off = ll_i16(qv[::-1].copy(), tseq[::-1].copy(), mat, q, e)
    if score < min_dp_max:
        return False, cigbuf, cig_used
    q_off = ql - (q_off + 1)
    t_off = tl - (t_off + 1)
    # ll_i16 may report a query end in the padding of its striped profile (past ql); q_off is then
    # negative and minimap2 reads the bases just before the gap in the same strand buffer -- as here
    if qb + q_off < 0:
        return False, cigbuf, cig_used
    qv = qseq0[qb + q_off:qb + ql]
    ez, cig = align_pair(jc, -1, 0, 0, 0, 0, 0, q, e, q2, e2, max_sw_mat, qv, tseq[t_off:], mat,
                         np.int64(np.int32(bw_opt * 1.5)), -1, zdrop, KSW_EZ_EXTZ_ONLY)
    if cig.shape[0] == 0:
        return False, cigbuf, cig_used
    R[ri, PARENT] = PARENT_UNSET
    cigbuf, cig_used = append_cigar(R, ri, cigbuf, cig_used, cig, cig.shape[0])
    R[ri, DP_SCORE] = ez[EZ_MAX]
    R[ri, ID] = -1
    R[ri, PARENT] = PARENT_UNSET
    R[ri, INV] = 1
    R[ri, REV] = 1 - R[i1, REV]
    R[ri, RID] = R[i1, RID]
    R[ri, DIV] = f32_bits(-1.0)
    if R[ri, REV] == 0:
        R[ri, QS] = R[i2, QE] + q_off
        R[ri, QE] = R[ri, QS] + ez[EZ_MAX_Q] + 1
    else:
        R[ri, QE] = R[i2, QS] - q_off
        R[ri, QS] = R[ri, QE] - (ez[EZ_MAX_Q] + 1)
    R[ri, RS] = R[i1, RE] + t_off
    R[ri, RE] = R[ri, RS] + ez[EZ_MAX_T] + 1
    cigbuf, cig_used = update_extra(R, ri, cigbuf, cig_used, qv, tseq[t_off:], mat, q, e,
                                    (flag & F_EQX) != 0, (flag & F_SR) == 0)
    return True, cigbuf, cig_used


@njit(cache=True, nogil=True)
def reserve_rows(R, n):
    """R with at least n rows (the first rows kept)."""
    if n <= R.shape[0]:
        return R
    R2 = np.zeros((max(2 * R.shape[0], n), NR), np.int64)
    R2[:R.shape[0]] = R
    return R2


@njit(cache=True, nogil=True)
def insert_reg(R, n_regs, i, src):
    """mm_insert_reg: a copy of row src goes right after row i (rows i+1.. move down).  src may be a
    scratch row at or past n_regs.  Returns (R, n_regs + 1)."""
    row = R[src].copy()
    R = reserve_rows(R, n_regs + 2)
    for j in range(n_regs, i + 1, -1):
        R[j, :] = R[j - 1, :]
    R[i + 1, :] = row
    return R, n_regs + 1


# ----------------------------------------------------------------------------------------------
# dp_max recalibration
@njit(cache=True, nogil=True)
def count_gaps(R, i, cigbuf):
    """mm_count_gaps: (total gap length, number of gaps); (-1, -1) without a CIGAR."""
    if R[i, HAS_P] == 0:
        return -1, -1
    n_gap = 0
    n_gapo = 0
    off = R[i, CIG_OFF]
    for k in range(R[i, N_CIGAR]):
        op = cigbuf[off + k] & 0xF
        if op == CIG_I or op == CIG_D:
            n_gapo += 1
            n_gap += np.int64(cigbuf[off + k] >> 4)
    return n_gap, n_gapo


@njit(cache=True, nogil=True, error_model="numpy")
def event_identity(R, i, cigbuf):
    """mm_event_identity: matches / (aligned columns with each gap counted once)."""
    if R[i, HAS_P] == 0:
        return -1.0
    n_gap, n_gapo = count_gaps(R, i, cigbuf)
    return np.float64(R[i, MLEN]) / np.float64(np.int32(R[i, BLEN] + R[i, N_AMBI] - n_gap + n_gapo))


@njit(cache=True, nogil=True)
def recal_max_dp(R, i, cigbuf, b2, match_sc):
    """mm_recal_max_dp: dp_max rescored with mismatch b2 and log gap costs."""
    if R[i, HAS_P] == 0:
        return -1
    n_gap = 0
    gap_cost = 0.0
    off = R[i, CIG_OFF]
    for k in range(R[i, N_CIGAR]):
        op = cigbuf[off + k] & 0xF
        ln = np.int64(cigbuf[off + k] >> 4)
        if op == CIG_I or op == CIG_D:
            gap_cost += b2 + np.float64(mg_log2(1.0 + ln))
            n_gap += ln
    n_mis = R[i, BLEN] + R[i, N_AMBI] - R[i, MLEN] - n_gap
    return np.int64(np.int32(match_sc * (R[i, MLEN] - b2 * n_mis - gap_cost) + 0.499))


@njit(cache=True, nogil=True, error_model="numpy")
def update_dp_max(qlen, n_regs, R, cigbuf, frac, sc_a, sc_b):
    """mm_update_dp_max: when the best alignment covers most of the read and the second best is close,
    rescore every dp_max with a mismatch penalty derived from the best one's divergence."""
    if n_regs < 2:
        return
    mx = -1
    mx2 = -1
    max_i = -1
    for i in range(n_regs):
        if R[i, HAS_P] == 0:
            continue
        if R[i, DP_MAX] > mx:
            mx2 = mx
            mx = R[i, DP_MAX]
            max_i = i
        elif R[i, DP_MAX] > mx2:
            mx2 = R[i, DP_MAX]
    if max_i < 0 or mx < 0 or mx2 < 0:
        return
    if R[max_i, QE] - R[max_i, QS] < np.float64(qlen) * frac:
        return
    if mx2 < np.float64(mx) * frac:
        return
    div = 1.0 - event_identity(R, max_i, cigbuf)
    if div < 0.02:
        div = 0.02
    b2 = 0.5 / div
    if b2 * sc_a < sc_b:
        b2 = np.float64(sc_a) / sc_b
    for i in range(n_regs):
        if R[i, HAS_P] == 0:
            continue
        v = recal_max_dp(R, i, cigbuf, b2, sc_a)
        R[i, DP_MAX] = v if v > 0 else 0


# ----------------------------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def align_skeleton(flag, k, idx_flag, sc_a, sc_b, q, e, q2, e2, sc_ambi, zdrop, zdrop_inv, end_bonus,
                   bw, bw_long, max_gap, min_cnt, min_chain_score, min_dp_max, min_ksw_len,
                   max_clip_ratio, rank_min_len, rank_frac, alt_drop, max_sw_mat, split_prefix,
                   ref_seq, ref_off, qseq, R, n_regs, a, cigbuf, cig_used, jc):
    """mm_align_skeleton for one read (see the module docstring).  jc: the job context of the ksw calls
    (jc_new(JC_DIRECT, 0) computes them all here; with JC_PLAN only the calls of every region are recorded,
    and R / a / the CIGARs are left half-done).  Returns (R, n_regs, cigbuf, cig_used)."""
    qlen = qseq.shape[0]
    qseq0_own = np.empty(2 * qlen, np.uint8)
    for i in range(qlen):
        c = qseq[i]
        qseq0_own[i] = c
        qseq0_own[2 * qlen - 1 - i] = 3 - c if c < 4 else 4
    mat_own = gen_simple_mat(5, sc_a, sc_b, sc_ambi)
    # views without owners (nbshare.unowned) of what is only read and never returned: the per-region and per-gap
    # calls below pass them on without reference counts (the caller holds a, qseq and jc; keep_alive the rest)
    qseq0, mat, qseq, a, jc = unowned((qseq0_own, mat_own, qseq, a, jc))
    clip = np.float64(np.float32(max_clip_ratio))
    frac = np.float64(np.float32(rank_frac))
    alt = np.float64(np.float32(alt_drop))
    n_a = squeeze_a(R, n_regs, a)
    R = reserve_rows(R, n_regs + 1)
    i = 0
    while i < n_regs:
        s = n_regs  # scratch row for a split-off tail / an inversion
        cigbuf, cig_used = align1(flag, k, idx_flag, sc_a, sc_b, q, e, q2, e2, zdrop, zdrop_inv, end_bonus, bw,
                                  bw_long, max_gap, min_cnt, min_chain_score, min_dp_max, min_ksw_len, max_sw_mat,
                                  ref_seq, ref_off, qseq0, qlen, mat, R, i, s, n_a, a, cigbuf, cig_used, jc)
        if R[s, CNT] > 0:
            R, n_regs = insert_reg(R, n_regs, i, s)
            s = n_regs
        if i > 0 and R[i, SPLIT_INV] and (flag & F_NO_INV) == 0:
            ok, cigbuf, cig_used = align1_inv(flag, sc_a, q, e, q2, e2, zdrop, bw, max_gap, min_chain_score,
                                              min_dp_max, max_sw_mat, ref_seq, ref_off, qseq0, qlen, mat,
                                              R, i - 1, i, s, cigbuf, cig_used, jc)
            if ok:
                R, n_regs = insert_reg(R, n_regs, i, s)
                i += 1
        i += 1
    keep_alive((qseq0_own, mat_own))
    if jc[0][0] == JC_PLAN:
        return R, n_regs, cigbuf, cig_used
    n_regs = filter_regs(min_cnt, min_chain_score, min_dp_max, clip, qlen, R, n_regs)
    if (flag & F_SR) == 0 and split_prefix == 0 and qlen >= rank_min_len:
        update_dp_max(qlen, n_regs, R, cigbuf, frac, sc_a, sc_b)
        n_regs = filter_regs(min_cnt, min_chain_score, min_dp_max, clip, qlen, R, n_regs)
    n_regs = hit_sort(R, n_regs, alt)
    return R, n_regs, cigbuf, cig_used


def align_skeleton_opt(o, ref_seq, ref_off, qseq, R, n_regs, a, cigbuf, cig_used):
    """align_skeleton with the options taken from a MapOpt-like object (attributes named as
    mm_mapopt_t's fields, plus k and idx_flag of the index)."""
    if o.flag & F_SPLICE:
        raise NotImplementedError("spliced alignment (MM_F_SPLICE) is not ported")
    return align_skeleton(
        np.int64(o.flag), np.int64(o.k), np.int64(o.idx_flag), np.int64(o.a), np.int64(o.b), np.int64(o.q),
        np.int64(o.e), np.int64(o.q2), np.int64(o.e2), np.int64(o.sc_ambi), np.int64(o.zdrop),
        np.int64(o.zdrop_inv), np.int64(o.end_bonus), np.int64(o.bw), np.int64(o.bw_long), np.int64(o.max_gap),
        np.int64(o.min_cnt), np.int64(o.min_chain_score), np.int64(o.min_dp_max), np.int64(o.min_ksw_len),
        float(o.max_clip_ratio), np.int64(o.rank_min_len), float(o.rank_frac), float(o.alt_drop),
        np.int64(o.max_sw_mat), np.int64(1 if getattr(o, "split_prefix", None) else 0),
        ref_seq, ref_off, qseq, R, np.int64(n_regs), a, cigbuf, np.int64(cig_used), jc_new(JC_DIRECT, 0))
