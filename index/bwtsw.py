"""The FM-index of ``T = pac + revcomp(pac)`` built block by block on the CPU, in memory bounded by the block size
(``g3align index -a bwtsw``): a 3.1 Gbp reference in well under 16 GB, where divsufsort's whole suffix array needs
8 bytes a base of both strands (~50 GB). The index is the same, byte for byte, as the one divsufsort's suffix array
or the GPU's bucket sort give (tests/test_bwtsw.py).

How
---
The BWT grows from the text's end, one block of positions at a time (the idea of Hon, Lam, Sung et al.'s
space-efficient BWT construction, as in `bwa index -a bwtsw`). After the blocks from ``k`` on, the BWT ``W`` holds
the sorted suffixes of ``T[k:]`` (and the empty one, row 0); the row of the suffix at ``k`` stands for ``$`` (the
base before it is not in the set yet). A new block ``T[k-m:k]`` goes in in three steps:

1. **Ranks among the old suffixes.** For each new suffix ``j``, ``R(j)`` = how many old suffixes are smaller. With
   ``c = T[j]``: ``R(j) = C[c] + occ(c, R(j+1))`` (the old suffixes that start with a smaller base, and those ``cY``
   with ``Y`` below the suffix at ``j + 1``), where ``R(k)`` is the old row of the suffix at ``k``: one backward
   search step a position, from ``k - 1`` down (``_chain``).
2. **Their order among themselves.** New suffixes ordered by ``R`` are in order; those with equal ``R`` (no old
   suffix between them) compare by their first base, then by the suffixes one on. So their order is that of the
   suffixes of the integer string ``a(k-m) .. a(k-1) e`` with ``a(j) = 8 R(j) + 2 T[j] + 1`` and the end symbol
   ``e = 8 (R(k) + 1)`` (which sorts right where the old suffix at ``k`` does): prefix doubling (Manber and Myers,
   Larsson and Sadakane) over the few ties that ``R`` leaves (``_block_ranks``).
3. **Merge.** The new suffix ``j`` with ``q`` new suffixes before it lands at row ``R(j) + q``, its BWT base
   ``T[j-1]``; the old rows move up by the new suffixes before them. ``W`` is merged in place from its end; the old
   ``$`` row gets ``T[k-1]``, the block's first suffix becomes the new ``$`` (``_merge``).

Blocks start at ``first`` positions and double up to ``block``, so that the old set is never much smaller than a
block (few ties in step 2). The rows of the blocks' first suffixes are kept (and moved at each merge), so that at
the end the suffix array is sampled by walking the LF mapping from each of them at once, a stretch of the text each
(``_walk``, in parallel); the pair codes of the occurrence table come from ``W`` in one pass (``_codes_w``).

``W`` is 2 bits a row with the counts of each base before every 128 rows, both in one 64-byte line (one cache line a
backward step): 0.5 bytes a row. Memory: the packed text (0.25 bytes a row), ``W``, about 48 bytes a suffix of one
block, then the sampled suffix array; the occurrence table (1.5 bytes a row) goes to a file-backed map in
``tmp_dir`` when given, not to memory.
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np
from numba import get_num_threads, prange

from g3align.index.fm import _assemble, _c1, _occ_table, popcount64, sa_words, table_layout
from g3align.index.sufsort import _base, pack_text
from g3align.jit import njit

__all__ = ["BLOCK", "FIRST", "build_fm_blockwise", "memory_needed"]

BLOCK = 1 << 27          # suffixes a block at most (~48 bytes each while it is sorted)
FIRST = 1 << 20          # the first block; each next one as large as all before it, up to BLOCK
_BLK = 7                 # W: 128 rows a line
_M55 = np.uint64(0x5555555555555555)


def memory_needed(l_pac: int, block: int = BLOCK) -> int:
    """Host bytes a blockwise build of l_pac bases needs at least (n = 2 l_pac rows): the reference (1 byte a base,
    as read), the packed text (0.25 a row), W (0.5 a row), a block's sort (48 bytes a suffix), or later the sampled
    suffix array (0.5 bytes a row at sa_intv 8)."""
    n = 2 * int(l_pac)
    return int(l_pac + 0.75 * n + max(48 * min(int(block), n), 0.5 * n))


# ------------------------------------------------------------------------------------------------
# W: the growing BWT
# ------------------------------------------------------------------------------------------------

@njit(cache=True, inline="always")
def _wget(W, p):
    return np.int64((W[p >> _BLK, 4 + ((p >> 5) & 3)] >> np.uint64(62 - 2 * (p & 31))) & np.uint64(3))


@njit(cache=True, inline="always")
def _wset(W, p, c):
    b = p >> _BLK
    w = 4 + ((p >> 5) & 3)
    sh = np.uint64(62 - 2 * (p & 31))
    W[b, w] = (W[b, w] & ~(np.uint64(3) << sh)) | (np.uint64(c) << sh)


@njit(cache=True, inline="always")
def _match(x, c):
    """One bit (the low of each 2-bit field) where the base of x's field is c."""
    y = x ^ (np.uint64(c) * _M55)
    return ~(y | (y >> np.uint64(1))) & _M55


