"""Dynamic-programming kernels with bwa 0.7.17 semantics (ksw.c / bwa.c).

Every routine here is meant to give *bit-identical* results to the corresponding
bwa routine, including how ties are broken, because the aligner's SAM output
has to agree with ``bwa mem`` read for read.  All functions are numba
``@njit(cache=True)`` and may be called from other njit code.

Conventions
-----------
* Sequences are ``uint8`` arrays of base codes 0..4 (A,C,G,T,N).
* ``mat`` is an ``int8`` m*m scoring matrix in row-major order
  (``mat[t*m + q]``), normally built by :func:`fill_scmat` with m = 5.
* A gap of length L costs ``o + L*e`` (so the first gapped base costs o+e).
  "del" = gap in the query (target bases skipped), "ins" = gap in the target.
* CIGARs are ``uint32`` arrays of ``len << 4 | op`` with op M=0 I=1 D=2 S=3 H=4.

Public functions (see each docstring for details)
------------------------------------------------
``fill_scmat(a, b)``                                       -> int8[25]
``ksw_extend2(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins,
              w, end_bonus, zdrop, h0)``
    -> (score, qle, tle, gtle, gscore, max_off)
``ksw_global2(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins, w)``
    -> (score, cigar)
``ksw_align2(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins, xtra)``
    -> (score, te, qe, score2, te2, tb, qb)
``gen_cigar2(mat, o_del, e_del, o_ins, e_ins, w, l_pac, pac, l_query, query, rb, re)``
    -> (score, cigar, NM, MD)

Scratch-buffer variants (no allocation except the returned CIGAR) for hot loops:
``ksw_extend2_ws(..., h0, ws)``                 ws: int32[extend_ws_size(qlen, m)]
``ksw_global2_ws(..., w, with_cigar, ws, zbuf)`` (ws, zbuf) sizes: global_ws_size(qlen, tlen, m, w);
                                                with_cigar=False: score only, empty cigar
``ksw_align2_ws(..., xtra, ws, ws8)``           (int32, uint8) sizes: align_ws_size(qlen, tlen, m)
The plain variants allocate their scratch once per call.
"""

import numpy as np

from g3align.jit import njit

# flags of ksw_align2's ``xtra`` argument (values as in bwa's ksw.h)
KSW_XBYTE = 0x10000   # 8-bit (saturating) score cells; score 255 signals overflow
KSW_XSTOP = 0x20000   # stop as soon as the best score reaches xtra & 0xffff
KSW_XSUBO = 0x40000   # track a 2nd-best hit scoring at least xtra & 0xffff
KSW_XSTART = 0x80000  # also find the start positions (tb, qb) by a reverse pass

NEG_INF = -0x40000000  # "minus infinity" of the global aligner

CIGAR_M = 0
CIGAR_I = 1
CIGAR_D = 2
CIGAR_S = 3
CIGAR_H = 4


# ----------------------------------------------------------------------------
# scoring matrix
# ----------------------------------------------------------------------------

@njit(cache=True)
def fill_scmat(a, b):
    """5x5 matrix as bwa_fill_scmat: +a on the ACGT diagonal, -b for ACGT
    mismatches, -1 whenever either base is N (code 4)."""
    mat = np.empty(25, np.int8)
    for i in range(5):
        for j in range(5):
            if i == 4 or j == 4:
                mat[i * 5 + j] = -1
            elif i == j:
                mat[i * 5 + j] = a
            else:
                mat[i * 5 + j] = -b
    return mat


# ----------------------------------------------------------------------------
# banded extension (seed extension with z-drop and end bonus)
# ----------------------------------------------------------------------------

@njit(cache=True)
def extend_ws_size(qlen, m):
    """Length of the int32 scratch array needed by :func:`ksw_extend2_ws`."""
    return 2 * (qlen + 2) + m * qlen


