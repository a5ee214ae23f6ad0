"""Alignment regions -> SAM records (bwa's mem_reg2aln, mem_gen_alt, mem_reg2sam, mem_aln2sam).

Everything here is numba: the batch kernel formats each read's records into one growing uint8
buffer, so no per-read Python runs on the output path. CIGAR ops are bwa's (len<<4 | op, op in MIDSH
= 0..4); internal clipping op 3 prints as S, or H for supplementary records unless -Y.
"""

import numpy as np

from g3align.aligner.io.textbuf import put_bytes, put_char, put_fixed3, put_int, reserve
from g3align.aligner.mem.bns import depos, pos2rid
from g3align.aligner.mem.extend import (
    ALT_SC,
    CSUB,
    IS_ALT,
    QB,
    QE,
    RB,
    RE,
    SCORE,
    SECONDARY,
    SECONDARY_ALL,
    SUB,
    TRUESC,
    W,
)
from g3align.aligner.mem.ksw import gen_cigar2
from g3align.aligner.mem.options import F_SOFTCLIP, contig_is_alt
from g3align.aligner.mem.primary import approx_mapq_se
from g3align.aligner.runtime.nbshare import unowned
from g3align.jit import njit

MIDSH = np.frombuffer(b"MIDSHN", np.uint8)
ACGTN = np.frombuffer(b"ACGTN", np.uint8)
TGCAN = np.frombuffer(b"TGCAN", np.uint8)


_LIT3 = np.frombuffer(b"*\t0\t0\t*", np.uint8).copy()  # b"*\t0\t0\t*"
_LIT4 = np.frombuffer(b"\t*\t0\t0\t", np.uint8).copy()  # b"\t*\t0\t0\t" (used without its first tab)
_LIT5 = np.frombuffer(b"*\t*", np.uint8).copy()  # b"*\t*"
_LIT6 = np.frombuffer(b"\tNM:i:", np.uint8).copy()  # b"\tNM:i:"
_LIT7 = np.frombuffer(b"\tMD:Z:", np.uint8).copy()  # b"\tMD:Z:"
_LIT8 = np.frombuffer(b"\tAS:i:", np.uint8).copy()  # b"\tAS:i:"
_LIT9 = np.frombuffer(b"\tXS:i:", np.uint8).copy()  # b"\tXS:i:"
_LIT10 = np.frombuffer(b"\tRG:Z:", np.uint8).copy()  # b"\tRG:Z:"
_LIT11 = np.frombuffer(b"\tSA:Z:", np.uint8).copy()  # b"\tSA:Z:"
_LIT12 = np.frombuffer(b"\tXA:Z:", np.uint8).copy()  # b"\tXA:Z:"


_LIT_MC = np.frombuffer(b"\tMC:Z:", np.uint8).copy()
_LIT_PA = np.frombuffer(b"\tpa:f:", np.uint8).copy()


@njit(cache=True, specialize_literals=False)
def put_cigar(buf, n, cig, hard):
    for k in range(cig.shape[0]):
        op = cig[k] & 0xf
        if hard and (op == 3 or op == 4):
            op = 4
        buf, n = put_int(buf, n, cig[k] >> 4)
        buf, n = put_char(buf, n, MIDSH[op])
    return buf, n


# ---------------------------------------------------------------- region -> alignment
@njit(cache=True, specialize_literals=False)
def ref_len(cig):
    """Reference bases covered by a CIGAR (M and D)."""
    l = 0
    for k in range(cig.shape[0]):
        op = cig[k] & 0xf
        if op == 0 or op == 2:
            l += cig[k] >> 4
    return l


@njit(cache=True, specialize_literals=False)
def infer_bw(l1, l2, score, a, q, r):
    if l1 == l2 and l1 * a - score < ((q + r - a) << 1):
        return 0
    mn = l1 if l1 < l2 else l2
    w = int((mn * a - score - q) / r + 2.)
    d = l1 - l2 if l1 > l2 else l2 - l1
    if w < d:
        w = d
    return w


