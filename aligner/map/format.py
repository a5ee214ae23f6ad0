"""PAF and SAM records of `g3align map` (minimap2 2.24's format.c semantics, our own code).

`write_read` formats every record of one read (all its regions, or the unmapped record) into a
growing uint8 buffer, in Numba, so the output path runs no per-read Python.  Regions come as the
region matrix of aligner/map/types.py with their CIGARs in the read's uint32 buffer.

Float tags (`de`, `dv`) are printed as C's "%.4f" would print the double: exact round-half-even of
the binary value (see `put_f4`), so the text is byte-identical to minimap2's.
"""
import math

import numpy as np

from g3align.aligner.io.textbuf import put_bytes, put_char, put_int, reserve
from g3align.aligner.map.align import getseq2
from g3align.aligner.map.types import (
    BLEN,
    CIG_D,
    CIG_I,
    CIG_OFF,
    CNT,
    DIV,
    DP_MAX,
    DP_SCORE,
    HAS_P,
    ID,
    INV,
    MAPQ,
    MLEN,
    N_AMBI,
    N_CIGAR,
    PARENT,
    PROPER_FRAG,
    QE,
    QS,
    RE,
    REV,
    RID,
    RS,
    SAM_PRI,
    SCORE,
    SPLIT,
    SUBSC,
    TRANS_STRAND,
    bits_f32,
)
from g3align.jit import njit

# option flags used here (aligner/map/options.py)
_F_OUT_SAM = 0x008
_F_NO_QUAL = 0x010
_F_OUT_CG = 0x020
_F_OUT_CS = 0x040
_F_OUT_CS_LONG = 0x800
_F_NO_PRINT_2ND = 0x4000
_F_SOFTCLIP = 0x80000
_F_OUT_MD = 0x1000000
_F_COPY_COMMENT = 0x2000000
_F_PAF_NO_HIT = 0x8000000
_F_QSTRAND = 0x100000000
_F_SAM_HIT_ONLY = 0x40000000

CIGAR_STR = np.frombuffer(b"MIDNSHP=XB", np.uint8).copy()
ACGTN = np.frombuffer(b"ACGTN", np.uint8).copy()
ACGTN_LC = np.frombuffer(b"acgtn", np.uint8).copy()
PM = np.frombuffer(b"+-", np.uint8).copy()


def _comp_table() -> np.ndarray:
    """minimap2's complement table: IUPAC letters complemented, case kept, other bytes unchanged."""
    t = np.arange(256, dtype=np.uint8)
    pairs = {"A": "T", "C": "G", "G": "C", "T": "A", "U": "A", "R": "Y", "Y": "R", "K": "M", "M": "K",
             "B": "V", "V": "B", "D": "H", "H": "D", "S": "S", "W": "W", "N": "N"}
    for a, b in pairs.items():
        t[ord(a)] = ord(b)
        t[ord(a.lower())] = ord(b.lower())
    return t


COMP = _comp_table()


def _lit(s: str) -> np.ndarray:
    return np.frombuffer(s.encode(), np.uint8).copy()


L_NM, L_MS, L_AS, L_NN, L_TS = _lit("\tNM:i:"), _lit("\tms:i:"), _lit("\tAS:i:"), _lit("\tnn:i:"), _lit("\tts:A:")
L_TP, L_CM, L_S1, L_S2 = _lit("\ttp:A:"), _lit("\tcm:i:"), _lit("\ts1:i:"), _lit("\ts2:i:")
L_DE, L_DV, L_ZD, L_RL = _lit("\tde:f:"), _lit("\tdv:f:"), _lit("\tzd:i:"), _lit("\trl:i:")
L_CG, L_CS, L_MD, L_SA, L_RG = _lit("\tcg:Z:"), _lit("\tcs:Z:"), _lit("\tMD:Z:"), _lit("\tSA:Z:"), _lit("\tRG:Z:")
L_UNMAPPED_PAF = _lit("\t0\t0\t*\t*\t0\t0\t0\t0\t0\t0")
L_UNMAPPED_SAM = _lit("\t4\t*\t0\t0\t*\t*\t0\t0\t")
L_SAM_MATE = _lit("\t*\t0\t0\t")
L_ZERO_STAR, L_NO_COOR, L_SAME, L_NO_MATE = _lit("\t0\t*"), _lit("*\t0\t0\t*"), _lit("\t=\t"), _lit("\t*\t0\t")
L_FI = _lit("\tFI:i:")
_NO_MATE = np.full(4, -1, np.int64)  # (rid, rs, re, rev) of no region