@njit(cache=True, inline="always")
def _occ(W, dollar, c, i):
    """How many rows < i have base c before them (the $ row, which stores a 0, left out)."""
    b = i >> _BLK
    r = np.int64(W[b, c])
    rem = i & 127
    q = 0
    while rem >= 32:
        r += np.int64(popcount64(_match(W[b, 4 + q], c)))
        rem -= 32
        q += 1
    if rem:
        mask = ~np.uint64(0) << np.uint64(64 - 2 * rem)
        r += np.int64(popcount64(_match(W[b, 4 + q], c) & mask))
    if c == 0 and (b << _BLK) <= dollar < i:
        r -= 1
    return r


@njit(cache=True)
def _recount(W, L, dollar):
    """The counts before every line of W's first L rows (from line 1 on; the $ row left out)."""
    run = np.zeros(4, np.int64)
    nb = ((L - 1) >> _BLK) + 1
    for b in range(nb):
        for c in range(4):
            W[b, c] = np.uint64(run[c])
        for q in range(4):
            x = W[b, 4 + q]
            for c in range(4):
                run[c] += np.int64(popcount64(_match(x, c)))
        if (b << _BLK) <= dollar < ((b + 1) << _BLK):
            run[0] -= 1
    # the rows past L in the last line are zero (base 0): take them back out
    pad = (nb << _BLK) - L
    run[0] -= pad
    if nb < W.shape[0]:
        for c in range(4):
            W[nb, c] = np.uint64(run[c])


# ------------------------------------------------------------------------------------------------
# one block
# ------------------------------------------------------------------------------------------------

@njit(cache=True)
def _chain(P, W, C, dollar, k, m, key):
    """key[t] = a(k - m + t) (module docstring, step 1) for t < m, key[m] = e."""
    r = dollar
    for t in range(m - 1, -1, -1):
        c = _base(P, k - m + t)
        r = C[c] + _occ(W, dollar, c, r)
        key[t] = np.uint64(8 * r + 2 * c + 1)
    key[m] = np.uint64(8 * (dollar + 1))


@njit(cache=True)
def _radix_order(key, nbits):
    """The indices of key (uint64, values below 2**nbits) in ascending order, and the keys in that order: an LSD
    radix sort, 8 bits a pass, of each key packed with its index into one uint64 (nbits + bits of the index <= 64)."""
    m = key.shape[0]
    ib = 1
    while (np.int64(1) << ib) < m:
        ib += 1
    v = np.empty(m, np.uint64)
    for j in range(m):
        v[j] = (key[j] << np.uint64(ib)) | np.uint64(j)
    t = np.empty_like(v)
    for sh in range(ib, ib + nbits, 8):
        s = np.uint64(sh)
        cnt = np.zeros(257, np.int64)
        for j in range(m):
            cnt[((v[j] >> s) & np.uint64(255)) + 1] += 1
        for d in range(256):
            cnt[d + 1] += cnt[d]
        for j in range(m):
            d = (v[j] >> s) & np.uint64(255)
            o = cnt[d]
            cnt[d] = o + 1
            t[o] = v[j]
        v, t = t, v
    idx = np.empty(m, np.int64)
    low = (np.uint64(1) << np.uint64(ib)) - np.uint64(1)
    for j in range(m):
        idx[j] = np.int64(v[j] & low)
        v[j] = v[j] >> np.uint64(ib)
    return idx, v


@njit(cache=True, inline="always")
def _run_end(a, q):
    """The end of the run of values equal to a[q] that starts at q."""
    e = q + 1
    while e < a.shape[0] and a[e] == a[q]:
        e += 1
    return e


@njit(cache=True)
def _first_ranks(o, ks, isa):
    """isa[o[q]] = the first place of q's run of equal keys (ks = key[o]); returns the places (slots) of the tied
    suffixes, and those suffixes, in order."""
    m1 = o.shape[0]
    nt = 0
    q = 0
    while q < m1:
        e = _run_end(ks, q)
        for u in range(q, e):
            isa[o[u]] = q
        if e - q > 1:
            nt += e - q
        q = e
    slot = np.empty(nt, np.int64)
    pos = np.empty(nt, np.int64)
    w = 0
    q = 0
    while q < m1:
        e = _run_end(ks, q)
        if e - q > 1:
            for u in range(q, e):
                slot[w] = u
                pos[w] = o[u]
                w += 1
        q = e
    return slot, pos