@njit(cache=True, inline="always")
def ksw_extend2_ws(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins,
                   w, end_bonus, zdrop, h0, ws):
    """ksw_extend2 with a caller-provided int32 scratch array ``ws`` of length
    >= extend_ws_size(qlen, m).  See :func:`ksw_extend2`."""
    oe_del = o_del + e_del
    oe_ins = o_ins + e_ins
    n1 = qlen + 2
    hrow = ws[0:n1]            # hrow[j]: H of the previous row at column j-1
    erow = ws[n1:2 * n1]       # erow[j]: E entering the current row at column j
    prof = ws[2 * n1:2 * n1 + m * qlen]  # prof[c*qlen + j] = score(c, query[j])
    for c in range(m):
        base = c * qlen
        for j in range(qlen):
            prof[base + j] = mat[c * m + query[j]]
    for j in range(n1):
        hrow[j] = 0
        erow[j] = 0
    # row "-1": the upstream score h0, decaying along an insertion
    hrow[0] = h0
    hrow[1] = h0 - oe_ins if h0 > oe_ins else 0
    j = 2
    while j <= qlen and hrow[j - 1] > e_ins:
        hrow[j] = hrow[j - 1] - e_ins
        j += 1
    # shrink the band to what could possibly still score positively
    mx = 0
    for k in range(m * m):
        if mat[k] > mx:
            mx = mat[k]
    max_ins = int((qlen * mx + end_bonus - o_ins) / e_ins + 1.0)
    if max_ins < 1:
        max_ins = 1
    if w > max_ins:
        w = max_ins
    max_del = int((qlen * mx + end_bonus - o_del) / e_del + 1.0)
    if max_del < 1:
        max_del = 1
    if w > max_del:
        w = max_del
    best = h0
    max_i = -1
    max_j = -1
    max_ie = -1
    gscore = -1
    max_off = 0
    beg = 0
    end = qlen
    for i in range(tlen):
        f = 0
        rmax = 0
        mj = -1
        poff = target[i] * qlen
        if beg < i - w:
            beg = i - w
        if end > i + w + 1:
            end = i + w + 1
        if end > qlen:
            end = qlen
        if beg == 0:
            h1 = h0 - (o_del + e_del * (i + 1))
            if h1 < 0:
                h1 = 0
        else:
            h1 = 0
        for j in range(beg, end):
            # hrow[j] holds H(i-1,j-1), erow[j] holds E(i,j); f is F(i,j), h1 is H(i,j-1)
            mm = hrow[j]
            e = erow[j]
            hrow[j] = h1
            # a zero diagonal predecessor is not extended (keeps "xMyIzD" cigars out)
            if mm != 0:
                mm += prof[poff + j]
            else:
                mm = 0
            h = mm if mm > e else e
            if f > h:
                h = f
            h1 = h
            if h >= rmax:          # last column reaching the row maximum wins
                mj = j
                rmax = h
            t = mm - oe_del
            if t < 0:
                t = 0
            e -= e_del
            if t > e:
                e = t
            erow[j] = e
            t = mm - oe_ins
            if t < 0:
                t = 0
            f -= e_ins
            if t > f:
                f = t
        hrow[end] = h1
        erow[end] = 0
        jlast = end if end > beg else beg
        if jlast == qlen and h1 >= gscore:  # whole query consumed in this row
            max_ie = i
            gscore = h1
        if rmax == 0:
            break
        if rmax > best:
            best = rmax
            max_i = i
            max_j = mj
            d = mj - i if mj > i else i - mj
            if d > max_off:
                max_off = d
        elif zdrop > 0:
            if i - max_i > mj - max_j:
                if best - rmax - ((i - max_i) - (mj - max_j)) * e_del > zdrop:
                    break
            else:
                if best - rmax - ((mj - max_j) - (i - max_i)) * e_ins > zdrop:
                    break
        # trim zero cells off both ends of the band for the next row
        j = beg
        while j < end and hrow[j] == 0 and erow[j] == 0:
            j += 1
        beg = j
        j = end
        while j >= beg and hrow[j] == 0 and erow[j] == 0:
            j -= 1
        end = j + 2 if j + 2 < qlen else qlen
    return best, max_j + 1, max_i + 1, max_ie + 1, gscore, max_off


