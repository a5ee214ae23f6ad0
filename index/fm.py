"""FM-index over ``T = pac + revcomp(pac)`` with a double-step occurrence table.

Conventions (docs/DESIGN.md): ``n = 2*l_pac``; rows ``0..n`` are the sorted suffixes of ``T$``; row 0
is the empty suffix ``$`` (``SA[0] = n``); row ``j >= 1`` is divsufsort's ``SA[j-1]``; ``primary`` is
the row with ``SA = 0``. This is bwa's row numbering: ``fm_sa(fm, row)`` equals bwa's ``bwt_sa`` for
every row ``>= 1``.

Occurrence table
----------------
Every row ``j`` carries a 4-bit *pair code* ``T[SA[j]-2] << 2 | T[SA[j]-1]`` (the two bases before its
suffix). Two rows have no such pair: the ``primary`` row (SA = 0, BWT char ``$``) stores code 0 and
the row ``row_sa1`` (SA = 1, one base ``T[0]`` before it) stores code ``T[0]`` (i.e. pair ``A,T[0]``,
whose low 2 bits are the correct single preceding base). Queries subtract these two fake entries.

Rows are grouped in blocks of ``occ_intv = 64`` (fixed). Each block of the flat uint32 array ``occ``
(``occ_stride = 24`` words) holds, at ``occ[b*24 : b*24 + 16]``, the 16 counts of the stored codes in rows
``< b*occ_intv``, followed by the block's codes, 16 per 64-bit code word stored as two uint32 (low word first;
row ``b*occ_intv + 16*w + k`` is nibble ``k`` (bits ``4k..4k+3``) of code word ``w``). There is a final block
so that ``occ(c, n + 1)`` works: ``nblocks = ((n + 1) >> 6) + 1``.

With ``occ_wide == 0`` (``n + 1 < 2**32``) the counts are the whole counts. With ``occ_wide == s`` (7..31;
``SUPER_SHIFT`` = 31 for ``n + 1 >= 2**32``, a smaller s only forced by tests) the rows also form superblocks of
``2**s`` rows: a block's counts are those of the rows from its superblock's first row, and after the blocks,
at ``occ[nblocks*24 + 32*j ...]``, superblock j's 16 whole counts (rows ``< j << s``) follow as 64-bit values
(two uint32, low first). So the table keeps 1.5 bytes a row at every size, and ``n + 1 < 2**33``
(``MAX_ROWS``).

``occ2(ab, i) = #{j < i : SA[j] >= 2, T[SA[j]-2] = a, T[SA[j]-1] = b}``
``occ1(c, i)  = #{j < i : SA[j] >= 1, T[SA[j]-1] = c}`` = sum over a of the stored counts of ``a<<2|c``
(minus the primary's fake code when c == 0).

``C1[c]`` (c = 0..3) is the first row starting with base c, ``C1[4] = C1[5] = n + 1``.
``C2[ab]`` (ab = 0..15) is the first row starting with ``ab``, ``C2[16] = n + 1``; the interval of
``ab`` is ``[C2[ab], C2[ab] + occ2(ab, n + 1))``.

Sampled suffix array: ``sa[i] = SA[i*sa_intv]`` (``sa[0] = n``), ``sa_intv`` a power of two, i below
``m = (n >> sa_shift) + 1``. uint32: with ``occ_wide == 0`` the m values; otherwise their low 32 bits, then
``ceil(m / 32)`` words of their bit 32 (bit k of word q: sample 32q + k; ``pack_sa``).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import get_num_threads, prange, types
from numba.extending import intrinsic

from g3align.jit import njit

__all__ = [
    "FMIndex",
    "build_fm",
    "build_text",
    "fm_bwt",
    "fm_count",
    "fm_from_bwt",
    "fm_lf",
    "fm_locate",
    "fm_occ1",
    "fm_occ2",
    "fm_occ4",
    "fm_sa",
    "fm_step1",
    "fm_step2",
    "wide_layout",
]

FMIndex = namedtuple(
    "FMIndex",
    [
        "n",  # int: text length 2*l_pac (rows 0..n)
        "l_pac",  # int: forward reference length
        "primary",  # int: row whose SA is 0 (BWT char '$')
        "row_sa1",  # int: row whose SA is 1 (preceded only by T[0])
        "t0",  # int: T[0], the fake pair code stored at row_sa1
        "C1",  # int64[6]
        "C2",  # int64[17]
        "occ",  # uint32[]: the blocks (then, with occ_wide, the superblocks' counts)
        "occ_shift",  # int: log2(occ_intv) = 6 (fixed; recorded for the file format)
        "occ_stride",  # int: words of occ per block (24)
        "occ_wide",  # int: 0, or log2 of a superblock's rows (SUPER_SHIFT from 2**32 rows)
        "sa",  # uint32[]: SA at rows multiple of sa_intv (with occ_wide: low words, then the bits 32)
        "sa_shift",  # int: log2(sa_intv)
    ],
)

_NIB_LO = np.uint64(0x1111111111111111)
_U64_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


@intrinsic
def popcount64(typingctx, x):
    """LLVM ctpop on a uint64 (compiles to POPCNT)."""
    if not isinstance(x, types.Integer):
        return None
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        val = context.cast(builder, args[0], signature.args[0], types.uint64)
        return builder.ctpop(val)

    return sig, codegen


# ------------------------------------------------------------------------------------------------
# queries
# ------------------------------------------------------------------------------------------------


# The occurrence table uses 64-row blocks (4 code words); the block size is fixed so that the
# in-block counting below is branchless and fully unrolled.
OCC_SHIFT = 6
OCC_INTV = 1 << OCC_SHIFT
OCC_STRIDE = 24           # uint32 words a block: 16 counts, 4 code words of two uint32
SUPER_SHIFT = 31          # log2 of a superblock's rows in the layout of 2**32 rows or more
MAX_ROWS = (1 << 33) - 1  # rows the layout holds at most (n + 1: the sampled SA keeps one bit above 32)


@njit(inline="always")
def _code_word(occ, wide, base, w):
    """Code word w (0..3) of the block starting at occ[base] (two uint32, low first, in both layouts)."""
    lo = np.uint64(occ[base + 16 + 2 * w])
    hi = np.uint64(occ[base + 17 + 2 * w])
    return lo | (hi << np.uint64(32))


@njit(inline="always")
def _sup(fm, i, ab):
    """Wide layout: the count of code ab in the rows before row i's superblock (0 in the narrow layout)."""
    if fm.occ_wide == 0:
        return np.int64(0)
    t = ((((fm.n + 1) >> OCC_SHIFT) + 1) * OCC_STRIDE) + (i >> fm.occ_wide) * 32 + 2 * ab
    return np.int64(fm.occ[t]) | (np.int64(fm.occ[t + 1]) << np.int64(32))