_SMALL = 32  # groups up to this size are sorted in place


@njit(cache=True)
def _refine(isa, pos, slot, h):
    """One doubling round over the tied suffixes (pos, with their places slot, groups contiguous): each group
    sorted by isa[pos + h] and split where it differs; isa updated; returns how many stay tied (compacted to the
    front of pos and slot)."""
    nu = pos.shape[0]
    sps = np.empty(_SMALL, np.int64)
    sss = np.empty(_SMALL, np.int64)
    w = 0
    i = 0
    while i < nu:
        g = isa[pos[i]]
        e = i + 1
        while e < nu and isa[pos[e]] == g:
            e += 1
        sz = e - i
        if sz <= _SMALL:                    # insertion sort into the scratch
            ps, ss = sps, sss
            for u in range(sz):
                p = pos[i + u]
                x = isa[p + h]              # pos + h < len(isa): a tied suffix does not hold the end symbol yet
                v = u
                while v > 0 and ss[v - 1] > x:
                    ss[v] = ss[v - 1]
                    ps[v] = ps[v - 1]
                    v -= 1
                ss[v] = x
                ps[v] = p
        else:
            sec = np.empty(sz, np.int64)
            for u in range(sz):
                sec[u] = isa[pos[i + u] + h]
            o = np.argsort(sec)
            ps = pos[i:e][o]
            ss = sec[o]
        q = 0
        while q < sz:
            f = min(_run_end(ss, q), sz)
            rk = slot[i + q]
            for u in range(q, f):
                isa[ps[u]] = rk
            if f - q > 1:
                for u in range(q, f):
                    pos[w] = ps[u]
                    slot[w] = slot[i + u]
                    w += 1
            q = f
        i = e
    return w


def _block_ranks(key):
    """The rank of each suffix of the integer string ``key`` (its last symbol unique) among them all: int64."""
    m1 = int(key.shape[0])
    nbits = max(1, int(key.max()).bit_length())
    if nbits + m1.bit_length() > 64:
        raise ValueError(f"a block of {m1} suffixes is too large for this text (use a smaller block)")
    o, ks = _radix_order(key, np.int64(nbits))
    isa = np.empty(m1, np.int64)
    slot, pos = _first_ranks(o, ks, isa)
    del o, ks
    h = 1
    nu = int(pos.shape[0])
    while nu:
        nu = int(_refine(isa, pos[:nu], slot[:nu], np.int64(h)))
        h *= 2
    return isa


@njit(cache=True, inline="always")
def _word(W, x):
    return W[x >> 2, 4 + (x & 3)]


@njit(cache=True, inline="always")
def _put_word(W, x, v):
    W[x >> 2, 4 + (x & 3)] = v


@njit(cache=True)
def _sorted_new(key, isa, P, k, m):
    """The block's suffixes in order, from their ranks isa (over the m suffixes and the end symbol, at isa[m]):
    their R (sorted) and BWT bases (0 for the block's first suffix, the new $), and the place of that first suffix."""
    Rs = np.empty(m, np.int64)
    ch = np.empty(m, np.uint8)
    e = isa[m]
    for t in range(m):
        q = isa[t]
        if q > e:
            q -= 1
        Rs[q] = np.int64(key[t] >> np.uint64(3))
        ch[q] = 0 if t == 0 else _base(P, k - m + t - 1)
    q0 = isa[0] - (1 if isa[0] > e else 0)
    return Rs, ch, q0


@njit(cache=True)
def _merge(W, L, Rs, ch):
    """Step 3: the block's suffixes (sorted: Rs, ch from _sorted_new) into W's L rows, in place from the end, a
    32-base word at a time (an old word is read before its place is written: the write position never falls below
    the read one)."""
    m = Rs.shape[0]
    i = L - 1
    w = L + m - 1
    ox = w >> 5                  # the output word being filled, and its bases so far
    ov = np.uint64(0)
    ix = np.int64(-1)            # the input word at hand
    iv = np.uint64(0)
    q = m - 1
    while q >= 0:                # from the end: the old row i, or the new suffix q when it sorts after it
        if i >= Rs[q]:
            x = i >> 5
            if x != ix:
                iv = _word(W, x)
                ix = x
            c = (iv >> np.uint64(62 - 2 * (i & 31))) & np.uint64(3)
            i -= 1
        else:
            c = np.uint64(ch[q])
            q -= 1
        if (w >> 5) != ox:
            _put_word(W, ox, ov)
            ox = w >> 5
            ov = np.uint64(0)
        ov |= c << np.uint64(62 - 2 * (w & 31))
        w -= 1
    # the rest (rows <= w = i) stays; the last output word keeps its bases at rows <= w
    if w >= 0 and (w >> 5) == ox:
        keep = ~np.uint64(0) << np.uint64(62 - 2 * (w & 31))
        _put_word(W, ox, (_word(W, ox) & keep) | ov)
    else:
        _put_word(W, ox, ov)