@njit(cache=True)
def ksw_extend2(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins,
                w, end_bonus, zdrop, h0):
    """Banded extension of query[0:qlen] against target[0:tlen] given an
    upstream score h0 (> 0), as bwa's ksw_extend2.

    Returns (score, qle, tle, gtle, gscore, max_off):
      score   best score (>= h0); the alignment covers query[0:qle], target[0:tle]
              (qle = tle = 0 when nothing beats h0)
      gtle    target length of the best end-to-end (whole-query) alignment
      gscore  its score, -1 if the query end was never reached
      max_off largest |i-j| diagonal offset at which the best score improved
    """
    ws = np.empty(extend_ws_size(qlen, m), np.int32)
    return ksw_extend2_ws(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins,
                          w, end_bonus, zdrop, h0, ws)


# ----------------------------------------------------------------------------
# banded global alignment with traceback
# ----------------------------------------------------------------------------

@njit(cache=True)
def _push_op(cig, n, op, ln):
    # append (or merge into the last element) one CIGAR operation
    if n > 0 and (cig[n - 1] & 0xf) == op:
        cig[n - 1] += np.uint32(ln << 4)
        return n
    cig[n] = np.uint32((ln << 4) | op)
    return n + 1


@njit(cache=True)
def global_ws_size(qlen, tlen, m, w):
    """(int32 scratch length, uint8 traceback scratch length) for ksw_global2_ws."""
    ncol = qlen if qlen < 2 * w + 1 else 2 * w + 1
    return 2 * (qlen + 1) + m * qlen, ncol * tlen


@njit(cache=True)
def ksw_global2_ws(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins, w,
                   with_cigar, ws, zbuf):
    """Core of ksw_global2.  ws: int32 scratch, zbuf: uint8 traceback scratch,
    sizes from :func:`global_ws_size` (zbuf unused if not with_cigar).
    Returns (score, cigar) - cigar is empty when with_cigar is False."""
    oe_del = o_del + e_del
    oe_ins = o_ins + e_ins
    n1 = qlen + 1
    hrow = ws[0:n1]
    erow = ws[n1:2 * n1]
    prof = ws[2 * n1:2 * n1 + m * qlen]
    ncol = qlen if qlen < 2 * w + 1 else 2 * w + 1
    for c in range(m):
        base = c * qlen
        for j in range(qlen):
            prof[base + j] = mat[c * m + query[j]]
    # row "-1": leading insertions inside the band, -inf beyond it
    hrow[0] = 0
    erow[0] = NEG_INF
    j = 1
    while j <= qlen and j <= w:
        hrow[j] = -(o_ins + e_ins * j)
        erow[j] = NEG_INF
        j += 1
    while j <= qlen:
        hrow[j] = NEG_INF
        erow[j] = NEG_INF
        j += 1
    for i in range(tlen):
        f = NEG_INF
        poff = target[i] * qlen
        beg = i - w if i > w else 0
        end = i + w + 1 if i + w + 1 < qlen else qlen
        h1 = -(o_del + e_del * (i + 1)) if beg == 0 else NEG_INF
        zoff = i * ncol - beg
        for j in range(beg, end):
            # hrow[j] = H(i-1,j-1), erow[j] = E(i,j), f = F(i,j), h1 = H(i,j-1).
            # Direction byte: bits 0-1 source of H (0 diag, 1 E, 2 F),
            # bit 2 "E(i+1,j) extends E", bit 5 "F(i,j+1) extends F".
            # Gaps open from the diagonal score mm, not from H.
            mm = hrow[j] + prof[poff + j]
            e = erow[j]
            hrow[j] = h1
            if mm >= e:
                d = 0
                h = mm
            else:
                d = 1
                h = e
            if h < f:
                d = 2
                h = f
            h1 = h
            t = mm - oe_del
            e -= e_del
            if e > t:
                d |= 4
            else:
                e = t
            erow[j] = e
            t = mm - oe_ins
            f -= e_ins
            if f > t:
                d |= 32
            else:
                f = t
            if with_cigar:
                zbuf[zoff + j] = d
        hrow[end] = h1
        erow[end] = NEG_INF
    score = hrow[qlen]
    if not with_cigar:
        return score, np.empty(0, np.uint32)
    cig = np.empty(qlen + tlen + 2, np.uint32)
    n = 0
    which = 0
    i = tlen - 1
    k = (i + w + 1 if i + w + 1 < qlen else qlen) - 1
    while i >= 0 and k >= 0:
        beg = i - w if i > w else 0
        end = i + w + 1 if i + w + 1 < qlen else qlen
        if k < beg or k >= end:
            # only reachable when |tlen-qlen| > w (bwa reads undefined memory
            # there); stop the walk instead of reading outside the band
            break
        which = (zbuf[i * ncol + k - beg] >> (which << 1)) & 3
        if which == 0:
            n = _push_op(cig, n, CIGAR_M, 1)
            i -= 1
            k -= 1
        elif which == 1:
            n = _push_op(cig, n, CIGAR_D, 1)
            i -= 1
        else:
            n = _push_op(cig, n, CIGAR_I, 1)
            k -= 1
    if i >= 0:
        n = _push_op(cig, n, CIGAR_D, i + 1)
    if k >= 0:
        n = _push_op(cig, n, CIGAR_I, k + 1)
    out = np.empty(n, np.uint32)
    for x in range(n):
        out[x] = cig[n - 1 - x]
    return score, out