@njit(inline="always")
def _sa_at(fm, j):
    """Sample j of the suffix array (the bit 32 from its words after the m low words in the wide layout)."""
    v = np.int64(fm.sa[j])
    if fm.occ_wide != 0:
        m = (fm.n >> fm.sa_shift) + 1
        v |= np.int64((fm.sa[m + (j >> 5)] >> np.uint32(j & 31)) & np.uint32(1)) << np.int64(32)
    return v


@njit(inline="always")
def _keep(r, w):
    """Mask of the nibbles of code word w that belong to rows < r of the block (r in 0..63)."""
    lim = r - 16 * w
    if lim <= 0:
        return np.uint64(0)
    if lim >= 16:
        return _U64_ONES
    return _U64_ONES >> np.uint64(64 - 4 * lim)


@njit(inline="always")
def _count_pair(occ, wide, base, r, pat):
    """Rows < r of the block whose 4-bit code equals the pattern nibble (pat = code * 0x111..1)."""
    cnt = np.int64(0)
    for w in range(4):
        x = _code_word(occ, wide, base, w) ^ pat
        x = x | (x >> np.uint64(1))
        x = x | (x >> np.uint64(2))
        cnt += np.int64(popcount64(~x & _NIB_LO & _keep(r, w)))
    return cnt


@njit(inline="always")
def _count_low2(occ, wide, base, r, pat):
    """Rows < r of the block whose code's low 2 bits (the BWT base) equal those of pat."""
    cnt = np.int64(0)
    for w in range(4):
        x = _code_word(occ, wide, base, w) ^ pat
        x = x | (x >> np.uint64(1))
        cnt += np.int64(popcount64(~x & _NIB_LO & _keep(r, w)))
    return cnt


@njit(inline="always")
def _occ2(fm, ab, i):
    occ = fm.occ
    base = (i >> OCC_SHIFT) * fm.occ_stride
    cnt = np.int64(occ[base + ab]) + _sup(fm, i, ab)
    cnt += _count_pair(occ, fm.occ_wide, base, i & (OCC_INTV - 1), np.uint64(ab) * _NIB_LO)
    if ab == 0 and fm.primary < i:
        cnt -= 1
    if ab == fm.t0 and fm.row_sa1 < i:
        cnt -= 1
    return cnt


