"""Suffix sorting by buckets, on the GPU (kernels/sufsort.cu) or with its numba twin: the rows of the FM-index of
``T = pac + revcomp(pac)`` without holding the whole suffix array.

What comes out (:class:`Rows`) is what the FM-index and bwa's files need of the suffix array: each row's pair code
(fm.py: the two bases before its suffix, ``codes[r]``, rows ``0..n``), the suffix array sampled every
``1 << shift`` rows, and the rows of the suffixes at text positions 0 (``primary``) and 1 (``row_sa1``). The
suffix array of a text is unique, so this equals what ``fm.suffix_array`` (divsufsort) gives, byte for byte, on any
device and for any chunking (tests/test_sufsort.py).

How
---
1. The text is packed 2 bits a base (``pack_text``). Every suffix falls in one of ``4**BIN_BASES`` buckets by its
   first bases; ``hist`` counts them.
2. Consecutive buckets are grouped into chunks of at most ``cap`` suffixes (what fits in GPU memory). A chunk's
   suffixes are the rows ``row0 .. row0 + m - 1`` of the whole order. Per chunk: gather its suffixes' positions
   and sort them by their first 29 bases (one 64-bit key each; the key also says where a suffix ends:
   kernels/sufsort.cu). Each suffix's rank so far goes into ``isa`` (its row when it is alone with its key, else
   the first row of its group of equals), its row's pair code and SA sample are written, and the suffixes that
   share their key with others (the groups) are kept for step 3.
3. Prefix doubling over all groups at once (Manber and Myers; Larsson and Sadakane): with every group sorted by
   its first ``h`` bases, sort each group by the rank of the suffix ``h`` bases on (``isa[pos + h]``), split it
   where those ranks differ, update ``isa`` and go on with ``2h``. The groups come from long repeats and from
   the random bases that stand for runs of N (``lrand48() & 3`` repeats itself every 2**19 draws, so every run
   of N becomes copies of one sequence): ``log2(longest repeat / 29)`` rounds. A round runs over pieces of
   whole groups (ranks updated by one piece only sharpen those the next piece reads), so that its memory stays
   bounded. A suffix alone in its group has its final row: its code and sample are written again there.

GPU memory: ``isa`` (8 bytes a text position), the packed text (n / 4 bytes), per chunk or piece about 56 to 96
bytes a suffix (positions, keys and the sort's buffers), and the groups of step 3 (24 bytes a suffix in them; kept on
the host instead, each piece sent over and back, when they would take more than half the GPU memory left: a 3.1 Gbp
reference's 1.4G suffixes in repeats would not fit beside its ranks on an 80 GB GPU). Host memory: the codes (n + 1
bytes), samples, and the groups between steps 2 and 3 (16 bytes a suffix).
"""
from __future__ import annotations

import time
from collections import namedtuple

import numpy as np
from numba import get_num_threads, prange

from g3align.jit import njit

__all__ = ["BIN_BASES", "Rows", "WIN", "pack_text", "sort_rows"]

WIN = 29          # bases in one sort key
BIN_BASES = 6     # buckets: the first 6 bases (4096 buckets)
NBINS = 1 << (2 * BIN_BASES)
_BIN_SHIFT = 64 - 2 * BIN_BASES
BYTES_PER_SUFFIX = 56    # GPU memory of a chunk's sort (step 2), per suffix
BYTES_PER_GROUPED = 96   # of a doubling piece (step 3), per suffix
MAX_CHUNK = (1 << 31) - (1 << 20)  # suffixes a chunk on the GPU at most (sort sizes stay below 2**31)

Rows = namedtuple("Rows", ["codes", "samples", "shift", "primary", "row_sa1"])
Rows.__doc__ = """codes: uint8[n + 1], row r's pair code; samples: uint64[(n >> shift) + 1], SA at rows multiple of
1 << shift (samples[0] = n); primary / row_sa1: the rows of the suffixes at text positions 0 / 1."""


# ------------------------------------------------------------------------------------------------
# the packed text and the CPU twins of kernels/sufsort.cu
# ------------------------------------------------------------------------------------------------