@njit(cache=True)
def ksw_global2(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins, w):
    """Banded global alignment (bwa's ksw_global2) with traceback.

    Returns (score, cigar) where cigar is uint32[] (len<<4|op, M=0 I=1 D=2).
    The band must contain the end cell (|tlen - qlen| <= w) for the result to
    be meaningful, as is always the case when called through gen_cigar2."""
    a, b = global_ws_size(qlen, tlen, m, w)
    ws = np.empty(a, np.int32)
    z = np.empty(b, np.uint8)
    return ksw_global2_ws(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins,
                          w, True, ws, z)


# ----------------------------------------------------------------------------
# local Smith-Waterman (bwa's striped SSE2 ksw_u8 / ksw_i16, emulated)
# ----------------------------------------------------------------------------
#
# bwa computes local alignments with Farrar's striped SIMD layout: the query
# is padded with zero-score cells to nlen = slen*p positions (p = 16 lanes for
# 8-bit cells, 8 for 16-bit cells) and cut into p segments of slen positions.
# A plain row-by-row DP reproduces its observable results as follows:
#   * H/E/F cells are floored at 0.  8-bit cells saturate: once the best score
#     reaches 255 - shift the scan stops and the score is reported as 255.
#   * In the striped code the next row's E never opens from a cell whose H
#     came from a horizontal gap that crossed a segment boundary ("lazy F").
#     This forbids some insertion->deletion adjacencies, but each of them can
#     be rearranged into deletion->insertion with the same cost and end cell,
#     so every H value (and therefore every output) equals that of the plain
#     Gotoh recursion used here - provided o_ins > 0.  With o_ins <= 0 the
#     lazy-F loop's exit test fires before a carried gap has been propagated
#     and the scores really differ; _striped_row then replays bwa's loop
#     order literally (about 2x slower, used only for that case).
#   * The padding cells are real DP cells (score 0 against any base); they
#     never beat the best score but enter the per-row maxima that feed the
#     second-best (score2/te2) bookkeeping, so they are computed too.
#   * te is the first row reaching the final best; qe the smallest query
#     position holding the maximum in that row.
#   * Consecutive rows qualifying for score2 are merged the way bwa's b[]
#     array does it (comparing against the row stored in the current entry).