@njit(inline="always")
def _occ1(fm, c, i):
    occ = fm.occ
    base = (i >> OCC_SHIFT) * fm.occ_stride
    cnt = (
        np.int64(occ[base + c])
        + np.int64(occ[base + 4 + c])
        + np.int64(occ[base + 8 + c])
        + np.int64(occ[base + 12 + c])
    )
    if fm.occ_wide != 0:
        cnt += _sup(fm, i, c) + _sup(fm, i, 4 + c) + _sup(fm, i, 8 + c) + _sup(fm, i, 12 + c)
    cnt += _count_low2(occ, fm.occ_wide, base, i & (OCC_INTV - 1), np.uint64(c) * _NIB_LO)
    if c == 0 and fm.primary < i:
        cnt -= 1
    return cnt


@njit(inline="always")
def _bwt(fm, row):
    if row == fm.primary:
        return np.int64(4)
    base = (row >> OCC_SHIFT) * fm.occ_stride
    r = row & (OCC_INTV - 1)
    word = _code_word(fm.occ, fm.occ_wide, base, r >> 4)
    return np.int64((word >> np.uint64(4 * (r & 15))) & np.uint64(3))


# Public query functions. They are compiled without NRT reference counting (_nrt=False): with it,
# every access to an array field of the FMIndex tuple costs atomic incref/decref pairs, which made
# an occ lookup 3-4x slower. They allocate nothing, so this is safe; callers may use NRT freely.


@njit(cache=True, _nrt=False)
def fm_occ2(fm, ab, i):
    """#{rows j < i whose two preceding bases are (a, b)}, ab = a<<2|b, 0 <= i <= n+1."""
    return _occ2(fm, ab, i)


@njit(cache=True, _nrt=False)
def fm_occ1(fm, c, i):
    """#{rows j < i whose preceding base (BWT char) is c}, c in 0..3, 0 <= i <= n+1."""
    return _occ1(fm, c, i)


@njit(cache=True, _nrt=False)
def fm_occ4(fm, i):
    """(occ1(0,i), occ1(1,i), occ1(2,i), occ1(3,i)) with one block visit."""
    occ = fm.occ
    wide = fm.occ_wide
    base = (i >> OCC_SHIFT) * fm.occ_stride
    r = i & (OCC_INTV - 1)
    o0 = np.int64(0)
    o1 = np.int64(0)
    o2 = np.int64(0)
    o3 = np.int64(0)
    for a in range(4):
        o0 += np.int64(occ[base + 4 * a]) + _sup(fm, i, 4 * a)
        o1 += np.int64(occ[base + 4 * a + 1]) + _sup(fm, i, 4 * a + 1)
        o2 += np.int64(occ[base + 4 * a + 2]) + _sup(fm, i, 4 * a + 2)
        o3 += np.int64(occ[base + 4 * a + 3]) + _sup(fm, i, 4 * a + 3)
    for w in range(4):
        keep = _NIB_LO & _keep(r, w)
        lo = _code_word(occ, wide, base, w)
        x1 = lo ^ np.uint64(0x1111111111111111)
        x2 = lo ^ np.uint64(0x2222222222222222)
        x3 = lo ^ np.uint64(0x3333333333333333)
        o0 += np.int64(popcount64(~(lo | (lo >> np.uint64(1))) & keep))
        o1 += np.int64(popcount64(~(x1 | (x1 >> np.uint64(1))) & keep))
        o2 += np.int64(popcount64(~(x2 | (x2 >> np.uint64(1))) & keep))
        o3 += np.int64(popcount64(~(x3 | (x3 >> np.uint64(1))) & keep))
    if fm.primary < i:
        o0 -= 1
    return o0, o1, o2, o3


@njit(cache=True, _nrt=False)
def fm_bwt(fm, row):
    """BWT character of row: the base preceding its suffix (0..3), or 4 for the primary row ('$')."""
    return _bwt(fm, row)


@njit(cache=True, _nrt=False)
def fm_lf(fm, row):
    """LF mapping: row of the suffix one position to the left (primary -> 0)."""
    if row == fm.primary:
        return np.int64(0)
    c = _bwt(fm, row)
    return fm.C1[c] + _occ1(fm, c, row)


@njit(cache=True, _nrt=False)
def fm_step1(fm, k, l, c):
    """Prepend base c (0..3) to the pattern of row interval [k, l); c > 3 gives an empty interval."""
    if c > 3:
        return np.int64(fm.n + 1), np.int64(fm.n + 1)
    C = fm.C1[c]
    return C + _occ1(fm, c, k), C + _occ1(fm, c, l)