# The alignment of a region (gen_cigar2 with reg2aln's band doubling) depends only on these region fields,
# the read and the options: the key of a precomputed alignment (memcigar.py, the GPU traceback stage).
CG_FIELDS = (QB, QE, RB, RE, TRUESC, W)
CG_SCORE, CG_NM, CG_NCIG, CG_NMD = 0, 1, 2, 3  # columns of a precomputed result row (int32); NCIG -1: none


@njit(cache=True, specialize_literals=False)
def cg_empty():
    """A read's precomputed-alignment context with nothing in it: (keys (k, 6) int64, res (k, 4) int32,
    cig_off (k+1), cig uint32, md_off (k+1), md uint8); reg2aln then aligns every region itself."""
    return (np.zeros((0, 6), np.int64), np.zeros((0, 4), np.int32), np.zeros(1, np.int64),
            np.zeros(0, np.uint32), np.zeros(1, np.int64), np.zeros(0, np.uint8))


@njit(cache=True, inline="always")
def cg_slice(cg, u, v):
    """The precomputed alignments of region rows [u, v) (one read) of a part's cg."""
    return (cg[0][u:v], cg[1][u:v], cg[2][u:v + 1], cg[3], cg[4][u:v + 1], cg[5])


@njit(cache=True, inline="always")
def cg_find(cg, R, i):
    """Row of region i's precomputed alignment in the read's context `cg`, or -1."""
    keys = cg[0]
    for j in range(keys.shape[0]):
        if (keys[j, 0] == R[i, QB] and keys[j, 1] == R[i, QE] and keys[j, 2] == R[i, RB]
                and keys[j, 3] == R[i, RE] and keys[j, 4] == R[i, TRUESC] and keys[j, 5] == R[i, W]):
            return j if cg[1][j, CG_NCIG] >= 0 else -1
    return -1


@njit(cache=True, specialize_literals=False)
def region_cigar(opt, mat, l_pac, pac, q, qb, qe, rb, re, truesc, w_reg):
    """mem_reg2aln's alignment of a region: gen_cigar2 over the query [qb, qe) and reference [rb, re) with
    the band inferred from the score, doubled while the score stays short of truesc (at most 3 tries).
    Returns gen_cigar2's (score, cigar, NM, MD) of the last try."""
    tmp = infer_bw(qe - qb, re - rb, truesc, opt.a, opt.o_del, opt.e_del)
    w2 = infer_bw(qe - qb, re - rb, truesc, opt.a, opt.o_ins, opt.e_ins)
    w2 = w2 if w2 > tmp else tmp
    if w2 > opt.w:
        w2 = w2 if w2 < w_reg else w_reg
    it = 0
    last_sc = -(1 << 30)
    while True:
        w2 = w2 if w2 < (opt.w << 2) else (opt.w << 2)
        score, cig, nm, md = gen_cigar2(mat, opt.o_del, opt.e_del, opt.o_ins, opt.e_ins, w2, l_pac, pac,
                                        qe - qb, q[qb:qe], rb, re)
        if score == last_sc or w2 == (opt.w << 2):
            break
        last_sc = score
        w2 <<= 1
        it += 1
        if not (it < 3 and score < truesc - opt.a):
            break
    return score, cig, nm, md