@njit(cache=True)
def _striped_row(nlen, slen, p, cap, shift, poff, prof, hprev, hcur, erow, carry,
                 oe_del, e_del, oe_ins, e_ins):
    """One target row in the exact order of bwa's SIMD loops.  First pass: F
    restarted at every segment start, E derived from that provisional H; the
    F leaving each segment is kept in carry[].  Then the "lazy F" loop pushes
    the carries across segment boundaries, lane-parallel, stopping as soon as
    no lane's carry can beat its next cell (bwa's exit test, which is what
    makes o_ins <= 0 differ from the plain recursion).  Returns the row
    maximum of the first pass (bwa's imax)."""
    diag = 0
    f = 0
    imax = 0
    seg = 0
    lane = 0
    for j in range(nlen):
        if seg == slen:
            carry[lane] = f
            lane += 1
            seg = 0
            f = 0
        seg += 1
        mm = diag + prof[poff + j]
        if mm > cap:
            mm = cap
        mm -= shift
        if mm < 0:
            mm = 0
        diag = hprev[j]
        e = erow[j]
        h = mm if mm > e else e
        if f > h:
            h = f
        hcur[j] = h
        if h > imax:
            imax = h
        e -= e_del
        if e < 0:
            e = 0
        t = h - oe_del
        if t > e:
            e = t
        erow[j] = e
        f -= e_ins
        if f < 0:
            f = 0
        t = h - oe_ins
        if t > f:
            f = t
    # lazy F: 16 rounds, each first moving every lane's carry to the next lane
    carry[lane] = f
    for _round in range(16):
        for l in range(p - 1, 0, -1):
            carry[l] = carry[l - 1]
        carry[0] = 0
        for j in range(slen):
            settled = True
            for l in range(p):
                x = l * slen + j
                h = hcur[x]
                c = carry[l]
                if c > h:
                    h = c
                    hcur[x] = h
                h -= oe_ins
                if h < 0:
                    h = 0
                c -= e_ins
                if c < 0:
                    c = 0
                carry[l] = c
                if c > h:
                    settled = False
            if settled:
                return imax
    return imax


@njit(cache=True)
def _sw_pass(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins,
             xtra, byte, striped, prof, hA, hB, erow, bsc, bte, carry):
    """One ksw_u8 / ksw_i16 scan of query[0:qlen] against target[0:tlen].
    striped=True follows the SIMD code's segment/lazy-F order literally
    (required when o_ins <= 0, see above); otherwise the plain recursion.
    Returns (score, te, qe, score2, te2)."""
    p = 16 if byte else 8
    slen = (qlen + p - 1) // p
    nlen = slen * p
    mn = 127
    mxs = 0
    for a in range(m * m):
        if mat[a] < mn:
            mn = mat[a]
        if mat[a] > mxs:
            mxs = mat[a]
    qmax = mxs & 0xff
    # Cell update for both widths: M = min(diag + prof, cap) - shift, floored
    # at 0.  8-bit: prof holds (score + shift) as a byte and cap = 255 models
    # the saturating add; 16-bit: shift = 0, cap = 32767 (the floor is
    # harmless there since E, F >= 0).
    if byte:
        shift = (256 - (mn & 0xff)) & 0xff
        cap = 255
    else:
        shift = 0
        cap = 32767
    for c in range(m):
        base = c * nlen
        for j in range(nlen):
            s = 0
            if j < qlen:
                s = mat[c * m + query[j]]
            prof[base + j] = ((s + shift) & 0xff) if byte else s
    for j in range(nlen):
        hA[j] = 0
        erow[j] = 0
    minsc = (xtra & 0xffff) if (xtra & KSW_XSUBO) else 0x10000
    endsc = (xtra & 0xffff) if (xtra & KSW_XSTOP) else 0x10000
    oe_del = o_del + e_del
    oe_ins = o_ins + e_ins
    gmax = 0
    te = -1
    qe = 0 if nlen > 0 else -1
    n_b = 0
    hprev = hA
    hcur = hB
    for i in range(tlen):
        poff = target[i] * nlen
        if striped:
            imax = _striped_row(nlen, slen, p, cap, shift, poff, prof, hprev, hcur, erow,
                                carry, oe_del, e_del, oe_ins, e_ins)
        else:
            diag = 0
            f = 0
            imax = 0
            for j in range(nlen):
                mm = diag + prof[poff + j]
                if mm > cap:
                    mm = cap
                mm -= shift
                if mm < 0:
                    mm = 0
                diag = hprev[j]
                e = erow[j]
                h = mm if mm > e else e
                if f > h:
                    h = f
                hcur[j] = h
                if h > imax:
                    imax = h
                e -= e_del
                if e < 0:
                    e = 0
                t = h - oe_del
                if t > e:
                    e = t
                erow[j] = e
                f -= e_ins
                if f < 0:
                    f = 0
                t = h - oe_ins
                if t > f:
                    f = t
        if imax >= minsc:
            # rows scoring >= minsc; a row right after the row stored in the
            # last entry updates that entry, otherwise a new entry starts
            if n_b == 0 or bte[n_b - 1] + 1 != i:
                bsc[n_b] = imax
                bte[n_b] = i
                n_b += 1
            elif bsc[n_b - 1] < imax:
                bsc[n_b - 1] = imax
                bte[n_b - 1] = i
        if imax > gmax:
            gmax = imax
            te = i
            # query end: smallest position holding this row's maximum
            best = -1
            for j in range(nlen):
                if hcur[j] > best:
                    best = hcur[j]
                    qe = j
            if gmax >= endsc or (byte and gmax + shift >= 255):
                break
        tmp = hprev
        hprev = hcur
        hcur = tmp
    if byte and gmax + shift >= 255:
        return 255, te, -1, -1, -1
    score2 = -1
    te2 = -1
    if n_b > 0:
        r = (gmax + qmax - 1) // qmax
        low = te - r
        high = te + r
        for x in range(n_b):
            e = bte[x]
            if (e < low or e > high) and bsc[x] > score2:
                score2 = bsc[x]
                te2 = e
    return gmax, te, qe, score2, te2