@njit(cache=True, _nrt=False)
def fm_step2(fm, k, l, a, b):
    """Prepend bases a, b (a leftmost: pattern P -> a b P) to the interval [k, l)."""
    if a > 3 or b > 3:
        return np.int64(fm.n + 1), np.int64(fm.n + 1)
    ab = (a << 2) | b
    C = fm.C2[ab]
    return C + _occ2(fm, ab, k), C + _occ2(fm, ab, l)


@njit(cache=True, _nrt=False)
def fm_sa(fm, row):
    """Suffix-array value (position in T) of a row, by LF walking to a sampled row."""
    mask = (np.int64(1) << fm.sa_shift) - 1
    steps = np.int64(0)
    while row & mask:
        if row == fm.primary:
            return steps
        c = _bwt(fm, row)
        row = fm.C1[c] + _occ1(fm, c, row)
        steps += 1
    return steps + _sa_at(fm, row >> fm.sa_shift)


@njit(cache=True)
def fm_count(fm, pat):
    """Row interval [k, l) of a pattern (uint8 codes) using double steps (testing/utility)."""
    k = np.int64(0)
    l = np.int64(fm.n + 1)
    i = pat.shape[0]
    while i >= 2 and k < l:
        k, l = fm_step2(fm, k, l, np.int64(pat[i - 2]), np.int64(pat[i - 1]))
        i -= 2
    if i == 1 and k < l:
        k, l = fm_step1(fm, k, l, np.int64(pat[0]))
    return k, l


@njit(cache=True)
def fm_locate(fm, k, l):
    """SA values of the rows [k, l) (int64 array)."""
    out = np.empty(max(l - k, 0), dtype=np.int64)
    for j in range(k, l):
        out[j - k] = fm_sa(fm, j)
    return out


# ------------------------------------------------------------------------------------------------
# construction
# ------------------------------------------------------------------------------------------------


def build_text(pac: np.ndarray) -> np.ndarray:
    """T = pac + revcomp(pac) as uint8 codes 0..3."""
    pac = np.asarray(pac, dtype=np.uint8)
    lp = pac.shape[0]
    t = np.empty(2 * lp, dtype=np.uint8)
    t[:lp] = pac
    np.subtract(3, pac[::-1], out=t[lp:])
    return t


@njit(cache=True, parallel=True)
def _codes_sa(T, SA, n, r0, r1, codes, specials):
    """codes[r - r0] = the pair code of row r (module docstring) for rows [r0, r1), from the text and its suffix
    array; specials[0] / [1] receive the rows whose suffix starts at 0 (primary) / 1 when they are in range."""
    for row in prange(r0, r1):
        s = n if row == 0 else np.int64(SA[row - 1])
        if s >= 2:
            code = np.int64(T[s - 2]) * 4 + np.int64(T[s - 1])
        elif s == 1:
            code = np.int64(T[0])
            specials[1] = row
        else:
            code = np.int64(0)
            specials[0] = row
        codes[row - r0] = code


@njit(cache=True, parallel=True)
def _codes_bwt(B, C1, ranks, r0, r1, codes, specials):
    """_codes_sa from a BWT instead: B[r] is the base before row r's suffix (uint8, 4 at the primary row, whose
    BWT character is '$'); ranks[p] holds the counts of each base in B[:start of piece p] for the pieces that
    split [r0, r1) as here. The base two before row r's suffix is B[LF(r)], LF(r) = C1[c] + rank of c = B[r]."""
    nsub = ranks.shape[0]
    per = (r1 - r0 + nsub - 1) // nsub
    for p in prange(nsub):
        rk = ranks[p].copy()
        for row in range(r0 + p * per, min(r1, r0 + (p + 1) * per)):
            c = np.int64(B[row])
            if c > 3:
                codes[row - r0] = 0
                specials[0] = row
                continue
            lf = C1[c] + rk[c]
            rk[c] += 1
            b = np.int64(B[lf])
            if b > 3:  # the suffix at text position 1: only T[0] before it
                codes[row - r0] = c
                specials[1] = row
            else:
                codes[row - r0] = b * 4 + c


@njit(cache=True, parallel=True)
def _piece_ranks(B, r0, r1, nsub, carry):
    """Counts of each base (0..3) in B[:start of each of the nsub pieces of [r0, r1)], given carry = the counts
    in B[:r0]; carry is advanced to the counts in B[:r1]."""
    per = (r1 - r0 + nsub - 1) // nsub
    own = np.zeros((nsub, 4), np.int64)
    for p in prange(nsub):
        for row in range(r0 + p * per, min(r1, r0 + (p + 1) * per)):
            c = B[row]
            if c < 4:
                own[p, c] += 1
    ranks = np.empty((nsub, 4), np.int64)
    for p in range(nsub):
        for c in range(4):
            ranks[p, c] = carry[c]
            carry[c] += own[p, c]
    return ranks