@njit(cache=True, specialize_literals=False)
def put_f4(buf, n, x):
    """C's printf("%.4f", x) for 0 <= x < 2^20 (exact round-half-even of the binary value)."""
    if x < 0.0:
        buf, n = put_char(buf, n, 45)
        x = -x
    m, e = math.frexp(x)               # x = m * 2^e, 0.5 <= m < 1
    mant = np.int64(m * 9007199254740992.0)  # 2^53: exact
    e2 = e - 53                        # x = mant * 2^e2
    # x * 10^4 = mant * 625 * 2^(e2 + 4)
    prod = mant * 625                  # < 2^63
    s = -(e2 + 4)
    if x == 0.0:
        q = np.int64(0)
    elif s <= 0:
        q = prod << (-s)
    elif s >= 64:
        q = np.int64(0)                # prod < 2^63 <= half: rounds to 0
    elif s == 63:
        q = np.int64(1) if prod > (np.int64(1) << 62) else np.int64(0)
    else:
        q = prod >> s
        rem = prod - (q << s)
        half = np.int64(1) << (s - 1)
        if rem > half or (rem == half and (q & 1) == 1):
            q += 1
    ip = q // 10000
    fp = q - ip * 10000
    buf, n = put_int(buf, n, ip)
    buf, n = put_char(buf, n, 46)
    d = 1000
    while d > 0:
        buf, n = put_char(buf, n, 48 + (fp // d) % 10)
        d //= 10
    return buf, n


@njit(cache=True, specialize_literals=False)
def event_identity(R, i, cig):
    """minimap2's mm_event_identity (gap-compressed identity); -1 without alignment."""
    if R[i, HAS_P] == 0:
        return -1.0
    n_gap = 0
    n_gapo = 0
    o = R[i, CIG_OFF]
    for k in range(R[i, N_CIGAR]):
        op = cig[o + k] & 0xF
        if op == CIG_I or op == CIG_D:
            n_gapo += 1
            n_gap += cig[o + k] >> 4
    return R[i, MLEN] / float(R[i, BLEN] + R[i, N_AMBI] - n_gap + n_gapo)


@njit(cache=True, specialize_literals=False)
def _write_tags(buf, n, R, i, cig):
    if R[i, ID] == R[i, PARENT]:
        tp = 73 if R[i, INV] else 80            # I / P
    else:
        tp = 105 if R[i, INV] else 83           # i / S
    if R[i, HAS_P]:
        buf, n = put_bytes(buf, n, L_NM)
        buf, n = put_int(buf, n, R[i, BLEN] - R[i, MLEN] + R[i, N_AMBI])
        buf, n = put_bytes(buf, n, L_MS)
        buf, n = put_int(buf, n, R[i, DP_MAX])
        buf, n = put_bytes(buf, n, L_AS)
        buf, n = put_int(buf, n, R[i, DP_SCORE])
        buf, n = put_bytes(buf, n, L_NN)
        buf, n = put_int(buf, n, R[i, N_AMBI])
        ts = R[i, TRANS_STRAND]
        if ts == 1 or ts == 2:
            buf, n = put_bytes(buf, n, L_TS)
            buf, n = put_char(buf, n, 43 if ts == 1 else 45)
    buf, n = put_bytes(buf, n, L_TP)
    buf, n = put_char(buf, n, tp)
    buf, n = put_bytes(buf, n, L_CM)
    buf, n = put_int(buf, n, R[i, CNT])
    buf, n = put_bytes(buf, n, L_S1)
    buf, n = put_int(buf, n, R[i, SCORE])
    if R[i, PARENT] == R[i, ID]:
        buf, n = put_bytes(buf, n, L_S2)
        buf, n = put_int(buf, n, R[i, SUBSC])
    if R[i, HAS_P]:
        div = 1.0 - event_identity(R, i, cig)
        buf, n = put_bytes(buf, n, L_DE)
        if div == 0.0:
            buf, n = put_char(buf, n, 48)
        else:
            buf, n = put_f4(buf, n, div)
    else:
        dv = bits_f32(R[i, DIV])
        if dv >= 0.0 and dv <= 1.0:
            buf, n = put_bytes(buf, n, L_DV)
            if dv == 0.0:
                buf, n = put_char(buf, n, 48)
            else:
                buf, n = put_f4(buf, n, np.float64(dv))
    if R[i, SPLIT]:
        buf, n = put_bytes(buf, n, L_ZD)
        buf, n = put_int(buf, n, R[i, SPLIT])
    return buf, n


@njit(cache=True, specialize_literals=False)
def _ref_and_query(R, i, qcodes, ref_seq, ref_off, qstrand):
    """Reference and query (on the reference strand) codes of region i's aligned span. qstrand (--qstrand): the
    query on its own strand, the reference reverse-complemented for a reverse hit (whose rs, re count from the
    contig's end then: mm_idx_getseq2)."""
    rs = R[i, RS]
    re = R[i, RE]
    qs = R[i, QS]
    qe = R[i, QE]
    t = np.empty(re - rs, np.uint8)
    getseq2(ref_seq, ref_off, qstrand and R[i, REV] != 0, R[i, RID], rs, re, t)
    q = np.empty(qe - qs, np.uint8)
    if R[i, REV] == 0 or qstrand:
        q[:] = qcodes[qs:qe]
    else:
        for k in range(qs, qe):
            c = qcodes[k]
            q[qe - k - 1] = 4 if c >= 4 else 3 - c
    return t, q


@njit(cache=True, specialize_literals=False)
def _put_cigar(buf, n, R, i, cig):
    o = R[i, CIG_OFF]
    for k in range(R[i, N_CIGAR]):
        buf, n = put_int(buf, n, cig[o + k] >> 4)
        buf, n = put_char(buf, n, CIGAR_STR[cig[o + k] & 0xF])
    return buf, n


@njit(cache=True, specialize_literals=False)
def _put_identical(buf, n, q, st, run, no_iden):
    """A cs run of identical bases: ':LEN' (short form) or '=BASES' (long form)."""
    if no_iden:
        buf, n = put_char(buf, n, 58)
        return put_int(buf, n, run)
    buf, n = put_char(buf, n, 61)
    for u in range(st, st + run):
        buf, n = put_char(buf, n, ACGTN[q[u]])
    return buf, n


@njit(cache=True, specialize_literals=False)
def _put_rl(buf, n, rep_len):
    if rep_len >= 0:
        buf, n = put_bytes(buf, n, L_RL)
        buf, n = put_int(buf, n, rep_len)
    return buf, n


@njit(cache=True, specialize_literals=False)
def _put_comment_eol(buf, n, flag, comment):
    if (flag & _F_COPY_COMMENT) and comment.shape[0] > 0:
        buf, n = put_char(buf, n, 9)
        buf, n = put_bytes(buf, n, comment)
    return put_char(buf, n, 10)


@njit(cache=True, specialize_literals=False)
def _write_cs_or_md(buf, n, R, i, cig, qcodes, ref_seq, ref_off, no_iden, is_md, qstrand):
    t, q = _ref_and_query(R, i, qcodes, ref_seq, ref_off, qstrand)
    buf, n = put_bytes(buf, n, L_MD if is_md else L_CS)
    qo = 0
    to = 0
    l_md = 0
    o = R[i, CIG_OFF]
    for k in range(R[i, N_CIGAR]):
        op = cig[o + k] & 0xF
        ln = np.int64(cig[o + k] >> 4)
        if op == 0 or op == 7 or op == 8:                     # M = X
            if is_md:
                for j in range(ln):
                    if q[qo + j] != t[to + j]:
                        buf, n = put_int(buf, n, l_md)
                        buf, n = put_char(buf, n, ACGTN[t[to + j]])
                        l_md = 0
                    else:
                        l_md += 1
            else:
                run = 0
                start = 0
                for j in range(ln):
                    if q[qo + j] != t[to + j]:
                        if run > 0:
                            buf, n = _put_identical(buf, n, q, qo + start, run, no_iden)
                            run = 0
                        buf, n = put_char(buf, n, 42)
                        buf, n = put_char(buf, n, ACGTN_LC[t[to + j]])
                        buf, n = put_char(buf, n, ACGTN_LC[q[qo + j]])
                    else:
                        if run == 0:
                            start = j
                        run += 1
                if run > 0:
                    buf, n = _put_identical(buf, n, q, qo + start, run, no_iden)
            qo += ln
            to += ln
        elif op == 1:                                         # I
            if not is_md:
                buf, n = put_char(buf, n, 43)
                for j in range(ln):
                    buf, n = put_char(buf, n, ACGTN_LC[q[qo + j]])
            qo += ln
        elif op == 2:                                         # D
            if is_md:
                buf, n = put_int(buf, n, l_md)
                buf, n = put_char(buf, n, 94)
                for j in range(ln):
                    buf, n = put_char(buf, n, ACGTN[t[to + j]])
                l_md = 0
            else:
                buf, n = put_char(buf, n, 45)
                for j in range(ln):
                    buf, n = put_char(buf, n, ACGTN_LC[t[to + j]])
            to += ln
        else:                                                 # N (intron)
            if not is_md:
                buf, n = put_char(buf, n, 126)
                buf, n = put_char(buf, n, ACGTN_LC[t[to]])
                buf, n = put_char(buf, n, ACGTN_LC[t[to + 1]])
                buf, n = put_int(buf, n, ln)
                buf, n = put_char(buf, n, ACGTN_LC[t[to + ln - 2]])
                buf, n = put_char(buf, n, ACGTN_LC[t[to + ln - 1]])
            to += ln
    if is_md and l_md > 0:
        buf, n = put_int(buf, n, l_md)
    return buf, n


@njit(cache=True, specialize_literals=False)
def _put_cs_md(buf, n, flag, R, i, cig, qcodes, ref_seq, ref_off):
    if R[i, HAS_P] and (flag & (_F_OUT_CS | _F_OUT_MD)):
        buf, n = _write_cs_or_md(buf, n, R, i, cig, qcodes, ref_seq, ref_off, (flag & _F_OUT_CS_LONG) == 0,
                                 (flag & _F_OUT_MD) != 0, (flag & _F_QSTRAND) != 0)
    return buf, n


@njit(cache=True, specialize_literals=False)
def _put_seq(buf, n, s, rev, comp):
    if rev:  # reversed (and complemented): room for all of it first, then one pass
        ln = s.shape[0]
        buf = reserve(buf, n, ln)
        for k in range(ln):
            c = s[ln - 1 - k]
            buf[n + k] = COMP[c] if comp and c < 128 else c
        return buf, n + ln
    return put_bytes(buf, n, s)


@njit(cache=True, specialize_literals=False)
def _write_paf(buf, n, flag, name, qlen, R, i, cig, qcodes, ref_seq, ref_off, ctg_names, ctg_noff, ctg_len,
               rep_len, comment):
    buf, n = put_bytes(buf, n, name)
    buf, n = put_char(buf, n, 9)
    buf, n = put_int(buf, n, qlen)
    buf, n = put_char(buf, n, 9)
    buf, n = put_int(buf, n, R[i, QS])
    buf, n = put_char(buf, n, 9)
    buf, n = put_int(buf, n, R[i, QE])
    buf, n = put_char(buf, n, 9)
    buf, n = put_char(buf, n, PM[R[i, REV]])
    buf, n = put_char(buf, n, 9)
    rid = R[i, RID]
    buf, n = put_bytes(buf, n, ctg_names[ctg_noff[rid]:ctg_noff[rid + 1]])
    buf, n = put_char(buf, n, 9)
    buf, n = put_int(buf, n, ctg_len[rid])
    buf, n = put_char(buf, n, 9)
    if (flag & _F_QSTRAND) and R[i, REV]:  # the hit's reference strand counts from the contig's end
        buf, n = put_int(buf, n, ctg_len[rid] - R[i, RE])
        buf, n = put_char(buf, n, 9)
        buf, n = put_int(buf, n, ctg_len[rid] - R[i, RS])
    else:
        buf, n = put_int(buf, n, R[i, RS])
        buf, n = put_char(buf, n, 9)
        buf, n = put_int(buf, n, R[i, RE])
    buf, n = put_char(buf, n, 9)
    buf, n = put_int(buf, n, R[i, MLEN])
    buf, n = put_char(buf, n, 9)
    buf, n = put_int(buf, n, R[i, BLEN])
    buf, n = put_char(buf, n, 9)
    buf, n = put_int(buf, n, R[i, MAPQ])
    buf, n = _write_tags(buf, n, R, i, cig)
    buf, n = _put_rl(buf, n, rep_len)
    if R[i, HAS_P] and (flag & _F_OUT_CG):
        buf, n = put_bytes(buf, n, L_CG)
        buf, n = _put_cigar(buf, n, R, i, cig)
    buf, n = _put_cs_md(buf, n, flag, R, i, cig, qcodes, ref_seq, ref_off)
    return _put_comment_eol(buf, n, flag, comment)


@njit(cache=True, specialize_literals=False)
def qname_len(name):
    """minimap2's mm_qname_len: a name of 3 or more characters ending in /DIGIT without those 2 characters."""
    ln = name.shape[0]
    if ln >= 3 and 48 <= name[ln - 1] <= 57 and name[ln - 2] == 47:
        return ln - 2
    return ln


@njit(cache=True, specialize_literals=False)
def _write_sam(buf, n, flag, name, seq, qual, R, nreg, i, cig, qcodes, ref_seq, ref_off, ctg_names, ctg_noff,
               rep_len, comment, rg_id, seg_idx, n_seg, prv, nxt):
    """One SAM record: region i of the read (i < 0: its unmapped record), as format.c's mm_write_sam3. A segment
    of a fragment (n_seg > 1) gets the pair flags and its mate's fields: prv / nxt are the sam_pri regions of the
    previous and the next segment as (rid, rs, re, rev), rid < 0 when that segment is unmapped."""
    qlen = seq.shape[0]
    if n_seg == 1 and i < 0:
        buf, n = put_bytes(buf, n, name)
        buf, n = put_bytes(buf, n, L_UNMAPPED_SAM)
        buf, n = put_bytes(buf, n, seq)
        buf, n = put_char(buf, n, 9)
        if qual.shape[0] > 0:
            buf, n = put_bytes(buf, n, qual)
        else:
            buf, n = put_char(buf, n, 42)
        return _sam_tail(buf, n, flag, R, nreg, i, cig, qcodes, ref_seq, ref_off, ctg_names, ctg_noff, qlen,
                         rep_len, comment, rg_id, -1)
    buf, n = put_bytes(buf, n, name[:qname_len(name)] if n_seg > 1 else name)
    sflag = 1 if n_seg > 1 else 0
    if i < 0:
        sflag |= 0x4
    else:
        if R[i, REV]:
            sflag |= 0x10
        if R[i, PARENT] != R[i, ID]:
            sflag |= 0x100
        elif R[i, SAM_PRI] == 0:
            sflag |= 0x800
    if n_seg > 1:
        if i >= 0 and R[i, PROPER_FRAG]:
            sflag |= 0x2
        if seg_idx == 0:
            sflag |= 0x40
        elif seg_idx == n_seg - 1:
            sflag |= 0x80
        if nxt[0] < 0:
            sflag |= 0x8
        elif nxt[3]:
            sflag |= 0x20
    buf, n = put_char(buf, n, 9)
    buf, n = put_int(buf, n, sflag)
    buf, n = put_char(buf, n, 9)
    this_rid = -1
    this_pos = -1
    if i < 0:
        if prv[0] >= 0:
            this_rid = prv[0]
            this_pos = prv[1]
            buf, n = put_bytes(buf, n, ctg_names[ctg_noff[this_rid]:ctg_noff[this_rid + 1]])
            buf, n = put_char(buf, n, 9)
            buf, n = put_int(buf, n, this_pos + 1)
            buf, n = put_bytes(buf, n, L_ZERO_STAR)
        else:
            buf, n = put_bytes(buf, n, L_NO_COOR)
    else:
        rid = R[i, RID]
        this_rid = rid
        this_pos = R[i, RS]
        buf, n = put_bytes(buf, n, ctg_names[ctg_noff[rid]:ctg_noff[rid + 1]])
        buf, n = put_char(buf, n, 9)
        buf, n = put_int(buf, n, R[i, RS] + 1)
        buf, n = put_char(buf, n, 9)
        buf, n = put_int(buf, n, R[i, MAPQ])
        buf, n = put_char(buf, n, 9)
        if R[i, HAS_P] == 0:
            buf, n = put_char(buf, n, 42)
        else:
            c0 = qlen - R[i, QE] if R[i, REV] else R[i, QS]
            c1 = R[i, QS] if R[i, REV] else qlen - R[i, QE]
            cc = 72 if (sflag & 0x800) and not (flag & _F_SOFTCLIP) else 83
            if c0:
                buf, n = put_int(buf, n, c0)
                buf, n = put_char(buf, n, cc)
            buf, n = _put_cigar(buf, n, R, i, cig)
            if c1:
                buf, n = put_int(buf, n, c1)
                buf, n = put_char(buf, n, cc)
    if n_seg > 1:
        tlen = 0
        if this_rid >= 0 and nxt[0] >= 0:
            if this_rid == nxt[0]:
                if i >= 0:
                    this5 = R[i, RE] - 1 if R[i, REV] else this_pos
                    next5 = nxt[2] - 1 if nxt[3] else nxt[1]
                    tlen = next5 - this5
                buf, n = put_bytes(buf, n, L_SAME)
            else:
                buf, n = put_char(buf, n, 9)
                buf, n = put_bytes(buf, n, ctg_names[ctg_noff[nxt[0]]:ctg_noff[nxt[0] + 1]])
                buf, n = put_char(buf, n, 9)
            buf, n = put_int(buf, n, nxt[1] + 1)
            buf, n = put_char(buf, n, 9)
        elif nxt[0] >= 0:
            buf, n = put_char(buf, n, 9)
            buf, n = put_bytes(buf, n, ctg_names[ctg_noff[nxt[0]]:ctg_noff[nxt[0] + 1]])
            buf, n = put_char(buf, n, 9)
            buf, n = put_int(buf, n, nxt[1] + 1)
            buf, n = put_char(buf, n, 9)
        elif this_rid >= 0:
            buf, n = put_bytes(buf, n, L_SAME)
            buf, n = put_int(buf, n, this_pos + 1)
            buf, n = put_char(buf, n, 9)
        else:
            buf, n = put_bytes(buf, n, L_NO_MATE)
        if tlen > 0:
            tlen += 1
        elif tlen < 0:
            tlen -= 1
        buf, n = put_int(buf, n, tlen)
        buf, n = put_char(buf, n, 9)
    else:
        buf, n = put_bytes(buf, n, L_SAM_MATE)
    if i < 0:
        buf, n = put_bytes(buf, n, seq)
        buf, n = put_char(buf, n, 9)
        if qual.shape[0] > 0:
            buf, n = put_bytes(buf, n, qual)
        else:
            buf, n = put_char(buf, n, 42)
    elif (sflag & 0x900) == 0 or (flag & _F_SOFTCLIP):
        buf, n = _put_seq(buf, n, seq, R[i, REV], True)
        buf, n = put_char(buf, n, 9)
        if qual.shape[0] > 0:
            buf, n = _put_seq(buf, n, qual, R[i, REV], False)
        else:
            buf, n = put_char(buf, n, 42)
    elif sflag & 0x100:
        buf, n = put_char(buf, n, 42)
        buf, n = put_char(buf, n, 9)
        buf, n = put_char(buf, n, 42)
    else:
        buf, n = _put_seq(buf, n, seq[R[i, QS]:R[i, QE]], R[i, REV], True)
        buf, n = put_char(buf, n, 9)
        if qual.shape[0] > 0:
            buf, n = _put_seq(buf, n, qual[R[i, QS]:R[i, QE]], R[i, REV], False)
        else:
            buf, n = put_char(buf, n, 42)
    return _sam_tail(buf, n, flag, R, nreg, i, cig, qcodes, ref_seq, ref_off, ctg_names, ctg_noff, qlen, rep_len,
                     comment, rg_id, seg_idx if n_seg > 2 else -1)


@njit(cache=True, specialize_literals=False)
def _sam_tail(buf, n, flag, R, nreg, i, cig, qcodes, ref_seq, ref_off, ctg_names, ctg_noff, qlen, rep_len, comment,
              rg_id, fi):
    """A SAM record's tags to its end of line: RG, FI (fi >= 0: a fragment of more than two segments), the
    region's tags and SA, cs / MD, rl, the comment."""
    if rg_id.shape[0] > 0:
        buf, n = put_bytes(buf, n, L_RG)
        buf, n = put_bytes(buf, n, rg_id)
    if fi >= 0:
        buf, n = put_bytes(buf, n, L_FI)
        buf, n = put_int(buf, n, fi)
    if i >= 0:
        buf, n = _write_tags(buf, n, R, i, cig)
        if R[i, PARENT] == R[i, ID] and R[i, HAS_P] and nreg > 1:
            n_sa = 0
            for j in range(nreg):
                if j != i and R[j, PARENT] == R[j, ID] and R[j, HAS_P]:
                    n_sa += 1
            if n_sa > 0:
                buf, n = put_bytes(buf, n, L_SA)
                for j in range(nreg):
                    if j == i or R[j, PARENT] != R[j, ID] or R[j, HAS_P] == 0:
                        continue
                    lq = R[j, QE] - R[j, QS]
                    lr = R[j, RE] - R[j, RS]
                    l_i = 0
                    l_d = 0
                    if lq < lr:
                        l_m = lq
                        l_d = lr - l_m
                    else:
                        l_m = lr
                        l_i = lq - l_m
                    clip5 = qlen - R[j, QE] if R[j, REV] else R[j, QS]
                    clip3 = R[j, QS] if R[j, REV] else qlen - R[j, QE]
                    rj = R[j, RID]
                    buf, n = put_bytes(buf, n, ctg_names[ctg_noff[rj]:ctg_noff[rj + 1]])
                    buf, n = put_char(buf, n, 44)
                    buf, n = put_int(buf, n, R[j, RS] + 1)
                    buf, n = put_char(buf, n, 44)
                    buf, n = put_char(buf, n, PM[R[j, REV]])
                    buf, n = put_char(buf, n, 44)
                    if clip5:
                        buf, n = put_int(buf, n, clip5)
                        buf, n = put_char(buf, n, 83)
                    if l_m:
                        buf, n = put_int(buf, n, l_m)
                        buf, n = put_char(buf, n, 77)
                    if l_i:
                        buf, n = put_int(buf, n, l_i)
                        buf, n = put_char(buf, n, 73)
                    if l_d:
                        buf, n = put_int(buf, n, l_d)
                        buf, n = put_char(buf, n, 68)
                    if clip3:
                        buf, n = put_int(buf, n, clip3)
                        buf, n = put_char(buf, n, 83)
                    buf, n = put_char(buf, n, 44)
                    buf, n = put_int(buf, n, R[j, MAPQ])
                    buf, n = put_char(buf, n, 44)
                    buf, n = put_int(buf, n, R[j, BLEN] - R[j, MLEN] + R[j, N_AMBI])
                    buf, n = put_char(buf, n, 59)
        buf, n = _put_cs_md(buf, n, flag, R, i, cig, qcodes, ref_seq, ref_off)
    buf, n = _put_rl(buf, n, rep_len)
    return _put_comment_eol(buf, n, flag, comment)


@njit(cache=True, specialize_literals=False)
def write_read(buf, n, flag, name, seq, qual, qcodes, R, nreg, cig, rep_len, ref_seq, ref_off, ctg_names, ctg_noff,
               ctg_len, comment, rg_id):
    """All records of one single-segment read, as minimap2's output step writes them.

    seq: the read as given (U/u already turned into T/t); qual: empty array when absent or -Q;
    qcodes: seq in 0..4 codes.  Returns (buf, n).
    """
    if nreg > 0:
        for i in range(nreg):
            if (flag & _F_NO_PRINT_2ND) and R[i, ID] != R[i, PARENT]:
                continue
            if flag & _F_OUT_SAM:
                buf, n = _write_sam(buf, n, flag, name, seq, qual, R, nreg, i, cig, qcodes, ref_seq, ref_off,
                                    ctg_names, ctg_noff, rep_len, comment, rg_id, 0, 1, _NO_MATE, _NO_MATE)
            else:
                buf, n = _write_paf(buf, n, flag, name, seq.shape[0], R, i, cig, qcodes, ref_seq, ref_off,
                                    ctg_names, ctg_noff, ctg_len, rep_len, comment)
    elif (flag & _F_OUT_SAM) and not (flag & _F_SAM_HIT_ONLY):
        buf, n = _write_sam(buf, n, flag, name, seq, qual, R, 0, -1, cig, qcodes, ref_seq, ref_off,
                            ctg_names, ctg_noff, rep_len, comment, rg_id, 0, 1, _NO_MATE, _NO_MATE)
    elif (flag & _F_PAF_NO_HIT) and not (flag & _F_OUT_SAM):
        buf, n = put_bytes(buf, n, name)
        buf, n = put_char(buf, n, 9)
        buf, n = put_int(buf, n, seq.shape[0])
        buf, n = put_bytes(buf, n, L_UNMAPPED_PAF)
        buf, n = _put_rl(buf, n, rep_len)
        buf, n = put_char(buf, n, 10)
    return buf, n


@njit(cache=True, specialize_literals=False)
def _sam_pri(R, a, b, out):
    """(rid, rs, re, rev) of the first region of R[a:b] marked sam_pri into out (rid -1 when there is none)."""
    out[0] = -1
    for i in range(a, b):
        if R[i, SAM_PRI]:
            out[0], out[1], out[2], out[3] = R[i, RID], R[i, RS], R[i, RE], R[i, REV]
            return


@njit(cache=True, specialize_literals=False)
def write_frag(buf, n, flag, names, name_off, seqs, quals, qcodes, seg_off, R, r_off, cig, rep_lens, ref_seq, ref_off,
               ctg_names, ctg_noff, ctg_len, comments, com_off, rg_id):
    """All records of a fragment of n_seg = seg_off.shape[0] - 1 segments (map.c's output step; SAM records by
    mm_write_sam3 with the mates' fields, PAF ones as for single reads): segment s is read seq[seg_off[s]:
    seg_off[s+1]] (qual likewise, when given; qcodes its codes), named names[name_off[s]:name_off[s+1]], with
    regions R[r_off[s]:r_off[s+1]] and repeat length rep_lens[s]."""
    n_seg = seg_off.shape[0] - 1
    if not (flag & _F_OUT_SAM):
        for s in range(n_seg):
            q0, q1 = seg_off[s], seg_off[s + 1]
            buf, n = write_read(buf, n, flag, names[name_off[s]:name_off[s + 1]], seqs[q0:q1],
                                quals[q0:q1] if quals.shape[0] > 0 else quals[:0], qcodes[q0:q1],
                                R[r_off[s]:r_off[s + 1]], r_off[s + 1] - r_off[s], cig, rep_lens[s], ref_seq, ref_off,
                                ctg_names, ctg_noff, ctg_len, comments[com_off[s]:com_off[s + 1]], rg_id)
        return buf, n
    prv = np.empty(4, np.int64)
    nxt = np.empty(4, np.int64)
    for s in range(n_seg):
        a, b = r_off[s], r_off[s + 1]
        t = (s + 1) % n_seg
        _sam_pri(R, r_off[t], r_off[t + 1], nxt)
        if n_seg > 2:
            prv[0] = -1
            for k in range(1, n_seg):
                p = (s + n_seg - k) % n_seg
                if r_off[p + 1] > r_off[p]:
                    _sam_pri(R, r_off[p], r_off[p + 1], prv)
                    break
        else:
            prv[:] = nxt
        q0, q1 = seg_off[s], seg_off[s + 1]
        name = names[name_off[s]:name_off[s + 1]]
        qual = quals[q0:q1] if quals.shape[0] > 0 else quals[:0]
        comment = comments[com_off[s]:com_off[s + 1]]
        Rs = R[a:b]
        if b > a:
            for i in range(b - a):
                if (flag & _F_NO_PRINT_2ND) and Rs[i, ID] != Rs[i, PARENT]:
                    continue
                buf, n = _write_sam(buf, n, flag, name, seqs[q0:q1], qual, Rs, b - a, i, cig, qcodes[q0:q1],
                                    ref_seq, ref_off, ctg_names, ctg_noff, rep_lens[s], comment, rg_id, s, n_seg, prv,
                                    nxt)
        elif not (flag & _F_SAM_HIT_ONLY):
            buf, n = _write_sam(buf, n, flag, name, seqs[q0:q1], qual, Rs, 0, -1, cig, qcodes[q0:q1], ref_seq,
                                ref_off, ctg_names, ctg_noff, rep_lens[s], comment, rg_id, s, n_seg, prv, nxt)
    return buf, n