@njit(cache=True)
def align_ws_size(qlen, tlen, m):
    """(int32 scratch length, uint8 scratch length) needed by
    :func:`ksw_align2_ws` (covers both the 8- and 16-bit layouts)."""
    nlen = (qlen + 7) // 8 * 8 + 16
    return (m + 3) * nlen + 2 * tlen + 2 + 16, qlen + tlen


@njit(cache=True, inline="always")
def _align2_impl(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins, xtra,
                 striped, ws, ws8):
    byte = (xtra & KSW_XBYTE) != 0
    nlen = (qlen + 7) // 8 * 8 + 16
    prof = ws[0:m * nlen]
    o = m * nlen
    hA = ws[o:o + nlen]
    hB = ws[o + nlen:o + 2 * nlen]
    erow = ws[o + 2 * nlen:o + 3 * nlen]
    o += 3 * nlen
    bsc = ws[o:o + tlen + 1]
    bte = ws[o + tlen + 1:o + 2 * tlen + 2]
    o += 2 * tlen + 2
    carry = ws[o:o + 16]
    score, te, qe, score2, te2 = _sw_pass(qlen, query, tlen, target, m, mat,
                                          o_del, e_del, o_ins, e_ins, xtra, byte,
                                          striped, prof, hA, hB, erow, bsc, bte, carry)
    tb = -1
    qb = -1
    if (xtra & KSW_XSTART) == 0 or ((xtra & KSW_XSUBO) != 0 and score < (xtra & 0xffff)):
        return score, te, qe, score2, te2, tb, qb
    # reverse pass: reversed query[0..qe] against the target whose first te+1
    # bases are reversed (the rest unchanged), stopping once the forward score
    # is reached
    rq = ws8[0:qe + 1]
    rt = ws8[qlen:qlen + tlen]
    for x in range(qe + 1):
        rq[x] = query[qe - x]
    for x in range(tlen):
        rt[x] = target[te - x] if x <= te else target[x]
    rs, rte, rqe, _s2, _t2 = _sw_pass(qe + 1, rq, tlen, rt, m, mat,
                                      o_del, e_del, o_ins, e_ins, KSW_XSTOP | score, byte,
                                      striped, prof, hA, hB, erow, bsc, bte, carry)
    if rs == score:
        tb = te - rte
        qb = qe - rqe
    return score, te, qe, score2, te2, tb, qb


@njit(cache=True)
def ksw_align2_ws(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins, xtra,
                  ws, ws8):
    """ksw_align2 with caller scratch: ws int32 and ws8 uint8 arrays at least
    as long as given by :func:`align_ws_size`."""
    return _align2_impl(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins, xtra,
                        o_ins <= 0, ws, ws8)


