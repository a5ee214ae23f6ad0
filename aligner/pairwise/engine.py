"""Pairwise DP alignment engine: many (query, target) pairs -> score, ends, starts, CIGAR.

Input: two equal-length lists of DNA sequences (str / bytes), pre-encoded ``(codes, offsets)`` CSR
pairs (codes uint8 0..4, offsets int64[n+1]; numpy or CuPy) or ``Packed2`` (2-bit packed), see
aligner/pairwise/pwio.py.  Output: :class:`PairwiseResult`, numpy arrays (``output="cupy"``: left on the GPU).

Transport (GPU path): host arrays go up through their own pages locked in place (pinned.upload);
big host code arrays go in slabs whose uploads overlap the alignment of the slab before
(_align_slabs); offsets of batches with one query and one target length are made on the device;
CIGARs are compacted on the device (_Cigars) and every result array comes back in one copy.
``timings=`` receives where a call's time went (encode, upload, route, kernel, download).

Scoring (bwa conventions)
  * bases A C G T (either case) are 0..3; the IUPAC ambiguity codes N R Y K M S W B D H V (either
    case) are N (code 4); anything else is an error.  s(a,b) = ``match`` if a == b < 4, ``-1`` if
    either is N (bwa's ``-1`` for ambiguous bases, N vs N included), else ``-mismatch``.
  * a gap of length L costs ``gap_open + L * gap_extend`` (bwa/ksw convention: the open penalty is
    paid once on top of the per-base extension).  ``gap_open == 0`` is a linear gap model.
    parasail's open/extend are ``gap_open + gap_extend`` and ``gap_extend`` (parasail charges
    ``open + (L-1) * extend``); tests/test_pairwise.py checks scores against parasail that way.

Modes (DP rows i = query 1..m, columns j = target 1..n; H(i,j) = best score of an alignment of
the query prefix q[:i] and target prefix t[:j] ending there)
  * ``global``      Needleman-Wunsch: both sequences end to end (parasail ``nw``).
  * ``semiglobal``  "glocal": the whole query fitted into any substring of the target; target
    prefix and suffix are free, query gaps at either end are charged (parasail ``sg_dx``).
  * ``local``       Smith-Waterman (parasail ``sw``); score 0 means "no alignment", ends (0, 0).

Coordinates are 0-based half-open: the alignment covers ``query[q_start:q_end]`` and
``target[t_start:t_end]``.  Without traceback the starts are not computed (-1), except in
global mode (0, 0) and the query start in semiglobal mode (0).

Tie-breaking (the GPU kernels and the CPU twin share it, so results are identical byte for byte)
  * end cell: highest score, then smallest ``t_end``, then smallest ``q_end``.
  * traceback, from the end cell: in H, (local and H == 0) stops, then diagonal (M) before
    E (D, gap in the query) before F (I, gap in the target); in E/F the gap is extended only when
    that is strictly better than opening it.  Global alignments run to (0, 0) (leftover target ->
    D, leftover query -> I); semiglobal ones stop on row 0; local ones on H == 0 or the border.
  * CIGAR: BAM encoding ``len << 4 | op`` with op M=0 (match or mismatch), I=1, D=2; CSR arrays
    ``cigar`` / ``cigar_off``.

Band: with ``band=w`` cells with ``|i - j| > w`` (border cells included) are unreachable.
Global alignments need ``|m - n| <= w``, semiglobal ``m <= n + w``.  The band restricts the
result; the kernels still sweep every cell.

Algorithms: GPU kernels in kernels/pairwise.cu (see its header for the thread mappings), chosen
by length (inter-query thread per pair for short queries, a group of lanes per pair above
``INTRA_MIN_M``; score only, long pairs from ``LONG_MIN_M`` bases when too few to fill the GPU and
every pair from ``CHAIN_MIN_M`` bases: chained strips of all of them over all SMs, pw_chain_batch).
Score only: pairs whose DP values provably fit int16 (``fits16``: a bound from m, n and the
scores, never assumed) run two per group in the 16-bit packed DPX kernel, the others in 32 bits.
Traceback: short pairs (m <= 256, ``fits_tb16``: direction bytes <= TB16_SMEM = 48 KB per warp, i.e.
up to about 200 x 200) in the 16-bit kernel pw_tb16 (two pairs per warp, direction bits of the whole
pair in shared memory, walked in the same kernel; H200 10M x 150 bp local / global / semiglobal
762 / 802 / 781 GCUPS, docs/BENCHMARKS.md's git history); the others
gridded (forward pass stores rows every BH and columns every GW cells, in the 16-bit kernel where
it fits and m < 4 kb; the blocks near the path are recomputed), for one huge pair or a few
(``TB_CHAIN_MAX``) long ones in linear space, one pair after the other over all SMs.  The CPU twin below is the plain
Gotoh recurrence (numba, one pair per thread), the fallback and the oracle; its traceback keeps a
full direction matrix, or for large pairs the same gridded walk (identical CIGARs).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numba
import numpy as np
from numba import prange

from g3align.aligner.gpu import pinned
from g3align.aligner.gpu.device import gpu_available
from g3align.aligner.pairwise.pwio import (  # noqa: F401
    Packed2,
    csr,
    device_codes,
    gather_runs,
    host_codes,
    host_form,
    pack2,
    slab_codes,
)
from g3align.jit import njit
from g3align.kernels.loader import fit_shared

MODES = {"global": 0, "semiglobal": 1, "local": 2}
NEG = -0x20000000                 # minus "infinity", as in the kernels
SCORE_LIMIT = 1 << 27             # |any DP value| must stay below this (int32 with headroom)
INTRA_MIN_M = 384                 # queries at least this long use a lane group per pair
CHAIN_MIN_M = 65536               # queries at least this long use pw_chain (one pair, many warps)
CIGAR_OPS = "MID"

# ---------------------------------------------------------------------------------------------
# encoding

def encode_seqs(seqs, what: str = "sequence") -> tuple[np.ndarray, np.ndarray]:
    """Any input form (aligner/pairwise/pwio.py) -> (uint8 codes, int64 offsets), numpy."""
    return host_codes(seqs, what)


# ---------------------------------------------------------------------------------------------
# result

@dataclass
class PairwiseResult:
    """Per-pair arrays (int32 unless noted); CIGAR as CSR (empty when traceback was off)."""
    score: np.ndarray
    q_end: np.ndarray
    t_end: np.ndarray
    q_start: np.ndarray
    t_start: np.ndarray
    cigar: np.ndarray        # uint32, BAM encoding len<<4|op
    cigar_off: np.ndarray    # int64[n+1]
    device: str = "cpu"

    def __len__(self) -> int:
        return self.score.size

    def cigar_string(self, k: int) -> str:
        c = self.cigar[self.cigar_off[k]:self.cigar_off[k + 1]]
        return "".join(f"{int(x) >> 4}{CIGAR_OPS[int(x) & 15]}" for x in c)

    def cigars(self) -> list[str]:
        return [self.cigar_string(k) for k in range(len(self))]


# ---------------------------------------------------------------------------------------------
# CPU twin (numba): the plain recurrence, full direction matrix

@njit(cache=True, inline="always")
def _rowinit(j, mode, go, ge, band):          # H(0, j)
    if band >= 0 and j > band:
        return NEG
    if mode == 0 and j > 0:
        return -(go + j * ge)
    return 0


@njit(cache=True, inline="always")
def _colinit(i, mode, go, ge, band):          # H(i, 0)
    if band >= 0 and i > band:
        return NEG
    if mode != 2 and i > 0:
        return -(go + i * ge)
    return 0


@njit(cache=True)
def _walk(D, mode, i, j, cig, c0):
    """Trace back from (i, j) over direction matrix D; CIGAR runs into cig[c0:]. -> (qs, ts, n_runs)."""
    nc = 0
    cur_op = 0
    cur_len = 0
    state = 0
    while True:
        if mode == 2:
            if i == 0 or j == 0:
                break
        else:
            if i == 0:
                if mode == 0 and j > 0:
                    op, ln = 2, j
                    if op == cur_op:
                        cur_len += ln
                    else:
                        if cur_len:
                            cig[c0 + nc] = (cur_len << 4) | cur_op
                            nc += 1
                        cur_op, cur_len = op, ln
                    j = 0
                break
            if j == 0:
                op, ln = 1, i
                if op == cur_op:
                    cur_len += ln
                else:
                    if cur_len:
                        cig[c0 + nc] = (cur_len << 4) | cur_op
                        nc += 1
                    cur_op, cur_len = op, ln
                i = 0
                break
        nib = D[i, j]
        op = -1
        if state == 0:
            dd = nib & 3
            if dd == 3:
                break
            if dd == 0:
                op = 0
                i -= 1
                j -= 1
            else:
                state = dd
        elif state == 1:
            op = 2
            j -= 1
            state = 1 if nib & 4 else 0
        else:
            op = 1
            i -= 1
            state = 2 if nib & 8 else 0
        if op >= 0:
            if op == cur_op:
                cur_len += 1
            else:
                if cur_len:
                    cig[c0 + nc] = (cur_len << 4) | cur_op
                    nc += 1
                cur_op, cur_len = op, 1
    if cur_len:
        cig[c0 + nc] = (cur_len << 4) | cur_op
        nc += 1
    a, b = c0, c0 + nc - 1
    while a < b:
        x = cig[a]
        cig[a] = cig[b]
        cig[b] = x
        a += 1
        b -= 1
    return i, j, nc


@njit(cache=True)
def _align_one(q, t, mode, match, mismatch, go, ge, band, tb, cig, c0):
    """One pair -> (score, q_end, t_end, q_start, t_start, n_cigar); CIGAR into cig[c0:]."""
    m = q.size
    n = t.size
    goe = go + ge
    if m == 0 or n == 0:                      # no DP cell: closed forms (same as the walk's borders)
        if mode == 2:
            return 0, 0, 0, 0, 0, 0
        if mode == 1 and m == 0:
            return 0, 0, 0, 0, 0, 0
        s = _colinit(m, mode, go, ge, band) if n == 0 else _rowinit(n, mode, go, ge, band)
        nc = 0
        if tb and m + n > 0:
            cig[c0] = ((m + n) << 4) | (1 if n == 0 else 2)
            nc = 1
        return s, m, (n if mode == 0 else 0), 0, 0, nc
    H = np.empty(n + 1, np.int32)
    F = np.empty(n + 1, np.int32)
    for j in range(n + 1):
        H[j] = _rowinit(j, mode, go, ge, band)
        F[j] = NEG
    D = np.empty((m + 1, n + 1) if tb else (1, 1), np.uint8)
    if mode == 2:
        bs, bi, bj = 0, 0, 0
    elif mode == 1:
        bs, bi, bj = _colinit(m, mode, go, ge, band), m, 0
    else:
        bs, bi, bj = NEG, m, n
    for i in range(1, m + 1):
        qc = q[i - 1]
        hdiag = H[0]
        hleft = _colinit(i, mode, go, ge, band)
        H[0] = hleft
        e = NEG
        for j in range(1, n + 1):
            tc = t[j - 1]
            if qc > 3 or tc > 3:
                sc = -1
            elif qc == tc:
                sc = match
            else:
                sc = -mismatch
            ee = e - ge
            eo = hleft - goe
            e = max(ee, eo)
            fe = F[j] - ge
            fo = H[j] - goe
            f = max(fe, fo)
            hd = hdiag + sc
            h = max(hd, max(e, f))
            if mode == 2:
                h = max(h, 0)
            if tb:
                if mode == 2 and h == 0:
                    d = 3
                elif h == hd:
                    d = 0
                elif h == e:
                    d = 1
                else:
                    d = 2
                if ee > eo:
                    d |= 4
                if fe > fo:
                    d |= 8
                D[i, j] = d
            if band >= 0 and abs(i - j) > band:
                h = NEG
                e = NEG
                f = NEG
            hdiag = H[j]
            H[j] = h
            F[j] = f
            hleft = h
            if mode == 2:
                if h > bs or (h == bs and (j < bj or (j == bj and i < bi))):
                    bs, bi, bj = h, i, j
        if i == m:
            if mode == 1:
                for j in range(1, n + 1):
                    if H[j] > bs:
                        bs, bj = H[j], j
            elif mode == 0:
                bs = H[n]
    qs = -1
    ts = -1
    nc = 0
    if mode == 0:
        qs, ts = 0, 0
    elif mode == 1:
        qs = 0
    if tb:
        qs, ts, nc = _walk(D, mode, bi, bj, cig, c0)
    return bs, bi, bj, qs, ts, nc


@njit(cache=True, inline="always")
def _push(cig, c0, nc, cur_op, cur_len, op, ln):
    if op == cur_op:
        return nc, cur_op, cur_len + ln
    if cur_len:
        cig[c0 + nc] = (cur_len << 4) | cur_op
        nc += 1
    return nc, op, ln


@njit(cache=True)
def _align_one_grid(q, t, mode, match, mismatch, go, ge, band, BH, GW, cig, c0):
    """_align_one with traceback in O((m/BH + n/GW) * (m + n) + BH*GW) memory (the gridded scheme of
    the GPU kernels): the forward pass keeps H, F of every BH-th row and H, E of every GW-th column;
    the traceback recomputes each BH x GW block the path enters from those checkpoints and walks it
    with the same nibbles and tie-breaking as the full-matrix walk, so the CIGAR is identical."""
    m = q.size
    n = t.size
    if m == 0 or n == 0:
        return _align_one(q, t, mode, match, mismatch, go, ge, band, True, cig, c0)
    goe = go + ge
    nb = (m + BH - 1) // BH
    ncb = (n + GW - 1) // GW
    rck = np.empty((max(nb - 1, 1), n + 1, 2), np.int32)
    cck = np.empty((max(ncb - 1, 1), m, 2), np.int32)
    H = np.empty(n + 1, np.int32)
    F = np.empty(n + 1, np.int32)
    for j in range(n + 1):
        H[j] = _rowinit(j, mode, go, ge, band)
        F[j] = NEG
    if mode == 2:
        bs, bi, bj = 0, 0, 0
    elif mode == 1:
        bs, bi, bj = _colinit(m, mode, go, ge, band), m, 0
    else:
        bs, bi, bj = NEG, m, n
    for i in range(1, m + 1):
        qc = q[i - 1]
        hdiag = H[0]
        hleft = _colinit(i, mode, go, ge, band)
        H[0] = hleft
        e = NEG
        for j in range(1, n + 1):
            tc = t[j - 1]
            if qc > 3 or tc > 3:
                sc = -1
            elif qc == tc:
                sc = match
            else:
                sc = -mismatch
            e = max(e - ge, hleft - goe)
            f = max(F[j] - ge, H[j] - goe)
            h = max(hdiag + sc, max(e, f))
            if mode == 2:
                h = max(h, 0)
            if band >= 0 and abs(i - j) > band:
                h = NEG
                e = NEG
                f = NEG
            hdiag = H[j]
            H[j] = h
            F[j] = f
            hleft = h
            if j % GW == 0 and j < n:
                cck[j // GW - 1, i - 1, 0] = h
                cck[j // GW - 1, i - 1, 1] = e
            if mode == 2:
                if h > bs or (h == bs and (j < bj or (j == bj and i < bi))):
                    bs, bi, bj = h, i, j
        if i % BH == 0 and i < m:
            for j in range(n + 1):
                rck[i // BH - 1, j, 0] = H[j]
                rck[i // BH - 1, j, 1] = F[j]
        if i == m:
            if mode == 1:
                for j in range(1, n + 1):
                    if H[j] > bs:
                        bs, bj = H[j], j
            elif mode == 0:
                bs = H[n]
    # traceback over recomputed blocks
    D = np.empty((BH + 1, GW + 1), np.uint8)
    Hr = np.empty(GW + 1, np.int32)
    Fr = np.empty(GW + 1, np.int32)
    i, j = bi, bj
    state = 0
    nc = 0
    cur_op = 0
    cur_len = 0
    while True:
        if mode == 2:
            if i == 0 or j == 0:
                break
        else:
            if i == 0:
                if mode == 0 and j > 0:
                    nc, cur_op, cur_len = _push(cig, c0, nc, cur_op, cur_len, 2, j)
                    j = 0
                break
            if j == 0:
                nc, cur_op, cur_len = _push(cig, c0, nc, cur_op, cur_len, 1, i)
                i = 0
                break
        r0 = (i - 1) // BH * BH
        cb = (j - 1) // GW * GW
        ncol = j - cb
        for jj in range(ncol + 1):             # row r0, columns cb..j
            jx = cb + jj
            if r0 == 0:
                Hr[jj] = _rowinit(jx, mode, go, ge, band)
                Fr[jj] = NEG
            else:
                Hr[jj] = rck[r0 // BH - 1, jx, 0]
                Fr[jj] = rck[r0 // BH - 1, jx, 1]
        for ii in range(1, i - r0 + 1):
            ix = r0 + ii
            qc = q[ix - 1]
            hdiag = Hr[0]
            if cb == 0:
                hleft = _colinit(ix, mode, go, ge, band)
                e = NEG
            else:
                hleft = cck[cb // GW - 1, ix - 1, 0]
                e = cck[cb // GW - 1, ix - 1, 1]
            Hr[0] = hleft
            for jj in range(1, ncol + 1):
                jx = cb + jj
                tc = t[jx - 1]
                if qc > 3 or tc > 3:
                    sc = -1
                elif qc == tc:
                    sc = match
                else:
                    sc = -mismatch
                ee = e - ge
                eo = hleft - goe
                e = max(ee, eo)
                fe = Fr[jj] - ge
                fo = Hr[jj] - goe
                f = max(fe, fo)
                hd = hdiag + sc
                h = max(hd, max(e, f))
                if mode == 2:
                    h = max(h, 0)
                if mode == 2 and h == 0:
                    d = 3
                elif h == hd:
                    d = 0
                elif h == e:
                    d = 1
                else:
                    d = 2
                if ee > eo:
                    d |= 4
                if fe > fo:
                    d |= 8
                D[ii, jj] = d
                if band >= 0 and abs(ix - jx) > band:
                    h = NEG
                    e = NEG
                    f = NEG
                hdiag = Hr[jj]
                Hr[jj] = h
                Fr[jj] = f
                hleft = h
        stop = False
        while i > r0 and j > cb:
            nib = D[i - r0, j - cb]
            if state == 0:
                dd = nib & 3
                if dd == 3:
                    stop = True
                    break
                if dd == 0:
                    nc, cur_op, cur_len = _push(cig, c0, nc, cur_op, cur_len, 0, 1)
                    i -= 1
                    j -= 1
                else:
                    state = dd
            elif state == 1:
                nc, cur_op, cur_len = _push(cig, c0, nc, cur_op, cur_len, 2, 1)
                j -= 1
                state = 1 if nib & 4 else 0
            else:
                nc, cur_op, cur_len = _push(cig, c0, nc, cur_op, cur_len, 1, 1)
                i -= 1
                state = 2 if nib & 8 else 0
        if stop:
            break
    if cur_len:
        cig[c0 + nc] = (cur_len << 4) | cur_op
        nc += 1
    a, b = c0, c0 + nc - 1
    while a < b:
        x = cig[a]
        cig[a] = cig[b]
        cig[b] = x
        a += 1
        b -= 1
    return bs, bi, bj, i, j, nc


@njit(cache=True, parallel=True)
def _cpu_batch_grid(qc, qoff, tc, toff, mode, match, mismatch, go, ge, band, BH, GW, cig, cig_cap_off, out, sel):
    for k0 in prange(sel.size):
        p = sel[k0]
        r = _align_one_grid(qc[qoff[p]:qoff[p + 1]], tc[toff[p]:toff[p + 1]], mode, match, mismatch,
                            go, ge, band, BH, GW, cig, cig_cap_off[p])
        for k in range(6):
            out[k0, k] = r[k]


@njit(cache=True, parallel=True)
def _cpu_batch(qc, qoff, tc, toff, mode, match, mismatch, go, ge, band, tb, cig, cig_cap_off, out, sel):
    """Pairs sel (prange); out[k] = score, q_end, t_end, q_start, t_start, n_cigar of pair sel[k]."""
    for k0 in prange(sel.size):
        p = sel[k0]
        r = _align_one(qc[qoff[p]:qoff[p + 1]], tc[toff[p]:toff[p + 1]], mode, match, mismatch,
                       go, ge, band, tb, cig, cig_cap_off[p])
        for k in range(6):
            out[k0, k] = r[k]


def _finish(out: np.ndarray, cig_cap: np.ndarray, cap_off: np.ndarray, device: str) -> PairwiseResult:
    counts = out[:, 5].astype(np.int64)
    off = np.zeros(counts.size + 1, np.int64)
    np.cumsum(counts, out=off[1:])
    cig = np.empty(int(off[-1]), np.uint32)
    gather_runs(cig_cap, cap_off, counts, off, cig)
    return PairwiseResult(out[:, 0].copy(), out[:, 1].copy(), out[:, 2].copy(), out[:, 3].copy(),
                          out[:, 4].copy(), cig, off, device)


CPU_GRID_CELLS = 1 << 26           # CPU traceback: pairs with more cells use the gridded (linear-space) walk
CPU_GRID = (256, 256)              # its (BH, GW)


def align_cpu(qc, qoff, tc, toff, mode: int, match, mismatch, go, ge, band, tb, grid=None) -> PairwiseResult:
    """CPU twin over a whole batch (numba, parallel over pairs).

    Traceback: full direction matrix per pair, except pairs of more than CPU_GRID_CELLS cells (or all
    pairs when ``grid=(BH, GW)`` is given; none when ``grid="full"``), which use the gridded walk
    (identical CIGARs)."""
    npairs = qoff.size - 1
    cap = (np.diff(qoff) + np.diff(toff)) if tb else np.zeros(npairs, np.int64)
    cap_off = np.zeros(npairs + 1, np.int64)
    np.cumsum(cap, out=cap_off[1:])
    cig = np.zeros(max(int(cap_off[-1]), 1), np.uint32)
    out = np.zeros((npairs, 6), np.int32)
    big = np.zeros(npairs, bool)
    if tb and grid != "full":
        big = (np.diff(qoff) * np.diff(toff) > CPU_GRID_CELLS) if grid is None else np.ones(npairs, bool)
    if big.any():
        bh, gw = grid or CPU_GRID
        sel = np.flatnonzero(big)
        o2 = np.zeros((sel.size, 6), np.int32)
        _cpu_batch_grid(qc, qoff, tc, toff, mode, match, mismatch, go, ge, band, int(bh), int(gw), cig,
                        cap_off, o2, sel)
        out[sel] = o2
    if not big.all():
        sel = np.flatnonzero(~big)
        o2 = np.zeros((sel.size, 6), np.int32)
        _cpu_batch(qc, qoff, tc, toff, mode, match, mismatch, go, ge, band, bool(tb), cig, cap_off, o2, sel)
        out[sel] = o2
    return _finish(out, cig, cap_off, "cpu")


# ---------------------------------------------------------------------------------------------
# GPU launcher

def choose_config(m: int, tb: bool) -> tuple[int, int]:
    """(LANES, R) for queries of length m.

    Measured on the H100 (docs/BENCHMARKS.md): score only, 150 bp: thread per pair with 32 rows
    of register tiling ~ 8 lanes x 19 rows (1.30 vs 1.25 TCUPS local); 1 kb: 16 lanes x 16 rows
    1.22 vs thread per pair 1.02 TCUPS, hence the switch at INTRA_MIN_M.  With traceback the
    direction words of a lane group are coalesced: 8 lanes x 8 rows beat thread per pair 2x.
    """
    if tb:
        return (8, 8) if m < INTRA_MIN_M else (32, 8)
    if m < INTRA_MIN_M:
        return (1, 32)
    return (16, 16) if m < 4096 else (32, 16)


INTRA16_MIN_M = 384               # 16-bit path: queries at least this long use a lane group
NEG16 = -30000                    # the 16-bit kernels' minus infinity


def fits16(m, n, lanes_r, match, mismatch, go, ge) -> np.ndarray:
    """Per pair: True when every DP value of the 16-bit packed kernel provably stays in (NEG16, 32767].

    Bound (unbanded; rows padded to whole strips of SR = LANES*R rows, columns to the partner's n,
    padding scores -1): every H >= -(2*go + (i + j)*ge) (the all-gap path), E, F, H - go - ge and
    Hdiag + s are at most go + ge + mismatch below that; every H <= match * min(m, n).  The
    substitution profile is signed bytes (match, mismatch <= 127) and the sentinel NEG16 - go - ge
    must not wrap.  Pairs that fail take the 32-bit kernels (never wrapped, never clipped).
    """
    m = np.asarray(m, np.int64)
    n = np.asarray(n, np.int64)
    sr = lanes_r[0] * lanes_r[1]
    mpad = -(-m // sr) * sr
    lo = 4 * go + (mpad + n + 2) * ge + mismatch + 2
    ok = (lo < -NEG16 - 1000) & (match * np.minimum(m, n) <= 32000)
    if match > 127 or mismatch > 127 or go + ge > 2000:
        ok[:] = False
    return ok


def choose_config16(m: int) -> tuple[int, int]:
    """(LANES, R) of the 16-bit kernel for queries of length m (H100 sweeps, docs/BENCHMARKS.md):
    thread per 2 pairs with R in 26..32 rows chosen to waste the fewest padded rows (150 bp: R = 30,
    1.83 / 1.98 TCUPS local / global vs 1.77 / 1.91 with R = 32), 16 lanes x 16 rows from 384 bp."""
    if m >= INTRA16_MIN_M:
        return (16, 16)
    if m <= 0:
        return (1, 32)
    return (1, min(range(32, 25, -1), key=lambda r: (-(-m // r) * r - m, -r)))


def _median(x: np.ndarray, uniform: bool = False) -> int:
    """Median length for choose_config16 (of a regular sample of big arrays: it only picks a kernel shape)."""
    if uniform or x.size == 0:
        return int(x[0]) if x.size else 0
    return int(np.median(x[::max(1, x.size // 65536)]))


def pair_up(plist: np.ndarray, m: np.ndarray) -> np.ndarray:
    """plist sorted by query length -> int32 [A0, B0, A1, B1, ...]: neighbours of equal m share a
    group of the 16-bit kernel; B = -1 where an odd one is left alone."""
    k = plist.size
    if k and m[plist[0]] == m[plist[-1]]:        # one query length (sorted: all equal): neighbours pair up
        o = np.full(2 * ((k + 1) // 2), -1, np.int32)
        o[:k] = plist
        return o
    ms = m[plist]
    idx = np.arange(k)
    start = np.r_[True, ms[1:] != ms[:-1]] if k else np.zeros(0, bool)
    run0 = np.maximum.accumulate(np.where(start, idx, 0)) if k else idx
    even = ((idx - run0) % 2) == 0
    a = idx[even]
    has_b = (a + 1 < k) & (ms[np.minimum(a + 1, k - 1)] == ms[a])
    b = np.where(has_b, plist[np.minimum(a + 1, k - 1)], -1)
    return np.stack([plist[a], b], 1).reshape(-1).astype(np.int32)


TB16_MAX_M = 256                  # pw_tb16: query fits one strip of 32 lanes x R <= 8 rows
TB16_SMEM = 48 << 10              # pw_tb16: direction bytes of one warp (n * 32 * R) at most this; H100,
                                  # tb GCUPS local / global, pw_tb16 vs gridded: 150 bp 575 / 774 vs 347 / 449,
                                  # 200 bp (44.8 KB) 442 / 578 vs 408 / 548, 250 bp (64 KB) 423 / 530 vs 484 / 614
TB16_LIM = 15000                  # pw_tb16: |every DP value| below this (differences fit int16)
TB16_KEY_LIM = 4096               # pw_tb16, local: best-cell keys H * 8 + 7 - row fit int16


def tb16_rows(m) -> np.ndarray:
    """Rows per lane R of pw_tb16 for queries of length m (one strip of 32 * R >= m rows)."""
    return np.maximum(-(-np.asarray(m, np.int64) // 32), 1)


def fits_tb16(m, n, match, mismatch, go, ge, mode=None) -> np.ndarray:
    """Per pair: True when pw_tb16 (16-bit traceback in shared memory) may take it: m <= 256, the
    direction bytes n * 32 * R fit TB16_SMEM, and every DP value, of this pair and of the padded
    cells up to any partner's n (partners are bounded by the same TB16_SMEM), stays inside
    (-TB16_LIM, TB16_LIM): the all-gap lower bound 4*go + (32*R + nmax + 2)*ge + mismatch + 2 and the
    upper bound match * min(m, n) (same argument as ``fits16``, tighter range).  Local mode (mode 2)
    also needs match * min(m, n) < TB16_KEY_LIM: the kernel tracks the best cell as 16-bit keys
    H * 8 + 7 - row."""
    m = np.asarray(m, np.int64)
    n = np.asarray(n, np.int64)
    r = tb16_rows(m)
    sr = 32 * r
    nmax = TB16_SMEM // sr
    ok = (m <= TB16_MAX_M) & (n * sr <= TB16_SMEM)
    lo = 4 * go + (sr + nmax + 2) * ge + mismatch + 2
    ok &= (lo < TB16_LIM) & (match * np.minimum(m, n) < TB16_LIM)
    if mode == MODES["local"]:
        ok &= match * np.minimum(m, n) < TB16_KEY_LIM
    if match > 127 or mismatch > 127:
        ok[:] = False
    return ok


def _all_fit_tb16(mmin, mmax, nmax, match, mismatch, go, ge, mode) -> bool:
    """Whether every pair with mmin <= m <= mmax and n <= nmax passes ``fits_tb16`` (checked at the corners:
    its bounds grow with n and min(m, n), and depend on m otherwise only through R, so each R in the range is
    tried with the longest query it covers)."""
    r = np.arange(int(tb16_rows(mmin)), int(tb16_rows(mmax)) + 1)
    mt = np.minimum(32 * r, mmax)
    return bool(fits_tb16(mt, np.full(mt.size, nmax), match, mismatch, go, ge, mode).all())


def _tb16_batch(cp, get_module, plist, m, n, mode, match, mismatch, go, ge, mem_budget, qd, qoff_d, td, toff_d,
                score_d, qend_d, tend_d, tb_d, cigs, ev0, ev1, npairs, prof=None, whole=False, uniform=False,
                offs=None, stats=None):
    """Traceback of short pairs with pw_tb16 (two pairs per warp, directions in shared memory).
    plist: pairs that pass ``fits_tb16``; their CIGARs go to ``cigs`` (_Cigars).  whole: plist is every pair in
    index order, offs = the host (qoff, toff) and stats = (min m, max m, max n) then; uniform: all pairs have
    the same m and the same n.
    Returns kernel seconds.  prof: a list that receives, per launch, the (groups, 3) int64 cycles of the
    forward pass / the walk / the SM id (TBPROF build)."""
    ktime = 0.0
    mp = m if whole else m[plist]
    np_ = n if whole else n[plist]
    mlo, mhi, nhi = stats if whole else (int(mp.min()), int(mp.max()), int(np_.max()))
    r0, r1 = int(tb16_rows(mlo)), int(tb16_rows(mhi))
    rr = None if r0 == r1 else tb16_rows(mp)
    cig_off_h = None
    for r in range(r0, r1 + 1):
        pl = plist if rr is None else plist[rr == r]
        if pl.size == 0:
            continue
        one = rr is None
        pl = _by_length(pl, m, n, whole and one, uniform)
        order2 = _pairs_in_order(cp, npairs) if whole and one and uniform else pair_up(pl, m)
        G = order2.size // 2
        if whole and one:
            cells = int(offs[0][-1] + offs[1][-1]) * 4
        else:
            cells = int(((mp + np_) * 4).sum()) if one else int(((m[pl] + n[pl]) * 4).sum())
        if cells > mem_budget and not isinstance(order2, np.ndarray):
            order2 = order2.get()
        if cells <= mem_budget:
            bounds = [0, G]                                  # one launch
        else:
            a_ = order2[0::2]
            b_ = order2[1::2]
            bounds = _budget_bounds((m[a_] + n[a_]) * 4 + np.where(b_ >= 0, m[a_] + n[np.maximum(b_, 0)], 0) * 4,
                                    mem_budget)
        defs = _defines(mode, match, mismatch, go, ge, -1, True, 32, r)
        if prof is not None:
            defs["TBPROF"] = 1
        k = get_module("pairwise", defs).get_function("pw_tb16")
        for a, b in zip(bounds[:-1], bounds[1:]):
            o2 = order2[2 * a:2 * b]
            if whole and one and len(bounds) == 2:           # every pair, in order: CIGAR room at qoff + toff
                chunk = None
                if uniform:
                    cig_off_d = cp.arange(npairs, dtype=cp.int64) * (mlo + nhi)
                    co = np.array([0, npairs * (mlo + nhi)], np.int64)
                else:
                    co = offs[0] + offs[1]
                    cig_off_d = pinned.upload(co[:-1])
                nmx, mmx = nhi, mhi
            else:
                o2 = o2 if isinstance(o2, np.ndarray) else o2.get()
                chunk = pl if len(bounds) == 2 else o2[o2 >= 0]
                co = csr(m[chunk] + n[chunk])
                if cig_off_h is None:
                    cig_off_h = np.zeros(npairs, np.int64)
                cig_off_h[chunk] = co[:-1]
                cig_off_d = pinned.upload(cig_off_h)
                nmx, mmx = int(n[chunk].max()), int(m[chunk].max())
            cigd = cp.empty(max(int(co[-1]), 1), cp.uint32)
            smem = nmx * 32 * r + 4 * max(nmx, mmx)          # direction bytes + one word per column
            fit_shared(k, smem)                              # (and per query row, for the walk)
            profd = cp.zeros(3 * (b - a), cp.int64) if prof is not None else cp.zeros(1, cp.int64)
            ev0.record()
            k((b - a,), (32,), (qd, qoff_d, td, toff_d, pinned.upload(o2) if isinstance(o2, np.ndarray) else o2,
                                np.int32(b - a), score_d, qend_d, tend_d, cigd, cig_off_d, tb_d, profd),
              shared_mem=smem)
            ev1.record()
            ev1.synchronize()
            ktime += cp.cuda.get_elapsed_time(ev0, ev1) / 1e3
            if prof is not None:
                prof.append(profd.get().reshape(-1, 3))
            if chunk is None:
                cigs.keep(cigd, cig_off_d, None, tb_d)
            else:
                cigs.keep(cigd, co[:-1], chunk, tb_d)
            del cigd
    return ktime


def _defines(mode, match, mismatch, go, ge, band, tb, lanes, r):
    return dict(LANES=lanes, R=r, MODE=mode, MATCH=match, MISMATCH=mismatch, GO=go, GE=ge,
                TRACE=int(bool(tb)), BAND=band)


def _chain_one(cp, qd, q0, m, td, t0, n, mode, match, mismatch, go, ge, band, r=8, max_warps=None,
               ring_bytes=12 << 30, ck=None):
    """One long pair over many chained warps (score only) -> (score, q_end, t_end).

    ck = (rck, cck, BH, GW): also write the grid checkpoints (pw_chain_ck)."""
    from g3align.kernels.loader import get_module
    mod = get_module("pairwise", _defines(mode, match, mismatch, go, ge, band, False, 32, r))
    f = mod.get_function("pw_chain" if ck is None else "pw_chain_ck")
    dev = cp.cuda.Device()
    nsm = dev.attributes["MultiProcessorCount"]
    try:
        bps = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(f.ptr, 128, 0)
    except Exception:
        bps = 1
    nstrips = -(-m // (32 * r))
    W = min(bps * nsm * 4, 12 * nsm, nstrips, max(1, ring_bytes // (8 * (n + 1))))
    if max_warps:
        W = min(W, max_warps)
    W = max(4, W - W % 4) if W >= 4 else W
    nblocks = -(-W // 4)
    W = nblocks * 4                              # grid is whole blocks of 4 warps; must be co-resident
    ring = cp.empty(W * (n + 1) * 2, cp.int32)
    prog = cp.zeros(nstrips + 1, cp.int32)
    cand = cp.empty(3 * W, cp.int32)
    extra = () if ck is None else (ck[0], ck[1], np.int32(ck[2]), np.int32(ck[3]))
    f((nblocks,), (128,), (qd[q0:q0 + m], np.int32(m), td[t0:t0 + n], np.int32(n), ring, prog, cand) + extra)
    del ring
    c = cand.get().reshape(-1, 3)
    c = c[np.lexsort((c[:, 1], c[:, 2], -c[:, 0].astype(np.int64)))]
    return int(c[0, 0]), int(c[0, 1]), int(c[0, 2])


# Regime 2 (score only): long pairs as (pair, strip) work items of pw_chain_batch over the whole GPU.
# The batch kernels give a long pair one lane group (16 lanes of the 32-bit kernel, 8 of the 16-bit
# one): a few hundred long pairs leave most of the GPU idle for the whole kernel.  Measured on the
# H200 box (docs/BENCHMARKS.md, `gpu_pairwise_bench.py --stages blong`, local, R = 8): pw_chain_batch
# runs at about 400 GCUPS whatever the pair count; the 32-bit batch kernel on 20 kb pairs reaches
# 323 GCUPS at 2 warps per SM and 644 at 4, the 16-bit one on 10 kb pairs 134 at 0.5 and 521 at 2;
# R = 16 lifts pw_chain_batch to 614 (64 x 50 kb), hence the default r = 16 and the switch points
# below (chain while the batch kernels would fill fewer warps per SM than these).
LONG_MIN_M = 8192                 # queries at least this long may take pw_chain_batch
LONG_FILL32 = 4.0                 # ... when the 32-bit batch kernel would run them in fewer warps than this per SM
LONG_FILL16 = 2.0                 # ... the same for pairs that fit the 16-bit kernel
TB_CHAIN_MAX = 16                 # traceback: up to this many pairs of LONG_MIN_M or more go one at a time through
                                  # the chained linear-space path (8 x 30 kb: 0.32 s vs 0.73 s gridded batch,
                                  # 48 x 30 kb: 1.89 s vs 0.75 s)
CHAIN_GROUP_DIV = 64              # pw_chain_batch interleaves groups of W // CHAIN_GROUP_DIV pairs


def chain_items(ns, group: int) -> np.ndarray:
    """Work items of pw_chain_batch for pairs a = 0..P-1 of ns[a] strips -> int32 (K, 4) rows
    (a, strip, prev item, next item), prev / next = the items of strips s-1 / s+1 of pair a (-1: none).

    Pairs are sorted by strip count (descending) and cut into groups of ``group``; a group's items
    are listed strip by strip (strip 0 of each pair, then strip 1, ...), so that ``group`` pairs
    fill the warp pipeline at once instead of one pair's strips behind each other (group 1 is
    pair-major order).  Level s of a group is a prefix of its pairs (descending strip counts), so
    next - k <= group for every item k: the kernel needs group <= W (ring reuse, see pw_chain_batch)."""
    ns = np.asarray(ns, np.int64)
    K = int(ns.sum())
    rank = np.empty(ns.size, np.int64)
    rank[np.argsort(-ns, kind="stable")] = np.arange(ns.size)
    first = np.zeros(ns.size + 1, np.int64)
    np.cumsum(ns, out=first[1:])
    a = np.repeat(np.arange(ns.size), ns)        # pair-major enumeration e: pair a, strip s
    s = np.arange(K) - first[a]
    r = rank[a]
    pos = np.empty(K, np.int64)                  # item index of element e
    pos[np.lexsort((r, s, r // max(int(group), 1)))] = np.arange(K)
    items = np.empty((K, 4), np.int32)
    items[pos, 0] = a
    items[pos, 1] = s
    e = np.arange(K)
    items[pos, 2] = np.where(s > 0, pos[np.maximum(e - 1, 0)], -1)
    items[pos, 3] = np.where(s + 1 < ns[a], pos[np.minimum(e + 1, K - 1)], -1)
    return items


def chain_batch_pairs(m, n, work, nsm: int, match, mismatch, go, ge, band, width="auto", chain=None) -> np.ndarray:
    """Score only: the pairs of ``work`` (sorted indices) that go to pw_chain_batch.

    Queries of CHAIN_MIN_M bases or more always do (all of them in one launch instead of pw_chain one
    after the other); queries of LONG_MIN_M or more when the lane groups the batch kernels would give
    them (16 lanes per pair in 32 bits, 8 in the 16-bit kernel where ``fits16``) fill less than the
    GPU at LONG_FILL32 / LONG_FILL16 warps per SM.  chain=True: every query of LONG_MIN_M or more;
    chain=False: none (the previous routes: batch kernels, pw_chain one pair at a time)."""
    work = np.asarray(work, np.int64)
    if chain is False:
        return work[:0]
    mw = np.asarray(m)[work]
    huge = work[mw >= CHAIN_MIN_M]
    long_ = work[(mw >= LONG_MIN_M) & (mw < CHAIN_MIN_M)]
    if chain is None and long_.size:
        f16 = np.zeros(long_.size, bool)
        if band < 0 and width != 32:
            cfg16 = choose_config16(LONG_MIN_M)
            f16 = fits16(np.asarray(m)[long_], np.asarray(n)[long_], cfg16, match, mismatch, go, ge)
        w32 = (~f16).sum() * choose_config(INTRA_MIN_M, False)[0] / 32
        w16 = f16.sum() * choose_config16(LONG_MIN_M)[0] / 2 / 32
        if w32 / LONG_FILL32 + w16 / LONG_FILL16 >= nsm:
            long_ = long_[:0]
    return np.union1d(huge, long_)


def _chain_batch(cp, qd, qoff, td, toff, plist, mode, match, mismatch, go, ge, band, r=16, max_warps=None,
                 warps_per_sm=12, group=None, ring_bytes=12 << 30, timings=None):
    """Many long pairs (plist: indices into the host CSR offsets qoff / toff, m, n > 0) over W chained,
    co-resident warps (pw_chain_batch, score only) -> int32 arrays score, q_end, t_end in plist order.

    W = warps_per_sm per SM (as _chain_one), at most the occupancy limit, the item count, max_warps
    and ring_bytes of boundary rows (W * (max n + 1) int2); group: pairs interleaved strip by strip
    (chain_items; default W // CHAIN_GROUP_DIV, 1 = pair-major).  timings: receives the kernel
    seconds (chain_batch_s, added up) and the launch shape (chain_batch_W / _group / _items)."""
    from g3align.kernels.loader import get_module
    plist = np.asarray(plist, np.int64)
    m = (qoff[plist + 1] - qoff[plist]).astype(np.int64)
    n = (toff[plist + 1] - toff[plist]).astype(np.int64)
    mod = get_module("pairwise", _defines(mode, match, mismatch, go, ge, band, False, 32, r))
    f = mod.get_function("pw_chain_batch")
    nsm = cp.cuda.Device().attributes["MultiProcessorCount"]
    try:
        bps = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(f.ptr, 128, 0)
    except Exception:
        bps = 1
    ns = -(-m // (32 * r))
    K = int(ns.sum())
    slot = int(n.max()) + 1
    W = min(bps * nsm * 4, warps_per_sm * nsm, K, max(1, ring_bytes // (8 * slot)))
    if max_warps:
        W = min(W, max_warps)
    wpb = min(W, 4)                              # blocks of 4 warps (one smaller block for W < 4)
    W -= W % wpb
    nblocks = W // wpb                           # all co-resident: W <= the occupancy limit
    g = max(1, W // CHAIN_GROUP_DIV) if group is None else min(max(int(group), 1), W)
    items = chain_items(ns, g)
    pinfo = np.stack([qoff[plist], toff[plist], m, n], 1).astype(np.int64)
    ring = cp.empty(W * slot * 2, cp.int32)
    prog = cp.zeros(K, cp.int32)
    cand = cp.empty(3 * K, cp.int32)
    args = (qd, td, cp.asarray(pinfo.reshape(-1)), cp.asarray(items.reshape(-1)), np.int32(K), ring,
            np.int64(slot), prog, cand)
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    ev0.record()
    f((nblocks,), (32 * wpb,), args)
    ev1.record()
    ev1.synchronize()
    if timings is not None:
        timings["chain_batch_s"] = timings.get("chain_batch_s", 0.0) + cp.cuda.get_elapsed_time(ev0, ev1) / 1e3
        timings.update(chain_batch_W=W, chain_batch_group=g, chain_batch_items=K)
    del ring, args
    c = cand.get().reshape(-1, 3).astype(np.int64)
    a = items[:, 0]
    o = np.lexsort((c[:, 1], c[:, 2], -c[:, 0], a))          # per pair: score desc, j asc, i asc
    best = o[np.r_[True, a[o][1:] != a[o][:-1]]]             # first item of each pair (every pair has one)
    return (c[best, 0].astype(np.int32), c[best, 1].astype(np.int32), c[best, 2].astype(np.int32))


def _budget_bounds(cost: np.ndarray, budget: int) -> list:
    """Cut points [0, ..., G] of G items of these costs into runs of at most `budget` each (at least one item)."""
    csum = np.cumsum(cost)
    bounds = [0]
    while bounds[-1] < cost.size:
        a = bounds[-1]
        bounds.append(max(int(np.searchsorted(csum, (csum[a - 1] if a else 0) + budget, side="right")), a + 1))
    return bounds


def _run16(cp, kern, order2, G, n, qd, qoff_d, td, toff_d, score_d, qend_d, tend_d, mem_budget, ev0, ev1, nmax):
    """Launch pw_batch16 over groups (order2: host or device; chunks that fit mem_budget); returns kernel seconds.
    nmax: at least the longest target of the groups (the boundary rows of one launch)."""
    bounds, maxn = ([0, G], [nmax]) if (nmax + 1) * 8 * G <= mem_budget else (None, None)   # one launch
    if bounds is None:
        order2 = order2 if isinstance(order2, np.ndarray) else order2.get()
        a_ = order2[0::2]
        b_ = order2[1::2]
        maxn_g = np.maximum(n[a_], np.where(b_ >= 0, n[np.maximum(b_, 0)], 0))
        bounds = _budget_bounds((maxn_g + 1) * 8, mem_budget)
        maxn = [int(maxn_g[a:b].max()) for a, b in zip(bounds[:-1], bounds[1:])]
    ktime = 0.0
    for (a, b), mx in zip(zip(bounds[:-1], bounds[1:]), maxn):
        g = b - a
        bnd = cp.empty((mx + 1) * g * 2, cp.uint32)
        o2 = order2[2 * a:2 * b]
        o2 = pinned.upload(o2) if isinstance(o2, np.ndarray) else o2
        threads = g * kern.lanes
        ev0.record()
        kern.f((-(-threads // 128),), (128,), (qd, qoff_d, td, toff_d, o2, np.int32(g), bnd, score_d, qend_d, tend_d))
        ev1.record()
        ev1.synchronize()
        ktime += cp.cuda.get_elapsed_time(ev0, ev1) / 1e3
        del bnd
    return ktime


class _K16:
    def __init__(self, f, lanes):
        self.f = f
        self.lanes = lanes


def grid_for_huge(m: int, n: int, budget: int, sr: int = 256) -> tuple[int, int]:
    """(BH, GW) of the linear-space traceback of one m x n pair: the smallest equal-ish grid whose
    checkpoints ((m/BH)*(n+1) + (n/GW)*m int2) fit in budget bytes; BH a multiple of sr."""
    g = sr
    while (m // g) * (n + 1) * 8 + (n // g) * m * 8 > budget:
        g += sr
    return g, g


def _chain_one_tb(cp, qd, q0, m, td, t0, n, mode, match, mismatch, go, ge, band, grid=None,
                  ck_budget=None, timings=None):
    """One huge pair with traceback in linear space (checkpoints + recomputation):
    -> (score, q_end, t_end, q_start, t_start, cigar uint32 array)."""
    from g3align.kernels.loader import get_module
    lanes, r = 32, 8
    sr = lanes * r
    if ck_budget is None:
        cp.get_default_memory_pool().free_all_blocks()
        free = cp.cuda.runtime.memGetInfo()[0]
        ck_budget = max(1 << 28, int(free * 0.45))
    bh, gw = grid if grid is not None else grid_for_huge(m, n, ck_budget, sr)
    bh = -(-bh // sr) * sr
    nrow = max(-(-m // bh) - 1, 0)
    ncol = max(-(-n // gw) - 1, 0)
    rck = cp.empty(max(nrow * (n + 1), 1) * 2, cp.int32)
    cck = cp.empty(max(ncol * m, 1) * 2, cp.int32)
    ev = [cp.cuda.Event() for _ in range(3)]
    ev[0].record()
    s, i, j = _chain_one(cp, qd, q0, m, td, t0, n, mode, match, mismatch, go, ge, band, r=r,
                         ring_bytes=min(12 << 30, int(cp.cuda.runtime.memGetInfo()[0] * 0.5)),
                         ck=(rck, cck, bh, gw))
    ev[1].record()
    mod = get_module("pairwise", _defines(mode, match, mismatch, go, ge, band, True, lanes, r))
    f = mod.get_function("pw_tb")
    z64 = cp.zeros(1, cp.int64)
    sbnd = cp.empty((gw + 1) * 2, cp.int32)
    smem = (bh // sr) * (gw + lanes - 1) * lanes * 4
    if smem <= 200 << 10:                       # the block's direction words in shared memory
        sdir = np.uint64(0)
        f.max_dynamic_shared_size_bytes = max(smem, f.max_dynamic_shared_size_bytes)
    else:
        sdir = cp.empty(smem // 4, cp.uint32)
        smem = 0
    cig = cp.empty(m + n, cp.uint32)
    tbo = cp.zeros(3, cp.int32)
    qoff1 = cp.asarray(np.array([0, m], np.int64))
    toff1 = cp.asarray(np.array([0, n], np.int64))
    f((1,), (lanes,), (qd[q0:q0 + m], qoff1, td[t0:t0 + n], toff1, cp.zeros(1, cp.int32), np.int32(1),
                       np.int32(bh), np.int32(gw), rck, z64, cck, z64, sbnd, sdir,
                       cp.asarray(np.array([i], np.int32)), cp.asarray(np.array([j], np.int32)), cig, z64, tbo),
      shared_mem=smem)
    ev[2].record()
    ev[2].synchronize()
    tbh = tbo.get()
    cg = cig[:int(tbh[2])].get()
    if timings is not None:
        timings["huge_forward_s"] = timings.get("huge_forward_s", 0.0) + cp.cuda.get_elapsed_time(ev[0], ev[1]) / 1e3
        timings["huge_tb_s"] = timings.get("huge_tb_s", 0.0) + cp.cuda.get_elapsed_time(ev[1], ev[2]) / 1e3
        timings["huge_grid"] = (bh, gw)
        timings["huge_ck_bytes"] = int((rck.size + cck.size) * 4)
    del rck, cck
    return s, i, j, int(tbh[0]), int(tbh[1]), cg


TB_SMEM_MAX = 100 << 10            # pw_tb: block direction words in shared memory up to this per CTA


def _grid_batch(cp, get_module, plist, fcfg, tcfg, grid, m, n, mode, match, mismatch, go, ge, band, mem_budget,
                qd, qoff_d, td, toff_d, score_d, qend_d, tend_d, tb_d, cigs, ev0, ev1, npairs,
                timings=None, f16=False):
    """Gridded traceback of many pairs: pw_batch_ck (forward config fcfg, score only + checkpoints),
    then pw_tb (config tcfg) recomputing the blocks along each path.  f16: every pair passes ``fits16``
    for fcfg and the forward pass is pw_batch16_ck (two pairs of equal m per group, same checkpoints).
    Returns kernel seconds; adds the forward / traceback split to timings["grid_fwd_s"] / ["grid_tb_s"]."""
    sr_f, sr_t = fcfg[0] * fcfg[1], tcfg[0] * tcfg[1]
    # default block width (H100 sweep, docs/BENCHMARKS.md): 64 columns for short pairs, 256 from INTRA_MIN_M
    bh0, gw = grid if grid is not None else (0, 64 if int(m[plist[0]]) < INTRA_MIN_M else 256)
    bh = int(np.lcm(sr_f, sr_t))
    bh = max(bh, -(-int(bh0) // bh) * bh)
    fmod = get_module("pairwise", _defines(mode, match, mismatch, go, ge, band, False, *fcfg))
    tmod = get_module("pairwise", _defines(mode, match, mismatch, go, ge, band, True, *tcfg))
    fk = fmod.get_function("pw_batch16_ck" if f16 else "pw_batch_ck")
    tk = tmod.get_function("pw_tb")
    mm, nn = m[plist], n[plist]
    nrck = np.maximum(-(-mm // bh) - 1, 0) * (nn + 1)
    ncck = np.maximum(-(-nn // gw) - 1, 0) * mm
    scratch = (gw + 1) * 8 + (bh // sr_t) * (gw + tcfg[0] - 1) * tcfg[0] * 4
    cost = (nn + 1) * 8 + (nrck + ncck) * 8 + (mm + nn) * 4 + scratch
    csum = np.cumsum(cost)
    rck_off_h = np.zeros(npairs, np.int64)
    cck_off_h = np.zeros(npairs, np.int64)
    cig_off_h = np.zeros(npairs, np.int64)
    ktime = 0.0
    a = 0
    while a < plist.size:
        b = max(int(np.searchsorted(csum, (csum[a - 1] if a else 0) + mem_budget, side="right")), a + 1)
        chunk = plist[a:b]
        G = chunk.size
        ro = np.zeros(G + 1, np.int64)
        np.cumsum(nrck[a:b], out=ro[1:])
        co = np.zeros(G + 1, np.int64)
        np.cumsum(ncck[a:b], out=co[1:])
        go_ = np.zeros(G + 1, np.int64)
        np.cumsum(mm[a:b] + nn[a:b], out=go_[1:])
        rck_off_h[chunk] = ro[:-1]
        cck_off_h[chunk] = co[:-1]
        cig_off_h[chunk] = go_[:-1]
        rck = cp.empty(max(int(ro[-1]), 1) * 2, cp.int32)
        cck = cp.empty(max(int(co[-1]), 1) * 2, cp.int32)
        rck_off = cp.asarray(rck_off_h)
        cck_off = cp.asarray(cck_off_h)
        order = cp.asarray(chunk.astype(np.int32))
        if f16:
            forder = pair_up(chunk, m)
            FG = forder.size // 2
            forder = cp.asarray(forder)
        else:
            forder, FG = order, G
        bnd = cp.empty((int(nn[a:b].max()) + 1) * FG * 2, cp.int32)
        ev0.record()
        fk((-(-FG * fcfg[0] // 128),), (128,), (qd, qoff_d, td, toff_d, forder, np.int32(FG), bnd, score_d, qend_d,
                                               tend_d, rck, rck_off, cck, cck_off, np.int32(bh), np.int32(gw)))
        evm = cp.cuda.Event()
        evm.record()
        del bnd
        sbnd = cp.empty(G * (gw + 1) * 2, cp.int32)
        gwords = (bh // sr_t) * (gw + tcfg[0] - 1) * tcfg[0]
        smem = (128 // tcfg[0]) * gwords * 4
        if smem <= TB_SMEM_MAX:          # direction words of the block in shared memory
            sdir = np.uint64(0)
            tk.max_dynamic_shared_size_bytes = max(smem, tk.max_dynamic_shared_size_bytes)
        else:
            sdir = cp.empty(G * gwords, cp.uint32)
            smem = 0
        cigd = cp.empty(max(int(go_[-1]), 1), cp.uint32)
        tk((-(-G * tcfg[0] // 128),), (128,), (qd, qoff_d, td, toff_d, order, np.int32(G), np.int32(bh),
                                              np.int32(gw), rck, rck_off, cck, cck_off, sbnd, sdir, qend_d,
                                              tend_d, cigd, cp.asarray(cig_off_h), tb_d), shared_mem=smem)
        ev1.record()
        ev1.synchronize()
        ktime += cp.cuda.get_elapsed_time(ev0, ev1) / 1e3
        if timings is not None:
            timings["grid_fwd_s"] = timings.get("grid_fwd_s", 0.0) + cp.cuda.get_elapsed_time(ev0, evm) / 1e3
            timings["grid_tb_s"] = timings.get("grid_tb_s", 0.0) + cp.cuda.get_elapsed_time(evm, ev1) / 1e3
        cigs.keep(cigd, go_[:-1], chunk, tb_d)
        del rck, cck, sbnd, sdir, cigd
        a = b
    return ktime


def _device_csr(cp, counts):
    """int64 CSR offsets [0, c0, c0 + c1, ...] of device counts, on the device."""
    off = cp.zeros(counts.size + 1, cp.int64)
    off[1:] = cp.cumsum(counts, dtype=cp.int64)
    return off


class _Cigars:
    """CIGARs made on the GPU, kept compacted per launch until the end of a call: the kernels write each pair's
    runs into room for m + n of them; ``keep`` packs a launch's pairs right after it (pw_gather_runs), so that only
    the runs themselves stay on the device and come back, and ``assemble`` puts every pair's runs in pair order."""

    def __init__(self, cp):
        self.cp = cp
        self.parts: list = []           # (pairs int64, runs uint32, their offsets int64, counts int32), device

    def _gather(self, src, src_off, cnt, dst_off, dst):
        from g3align.kernels.loader import get_module
        G = int(cnt.size)
        if G:
            get_module("pwio").get_function("pw_gather_runs")(
                (-(-G // 256),), (256,), (src, src_off, cnt, np.int32(1), dst_off, dst, np.int32(G)))

    def keep(self, cigd, src_off, pairs, tb_d) -> None:
        """Pairs (host indices; None: every pair, in order) whose runs are in cigd from src_off (per pair, same
        order; host or device); counts from tb_d (q_start, t_start, count per pair)."""
        cp = self.cp
        if pairs is None:
            pairs_d = None
            cnt = tb_d.reshape(-1, 3)[:, 2].copy()
        else:
            pairs_d = pinned.upload(np.asarray(pairs, np.int64))
            cnt = tb_d.reshape(-1, 3)[pairs_d, 2]
        off = _device_csr(cp, cnt)
        runs = cp.empty(max(int(off[-1]), 1), cp.uint32)
        src = pinned.upload(np.asarray(src_off, np.int64)) if isinstance(src_off, np.ndarray) else src_off
        self._gather(cigd, src, cnt, off, runs)
        self.parts.append((pairs_d, runs, off, cnt))

    def keep_host(self, pairs, runs_list) -> None:
        """CIGARs made on the host (pairs with an empty side, huge pairs): pairs and a list of uint32 arrays."""
        cp = self.cp
        cnt = np.array([r.size for r in runs_list], np.int32)
        off = csr(cnt)
        runs = np.concatenate(runs_list) if runs_list else np.zeros(0, np.uint32)
        self.parts.append((cp.asarray(np.asarray(pairs, np.int64)), cp.asarray(np.r_[runs, np.zeros(1, np.uint32)]),
                           cp.asarray(off), cp.asarray(cnt)))

    def assemble(self, counts):
        """(runs uint32, offsets int64[n+1]) on the device, pairs in order; counts: int32 runs per pair (device)."""
        cp = self.cp
        off = _device_csr(cp, counts)
        cig = cp.empty(max(int(off[-1]), 1), cp.uint32)
        for pairs_d, runs, roff, cnt in self.parts:
            self._gather(runs, roff, cnt, off if pairs_d is None else off[pairs_d], cig)
        return cig[:int(off[-1])], off


def _pairs_in_order(cp, k: int):
    """pair_up of every pair in index order when all have one query length, made on the device: int32
    [0, 1, 2, ..., k - 1] and a -1 for an odd k."""
    o = cp.arange(2 * ((k + 1) // 2), dtype=cp.int32)
    if k % 2:
        o[k] = -1
    return o


def _by_length(plist, m, n, whole: bool = False, uniform: bool = False):
    """plist ordered by (query length, target length) (the batch kernels' grouping): unchanged when already so,
    else sorted on the GPU for big lists (any order of equal keys gives the same results). whole: plist is every
    pair in index order (m, n used as they are); uniform: every pair has the same m and the same n."""
    if plist.size < 2 or uniform:
        return plist
    mp, np_ = (m, n) if whole else (m[plist], n[plist])
    key = (mp.astype(np.int64) << 32) | np_
    if np.all(key[1:] >= key[:-1]):
        return plist
    if plist.size >= 1 << 15:
        import cupy as cp
        return plist[cp.argsort(cp.asarray(key)).get()]
    return plist[np.argsort(key, kind="stable")]


def align_gpu(qc, qoff, tc, toff, mode: int, match, mismatch, go, ge, band, tb, config=None,
              mem_budget: int = 6 << 30, timings: dict | None = None, width="auto",
              config16=None, tb_method="grid", grid=None, tb16_prof=None, chain_batch=None,
              output: str = "numpy", lens=None) -> PairwiseResult:
    """GPU path over CSR codes (numpy or CuPy; offsets numpy); pairs with an empty side go through the CPU
    twin's closed forms.  output="cupy" leaves the result arrays on the device.

    Score-only, unbanded pairs whose DP values provably fit int16 (``fits16``) run in the 16-bit
    packed DPX kernel unless ``width=32``; ``width=16`` only forbids nothing extra (pairs that do
    not fit still run 32-bit).  ``config`` / ``config16`` force (LANES, R) of the 32 / 16-bit kernel.
    Traceback: unbanded pairs with m <= 256 that pass ``fits_tb16`` run in ``pw_tb16`` (16-bit, two
    pairs per warp, the direction bits of the whole pair in shared memory, walked in the same
    kernel) unless ``width=32``, ``config`` or ``grid`` is given.  The others:
    ``tb_method="grid"`` (default) stores grid checkpoints in the forward pass (rows every
    BH, columns every GW cells; ``grid=(BH, GW)``, BH rounded up to a multiple of the strip height)
    and recomputes the blocks near the path; ``"full"`` keeps the whole 4-bit direction matrix.
    Queries of CHAIN_MIN_M bases or more use the chained kernel, with traceback in linear space.
    Score only (no ``config``): those and, where the batch kernels would underfill the GPU, queries of
    LONG_MIN_M or more go to pw_chain_batch (``chain_batch_pairs``; ``chain_batch=True`` / ``False``
    forces all of them / none, the latter being the previous routes).
    Results stay on the device until the end of the call (CIGARs compacted there, _Cigars) and come back in
    one copy per array.  timings (if given) receives seconds: upload_s (inputs to the device), route_s (host
    work choosing kernels and orders), kernel_s (CUDA events around the launches), download_s (results back),
    and the pair counts of each route.
    """
    import time

    import cupy as cp

    from g3align.kernels.loader import get_module

    tim = timings if timings is not None else {}

    def add(key, t0):
        tim[key] = tim.get(key, 0.0) + time.perf_counter() - t0

    t0 = time.perf_counter()
    npairs = qoff.size - 1
    m, n, mmin, mmax, nmin, nmax = lens if lens is not None else _length_stats(np.diff(qoff), np.diff(toff))
    uniform = mmin == mmax and nmin == nmax      # one query length and one target length
    qd = qc if not isinstance(qc, np.ndarray) else pinned.upload(qc)
    td = tc if not isinstance(tc, np.ndarray) else pinned.upload(tc)
    if uniform:                                  # offsets k * length, made on the device
        qoff_d = cp.arange(npairs + 1, dtype=cp.int64) * mmin
        toff_d = cp.arange(npairs + 1, dtype=cp.int64) * nmin
    else:
        qoff_d = pinned.upload(qoff)
        toff_d = pinned.upload(toff)
    add("upload_s", t0)
    t0 = time.perf_counter()
    res = cp.zeros((6, npairs), cp.int32)      # score, q_end, t_end, q_start, t_start, CIGAR runs
    score_d, qend_d, tend_d = res[0], res[1], res[2]
    res[3] = -1 if mode == 2 else 0            # the starts without traceback (see the module docstring)
    res[4] = 0 if mode == 0 else -1
    cigs = _Cigars(cp)
    tb_d = cp.zeros(3 * npairs, cp.int32) if tb else None   # q_start, t_start, runs of the batch routes' pairs
    tb_pairs: list = []

    whole = mmin > 0 and nmin > 0              # no empty side: work is every pair, in order
    work = _scratch("work", npairs, np.arange) if whole else np.flatnonzero((m > 0) & (n > 0))
    empty = np.zeros(0, np.int64) if whole else np.flatnonzero((m == 0) | (n == 0))
    if empty.size:
        qh = qc if isinstance(qc, np.ndarray) else None
        th = tc if isinstance(tc, np.ndarray) else None
        eo = np.zeros((empty.size, 6), np.int32)
        runs = []
        for k_, p in enumerate(empty):
            c1 = np.zeros(int(m[p] + n[p]) + 1, np.uint32)
            q1 = qh[qoff[p]:qoff[p + 1]] if qh is not None else qd[int(qoff[p]):int(qoff[p + 1])].get()
            t1 = th[toff[p]:toff[p + 1]] if th is not None else td[int(toff[p]):int(toff[p + 1])].get()
            eo[k_] = _align_one(q1, t1, mode, match, mismatch, go, ge, band, bool(tb), c1, 0)
            runs.append(c1[:eo[k_, 5]])
        res[:, cp.asarray(empty)] = cp.asarray(np.ascontiguousarray(eo.T))
        if tb:
            cigs.keep_host(empty, runs)
    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    ktime = 0.0
    if work.size == 0:
        add("route_s", t0)
        return _finish_gpu(cp, res, cigs, tb, output, tim)

    huge = work[:0]
    cbatch = work[:0]
    if mmax >= LONG_MIN_M:
        huge = work[m[work] >= CHAIN_MIN_M] if config is None else work[:0]
        if tb and config is None:
            long_tb = work[m[work] >= LONG_MIN_M]
            if long_tb.size <= TB_CHAIN_MAX:
                huge = long_tb
        if not tb and config is None:
            nsm = cp.cuda.Device().attributes["MultiProcessorCount"]
            cbatch = chain_batch_pairs(m, n, work, nsm, match, mismatch, go, ge, band, width, chain_batch)
            huge = np.setdiff1d(huge, cbatch, assume_unique=True)
    if cbatch.size:
        timc: dict = {}
        s_, i_, j_ = _chain_batch(cp, qd, qoff, td, toff, cbatch, mode, match, mismatch, go, ge, band, timings=timc)
        res[:3, cp.asarray(cbatch)] = cp.asarray(np.stack([s_, i_, j_]))
        ktime += timc["chain_batch_s"]
        tim["pairs_chain_batch"] = tim.get("pairs_chain_batch", 0) + int(cbatch.size)
        tim.update((k_, v_) for k_, v_ in timc.items() if not k_.endswith("_s"))
    huge_runs = []
    for p in huge:
        if tb:
            tim1: dict = {}
            s, i, j, qs_, ts_, cg = _chain_one_tb(cp, qd, int(qoff[p]), int(m[p]), td, int(toff[p]), int(n[p]),
                                                 mode, match, mismatch, go, ge, band, grid=grid, timings=tim1)
            ktime += tim1["huge_forward_s"] + tim1["huge_tb_s"]
            for k_, v_ in tim1.items():
                tim[k_] = tim.get(k_, 0.0) + v_ if k_.endswith("_s") else v_
            res[:, int(p)] = cp.asarray(np.array([s, i, j, qs_, ts_, cg.size], np.int32))
            huge_runs.append(cg)
            continue
        ev0.record()
        s, i, j = _chain_one(cp, qd, int(qoff[p]), int(m[p]), td, int(toff[p]), int(n[p]),
                             mode, match, mismatch, go, ge, band)
        ev1.record()
        ev1.synchronize()
        ktime += cp.cuda.get_elapsed_time(ev0, ev1) / 1e3
        res[:3, int(p)] = cp.asarray(np.array([s, i, j], np.int32))
    if tb and huge.size:
        cigs.keep_host(huge, huge_runs)
    batch = work
    if huge.size or cbatch.size:
        batch = np.setdiff1d(work, np.union1d(huge, cbatch), assume_unique=True)
        whole = False
    use16 = np.zeros(0, np.int64)
    sets16: dict = {}
    if not tb and band < 0 and width != 32 and batch.size:
        short = batch[m[batch] < INTRA16_MIN_M] if mmin < INTRA16_MIN_M <= mmax else (
            batch if mmax < INTRA16_MIN_M else batch[:0])
        long_ = batch[m[batch] >= INTRA16_MIN_M] if mmin < INTRA16_MIN_M <= mmax else (
            batch if mmin >= INTRA16_MIN_M else batch[:0])
        ok = np.zeros(batch.size, bool)
        for part in (short, long_):
            if part.size:
                all_ = part.size == batch.size
                mp = m if whole and all_ else m[part]
                cfg16 = tuple(config16) if config16 is not None else choose_config16(_median(mp, mmin == mmax))
                if fits16(mp.max(keepdims=True), (n if whole and all_ else n[part]).max(keepdims=True), cfg16,
                          match, mismatch, go, ge)[0]:
                    sel = part                          # the bound grows with m and n: the largest pair decides
                else:
                    sel = part[fits16(mp, n[part], cfg16, match, mismatch, go, ge)]
                sets16.setdefault(cfg16, []).append(sel)
                if sel.size == batch.size:
                    ok = None
                else:
                    ok[np.searchsorted(batch, sel)] = True
        if ok is None:                                   # every pair in 16 bits
            use16, batch = batch, batch[:0]
        else:
            use16 = batch[ok]
            batch = batch[~ok]
    usetb16 = np.zeros(0, np.int64)
    if tb and band < 0 and width != 32 and tb_method == "grid" and grid is None and config is None and batch.size:
        if mmax <= TB16_MAX_M and _all_fit_tb16(max(mmin, 1), mmax, nmax, match, mismatch, go, ge, mode):
            usetb16, batch = batch, batch[:0]
        else:
            ok = fits_tb16(m[batch], n[batch], match, mismatch, go, ge, mode)
            usetb16 = batch[ok]
            batch = batch[~ok]
        use16 = usetb16
    tim["pairs16"] = tim.get("pairs16", 0) + int(use16.size)
    tim["pairs32"] = tim.get("pairs32", 0) + int(batch.size + huge.size + cbatch.size)
    dummy_u32 = cp.zeros(1, cp.uint32)
    dummy_i64 = cp.zeros(1, cp.int64)
    dummy_i32 = cp.zeros(1, cp.int32)
    add("route_s", t0)

    if usetb16.size:
        ktime += _tb16_batch(cp, get_module, usetb16, m, n, mode, match, mismatch, go, ge, mem_budget, qd, qoff_d, td,
                             toff_d, score_d, qend_d, tend_d, tb_d, cigs, ev0, ev1, npairs, prof=tb16_prof,
                             whole=whole and usetb16.size == npairs, uniform=uniform, offs=(qoff, toff),
                             stats=(mmin, mmax, nmax))
        tb_pairs.append(usetb16)
    elif use16.size:
        for (lanes, r), parts in sets16.items():
            plist = parts[0] if len(parts) == 1 else np.concatenate(parts)
            if plist.size == 0:
                continue
            every = whole and plist.size == npairs
            plist = _by_length(plist, m, n, every, uniform)
            order2 = _pairs_in_order(cp, npairs) if every and uniform else pair_up(plist, m)
            mod = get_module("pairwise", _defines(mode, match, mismatch, go, ge, -1, False, lanes, r))
            kern = _K16(mod.get_function("pw_batch16"), lanes)
            ktime += _run16(cp, kern, order2, order2.size // 2, n, qd, qoff_d, td, toff_d, score_d, qend_d,
                            tend_d, mem_budget, ev0, ev1, nmax=nmax)

    if config is not None:
        if tb and config[1] > 8:
            raise ValueError("traceback kernels keep R <= 8 rows per lane (4 direction bits each)")
        groups = {tuple(config): batch}
    else:
        intra = m[batch] >= INTRA_MIN_M
        groups = {choose_config(0, tb): batch[~intra], choose_config(INTRA_MIN_M, tb): batch[intra]}
    for (lanes, r), plist in groups.items():
        if plist.size == 0:
            continue
        plist = _by_length(plist, m, n, whole and plist.size == npairs, uniform)
        if tb:
            tb_pairs.append(plist)
        if tb and tb_method == "grid":
            fcfg = choose_config(int(m[plist[0]]), False) if config is None else (lanes, r)
            parts = [(plist, fcfg, False)]
            if config is None and band < 0 and width != 32 and int(m[plist[-1]]) < 4096:
                # the forward pass in 16 bits where it provably fits (fits16), with the strip height of
                # the 32-bit config (1 x 32 rows below INTRA_MIN_M, else 16 x 16), so the grid is unchanged;
                # pw_tb recomputes the blocks in 32 bits either way.  Not from 4 kb: there the checkpoints
                # cap a chunk at about 1000 pairs, i.e. 500 groups of 16 lanes, too few warps to fill the
                # GPU (10k x 10 kb: 2.5 s forward vs 1.1 s for the 32-bit kernel with 32 lanes per pair)
                cfg16 = (1, 32) if int(m[plist[0]]) < INTRA_MIN_M else (16, 16)
                ok = fits16(m[plist], n[plist], cfg16, match, mismatch, go, ge)
                parts = [(plist[~ok], fcfg, False), (plist[ok], cfg16, True)]
                tim["pairs16_grid"] = tim.get("pairs16_grid", 0) + int(ok.sum())
            for pl, fc, f16 in parts:
                if pl.size:
                    ktime += _grid_batch(cp, get_module, pl, fc, (lanes, r), grid, m, n, mode, match, mismatch, go,
                                         ge, band, mem_budget, qd, qoff_d, td, toff_d, score_d, qend_d, tend_d, tb_d,
                                         cigs, ev0, ev1, npairs, timings=tim, f16=f16)
            continue
        mod = get_module("pairwise", _defines(mode, match, mismatch, go, ge, band, tb, lanes, r))
        kern = mod.get_function("pw_batch")
        sr = lanes * r
        nstr = -(-m[plist] // sr)
        dir_words = nstr * (n[plist] + lanes - 1) * lanes if tb else np.zeros(plist.size, np.int64)
        cost = (n[plist] + 1) * 8 + dir_words * 4 + (m[plist] + n[plist]) * 4 * bool(tb)
        csum = np.cumsum(cost)
        dir_off_h = np.zeros(npairs, np.int64) if tb else None
        cig_off_h = np.zeros(npairs, np.int64) if tb else None
        a = 0
        while a < plist.size:
            b = int(np.searchsorted(csum, (csum[a - 1] if a else 0) + mem_budget, side="right"))
            b = max(b, a + 1)
            chunk = plist[a:b]
            G = chunk.size
            maxn = int(n[chunk].max())
            bnd = cp.empty((maxn + 1) * G * 2, cp.int32)
            order = cp.asarray(chunk.astype(np.int32))
            if tb:
                do = csr(dir_words[a:b])
                dir_off_h[chunk] = do[:-1]
                co = csr(m[chunk] + n[chunk])
                cig_off_h[chunk] = co[:-1]
                dirs = cp.empty(max(int(do[-1]), 1), cp.uint32)
                cigd = cp.empty(max(int(co[-1]), 1), cp.uint32)
                args_tb = (dirs, cp.asarray(dir_off_h), cigd, cp.asarray(cig_off_h), tb_d)
            else:
                args_tb = (dummy_u32, dummy_i64, dummy_u32, dummy_i64, dummy_i32)
            threads = G * lanes
            ev0.record()
            kern((-(-threads // 128),), (128,),
                 (qd, qoff_d, td, toff_d, order, np.int32(G), bnd, score_d, qend_d, tend_d) + args_tb)
            ev1.record()
            ev1.synchronize()
            ktime += cp.cuda.get_elapsed_time(ev0, ev1) / 1e3
            if tb:
                cigs.keep(cigd, co[:-1], chunk, tb_d)
                del dirs, cigd
            del bnd
            a = b
    if tb and tb_pairs:
        if whole and len(tb_pairs) == 1 and tb_pairs[0].size == npairs:
            res[3:6] = tb_d.reshape(-1, 3).T
        else:
            sel = pinned.upload(np.concatenate(tb_pairs) if len(tb_pairs) > 1 else tb_pairs[0])
            res[3:6, sel] = tb_d.reshape(-1, 3)[sel].T
    tim["kernel_s"] = tim.get("kernel_s", 0.0) + ktime
    return _finish_gpu(cp, res, cigs, tb, output, tim)


def _finish_gpu(cp, res, cigs, tb, output, tim) -> PairwiseResult:
    """The device results -> PairwiseResult (numpy, or CuPy for output="cupy")."""
    import time

    t0 = time.perf_counter()
    if tb:
        cig, off = cigs.assemble(res[5])
    else:
        cig, off = cp.zeros(0, cp.uint32), cp.zeros(res.shape[1] + 1, cp.int64)
    if output == "cupy":
        cp.cuda.get_current_stream().synchronize()
        tim["assemble_s"] = tim.get("assemble_s", 0.0) + time.perf_counter() - t0
        return PairwiseResult(res[0], res[1], res[2], res[3], res[4], cig, off, "gpu")
    h = pinned.to_host(res)                    # (in pinned memory of CuPy's pool: no copy out of it)
    if tb:
        cig_h, off_h = pinned.to_host(cig), pinned.to_host(off)
    else:
        cig_h, off_h = np.zeros(0, np.uint32), np.zeros(res.shape[1] + 1, np.int64)
    tim["download_s"] = tim.get("download_s", 0.0) + time.perf_counter() - t0
    return PairwiseResult(h[0], h[1], h[2], h[3], h[4], cig_h, off_h, "gpu")


# ---------------------------------------------------------------------------------------------
# public API

def align_pairs(queries, targets, mode: str = "global", match: int = 1, mismatch: int = 4,
                gap_open: int = 6, gap_extend: int = 1, traceback: bool = False, band=None,
                device: str = "auto", output: str = "numpy", timings: dict | None = None, **kw) -> PairwiseResult:
    """Align queries[k] against targets[k] for every k (see the module docstring for conventions).

    queries, targets: lists of str (or bytes), ``(codes, offsets)`` CSR arrays (numpy or CuPy; codes uint8
    0..4) or ``Packed2`` (2-bit packed, see ``pack2``); aligner/pairwise/pwio.py.
    mode: 'global' | 'semiglobal' (whole query inside the target; parasail sg_dx) | 'local'.
    match, mismatch: positive score / penalty; N scores -1.  gap of length L costs
    gap_open + L*gap_extend (gap_open=0: linear).  traceback: also starts and CIGARs.
    band: None or w >= 0 (cells |i-j| > w unreachable).  device: 'auto' | 'gpu' | 'cpu'.
    output: 'numpy' | 'cupy' (the GPU path's arrays left on the device).  timings: a dict that receives where
    the time went (encode_s, upload_s, route_s, kernel_s, download_s; GPU path).
    Returns a PairwiseResult of numpy (or CuPy) arrays.
    """
    import time

    if mode not in MODES:
        raise ValueError(f"mode must be one of {sorted(MODES)}, not {mode!r}")
    md = MODES[mode]
    match, mismatch, gap_open, gap_extend = int(match), int(mismatch), int(gap_open), int(gap_extend)
    if match < 1 or mismatch < 1 or gap_open < 0 or gap_extend < 1:
        raise ValueError("need match >= 1, mismatch >= 1, gap_open >= 0, gap_extend >= 1")
    if max(match, mismatch, gap_open, gap_extend) > 10000:
        raise ValueError("scores above 10000 are not supported")
    if device not in ("auto", "gpu", "cpu"):
        raise ValueError("device must be auto, gpu or cpu")
    if output not in ("numpy", "cupy"):
        raise ValueError("output must be numpy or cupy")
    use_gpu = device == "gpu" or (device == "auto" and gpu_available())
    if device == "gpu" and not gpu_available():
        raise RuntimeError("device='gpu' but no CUDA device / cupy is available")
    if output == "cupy" and not use_gpu:
        raise ValueError("output='cupy' needs the GPU path")
    tim = timings if timings is not None else {}
    t0 = time.perf_counter()
    slabs = None
    if use_gpu:
        hq, ht = host_form(queries, "query"), host_form(targets, "target")
        if (hq is not None and ht is not None and hq[0] == ht[0] == "codes" and not kw
                and int(hq[2][-1] + ht[2][-1]) > 2 * SLAB_BYTES):
            slabs = (hq, ht)                          # host arrays: uploads overlap the alignment, slab by slab
            qoff, toff = hq[2], ht[2]
        else:
            qc, qoff = device_codes(queries, "query")
            tc, toff = device_codes(targets, "target")
    else:
        qc, qoff = host_codes(queries, "query")
        tc, toff = host_codes(targets, "target")
    tim["encode_s"] = tim.get("encode_s", 0.0) + time.perf_counter() - t0
    if qoff.size != toff.size:
        raise ValueError(f"{qoff.size - 1} queries but {toff.size - 1} targets: pairs are taken by "
                         "order, the lists must have equal length")
    lens = _length_stats(_lengths(qoff, "m"), _lengths(toff, "n"))
    m, n = lens[0], lens[1]
    if m.size:
        for what, lo in (("query", lens[2]), ("target", lens[4])):
            if lo < 0:
                raise ValueError(f"{what} offsets are not a valid CSR offsets array")
        bound = (lens[3] + lens[5]) * max(match, mismatch, gap_extend) + 2 * gap_open
        if bound >= SCORE_LIMIT:
            bound = int((m + n).max()) * max(match, mismatch, gap_extend) + 2 * gap_open
        if bound >= SCORE_LIMIT:
            raise ValueError(f"scores could reach {bound}, beyond the 32-bit kernels' range "
                             f"({SCORE_LIMIT}); split the sequences")
    bw = -1
    if band is not None:
        bw = int(band)
        if bw < 0:
            raise ValueError("band must be >= 0")
        if md == 0 and np.any(np.abs(m - n) > bw):
            raise ValueError("global alignment with band: every pair needs |len(q) - len(t)| <= band")
        if md == 1 and np.any(m > n + bw):
            raise ValueError("semiglobal alignment with band: every pair needs len(q) <= len(t) + band")
    if slabs is not None:
        return _align_slabs(*slabs, m, n, md, match, mismatch, gap_open, gap_extend, bw, bool(traceback), output,
                            tim)
    args = (qc, qoff, tc, toff, md, match, mismatch, gap_open, gap_extend, bw, bool(traceback))
    if use_gpu:
        return align_gpu(*args, output=output, timings=tim, lens=lens, **kw)
    return align_cpu(*args, grid=kw.get("grid"))


_SCRATCH = threading.local()   # per thread: arrays reused by the next call (fresh pages cost on a VM: ~1 ms a 8 MB)


def _scratch(key: str, size: int, fill=None) -> np.ndarray:
    """A per-thread int64 array of `size` kept for the next call of this thread (its content: fill(size) when
    given, made once; else whatever the caller writes). Only for arrays that do not outlive the call."""
    have = getattr(_SCRATCH, key, None)
    if have is None or have.size < size:
        have = fill(max(size, 1)).astype(np.int64) if fill is not None else np.empty(max(size, 1), np.int64)
        setattr(_SCRATCH, key, have)
    return have[:size]


def _length_stats(m: np.ndarray, n: np.ndarray) -> tuple:
    """(m, n, min m, max m, min n, max n) of query and target lengths (zeros for no pairs): align_gpu's `lens`."""
    if m.size == 0:
        return m, n, 0, 0, 0, 0
    return m, n, int(m.min()), int(m.max()), int(n.min()), int(n.max())


def _lengths(off: np.ndarray, key: str) -> np.ndarray:
    """np.diff(off) into a per-thread scratch array (align_pairs' lengths live only during the call)."""
    out = _scratch(key, off.size - 1)
    np.subtract(off[1:], off[:-1], out=out)
    return out


SLAB_BYTES = 96 << 20   # GPU path, host arrays of more than two slabs: query + target bases per slab (at least)
SLABS_MAX = 4           # and at most this many slabs (each align_gpu call has its fixed costs)


def _slab_bounds(qoff, toff, nbytes: int) -> list:
    """Pair indices cutting the pairs into slabs of about nbytes query + target bases (at least one pair each)."""
    tot = qoff + toff
    cuts = np.searchsorted(tot, np.arange(nbytes, int(tot[-1]), nbytes), side="left")
    return sorted(set([0, *cuts.tolist(), qoff.size - 1]))


def _align_slabs(hq, ht, m, n, mode, match, mismatch, go, ge, band, tb, output, tim) -> PairwiseResult:
    """align_gpu over slabs of pairs (_slab_bounds) of host inputs (pwio.host_form): a thread uploads slab k + 1
    (its own CUDA stream, the arrays' pages locked in place) while slab k is aligned; the results stay on the
    device and come back together. Each pair's result is its own: the same as in one call."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    import cupy as cp

    qoff, toff = hq[2], ht[2]
    bounds = _slab_bounds(qoff, toff, max(SLAB_BYTES, int(qoff[-1] + toff[-1]) // SLABS_MAX))
    stream = cp.cuda.Stream(non_blocking=True)

    def load(a, b):
        with pinned.on_stream(stream):
            out = (slab_codes(hq, a, b, "query"), qoff[a:b + 1] - qoff[a],
                   slab_codes(ht, a, b, "target"), toff[a:b + 1] - toff[a])
            stream.synchronize()
        return out

    parts = []
    with ThreadPoolExecutor(1, thread_name_prefix="g3align-upload") as up:
        fut = up.submit(load, bounds[0], bounds[1])
        for k in range(len(bounds) - 1):
            t0 = time.perf_counter()
            qd, qo, td, to = fut.result()
            tim["upload_wait_s"] = tim.get("upload_wait_s", 0.0) + time.perf_counter() - t0
            if k + 2 < len(bounds):
                fut = up.submit(load, bounds[k + 1], bounds[k + 2])
            a, b = bounds[k], bounds[k + 1]
            lens = _length_stats(m[a:b], n[a:b])
            parts.append(align_gpu(qd, qo, td, to, mode, match, mismatch, go, ge, band, tb, output="cupy",
                                   timings=tim, lens=lens))
            del qd, td
    t0 = time.perf_counter()
    cat = [cp.concatenate([getattr(r, f) for r in parts]) for f in ("score", "q_end", "t_end", "q_start", "t_start")]
    cig = cp.concatenate([r.cigar for r in parts]) if tb else cp.zeros(0, cp.uint32)
    base = np.cumsum([0] + [int(r.cigar.size) for r in parts])
    off = cp.concatenate([parts[0].cigar_off[:1]] + [r.cigar_off[1:] + int(b) for r, b in zip(parts, base)])
    if output == "cupy":
        return PairwiseResult(*cat, cig, off, "gpu")
    host = [pinned.to_host(x) for x in cat] + [pinned.to_host(cig), pinned.to_host(off)]
    tim["download_s"] = tim.get("download_s", 0.0) + time.perf_counter() - t0
    return PairwiseResult(*host, "gpu")


def rescore_cigar(q: np.ndarray, t: np.ndarray, cigar: np.ndarray, q_start: int, t_start: int,
                  match=1, mismatch=4, gap_open=6, gap_extend=1) -> int:
    """Score of a CIGAR placed at (q_start, t_start) under the module's scoring (for tests)."""
    s = 0
    i, j = q_start, t_start
    for x in cigar:
        ln, op = int(x) >> 4, int(x) & 15
        if op == 0:
            a, b = q[i:i + ln], t[j:j + ln]
            nn = (a > 3) | (b > 3)
            eq = (a == b) & ~nn
            s += match * int(eq.sum()) - int(nn.sum()) - mismatch * int((~eq & ~nn).sum())
            i += ln
            j += ln
        elif op == 1:
            s -= gap_open + ln * gap_extend
            i += ln
        else:
            s -= gap_open + ln * gap_extend
            j += ln
    return s


@njit(cache=True)
def _check_cigars(qc, qoff, tc, toff, score, qs, qe, ts, te, cig, coff, mode, match, mismatch, go, ge,
                  bad):
    """bad[p] = 0 when pair p's CIGAR is well formed, spans [qs, qe) x [ts, te), covers what the mode
    requires and re-scores to score[p]; else a code (1 adjacent equal ops / bad op, 2 spans, 3 mode
    coverage, 4 score)."""
    for p in range(score.size):
        q = qc[qoff[p]:qoff[p + 1]]
        t = tc[toff[p]:toff[p + 1]]
        i = qs[p]
        j = ts[p]
        s = 0
        prev = -1
        code = 0
        for k in range(coff[p], coff[p + 1]):
            ln = cig[k] >> 4
            op = cig[k] & 15
            if op == prev or op > 2 or ln == 0:
                code = 1
                break
            prev = op
            if op == 0:
                if i + ln > q.size or j + ln > t.size:
                    code = 2
                    break
                for x in range(ln):
                    a = q[i + x]
                    b = t[j + x]
                    if a > 3 or b > 3:
                        s -= 1
                    elif a == b:
                        s += match
                    else:
                        s -= mismatch
                i += ln
                j += ln
            elif op == 1:
                s -= go + ln * ge
                i += ln
            else:
                s -= go + ln * ge
                j += ln
        if code == 0 and (i != qe[p] or j != te[p] or qe[p] > q.size or te[p] > t.size
                          or qs[p] < 0 or ts[p] < 0):
            code = 2
        if code == 0:
            if mode == 0 and (qs[p] != 0 or ts[p] != 0 or qe[p] != q.size or te[p] != t.size):
                code = 3
            elif mode == 1 and (qs[p] != 0 or qe[p] != q.size):
                code = 3
        if code == 0 and s != score[p]:
            code = 4
        bad[p] = code


def check_cigars(res: PairwiseResult, qc, qoff, tc, toff, mode: int, match=1, mismatch=4, gap_open=6,
                 gap_extend=1) -> np.ndarray:
    """Vectorised CIGAR audit of a traceback result (see _check_cigars); returns the per-pair codes."""
    bad = np.zeros(len(res), np.int8)
    _check_cigars(qc, qoff, tc, toff, res.score.astype(np.int64), res.q_start.astype(np.int64),
                  res.q_end.astype(np.int64), res.t_start.astype(np.int64), res.t_end.astype(np.int64),
                  res.cigar.astype(np.int64), res.cigar_off, mode, match, mismatch, gap_open, gap_extend, bad)
    return bad


__all__ = [
    "MODES",
    "PairwiseResult",
    "align_cpu",
    "align_gpu",
    "align_pairs",
    "check_cigars",
    "encode_seqs",
    "numba",
    "rescore_cigar",
]