@njit(cache=True, specialize_literals=False)
def reg2aln(opt, mat, offsets, l_pac, pac, L, q, R, i, cg):
    """mem_reg2aln. Returns (rid, pos, is_rev, mapq, flag, NM, cigar, MD, score, sub, alt_sc). The region's
    alignment comes from `cg` (cg_empty() or a read's slice of memcigar's results) when it is there."""
    qb = R[i, QB]
    qe = R[i, QE]
    rb = R[i, RB]
    re = R[i, RE]
    mapq = approx_mapq_se(opt, R, i) if R[i, SECONDARY] < 0 else 0
    flag = 0x100 if R[i, SECONDARY] >= 0 else 0
    j = cg_find(cg, R, i)
    if j >= 0:
        nm = np.int64(cg[1][j, CG_NM])
        cig = cg[3][cg[2][j]:cg[2][j + 1]]
        md = cg[5][cg[4][j]:cg[4][j + 1]]
    else:
        score, cig, nm, md = region_cigar(opt, mat, l_pac, pac, q, qb, qe, rb, re, R[i, TRUESC], R[i, W])
    pos, is_rev = depos(l_pac, rb if rb < l_pac else re - 1)
    nc = cig.shape[0]
    s0 = 0
    if nc > 0:  # squeeze out leading or trailing deletions
        if (cig[0] & 0xf) == 2:
            pos += cig[0] >> 4
            s0 = 1
        elif (cig[nc - 1] & 0xf) == 2:
            nc -= 1
    cig = cig[s0:nc]
    if qb != 0 or qe != L:
        clip5 = L - qe if is_rev else qb
        clip3 = qb if is_rev else L - qe
        c2 = np.empty(cig.shape[0] + 2, np.uint32)
        m = 0
        if clip5:
            c2[m] = (clip5 << 4) | 3
            m += 1
        c2[m:m + cig.shape[0]] = cig
        m += cig.shape[0]
        if clip3:
            c2[m] = (clip3 << 4) | 3
            m += 1
        cig = c2[:m]
    rid = pos2rid(offsets, l_pac, pos)
    pos = pos - offsets[rid]
    sub = R[i, SUB] if R[i, SUB] > R[i, CSUB] else R[i, CSUB]
    return rid, pos, is_rev, mapq, flag, nm, cig, md, R[i, SCORE], sub, R[i, ALT_SC]


@njit(cache=True, specialize_literals=False)
def _pri_idx(xa_drop, R, i):
    k = R[i, SECONDARY_ALL]
    # bwa passes the float ratio to a double parameter: double arithmetic with the float's value
    if k >= 0 and np.float64(R[i, SCORE]) >= np.float64(R[k, SCORE]) * np.float64(xa_drop):
        return k
    return -1


@njit(cache=True, specialize_literals=False)
def _put_alt(bufs, nb_, opt, mat, offsets, l_pac, pac, L, q, R, i, name_buf, name_off, cg):
    """One XA entry (contig,strand+pos,CIGAR,NM;) for region i."""
    rid, pos, is_rev, mapq, flag, nm, cig, md, sc, sub, alt = reg2aln(opt, mat, offsets, l_pac, pac, L, q, R, i, cg)
    bufs, nb_ = put_bytes(bufs, nb_, name_buf[name_off[rid]:name_off[rid + 1]])
    bufs, nb_ = put_char(bufs, nb_, 44)
    bufs, nb_ = put_char(bufs, nb_, 45 if is_rev else 43)
    bufs, nb_ = put_int(bufs, nb_, pos + 1)
    bufs, nb_ = put_char(bufs, nb_, 44)
    for k in range(cig.shape[0]):
        bufs, nb_ = put_int(bufs, nb_, cig[k] >> 4)
        bufs, nb_ = put_char(bufs, nb_, MIDSH[cig[k] & 0xf])
    bufs, nb_ = put_char(bufs, nb_, 44)
    bufs, nb_ = put_int(bufs, nb_, nm)
    bufs, nb_ = put_char(bufs, nb_, 59)
    return bufs, nb_


@njit(cache=True, inline="always")
def _xa_dropped(opt, cnt, has_alt):
    """bwa drops a region's XA when it has more hits than -h allows (the second -h value when one is ALT)."""
    return cnt > opt.max_XA_hits_alt or (not has_alt and cnt > opt.max_XA_hits)