@njit(cache=True)
def ksw_align2(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins, xtra):
    """Local Smith-Waterman as bwa's ksw_align2 (ksw_qinit + ksw_u8/ksw_i16 and,
    with KSW_XSTART, the reverse pass for the start positions).

    xtra: KSW_XBYTE / KSW_XSUBO / KSW_XSTOP / KSW_XSTART flags | threshold.
    Returns (score, te, qe, score2, te2, tb, qb) exactly as kswr_t: te/qe are
    inclusive end positions (te = -1, qe = 0 when score is 0), tb/qb inclusive
    starts (-1 unless computed), score2/te2 the 2nd best hit (-1 if none).
    With KSW_XBYTE a score that does not fit 8 bits is reported as 255 with
    qe = tb = qb = -1."""
    a, b = align_ws_size(qlen, tlen, m)
    return _align2_impl(qlen, query, tlen, target, m, mat, o_del, e_del, o_ins, e_ins, xtra,
                        o_ins <= 0, np.empty(a, np.int32), np.empty(b, np.uint8))


# ----------------------------------------------------------------------------
# CIGAR / NM / MD for a region whose end points are known (bwa_gen_cigar2)
# ----------------------------------------------------------------------------

_BASE_CHARS = np.frombuffer(b"ACGTN", dtype=np.uint8).copy()


@njit(cache=True)
def _gc_prepare(mat, o_ins, e_ins, o_del, e_del, w_, l_pac, pac, l_query, query, rb, re):
    """Reference fetch, strand handling and band choice of bwa_gen_cigar2.
    Returns (ok, rseq, rlen, qs, w); w = -1 selects the ungapped shortcut.
    rseq/qs are the sequences as aligned: on the reverse strand bwa reverses
    both the query and the reverse-complemented reference, so qs is the query
    reversed and rseq the complemented forward-strand reference (gaps end up
    leftmost in forward coordinates)."""
    if l_query <= 0 or rb >= re or (rb < l_pac and re > l_pac):
        return False, np.empty(0, np.uint8), 0, np.empty(0, np.uint8), 0
    # bns_get_seq: clamp to [0, 2*l_pac); the length must then be unchanged
    beg = rb if rb > 0 else 0
    end = re if re < 2 * l_pac else 2 * l_pac
    if not (beg >= l_pac or end <= l_pac) or end - beg != re - rb:
        return False, np.empty(0, np.uint8), 0, np.empty(0, np.uint8), 0
    rlen = re - rb
    rseq = np.empty(rlen, np.uint8)
    qs = np.empty(l_query, np.uint8)
    if rb >= l_pac:
        start = 2 * l_pac - re
        for x in range(rlen):
            rseq[x] = 3 - pac[start + x]
        for x in range(l_query):
            qs[x] = query[l_query - 1 - x]
    else:
        for x in range(rlen):
            rseq[x] = pac[rb + x]
        for x in range(l_query):
            qs[x] = query[x]
    if l_query == rlen and w_ == 0:
        return True, rseq, rlen, qs, -1
    max_ins = int((((l_query + 1) >> 1) * mat[0] - o_ins) / e_ins + 1.0)
    max_del = int((((l_query + 1) >> 1) * mat[0] - o_del) / e_del + 1.0)
    max_gap = max_ins if max_ins > max_del else max_del
    if max_gap < 1:
        max_gap = 1
    dl = rlen - l_query
    if dl < 0:
        dl = -dl
    w = (max_gap + dl + 1) >> 1
    if w > w_:
        w = w_
    if w < dl + 3:
        w = dl + 3
    return True, rseq, rlen, qs, w


@njit(cache=True)
def _put_uint(buf, n, v):
    # decimal representation of a non-negative integer
    if v == 0:
        buf[n] = 48
        return n + 1
    nd = 0
    x = v
    while x > 0:
        nd += 1
        x //= 10
    x = v
    for k in range(nd - 1, -1, -1):
        buf[n + k] = 48 + x % 10
        x //= 10
    return n + nd


