"""Reference coordinate helpers (bwa's bntseq.c semantics) for numba code.

Coordinates live in the forward-reverse space [0, 2*l_pac): p >= l_pac is on the reverse strand and
maps to forward position 2*l_pac-1-p. `offsets` is the CSR contig table (int64[n_contigs+1]);
`pac` holds one base (0..3) per byte, forward strand only.
"""
import numpy as np

from g3align.jit import njit


@njit(cache=True, inline="always")
def depos(l_pac, pos):
    """(forward position, is_rev) of a forward-reverse coordinate."""
    if pos >= l_pac:
        return (l_pac << 1) - 1 - pos, 1
    return pos, 0


@njit(cache=True)
def pos2rid(offsets, l_pac, pos_f):
    """Contig index of a forward position (bwa's bns_pos2rid), -1 if past the end."""
    if pos_f >= l_pac:
        return -1
    n_seqs = offsets.shape[0] - 1
    left = 0
    mid = 0
    right = n_seqs
    while left < right:
        mid = (left + right) >> 1
        if pos_f >= offsets[mid]:
            if mid == n_seqs - 1:
                break
            if pos_f < offsets[mid + 1]:
                break
            left = mid + 1
        else:
            right = mid
    return mid


@njit(cache=True)
def intv2rid(offsets, l_pac, rb, re):
    """Contig of [rb, re) or -1 if it bridges contigs, -2 if it bridges the strands."""
    if rb < l_pac and re > l_pac:
        return -2
    pb, _ = depos(l_pac, rb)
    rid_b = pos2rid(offsets, l_pac, pb)
    if rb < re:
        pe, _ = depos(l_pac, re - 1)
        rid_e = pos2rid(offsets, l_pac, pe)
    else:
        rid_e = rid_b
    return rid_b if rid_b == rid_e else -1


@njit(cache=True)
def get_seq(l_pac, pac, beg, end, out):
    """Reference bases of [beg, end) in forward-reverse space into out[0:end-beg] (bns_get_seq).
    Returns the length written (0 if the range bridges the strands)."""
    if end < beg:
        beg, end = end, beg
    if end > (l_pac << 1):
        end = l_pac << 1
    if beg < 0:
        beg = 0
    if beg >= l_pac or end <= l_pac:
        n = end - beg
        if beg >= l_pac:
            beg_f = (l_pac << 1) - 1 - end
            end_f = (l_pac << 1) - 1 - beg
            j = 0
            k = end_f
            while k > beg_f:
                out[j] = 3 - pac[k]
                j += 1
                k -= 1
        else:
            for j in range(n):
                out[j] = pac[beg + j]
        return n
    return 0


@njit(cache=True)
def clip_to_contig(offsets, l_pac, beg, mid, end):
    """The clipping of bns_fetch_seq: [beg, end) cut to the contig (and strand) holding `mid`.
    Returns (beg, end, rid)."""
    if end < beg:
        beg, end = end, beg
    pf, is_rev = depos(l_pac, mid)
    rid = pos2rid(offsets, l_pac, pf)
    far_beg = offsets[rid]
    far_end = offsets[rid + 1]
    if is_rev:
        tmp = far_beg
        far_beg = (l_pac << 1) - far_end
        far_end = (l_pac << 1) - tmp
    if beg < far_beg:
        beg = far_beg
    if end > far_end:
        end = far_end
    return beg, end, rid


@njit(cache=True)
def fetch_seq(offsets, l_pac, pac, beg, mid, end):
    """bns_fetch_seq: clip [beg, end) to the contig (and strand) holding `mid`.
    Returns (seq array, beg, end, rid)."""
    beg, end, rid = clip_to_contig(offsets, l_pac, beg, mid, end)
    out = np.empty(max(end - beg, 0), np.uint8)
    get_seq(l_pac, pac, beg, end, out)
    return out, beg, end, rid