@njit(cache=True, specialize_literals=False)
def gen_alt_one(opt, mat, offsets, l_pac, pac, L, q, R, n, z, name_buf, name_off, cg):
    """The XA bytes gen_alt would give region z (empty if none): only hits whose primary is z are
    aligned, so a paired record (which carries only its own region's XA) skips the others' reg2aln."""
    cnt = 0
    has_alt = False
    for i in range(n):
        if _pri_idx(opt.XA_drop_ratio, R, i) == z:
            cnt += 1
            if R[i, IS_ALT]:
                has_alt = True
    if cnt == 0 or _xa_dropped(opt, cnt, has_alt):
        return q[:0]  # empty: a view, not an allocation (most records have no XA)
    bufs = np.empty(256, np.uint8)
    nb_ = 0
    for i in range(n):
        if _pri_idx(opt.XA_drop_ratio, R, i) == z:
            bufs, nb_ = _put_alt(bufs, nb_, opt, mat, offsets, l_pac, pac, L, q, R, i, name_buf, name_off, cg)
    return bufs[:nb_]


@njit(cache=True, specialize_literals=False)
def gen_alt(opt, mat, offsets, l_pac, pac, L, q, R, n, name_buf, name_off, cg):
    """mem_gen_alt: XA strings per region (CSR: xa_off[n+1], xa bytes). Only after mark_primary."""
    cnt = np.zeros(n, np.int64)
    has_alt = np.zeros(n, np.int64)
    tot = 0
    for i in range(n):
        r = _pri_idx(opt.XA_drop_ratio, R, i)
        if r >= 0:
            cnt[r] += 1
            tot += 1
            if R[i, IS_ALT]:
                has_alt[r] = 1
    xa_off = np.zeros(n + 1, np.int64)
    if tot == 0:
        return xa_off, np.empty(0, np.uint8), False
    # build per-region strings, then CSR
    bufs = np.empty(256, np.uint8)
    nb_ = 0
    owner = np.empty(n, np.int64)
    seg_b = np.empty(n, np.int64)
    seg_e = np.empty(n, np.int64)
    nseg = 0
    for i in range(n):
        r = _pri_idx(opt.XA_drop_ratio, R, i)
        if r < 0:
            continue
        if _xa_dropped(opt, cnt[r], has_alt[r] != 0):
            continue
        b0 = nb_
        bufs, nb_ = _put_alt(bufs, nb_, opt, mat, offsets, l_pac, pac, L, q, R, i, name_buf, name_off, cg)
        owner[nseg] = r
        seg_b[nseg] = b0
        seg_e[nseg] = nb_
        nseg += 1
    for s in range(nseg):
        xa_off[owner[s] + 1] += seg_e[s] - seg_b[s]
    for i in range(n):
        xa_off[i + 1] += xa_off[i]
    xa = np.empty(xa_off[n], np.uint8)
    fill = xa_off[:n].copy()
    for s in range(nseg):
        r = owner[s]
        ln = seg_e[s] - seg_b[s]
        xa[fill[r]:fill[r] + ln] = bufs[seg_b[s]:seg_e[s]]
        fill[r] += ln
    return xa_off, xa, True