@njit(cache=True, parallel=True)
def _fill_occ(codes, r0, n, occ, b0, b1, shift, stride, wide, nsub, sub_tot):
    """Fill blocks [b0, b1) of the occurrence table from the pair codes of their rows (codes[r - r0], rows
    r0 = b0 << shift up to n) in ``nsub`` parallel pieces.

    The 16 counts of each block are written relative to the start of its piece; ``sub_tot[p]``
    receives the code totals of piece p (``_fix_occ`` turns them into cumulative counts).
    """
    intv = np.int64(1) << shift
    nwords = intv >> 4
    per = (b1 - b0 + nsub - 1) // nsub
    for p in prange(nsub):
        pb0 = b0 + p * per
        pb1 = min(b1, pb0 + per)
        counts = np.zeros(16, dtype=np.int64)
        for b in range(pb0, pb1):
            base = b * stride
            for ab in range(16):
                occ[base + ab] = counts[ab]
            row = b * intv
            for w in range(nwords):
                word = np.uint64(0)
                for k in range(16):
                    if row <= n:
                        code = np.int64(codes[row - r0])
                        counts[code] += 1
                        word |= np.uint64(code) << np.uint64(4 * k)
                    row += 1
                occ[base + 16 + 2 * w] = word & np.uint64(0xFFFFFFFF)
                occ[base + 17 + 2 * w] = word >> np.uint64(32)
        for ab in range(16):
            sub_tot[p, ab] = counts[ab]


@njit(cache=True)
def _fix_occ(occ, b0, b1, stride, nsub, sub_tot, carry, wide, nbw, sup):
    """Add the counts of everything before each piece; ``carry`` (int64[16]) runs across calls. Wide layout
    (``wide`` = log2 of a superblock's rows): the counts become those from the block's superblock, whose whole
    counts go to occ[nbw + 32*j ...] at its first block; ``sup`` (int64[16]) keeps them across calls."""
    per = (b1 - b0 + nsub - 1) // nsub
    bmask = (np.int64(1) << (wide - OCC_SHIFT)) - 1 if wide else np.int64(0)
    for p in range(nsub):
        pb0 = b0 + p * per
        pb1 = min(b1, pb0 + per)
        for b in range(pb0, pb1):
            base = b * stride
            if wide:
                if (b & bmask) == 0:
                    t = nbw + (b >> (wide - OCC_SHIFT)) * 32
                    for ab in range(16):
                        v = np.int64(occ[base + ab]) + carry[ab]
                        sup[ab] = v
                        occ[t + 2 * ab] = v & np.int64(0xFFFFFFFF)
                        occ[t + 2 * ab + 1] = v >> np.int64(32)
                for ab in range(16):
                    occ[base + ab] = np.int64(occ[base + ab]) + carry[ab] - sup[ab]
            else:
                for ab in range(16):
                    occ[base + ab] += carry[ab]
        for ab in range(16):
            carry[ab] += sub_tot[p, ab]


@njit(cache=True)
def _base_counts(T):
    """Counts of the codes 0..3 in T (a BWT's 4, its '$', left out)."""
    c = np.zeros(4, dtype=np.int64)
    for i in range(T.shape[0]):
        if T[i] < 4:
            c[T[i]] += 1
    return c


def _log2_pow2(x: int, what: str) -> int:
    if x < 1 or (x & (x - 1)) != 0:
        raise ValueError(f"{what} must be a power of two (got {x})")
    return x.bit_length() - 1


def suffix_array(T: np.ndarray) -> np.ndarray:
    """divsufsort suffix array of T (int32 when len(T) < 2**31, else int64)."""
    import pydivsufsort

    return pydivsufsort.divsufsort(np.ascontiguousarray(T, dtype=np.uint8))


def wide_layout(n: int) -> bool:
    """Whether a text of n bases needs the wide table layout (its n + 1 rows do not fit in uint32 counts)."""
    return n + 1 >= (1 << 32)


def table_layout(n: int, wide=None) -> int:
    """occ_wide for a text of n bases: 0, or SUPER_SHIFT from 2**32 rows. ``wide`` forces the wide layout (tests):
    True for SUPER_SHIFT, an int s (7..31) for superblocks of 2**s rows."""
    check_rows(n)
    if wide_layout(n) or wide:
        s = SUPER_SHIFT if wide is None or wide is True or wide is False or wide == 0 else int(wide)
        if not OCC_SHIFT < s <= SUPER_SHIFT:
            raise ValueError(f"superblock shift must be in {OCC_SHIFT + 1}..{SUPER_SHIFT} (got {s})")
        return s
    return 0