@njit(cache=True, parallel=True)
def _pack(pac, P):
    lp = pac.shape[0]
    n = 2 * lp
    for w in prange(P.shape[0]):
        x = np.uint64(0)
        for k in range(32):
            i = w * 32 + k
            c = np.uint64(0)
            if i < lp:
                c = np.uint64(pac[i])
            elif i < n:
                c = np.uint64(3 - pac[n - 1 - i])
            x |= c << np.uint64(62 - 2 * k)
        P[w] = x


def pack_text(pac: np.ndarray) -> np.ndarray:
    """T = pac + revcomp(pac), 32 bases a uint64 (the first in the high bits), zero-padded, with a zero word after
    the end (a 32-base window may start at any position < n)."""
    pac = np.ascontiguousarray(pac, dtype=np.uint8)
    P = np.empty((2 * pac.shape[0]) // 32 + 2, np.uint64)
    _pack(pac, P)
    return P


@njit(cache=True, inline="always")
def _win(P, q):
    w = q >> 5
    b = np.uint64((q & 31) * 2)
    x = P[w] << b
    if b:
        x |= P[w + 1] >> (np.uint64(64) - b)
    return x


@njit(cache=True, inline="always")
def _key_at(P, n, q):
    rem = n - q
    if rem <= 0:
        return np.uint64(0)
    return (_win(P, q) & ~np.uint64(0x3F)) | np.uint64(min(rem, WIN))


@njit(cache=True, inline="always")
def _base(P, q):
    return np.int64((P[q >> 5] >> np.uint64(62 - 2 * (q & 31))) & np.uint64(3))


@njit(cache=True, parallel=True)
def _hist_cpu(P, n, nbins, nt):
    per = (n + nt - 1) // nt
    own = np.zeros((nt, nbins), np.int64)
    for t in prange(nt):
        for i in range(t * per, min(n, (t + 1) * per)):
            own[t, _win(P, i) >> np.uint64(_BIN_SHIFT)] += 1
    return own.sum(axis=0)


@njit(cache=True)
def _gather_cpu(P, n, lo, hi, cursor, out):
    for i in range(n):
        b = np.int64(_win(P, i) >> np.uint64(_BIN_SHIFT))
        if lo <= b < hi:
            out[cursor[b - lo]] = i
            cursor[b - lo] += 1


@njit(cache=True, parallel=True)
def _keys_cpu(P, n, pos, off, out):
    for j in prange(pos.shape[0]):
        out[j] = _key_at(P, n, pos[j] + off)


@njit(cache=True, parallel=True)
def _codes_cpu(P, pos, out):
    for j in prange(pos.shape[0]):
        s = pos[j]
        code = np.int64(0)
        if s >= 2:
            code = _base(P, s - 2) * 4 + _base(P, s - 1)
        elif s == 1:
            code = _base(P, 0)
        out[j] = code


# ------------------------------------------------------------------------------------------------
# the two devices
# ------------------------------------------------------------------------------------------------

class _Cpu:
    """The numba twins; numpy's stable sort."""

    xp = np

    def put(self, a):
        return a

    def capacity(self, n, per=BYTES_PER_SUFFIX, reserve=0):
        return n + 1

    def check(self, n):
        pass

    def argsort(self, a):
        return np.argsort(a, kind="stable")

    def hist(self, P, n):
        return _hist_cpu(P, np.int64(n), NBINS, max(1, get_num_threads()))

    def gather(self, P, n, lo, hi, starts, m):
        out = np.empty(m, np.int64)
        _gather_cpu(P, np.int64(n), np.int64(lo), np.int64(hi), starts.copy(), out)
        return out

    def keys(self, P, n, pos, off):
        out = np.empty(pos.shape[0], np.uint64)
        _keys_cpu(P, np.int64(n), pos, np.int64(off), out)
        return out

    def codes(self, P, pos):
        out = np.empty(pos.shape[0], np.uint8)
        _codes_cpu(P, pos, out)
        return out

    def get(self, a):
        return a

    def free(self):
        pass


class _Gpu:
    """kernels/sufsort.cu through CuPy; CuPy's (stable) argsort."""

    def __init__(self):
        import cupy

        from g3align.kernels.loader import get_module
        self.xp = cupy
        mod = get_module("sufsort", {"SX_BIN_BASES": BIN_BASES})
        self.k = {f: mod.get_function(f) for f in ("sx_hist", "sx_gather", "sx_keys", "sx_codes")}
        dev = cupy.cuda.Device()
        self.grid = 4 * int(dev.attributes["MultiProcessorCount"]) * 8

    def put(self, a):
        return self.xp.asarray(a)

    def free_bytes(self):
        self.free()
        return int(self.xp.cuda.Device().mem_info[0])

    def check(self, n):
        """A ValueError when the ranks and the packed text of n bases, and one chunk, cannot fit in this GPU."""
        need = 8 * (n + 1) + n // 4 + BYTES_PER_SUFFIX * min(n, 1 << 24)
        total = int(self.xp.cuda.Device().mem_info[1])
        if need > total:
            raise ValueError(f"sorting the suffixes of {n // 2} bp on the GPU needs at least {need / 1e9:.1f} GB of "
                             f"GPU memory, this GPU has {total / 1e9:.1f} GB (--device cpu sorts them on the host)")

    def capacity(self, n, per=BYTES_PER_SUFFIX, reserve=0):
        """Suffixes a chunk or piece, from the free GPU memory less ``reserve`` bytes still to come."""
        self.free()
        free, _ = self.xp.cuda.Device().mem_info
        return max(1 << 20, min(MAX_CHUNK, (int(free * 0.8) - reserve) // per))

    def argsort(self, a):
        return self.xp.argsort(a)

    def _grid(self, m):
        return (max(1, min(self.grid, (int(m) + 255) // 256)),)

    def hist(self, P, n):
        h = self.xp.zeros(NBINS, self.xp.uint64)
        self.k["sx_hist"](self._grid(n), (256,), (P, np.int64(n), h))
        return h.get().astype(np.int64)

    def gather(self, P, n, lo, hi, starts, m):
        xp = self.xp
        out = xp.empty(m, xp.int64)
        cur = xp.asarray(starts.astype(np.uint64))
        self.k["sx_gather"](self._grid(n), (256,), (P, np.int64(n), np.int32(lo), np.int32(hi), cur, out))
        return out

    def keys(self, P, n, pos, off):
        out = self.xp.empty(pos.shape[0], self.xp.uint64)
        self.k["sx_keys"](self._grid(pos.shape[0]), (256,), (P, np.int64(n), pos, np.int64(pos.shape[0]),
                                                             np.int64(off), out))
        return out

    def codes(self, P, pos):
        m = int(pos.shape[0])
        out = self.xp.empty(m, self.xp.uint8)
        self.k["sx_codes"](self._grid(m), (256,), (P, pos, np.int64(m), out))
        return out

    def get(self, a):
        return a.get()

    def free(self):
        self.xp.get_default_memory_pool().free_all_blocks()


# ------------------------------------------------------------------------------------------------
# the sort
# ------------------------------------------------------------------------------------------------

def _starts(xp, key):
    """Where a run of equal keys starts (bool)."""
    start = xp.empty(key.shape[0], bool)
    if key.shape[0]:
        start[0] = True
        xp.not_equal(key[1:], key[:-1], out=start[1:])
    return start


def _alone(xp, start):
    """Elements alone in their run (from the runs' start flags)."""
    alone = start.copy()
    alone[:-1] &= start[1:]
    return alone


def _first_rows(xp, start, rows):
    """For each element, the row of the first element of its run (rows: each element's row)."""
    return rows[xp.flatnonzero(start)][xp.cumsum(start, dtype=xp.int64) - 1]


class _Out:
    """The rows' codes, samples and specials on the host, written as rows get their suffixes."""

    def __init__(self, n, shift):
        self.codes = np.empty(n + 1, np.uint8)
        self.samples = np.empty((n >> shift) + 1, np.uint64)
        self.samples[0] = n
        self.shift = shift
        self.specials = np.full(2, -1, np.int64)

    def put(self, be, P, pos, rows):
        """Rows ``rows`` (device arrays, any order) hold the suffixes ``pos``."""
        c = be.codes(P, pos)
        samp = (rows & ((1 << self.shift) - 1)) == 0
        sr, sp = be.get(rows[samp]), be.get(pos[samp])
        for k in (0, 1):
            hit = be.get(rows[pos == k])
            if hit.shape[0]:
                self.specials[k] = int(hit[0])
        self.codes[be.get(rows)] = be.get(c)
        self.samples[sr >> self.shift] = sp

    def put_run(self, be, P, pos, row0):
        """Rows row0 .. row0 + len(pos) - 1 hold the suffixes ``pos`` (a device array)."""
        m = int(pos.shape[0])
        self.codes[row0:row0 + m] = be.get(be.codes(P, pos))
        intv = 1 << self.shift
        j0 = (-row0) % intv
        sp = be.get(pos[j0::intv])
        s0 = (row0 + j0) >> self.shift
        self.samples[s0:s0 + sp.shape[0]] = sp
        for k in (0, 1):
            hit = be.get(be.xp.flatnonzero(pos == k))
            if hit.shape[0]:
                self.specials[k] = row0 + int(hit[0])


def _pieces(xp, grp, cap: int) -> list:
    """Cuts of [0, len(grp)) into pieces of whole groups (grp: each place's group, in runs), about cap places each (a
    group larger than cap is a piece of its own)."""
    nu = int(grp.shape[0])
    if nu <= cap:
        return [0, nu]
    gstart = xp.flatnonzero(_starts(xp, grp))
    at = gstart[xp.searchsorted(gstart, xp.arange(cap, nu, cap), side="right") - 1]
    inner = [int(c) for c in np.unique(np.asarray(at.get() if hasattr(at, "get") else at)) if c > 0]
    return [0, *inner, nu]


def _double(be, P, n, isa, pos, slot, out, stats, cap=None, on_host=False):
    """Step 3 of the module docstring: pos (the suffixes of all groups, in row order), slot (the row of each place),
    every group sorted by its first WIN bases, isa (a device array) their ranks. Writes the final rows to out.
    pos and slot live on the device, or with ``on_host`` on the host (when they do not fit beside isa): each piece
    then travels to the device and back. Both are compacted in place, round after round."""
    xp = be.xp
    txp = np if on_host else xp                       # where pos, slot and grp live
    dev = be.put if on_host else (lambda a: a)
    back = be.get if on_host else (lambda a: a)
    nu = int(pos.shape[0])
    grp = txp.empty(nu, txp.int64)
    step = 1 << 26
    for a in range(0, nu, step):
        grp[a:a + step] = back(isa[dev(pos[a:a + step])].astype(xp.int64))
    h = WIN
    while nu:
        if stats is not None:
            stats.append((nu, h))
        piece = int(cap) if cap else be.capacity(n, per=BYTES_PER_GROUPED, reserve=0 if on_host else 24 * nu)
        cuts = _pieces(txp, grp[:nu], piece)
        w = 0                                      # places kept so far (w <= a: in place)
        for a, b in zip(cuts[:-1], cuts[1:]):
            p, sl, g = dev(pos[a:b]), dev(slot[a:b]), dev(grp[a:b])
            key = isa[p + h]
            perm = be.argsort(key)
            perm = perm[be.argsort(g[perm])]       # g[perm] is g again: groups stay where they were
            p = p[perm]
            key = key[perm]
            del perm
            start = _starts(xp, key)
            start[1:] |= g[1:] != g[:-1]
            del key
            newg = _first_rows(xp, start, sl)
            isa[p] = newg
            alone = _alone(xp, start)
            del start
            if bool(alone.any()):
                out.put(be, P, p[alone], sl[alone])
            tied = ~alone
            k = int(tied.sum())
            pos[w:w + k] = back(p[tied])
            slot[w:w + k] = back(sl[tied])
            grp[w:w + k] = back(newg[tied])
            w += k
            del p, sl, g, newg, alone, tied
        nu = w
        be.free()
        h *= 2


def _plan(hist: np.ndarray, cap: int) -> list:
    """Consecutive buckets grouped into chunks of at most ``cap`` suffixes (a bucket larger than cap is a chunk of
    its own): [(first bucket, end bucket, suffixes)]."""
    out = []
    lo, tot = 0, 0
    for b in range(hist.shape[0]):
        c = int(hist[b])
        if tot and tot + c > cap:
            out.append((lo, b, tot))
            lo, tot = b, 0
        tot += c
    if tot:
        out.append((lo, hist.shape[0], tot))
    return out


def sort_rows(pac: np.ndarray, shift: int, device: str = "cpu", cap: int | None = None, stats=None,
              tail_on_host: bool | None = None) -> Rows:
    """The rows of the FM-index of pac + revcomp(pac) (:class:`Rows`), the suffix array sampled every 1 << shift
    rows. device: "gpu" (kernels/sufsort.cu) or "cpu" (the numba twins); cap: most suffixes a chunk (default:
    what fits in GPU memory; the whole text on the CPU). stats: a list that receives ("chunks", count, largest,
    seconds) and ("doubling", [(suffixes, h) a round], seconds);
    tail_on_host: keep the doubling's groups on the host (default: when they take more than half the GPU memory
    left beside the ranks)."""
    pac = np.ascontiguousarray(pac, dtype=np.uint8)
    lp = int(pac.shape[0])
    if lp < 1:
        raise ValueError("cannot sort the suffixes of an empty reference")
    n = 2 * lp
    be = _Gpu() if device == "gpu" else _Cpu()
    be.check(n)
    xp = be.xp
    P = be.put(pack_text(pac))
    hist = be.hist(P, n)
    isa = xp.empty(n + 1, xp.uint64)               # the ranks so far (row 0 is the suffix '$' at n)
    isa[n] = 0
    plan = _plan(hist, int(cap) if cap else be.capacity(n))
    out = _Out(n, shift)
    t_last = 3 - int(pac[0])                        # T[n-1]
    t_before = 3 - int(pac[1]) if lp > 1 else int(pac[0])  # T[n-2]
    out.codes[0] = t_before * 4 + t_last            # row 0 is the suffix '$'
    groups = []
    row0 = 1
    starts = np.zeros(NBINS + 1, np.int64)
    t = time.perf_counter()
    for lo, hi, m in plan:
        np.cumsum(hist[lo:hi], out=starts[1:hi - lo + 1])
        pos = be.gather(P, n, lo, hi, starts[:hi - lo], m)
        key = be.keys(P, n, pos, 0)
        o = be.argsort(key)
        pos = pos[o]
        key = key[o]
        del o
        start = _starts(xp, key)
        del key
        rows = xp.arange(row0, row0 + m, dtype=xp.int64)
        isa[pos] = _first_rows(xp, start, rows)
        out.put_run(be, P, pos, row0)
        tied = ~_alone(xp, start)
        del start
        groups.append((be.get(pos[tied]), be.get(rows[tied])))
        del pos, rows, tied
        if m > (1 << 26):
            be.free()
        row0 += m
    if stats is not None:
        stats.append(("chunks", len(plan), max(m for _, _, m in plan), time.perf_counter() - t))
    if row0 != n + 1:
        raise RuntimeError(f"suffix sorting lost rows ({row0 - 1} of {n} sorted)")
    t = time.perf_counter()
    nu = sum(int(g[0].shape[0]) for g in groups)
    on_host = be.xp is not np and (tail_on_host if tail_on_host is not None else
                                   24 * nu > be.free_bytes() // 2)
    txp = np if on_host else xp
    pos, slot = txp.empty(nu, txp.int64), txp.empty(nu, txp.int64)
    w = 0
    while groups:                                   # one copy of the groups at a time
        gp, gs = groups.pop(0)
        k = int(gp.shape[0])
        pos[w:w + k] = gp if on_host else be.put(gp)
        slot[w:w + k] = gs if on_host else be.put(gs)
        w += k
        del gp, gs
    rounds = []
    _double(be, P, n, isa, pos, slot, out, rounds, cap, on_host)
    if stats is not None:
        stats.append(("doubling", rounds, time.perf_counter() - t))
    del isa, pos, slot
    be.free()
    if out.specials.min() < 1:
        raise RuntimeError("suffix sorting lost the rows of the suffixes at 0 and 1")
    return Rows(codes=out.codes, samples=out.samples, shift=int(shift), primary=int(out.specials[0]),
                row_sa1=int(out.specials[1]))