@njit(cache=True, specialize_literals=False)
def write_record(buf, n, opt, name, seq, qual, has_qual, comment, rg_id, ctg_names, ctg_off,
                 rid, pos, is_rev, mapq, flag, nm, cig, md, score, sub, alt_sc, xa, which,
                 sa_rid, sa_pos, sa_rev, sa_cig_off, sa_cig, sa_mapq, sa_nm, sa_flag, n_list,
                 m_has, m_rid, m_pos, m_rev, m_cig):
    """mem_aln2sam: one record. `which` is the record's index in the read's output list; the sa_*
    arrays describe the whole list (for the SA tag). m_* describe the mate's primary (m_has False for
    single-end); an empty cigar means "no alignment, coordinate only", as bwa's n_cigar == 0."""
    # the caller holds every input array for the call: unowned views of them cost no reference counting at each
    # of the many hand-overs below (buf, returned, stays as it is)
    (name, seq, qual, comment, rg_id, ctg_names, ctg_off, cig, md, xa, sa_rid, sa_pos, sa_rev, sa_cig_off, sa_cig,
     sa_mapq, sa_nm, sa_flag, m_cig) = unowned((name, seq, qual, comment, rg_id, ctg_names, ctg_off, cig, md, xa,
                                                sa_rid, sa_pos, sa_rev, sa_cig_off, sa_cig, sa_mapq, sa_nm, sa_flag,
                                                m_cig))
    L = seq.shape[0]
    n_cig = cig.shape[0]
    m_ncig = m_cig.shape[0]
    # bwa clips supplementary records (which > 0) hard, and the mate's CIGAR in their MC tag, unless -Y or the
    # alignment is on an ALT contig
    hard = which > 0 and not (opt.flag & F_SOFTCLIP) and contig_is_alt(opt, rid) == 0
    m_hard = which > 0 and not (opt.flag & F_SOFTCLIP) and contig_is_alt(opt, m_rid) == 0
    if m_has:
        flag |= 0x1
    if rid < 0:
        flag |= 0x4
    if m_has and m_rid < 0:
        flag |= 0x8
    if rid < 0 and m_has and m_rid >= 0:  # unmapped read placed at its mate
        rid = m_rid
        pos = m_pos
        is_rev = m_rev
        n_cig = 0
    if m_has and m_rid < 0 and rid >= 0:  # unmapped mate placed at this read
        m_rid = rid
        m_pos = pos
        m_rev = is_rev
        m_ncig = 0
    if is_rev:
        flag |= 0x10
    if m_has and m_rev:
        flag |= 0x20
    buf, n = put_bytes(buf, n, name)
    buf, n = put_char(buf, n, 9)
    buf, n = put_int(buf, n, (flag & 0xffff) | (0x100 if flag & 0x10000 else 0))
    buf, n = put_char(buf, n, 9)
    if rid >= 0:
        buf, n = put_bytes(buf, n, ctg_names[ctg_off[rid]:ctg_off[rid + 1]])
        buf, n = put_char(buf, n, 9)
        buf, n = put_int(buf, n, pos + 1)
        buf, n = put_char(buf, n, 9)
        buf, n = put_int(buf, n, mapq)
        buf, n = put_char(buf, n, 9)
        if n_cig > 0:
            buf, n = put_cigar(buf, n, cig, hard)
        else:
            buf, n = put_char(buf, n, 42)
    else:
        buf, n = put_bytes(buf, n, _LIT3)
    buf, n = put_char(buf, n, 9)
    if m_has and m_rid >= 0:
        if rid == m_rid:
            buf, n = put_char(buf, n, 61)
        else:
            buf, n = put_bytes(buf, n, ctg_names[ctg_off[m_rid]:ctg_off[m_rid + 1]])
        buf, n = put_char(buf, n, 9)
        buf, n = put_int(buf, n, m_pos + 1)
        buf, n = put_char(buf, n, 9)
        if rid == m_rid:
            if m_ncig == 0 or n_cig == 0:
                buf, n = put_char(buf, n, 48)
            else:
                p0 = pos + (ref_len(cig) - 1 if is_rev else 0)
                p1 = m_pos + (ref_len(m_cig) - 1 if m_rev else 0)
                d = p0 - p1
                buf, n = put_int(buf, n, -(d + (1 if p0 > p1 else (-1 if p0 < p1 else 0))))
        else:
            buf, n = put_char(buf, n, 48)
        buf, n = put_char(buf, n, 9)
    else:
        buf, n = put_bytes(buf, n, _LIT4[1:])
    if flag & 0x100:
        buf, n = put_bytes(buf, n, _LIT5)
    else:
        qb = 0
        qe = L
        nc = n_cig
        if nc > 0 and hard:
            c0 = cig[0] & 0xf
            c1 = cig[nc - 1] & 0xf
            if not is_rev:
                if c0 == 4 or c0 == 3:
                    qb += cig[0] >> 4
                if c1 == 4 or c1 == 3:
                    qe -= cig[nc - 1] >> 4
            else:
                if c0 == 4 or c0 == 3:
                    qe -= cig[0] >> 4
                if c1 == 4 or c1 == 3:
                    qb += cig[nc - 1] >> 4
        if qe <= qb:
            buf, n = put_char(buf, n, 42)  # empty SEQ is written as '*'
            buf, n = put_char(buf, n, 9)
            buf, n = put_char(buf, n, 42)
        else:
            buf = reserve(buf, n, 2 * (qe - qb) + 2)
            if not is_rev:
                for i in range(qb, qe):
                    buf[n] = ACGTN[seq[i]]
                    n += 1
                buf[n] = 9
                n += 1
                if has_qual:
                    for i in range(qb, qe):
                        buf[n] = qual[i]
                        n += 1
                else:
                    buf[n] = 42
                    n += 1
            else:
                for i in range(qe - 1, qb - 1, -1):
                    buf[n] = TGCAN[seq[i]]
                    n += 1
                buf[n] = 9
                n += 1
                if has_qual:
                    for i in range(qe - 1, qb - 1, -1):
                        buf[n] = qual[i]
                        n += 1
                else:
                    buf[n] = 42
                    n += 1
    if n_cig > 0:
        buf, n = put_bytes(buf, n, _LIT6)
        buf, n = put_int(buf, n, nm)
        buf, n = put_bytes(buf, n, _LIT7)
        buf, n = put_bytes(buf, n, md)
    if m_has and m_ncig > 0:
        buf, n = put_bytes(buf, n, _LIT_MC)
        buf, n = put_cigar(buf, n, m_cig, m_hard)
    if score >= 0:
        buf, n = put_bytes(buf, n, _LIT8)
        buf, n = put_int(buf, n, score)
    if sub >= 0:
        buf, n = put_bytes(buf, n, _LIT9)
        buf, n = put_int(buf, n, sub)
    if rg_id.shape[0] > 0:
        buf, n = put_bytes(buf, n, _LIT10)
        buf, n = put_bytes(buf, n, rg_id)
    if not (flag & 0x100):
        other = False
        for i in range(n_list):
            if i != which and not (sa_flag[i] & 0x100):
                other = True
                break
        if other:
            buf, n = put_bytes(buf, n, _LIT11)
            for i in range(n_list):
                if i == which or (sa_flag[i] & 0x100):
                    continue
                r = sa_rid[i]
                buf, n = put_bytes(buf, n, ctg_names[ctg_off[r]:ctg_off[r + 1]])
                buf, n = put_char(buf, n, 44)
                buf, n = put_int(buf, n, sa_pos[i] + 1)
                buf, n = put_char(buf, n, 44)
                buf, n = put_char(buf, n, 45 if sa_rev[i] else 43)
                buf, n = put_char(buf, n, 44)
                for k in range(sa_cig_off[i], sa_cig_off[i + 1]):
                    buf, n = put_int(buf, n, sa_cig[k] >> 4)
                    buf, n = put_char(buf, n, MIDSH[sa_cig[k] & 0xf])
                buf, n = put_char(buf, n, 44)
                buf, n = put_int(buf, n, sa_mapq[i])
                buf, n = put_char(buf, n, 44)
                buf, n = put_int(buf, n, sa_nm[i])
                buf, n = put_char(buf, n, 59)
        if alt_sc > 0:  # a primary-assembly hit with an ALT hit better than or as good as it
            buf, n = put_bytes(buf, n, _LIT_PA)
            buf, n = put_fixed3(buf, n, score / alt_sc)
    if xa.shape[0] > 0:
        buf, n = put_bytes(buf, n, _LIT12)
        buf, n = put_bytes(buf, n, xa)
    if comment.shape[0] > 0:
        buf, n = put_char(buf, n, 9)
        buf, n = put_bytes(buf, n, comment)
    buf, n = put_char(buf, n, 10)
    return buf, n