def check_rows(n: int) -> None:
    """A one-line ValueError when a text of n bases (both strands) is beyond what the FM-index holds."""
    if n + 1 > MAX_ROWS:
        raise ValueError(f"a reference of {n // 2} bp is beyond g3align's FM-index, which holds at most "
                         f"{(MAX_ROWS - 1) // 2} bp (both strands in fewer than 2**33 rows)")


def occ_words(n: int, wide: int) -> int:
    """uint32 words of the occurrence table of n + 1 rows: the blocks, then (wide layout) the superblocks'."""
    nblocks = ((n + 1) >> OCC_SHIFT) + 1
    nsup = ((nblocks - 1) >> (wide - OCC_SHIFT)) + 1 if wide else 0
    return nblocks * OCC_STRIDE + 32 * nsup


def sa_words(n: int, sa_shift: int, wide: int) -> int:
    """uint32 words of the sampled suffix array: m = (n >> sa_shift) + 1 samples (and their bits 32, wide)."""
    m = (n >> sa_shift) + 1
    return m + ((m + 31) >> 5 if wide else 0)


def pack_sa(samples: np.ndarray, wide: int) -> np.ndarray:
    """The stored sampled suffix array of ``samples`` (SA values < 2**33; module docstring): uint32 values, or in the
    wide layout their low words and then their bits 32, 32 a word; done in pieces (no uint64 copy of the whole)."""
    samples = np.asarray(samples)
    m = int(samples.shape[0])
    if not wide:
        return np.ascontiguousarray(samples, dtype=np.uint32)
    out = np.zeros(m + ((m + 31) >> 5), np.uint32)
    hi = out[m:].view(np.uint8)
    step = 1 << 24  # samples a piece: a multiple of 32 (whole words of bits)
    for a in range(0, m, step):
        part = samples[a:a + step]
        out[a:a + part.shape[0]] = part.astype(np.uint32)  # the low 32 bits (a C cast)
        bits = np.packbits((part >> 32).astype(bool), bitorder="little")
        hi[a >> 3:(a >> 3) + bits.shape[0]] = bits
    return out