@njit(cache=True)
def _block_bases(P, k, m, cnt):
    for j in range(k - m, k):
        cnt[_base(P, j)] += 1


# ------------------------------------------------------------------------------------------------
# the end: SA samples and pair codes
# ------------------------------------------------------------------------------------------------

_LANES = 8  # LF chains walked together by one thread (their memory accesses overlap)


@njit(cache=True, parallel=True)
def _walk(W, C1, dollar, cp_pos, cp_row, shift, lo, hi):
    """SA at every row multiple of 1 << shift: chain s walks from the suffix at cp_pos[s] (row cp_row[s]) back to
    cp_pos[s + 1] + 1 (cp_pos descending, ending with 0); lo / hi receive the samples' low 32 bits / bit 32
    (hi empty: no bit 32)."""
    ns = cp_pos.shape[0]
    ng = (ns + _LANES - 1) // _LANES
    mask = (np.int64(1) << shift) - 1
    for g in prange(ng):
        p = np.empty(_LANES, np.int64)
        r = np.empty(_LANES, np.int64)
        end = np.empty(_LANES, np.int64)
        live = 0
        for u in range(_LANES):
            s = g + u * ng                      # interleaved: each group gets long and short chains
            if s < ns:
                p[u] = cp_pos[s]
                r[u] = cp_row[s]
                end[u] = cp_pos[s + 1] if s + 1 < ns else -1
                live += 1
            else:
                p[u] = -1
                end[u] = -1
        while live:
            for u in range(_LANES):
                if p[u] <= end[u]:
                    continue
                ru = r[u]
                if (ru & mask) == 0:
                    lo[ru >> shift] = np.uint32(p[u] & 0xFFFFFFFF)
                    if hi.shape[0]:
                        hi[ru >> shift] = np.uint8(p[u] >> 32)
                p[u] -= 1
                if p[u] <= end[u]:
                    live -= 1
                    continue
                c = _wget(W, ru)
                r[u] = C1[c] + _occ(W, dollar, c, ru)


@njit(cache=True, parallel=True)
def _codes_w(W, C1, dollar, r0, r1, nsub, codes, specials):
    """fm._codes_bwt from W: the pair code of rows [r0, r1) (the base two back of row r is W's base at LF(r))."""
    per = (r1 - r0 + nsub - 1) // nsub
    for p in prange(nsub):
        a = r0 + p * per
        b = min(r1, a + per)
        if a >= b:
            continue
        rk = np.empty(4, np.int64)
        for c in range(4):
            rk[c] = _occ(W, dollar, c, a)
        for row in range(a, b):
            if row == dollar:
                codes[row - r0] = 0
                specials[0] = row
                continue
            c = _wget(W, row)
            lf = C1[c] + rk[c]
            rk[c] += 1
            if lf == dollar:
                codes[row - r0] = c
                specials[1] = row
            else:
                codes[row - r0] = _wget(W, lf) * 4 + c


def _pack_hi(sa, m, hi):
    """The bits 32 of the samples (hi, one a byte) into sa[m:], 32 a uint32 word (fm.pack_sa's layout)."""
    out = sa[m:].view(np.uint8)
    step = 1 << 24
    for a in range(0, m, step):
        bits = np.packbits(hi[a:a + step].astype(bool), bitorder="little")
        out[a >> 3:(a >> 3) + bits.shape[0]] = bits


# ------------------------------------------------------------------------------------------------
# the build
# ------------------------------------------------------------------------------------------------