# ------------------------------------------------------------------------------------------ mem -V
def xr_table(names: list, comments: list):
    """The XR:Z: text of each reference sequence for `mem -V`, as bwa prints it from its .ann file: the FASTA
    header's comment, where "(null)" or an empty one is none, cut to the 8,190 characters bwa reads back, tabs
    made spaces. Returns (name bytes, offsets, XR bytes, offsets, hash slots) for add_xr."""
    from g3align.aligner.io.reads import bytes_csr
    xr = []
    for c in comments:
        c = c.encode("utf-8", "surrogateescape")[:8190]
        xr.append(b"" if c == b"(null)" else c.replace(b"\t", b" "))
    nb, no = bytes_csr(names)
    xb, xo = _csr_of(xr)
    size = 1 << max(4, (2 * len(names)).bit_length())
    slots = np.full(size, -1, np.int64)
    _xr_slots(nb, no, slots)
    return nb, no, xb, xo, slots


def _csr_of(items: list):
    off = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(x) for x in items], out=off[1:])
    return np.frombuffer(b"".join(items), np.uint8).copy(), off


_XR = np.frombuffer(b"\tXR:Z:", np.uint8).copy()


@njit(cache=True, nogil=True)
def _name_hash(buf, a, b):
    h = np.uint64(14695981039346656037)
    for j in range(a, b):
        h = (h ^ np.uint64(buf[j])) * np.uint64(1099511628211)
    return h