@njit(cache=True)
def _gc_ungapped(mat, l_pac, pac, l_query, query, rb, re):
    """gen_cigar2's ungapped shortcut (band 0, equal lengths, one strand) read straight from pac: the same
    score, CIGAR, NM and MD as aligning the copied sequences, without the copies."""
    rev = rb >= l_pac
    start = 2 * l_pac - re if rev else rb
    md = np.empty(12 * (l_query + 3) + l_query, np.uint8)
    nmd = 0
    score = 0
    nm = 0
    u = 0
    for x in range(l_query):
        p = pac[start + x]
        if rev:
            r = 3 - p
            qv = query[l_query - 1 - x]
        else:
            r = p
            qv = query[x]
        score += mat[r * 5 + qv]
        if qv != r:
            nmd = _put_uint(md, nmd, u)
            md[nmd] = _BASE_CHARS[p]  # forward-strand letter on either strand
            nmd += 1
            nm += 1
            u = 0
        else:
            u += 1
    nmd = _put_uint(md, nmd, u)
    cigar = np.empty(1, np.uint32)
    cigar[0] = np.uint32(l_query << 4)
    return score, cigar, nm, md[:nmd]


@njit(cache=True)
def gen_cigar2(mat, o_del, e_del, o_ins, e_ins, w, l_pac, pac, l_query, query, rb, re):
    """bwa_gen_cigar2: global alignment of query[0:l_query] to the reference
    interval [rb, re) of the doubled coordinate space (rb >= l_pac: reverse
    strand).  ``pac`` is the forward strand, one base 0..3 per byte.

    Returns (score, cigar, NM, MD).  cigar is in forward-strand orientation
    (reversed-query order on the reverse strand, as bwa).  MD is a uint8 array
    of ASCII characters (no terminating NUL) with forward-strand reference
    letters.  If bwa would reject the region (empty, bridging both strands,
    out of range) cigar and MD are empty, NM = -1 and score = 0 (bwa leaves
    the score unset)."""
    if w == 0 and l_query > 0 and l_query == re - rb and (re <= l_pac or rb >= l_pac) and rb >= 0 \
            and re <= 2 * l_pac:
        return _gc_ungapped(mat, l_pac, pac, l_query, query, rb, re)
    ok, rseq, rlen, qs, bw = _gc_prepare(mat, o_ins, e_ins, o_del, e_del, w, l_pac, pac,
                                         l_query, query, rb, re)
    if not ok:
        return 0, np.empty(0, np.uint32), -1, np.empty(0, np.uint8)
    if bw < 0:
        score = 0
        for x in range(l_query):
            score += mat[rseq[x] * 5 + qs[x]]
        cigar = np.empty(1, np.uint32)
        cigar[0] = np.uint32(l_query << 4)
    else:
        a, b = global_ws_size(l_query, rlen, 5, bw)
        score, cigar = ksw_global2_ws(l_query, qs, rlen, rseq, 5, mat, o_del, e_del,
                                      o_ins, e_ins, bw, True, np.empty(a, np.int32),
                                      np.empty(b, np.uint8))
    # NM and MD; leading/trailing deletions count in neither
    rev = rb >= l_pac
    ncig = cigar.shape[0]
    md = np.empty(12 * (ncig + l_query + 2) + rlen, np.uint8)
    nmd = 0
    x = 0
    y = 0
    u = 0
    nm = 0
    for k in range(ncig):
        op = cigar[k] & 0xf
        ln = cigar[k] >> 4
        if op == 0:
            for t in range(ln):
                if qs[x + t] != rseq[y + t]:
                    nmd = _put_uint(md, nmd, u)
                    c = rseq[y + t]
                    if rev and c < 4:
                        c = 3 - c
                    md[nmd] = _BASE_CHARS[c]
                    nmd += 1
                    nm += 1
                    u = 0
                else:
                    u += 1
            x += ln
            y += ln
        elif op == 2:
            if k > 0 and k < ncig - 1:
                nmd = _put_uint(md, nmd, u)
                md[nmd] = 94  # '^'
                nmd += 1
                for t in range(ln):
                    c = rseq[y + t]
                    if rev and c < 4:
                        c = 3 - c
                    md[nmd] = _BASE_CHARS[c]
                    nmd += 1
                u = 0
                nm += ln
            y += ln
        elif op == 1:
            x += ln
            nm += ln
    nmd = _put_uint(md, nmd, u)
    return score, cigar, nm, md[:nmd]