def build_fm_blockwise(pac: np.ndarray, sa_shift: int, wide=None, progress=None, block: int = BLOCK,
                       first: int = FIRST, tmp_dir=None, log=None):
    """The FMIndex of pac + revcomp(pac) (fm.build_fm's), block by block (module docstring). ``tmp_dir``: where
    the occurrence table is kept while it is built (a file-backed map, removed when the index is dropped); None:
    in memory. ``log``: optional callable given one line a stage."""
    pac = np.ascontiguousarray(pac, dtype=np.uint8)
    lp = int(pac.shape[0])
    if lp < 1:
        raise ValueError("cannot build an FM-index of an empty reference")
    n = 2 * lp
    wide = table_layout(n, wide)
    block, first = max(1, int(block)), max(1, int(first))

    def _log(msg):
        if log is not None:
            log(msg)

    def _p(stage, done, total):
        if progress is not None:
            progress(stage, done, total)

    t0 = time.perf_counter()
    _p("sa", 0, 1)
    P = pack_text(pac)
    W = np.zeros((((n + 1) >> _BLK) + 2, 8), np.uint64)
    cnt = np.zeros(4, np.int64)                 # the bases of T[k:]
    L, k, dollar = 1, n, 0                      # rows so far (the empty suffix), the first old position, its row
    cp_pos, cp_row = [n], [0]
    nblocks, t_chain, t_sort, t_merge = 0, 0.0, 0.0, 0.0
    while k > 0:
        m = min(k, block, max(first, L - 1))
        C = _c1(cnt)                            # the first row of each base among the old suffixes
        key = np.empty(m + 1, np.uint64)
        t = time.perf_counter()
        _chain(P, W, C, np.int64(dollar), np.int64(k), np.int64(m), key)
        t_chain += time.perf_counter() - t
        t = time.perf_counter()
        isa = _block_ranks(key)
        Rs, ch, q0 = _sorted_new(key, isa, P, np.int64(k), np.int64(m))
        del key, isa
        t_sort += time.perf_counter() - t
        t = time.perf_counter()
        # the kept rows move up by the new suffixes before them (R <= row)
        cp_row = [r + int(np.searchsorted(Rs, r, side="right")) for r in cp_row]
        _wset(W, np.int64(dollar), _base(P, np.int64(k - 1)))  # the old $ row: the base before the suffix at k
        _merge(W, np.int64(L), Rs, ch)
        dollar = int(Rs[q0]) + int(q0)
        del Rs, ch
        L += m
        _recount(W, np.int64(L), np.int64(dollar))
        t_merge += time.perf_counter() - t
        _block_bases(P, np.int64(k), np.int64(m), cnt)
        k -= m
        cp_pos.append(k)
        cp_row.append(dollar)
        nblocks += 1
    del P
    if L != n + 1:
        raise RuntimeError(f"blockwise BWT lost rows ({L - 1} of {n})")
    primary = dollar
    _log(f"BWT of {n} bases in {nblocks} block(s) of up to {min(block, n)}: ranks {t_chain:.2f} s, "
         f"sorting {t_sort:.2f} s, merging {t_merge:.2f} s ({time.perf_counter() - t0:.2f} s)")
    _p("sa", 1, 1)

    C1 = _c1(cnt)                               # cnt: now the bases of the whole text
    _p("sample", 0, 1)
    t = time.perf_counter()
    m_s = (n >> sa_shift) + 1
    sa = np.zeros(sa_words(n, sa_shift, wide), np.uint32)
    hi = np.zeros(m_s if wide else 0, np.uint8)   # bit 32 of the samples: only the wide layout has one
    _walk(W, C1, np.int64(primary), np.array(cp_pos, np.int64), np.array(cp_row, np.int64), np.int64(sa_shift),
          sa[:m_s], hi)
    if wide:
        _pack_hi(sa, m_s, hi)
    del hi
    _log(f"suffix array sampled every {1 << sa_shift} rows by {len(cp_pos)} LF walks in "
         f"{time.perf_counter() - t:.2f} s")
    _p("sample", 1, 1)

    nsub = max(1, int(get_num_threads()))

    def codes_for(r0, r1, codes, specials, W=W):
        _codes_w(W, C1, np.int64(primary), np.int64(r0), np.int64(r1), np.int64(nsub), codes, specials)

    alloc = None
    if tmp_dir is not None:
        def alloc(words):
            fd, path = tempfile.mkstemp(prefix=".g3i-occ-", dir=tmp_dir)
            try:
                os.ftruncate(fd, 4 * words)
                mm = np.memmap(path, dtype=np.uint32, mode="r+", shape=(words,))
            finally:
                os.close(fd)
                os.unlink(path)            # the map keeps it until the index is dropped
            return mm
    occ, counts, p0, row_sa1 = _occ_table(n, wide, codes_for, lambda b1, nb: _p("occ", b1, nb), alloc=alloc)
    if p0 != primary:
        raise RuntimeError("blockwise BWT: the $ row moved")
    del W, codes_for
    t0b = int(pac[0])
    return _assemble(n, lp, primary, row_sa1, t0b, 3 - t0b, cnt, counts, occ, wide, sa, sa_shift)