@njit(cache=True, nogil=True)
def _xr_slots(nb, no, slots):
    """Open addressing of the names' indices by hash (slots: a power of two, at least twice the names)."""
    mask = np.uint64(slots.shape[0] - 1)
    for i in range(no.shape[0] - 1):
        k = _name_hash(nb, no[i], no[i + 1]) & mask
        while slots[k] >= 0:
            k = (k + np.uint64(1)) & mask
        slots[k] = i


@njit(cache=True, nogil=True)
def _xr_rid(buf, a, b, nb, no, slots):
    """Index of the reference named buf[a:b], or -1 ('*' or unknown)."""
    mask = np.uint64(slots.shape[0] - 1)
    k = _name_hash(buf, a, b) & mask
    while slots[k] >= 0:
        i = slots[k]
        if no[i + 1] - no[i] == b - a:
            same = True
            for j in range(b - a):
                if nb[no[i] + j] != buf[a + j]:
                    same = False
                    break
            if same:
                return i
        k = (k + np.uint64(1)) & mask
    return -1


@njit(cache=True, nogil=True)
def _add_xr(buf, nb, no, xb, xo, slots, out):
    """SAM lines of buf with "\tXR:Z:<text>" before each newline whose RNAME has an XR text; out=None: the size
    only. Returns the bytes written (or needed)."""
    o = 0
    pos = 0
    n = buf.shape[0]
    while pos < n:
        e = pos
        while buf[e] != 10:
            e += 1
        a = pos
        while buf[a] != 9:  # past QNAME and FLAG
            a += 1
        a += 1
        while buf[a] != 9:
            a += 1
        a += 1
        b = a
        while buf[b] != 9:
            b += 1
        rid = _xr_rid(buf, a, b, nb, no, slots)
        ln = e - pos
        if out is not None:
            out[o:o + ln] = buf[pos:e]
        o += ln
        if rid >= 0 and xo[rid + 1] > xo[rid]:
            if out is not None:
                out[o:o + 6] = _XR
                out[o + 6:o + 6 + xo[rid + 1] - xo[rid]] = xb[xo[rid]:xo[rid + 1]]
            o += 6 + xo[rid + 1] - xo[rid]
        if out is not None:
            out[o] = 10
        o += 1
        pos = e + 1
    return o


def add_xr(data, table) -> bytes:
    """Whole SAM lines (bytes or a memoryview) with bwa's XR tag added (xr_table)."""
    buf = np.frombuffer(data, np.uint8)
    nb, no, xb, xo, slots = table
    out = np.empty(_add_xr(buf, nb, no, xb, xo, slots, None), np.uint8)
    _add_xr(buf, nb, no, xb, xo, slots, out)
    return out.tobytes()


def xr_edit(names: list, comments: list):
    """`mem -V`: the OutputSink edit that adds bwa's XR tags to whole SAM lines, for this reference."""
    table = xr_table(names, comments)
    return lambda data: add_xr(data, table)