def build_fm(pac: np.ndarray, sa_intv: int = 8, progress=None, wide: bool | None = None,
             device: str = "cpu", with_rows=None, stats=None, algo: str = "is", block=None, tmp_dir=None,
             log=None) -> FMIndex:
    """Build the FM-index of ``pac + revcomp(pac)``.

    ``progress``: optional callable ``progress(stage: str, done: int, total: int)`` called as work
    advances (stages ``"text"``, ``"sa"``, ``"occ"``, ``"sample"``). ``wide``: force the wide table layout
    (default: only when ``n + 1 >= 2**32``; forcing it is for tests: ``table_layout``). ``device``: "cpu" sorts the
    suffixes with divsufsort (the whole suffix array in memory); "gpu" by buckets on the GPU (index/sufsort.py,
    never the whole suffix array; the same index). ``with_rows``: optional callable given the sorted rows
    (sufsort.Rows, sampled every min(sa_intv, 32) rows) on either device (bwa's index files are written from
    them). ``stats``: a list that receives sufsort.sort_rows' chunk statistics (GPU). ``algo`` (CPU): "is" for
    divsufsort, "bwtsw" for the blockwise build in bounded memory (index/bwtsw.py: ``block`` suffixes a block at most,
    the occurrence table kept in a file-backed map in ``tmp_dir``, ``log`` a callable given its stage lines); the
    same index.
    """
    pac = np.asarray(pac, dtype=np.uint8)
    if pac.shape[0] < 1:
        raise ValueError("cannot build an FM-index of an empty reference")
    sa_shift = _log2_pow2(int(sa_intv), "sa_intv")
    wide = table_layout(2 * int(pac.shape[0]), wide)
    if device == "gpu":
        return _build_fm_rows(pac, sa_shift, progress, wide, with_rows, "gpu", stats=stats)
    if algo == "bwtsw":
        if with_rows is not None:
            raise ValueError("bwa's index files (--bwa) are written by the GPU build or divsufsort's (-a is), "
                             "not by the blockwise one (-a bwtsw)")
        from g3align.index.bwtsw import BLOCK, build_fm_blockwise
        return build_fm_blockwise(pac, sa_shift, wide=wide, progress=progress, block=block or BLOCK,
                                  tmp_dir=tmp_dir, log=log)

    def _p(stage, done, total):
        if progress is not None:
            progress(stage, done, total)

    _p("text", 0, 1)
    T = build_text(pac)
    n = int(T.shape[0])
    _p("text", 1, 1)

    _p("sa", 0, 1)
    SA = suffix_array(T)
    _p("sa", 1, 1)

    def codes_for(r0, r1, codes, specials, T=T, SA=SA):
        _codes_sa(T, SA, np.int64(n), np.int64(r0), np.int64(r1), codes, specials)

    occ, counts, primary, row_sa1 = _occ_table(n, wide, codes_for, lambda b1, nb: _p("occ", b1, nb))
    del codes_for
    t0 = int(T[0])

    _p("sample", 0, 1)
    intv = 1 << sa_shift
    samples = np.empty(n // intv + 1, dtype=np.int64)
    samples[0] = n
    samples[1:] = SA[intv - 1::intv]
    sa = pack_sa(samples, wide)
    del samples
    if with_rows is not None:
        with_rows(rows_from_sa(T, SA, min(sa_shift, 5)))
    del SA
    _p("sample", 1, 1)
    bc = _base_counts(T)
    last = int(T[n - 1])
    del T
    return _assemble(n, int(pac.shape[0]), primary, row_sa1, t0, last, bc, counts, occ, wide, sa, sa_shift)


def rows_from_sa(T: np.ndarray, SA: np.ndarray, shift: int):
    """sufsort.Rows (every row's pair code, SA every 1 << shift rows) from a text and its whole suffix array."""
    from g3align.index.sufsort import Rows
    n = int(T.shape[0])
    codes = np.empty(n + 1, np.uint8)
    specials = np.full(2, -1, np.int64)
    _codes_sa(T, SA, np.int64(n), np.int64(0), np.int64(n + 1), codes, specials)
    samples = np.empty((n >> shift) + 1, np.uint64)
    samples[0] = n
    samples[1:] = SA[(1 << shift) - 1::1 << shift]
    return Rows(codes=codes, samples=samples, shift=int(shift), primary=int(specials[0]), row_sa1=int(specials[1]))


def _build_fm_rows(pac, sa_shift, progress, wide, with_rows, device, cap=None, stats=None) -> FMIndex:
    """build_fm from index/sufsort.py's bucket sort on ``device`` (gpu; cpu, its numba twin, for the tests), then
    the same occurrence table."""
    from g3align.index.sufsort import sort_rows

    def _p(stage, done, total):
        if progress is not None:
            progress(stage, done, total)

    n = 2 * int(pac.shape[0])
    wide = table_layout(n, wide)
    emit = min(sa_shift, 5) if with_rows is not None else sa_shift
    _p("sa", 0, 1)
    rows = sort_rows(pac, emit, device=device, cap=cap, stats=stats)
    _p("sa", 1, 1)

    def codes_for(r0, r1, codes, specials, all_codes=rows.codes, sp=(rows.primary, rows.row_sa1)):
        codes[:r1 - r0] = all_codes[r0:r1]
        specials[0], specials[1] = sp

    occ, counts, primary, row_sa1 = _occ_table(n, wide, codes_for, lambda b1, nb: _p("occ", b1, nb))
    _p("sample", 0, 1)
    sa = pack_sa(rows.samples[::1 << (sa_shift - emit)], wide)
    if with_rows is not None:
        with_rows(rows)
    del rows, codes_for
    _p("sample", 1, 1)
    cnt = _base_counts(pac)
    bc = cnt + cnt[::-1]               # T's bases: pac's and their complements
    t0 = int(pac[0])
    return _assemble(n, int(pac.shape[0]), primary, row_sa1, t0, 3 - t0, bc, counts, occ, wide, sa, sa_shift)


def occ_stride(wide=0) -> int:
    """uint32 words of ``occ`` per block (both layouts): 16 counts, then the block's pair codes (16 a uint64 word,
    two uint32)."""
    return OCC_STRIDE


def _c1(bc) -> np.ndarray:
    """C1 (6 entries, module docstring) from the counts of the bases 0..3 in the text."""
    C1 = np.empty(6, dtype=np.int64)
    C1[0] = 1
    C1[1:5] = 1 + np.cumsum(bc)
    C1[5] = C1[4]
    return C1


def _occ_table(n: int, wide: int, codes_for, progress=None, alloc=None):
    """(occ, the 16 code totals, primary, row_sa1): the occurrence table of rows 0..n, their pair codes given
    ~32M rows at a time by codes_for(r0, r1, codes, specials) (_codes_sa or _codes_bwt). alloc(words): where the
    table goes (default: a new array in memory)."""
    shift = OCC_SHIFT
    stride = OCC_STRIDE
    nblocks = ((n + 1) >> shift) + 1
    words = occ_words(n, wide)
    occ = np.empty(words, dtype=np.uint32) if alloc is None else alloc(words)
    nbw = np.int64(nblocks * stride)
    sup = np.zeros(16, dtype=np.int64)
    counts = np.zeros(16, dtype=np.int64)
    specials = np.full(2, -1, dtype=np.int64)
    nsub = max(1, int(get_num_threads()))
    sub_tot = np.zeros((nsub, 16), dtype=np.int64)
    step = max(nsub, (1 << 25) >> shift)  # ~32M rows per call
    codes = np.empty(step << shift, np.uint8)
    if progress is not None:
        progress(0, nblocks)
    for b0 in range(0, nblocks, step):
        b1 = min(nblocks, b0 + step)
        r0, r1 = b0 << shift, min(b1 << shift, n + 1)
        if r0 < r1:
            codes_for(r0, r1, codes, specials)
        _fill_occ(codes, np.int64(r0), np.int64(n), occ, np.int64(b0), np.int64(b1), np.int64(shift),
                  np.int64(stride), np.int64(wide), np.int64(nsub), sub_tot)
        _fix_occ(occ, np.int64(b0), np.int64(b1), np.int64(stride), np.int64(nsub), sub_tot, counts,
                 np.int64(wide), nbw, sup)
        if progress is not None:
            progress(b1, nblocks)
    primary, row_sa1 = int(specials[0]), int(specials[1])
    if primary < 1 or row_sa1 < 1:
        raise ValueError("not a BWT of a text and its reverse complement (no row for suffix 0 or 1)")
    return occ, counts, primary, row_sa1


def _assemble(n, l_pac, primary, row_sa1, t0, last, bc, counts, occ, wide, sa, sa_shift) -> FMIndex:
    """The FMIndex, its C1 / C2 from the base counts ``bc`` of the text and the totals ``counts`` of the stored pair
    codes (the pairs at text positions 0..n-2 plus the two fakes); ``last`` = T[n-1]."""
    C1 = _c1(bc)
    pair = counts.copy()
    pair[0] -= 1
    pair[t0] -= 1
    C2 = np.empty(17, dtype=np.int64)
    for a in range(4):
        acc = C1[a] + (1 if last == a else 0)
        for b in range(4):
            C2[a * 4 + b] = acc
            acc += pair[a * 4 + b]
    C2[16] = n + 1
    return FMIndex(n=n, l_pac=l_pac, primary=primary, row_sa1=row_sa1, t0=t0, C1=C1, C2=C2, occ=occ,
                   occ_shift=OCC_SHIFT, occ_stride=OCC_STRIDE, occ_wide=int(wide), sa=sa, sa_shift=sa_shift)


def fm_from_bwt(B: np.ndarray, primary: int, sa: np.ndarray, sa_shift: int, t0: int, wide: bool | None = None,
                progress=None) -> FMIndex:
    """The FM-index of a text T = pac + revcomp(pac) of n bases from its BWT instead of its suffix array (bwa's
    index files: index/bwafmt.read_bwa_index). B: uint8[n + 1], B[r] = the base before row r's suffix,
    4 at ``primary`` (the row of the whole text, BWT character '$'); sa: the sampled suffix array (sa[0] = n,
    sa[i] = SA at row i << sa_shift); t0 = T[0]. Each row's second base back is B[LF(r)], so the pair codes come
    from one pass over B."""
    n = int(B.shape[0]) - 1
    if n < 2 or B[primary] != 4:
        raise ValueError("not a BWT with its '$' at the primary row")
    wide = table_layout(n, wide)
    bc = _base_counts(B)
    C1 = _c1(bc)
    nsub = max(1, int(get_num_threads()))
    carry = np.zeros(4, np.int64)

    def codes_for(r0, r1, codes, specials):
        ranks = _piece_ranks(B, np.int64(r0), np.int64(r1), np.int64(nsub), carry)
        _codes_bwt(B, C1, ranks, np.int64(r0), np.int64(r1), codes, specials)

    occ, counts, p, row_sa1 = _occ_table(n, wide, codes_for, progress)
    if p != primary:
        raise ValueError("not a BWT with its '$' at the primary row")
    last = int(B[0])  # row 0 is the suffix '$': the base before it is T[n-1]
    sa = pack_sa(sa, wide)
    return _assemble(n, n // 2, primary, row_sa1, int(t0), last, bc, counts, occ, wide, sa, int(sa_shift))
