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
   suffixes are the rows ``row0 .. row0 + m - 1`` of the whole order.
3. Per chunk: gather its suffixes' positions, sort them by their first 29 bases (one 64-bit key each, the key
   also says where a suffix ends: kernels/sufsort.cu), then, while suffixes share their key so far, sort each
   group of equals by the next window (a stable sort by key, then a stable sort by group). Once few suffixes are
   left, each round compares several windows (up to 64: 1,856 bases; about WORK_PER_ROUND keys a round), so that
   long repeats take few rounds.
4. Emit the chunk's pair codes and samples, and go on with the next chunk.

GPU memory per chunk is about 56 bytes a suffix (positions, keys and the sort's buffers), the packed text n / 4
bytes; host memory is the codes (n + 1 bytes) and samples.
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
WORK_PER_ROUND = 1 << 24  # a round compares this many keys or more: 64 windows for few tied suffixes, 1 for many
BYTES_PER_SUFFIX = 56
MAX_CHUNK = (1 << 31) - (1 << 20)  # suffixes a chunk on the GPU at most (sort sizes stay below 2**31)  # GPU memory of a chunk's sort, per suffix (module docstring)

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
def _emit_cpu(P, sa, row0, shift, s_first, codes, samples, specials):
    mask = (np.int64(1) << shift) - 1
    for j in prange(sa.shape[0]):
        s = sa[j]
        row = row0 + j
        if s >= 2:
            code = _base(P, s - 2) * 4 + _base(P, s - 1)
        elif s == 1:
            code = _base(P, 0)
            specials[1] = row
        else:
            code = np.int64(0)
            specials[0] = row
        codes[j] = code
        if (row & mask) == 0:
            samples[(row >> shift) - s_first] = s


# ------------------------------------------------------------------------------------------------
# the two devices
# ------------------------------------------------------------------------------------------------

class _Cpu:
    """The numba twins; numpy's stable sort."""

    xp = np

    def put(self, a):
        return a

    def capacity(self, n):
        return n

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

    def emit(self, P, sa, row0, shift, s_first, codes, samples, specials):
        _emit_cpu(P, sa, np.int64(row0), np.int64(shift), np.int64(s_first), codes, samples, specials)

    def free(self):
        pass


class _Gpu:
    """kernels/sufsort.cu through CuPy; CuPy's (stable) argsort."""

    def __init__(self):
        import cupy

        from g3align.kernels.loader import get_module
        self.xp = cupy
        mod = get_module("sufsort", {"SX_BIN_BASES": BIN_BASES})
        self.k = {f: mod.get_function(f) for f in ("sx_hist", "sx_gather", "sx_keys", "sx_emit")}
        dev = cupy.cuda.Device()
        self.grid = 4 * int(dev.attributes["MultiProcessorCount"]) * 8

    def put(self, a):
        return self.xp.asarray(a)

    def capacity(self, n):
        self.free()
        free, _ = self.xp.cuda.Device().mem_info
        return max(1 << 16, min(MAX_CHUNK, int(free * 0.8) // BYTES_PER_SUFFIX))

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

    def emit(self, P, sa, row0, shift, s_first, codes, samples, specials):
        xp = self.xp
        m = int(sa.shape[0])
        c = xp.empty(m, xp.uint8)
        s = xp.empty(max(1, samples.shape[0]), xp.uint64)
        sp = xp.asarray(specials)
        self.k["sx_emit"](self._grid(m), (256,), (P, sa, np.int64(m), np.int64(row0), np.int32(shift),
                                                  np.int64(s_first), c, s, sp))
        c.get(out=codes)
        if samples.shape[0]:
            samples[:] = s[:samples.shape[0]].get()
        specials[:] = sp.get()

    def free(self):
        self.xp.get_default_memory_pool().free_all_blocks()


# ------------------------------------------------------------------------------------------------
# the sort
# ------------------------------------------------------------------------------------------------

def _groups(xp, start):
    """(indices of the elements not alone in their group, their group numbers) from the groups' start flags."""
    m = start.shape[0]
    alone = start.copy()
    alone[:-1] &= start[1:]
    u = xp.flatnonzero(~alone)
    gid = xp.cumsum(start, dtype=xp.int64)[u]
    return u, gid.astype(xp.uint32) if m < (1 << 32) else gid


def _sort_chunk(be, P, n, pos, stats=None):
    """pos (a chunk's suffix positions, any order) sorted by their suffixes; stats: a list that receives
    (suffixes still tied, windows compared) for each round after the first."""
    xp = be.xp
    key = be.keys(P, n, pos, 0)
    o = be.argsort(key)
    pos = pos[o]
    key = key[o]
    del o
    start = xp.empty(pos.shape[0], bool)
    start[0] = True
    xp.not_equal(key[1:], key[:-1], out=start[1:])
    del key
    u, gid = _groups(xp, start)
    del start
    depth = WIN
    while u.shape[0]:
        nu = int(u.shape[0])
        wins = max(1, min(64, WORK_PER_ROUND // nu))
        if stats is not None:
            stats.append((nu, wins))
        sub = pos[u]
        keys = [be.keys(P, n, sub, depth + WIN * k) for k in range(wins)]
        perm = xp.arange(nu, dtype=xp.int64)
        for k in range(wins - 1, -1, -1):          # least significant window first, then the group
            perm = perm[be.argsort(keys[k][perm])]
        perm = perm[be.argsort(gid[perm])]           # gid[perm] is gid again: groups stay where they were
        pos[u] = sub[perm]
        del sub
        start = xp.empty(nu, bool)
        start[0] = True
        xp.not_equal(gid[1:], gid[:-1], out=start[1:])
        for k in range(wins):
            kk = keys[k][perm]
            start[1:] |= kk[1:] != kk[:-1]
        del keys, perm
        v, gid = _groups(xp, start)
        u = u[v]
        depth += WIN * wins
    return pos


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


def sort_rows(pac: np.ndarray, shift: int, device: str = "cpu", cap: int | None = None, progress=None,
              stats=None) -> Rows:
    """The rows of the FM-index of pac + revcomp(pac) (:class:`Rows`), the suffix array sampled every 1 << shift
    rows. device: "gpu" (kernels/sufsort.cu) or "cpu" (the numba twins); cap: most suffixes a chunk (default:
    what fits in GPU memory; the whole text on the CPU). progress(done, total) after each chunk; stats: a list
    that receives each chunk's (suffixes, seconds, [(tied suffixes, windows) of each later round])."""
    pac = np.ascontiguousarray(pac, dtype=np.uint8)
    lp = int(pac.shape[0])
    if lp < 1:
        raise ValueError("cannot sort the suffixes of an empty reference")
    n = 2 * lp
    be = _Gpu() if device == "gpu" else _Cpu()
    P = be.put(pack_text(pac))
    hist = be.hist(P, n)
    plan = _plan(hist, int(cap) if cap else be.capacity(n))
    codes = np.empty(n + 1, np.uint8)
    samples = np.empty((n >> shift) + 1, np.uint64)
    samples[0] = n
    t_last = 3 - int(pac[0])                        # T[n-1]
    t_before = 3 - int(pac[1]) if lp > 1 else int(pac[0])  # T[n-2]
    codes[0] = t_before * 4 + t_last                # row 0 is the suffix '$'
    specials = np.full(2, -1, np.int64)
    row0 = 1
    starts = np.zeros(NBINS + 1, np.int64)
    for k, (lo, hi, m) in enumerate(plan):
        np.cumsum(hist[lo:hi], out=starts[1:hi - lo + 1])
        t = time.perf_counter()
        pos = be.gather(P, n, lo, hi, starts[:hi - lo], m)
        rounds = []
        pos = _sort_chunk(be, P, n, pos, rounds)
        s_first = (row0 + (1 << shift) - 1) >> shift
        s_end = ((row0 + m - 1) >> shift) + 1
        be.emit(P, pos, row0, shift, s_first, codes[row0:row0 + m], samples[s_first:s_end], specials)
        del pos
        be.free()
        if stats is not None:
            stats.append((m, time.perf_counter() - t, rounds))
        row0 += m
        if progress is not None:
            progress(k + 1, len(plan))
    if row0 != n + 1 or specials.min() < 1:
        raise RuntimeError(f"suffix sorting lost rows ({row0 - 1} of {n} sorted)")
    return Rows(codes=codes, samples=samples, shift=int(shift), primary=int(specials[0]), row_sa1=int(specials[1]))
