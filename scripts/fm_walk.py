#!/usr/bin/env python3
"""Check an FM-index against its text: walk it backwards from the row of '$' for K steps (LF mapping) and compare
each row's BWT base with the text base before its suffix, and each sampled row's SA value with its text position
(the walk starts at the text's end: on a 3.1 Gbp index its positions are above 2**32, the wide layout's bit 32).
A wrong row anywhere on the walk shows as a wrong base or SA from there on. With PAIRS, also that many random rows
all over the index: each row's suffix (located with the sampled SA) must sort below the next row's, compared base by
base in the text (up to 2**20 bases; a pair still equal there is counted as undecided). Used on indexes too large to
build with divsufsort (scripts/gpu_index.sh, the blockwise CPU build).

    python scripts/fm_walk.py PREFIX [K] [PAIRS]   (PREFIX.g3i; prints one line, exits 1 on a mismatch)
"""
from __future__ import annotations

import sys
import time

import numpy as np

from g3align.index.fm import fm_bwt, fm_lf, fm_sa
from g3align.index.store import load_index
from g3align.jit import njit


@njit(cache=True, inline="always")
def _t(pac, n, q):
    """T[q] of T = pac + revcomp(pac), n = len(T)."""
    lp = pac.shape[0]
    return np.int64(pac[q]) if q < lp else np.int64(3 - pac[n - 1 - q])


@njit(cache=True)
def walk(fm, pac, k):
    """(base mismatches, sampled rows checked, SA mismatches) over the first k rows of the walk from row 0."""
    n = fm.n
    mask = (np.int64(1) << fm.sa_shift) - 1
    row = np.int64(0)
    bad = 0
    checked = 0
    sa_bad = 0
    for i in range(min(k, n)):
        pos = n - i                      # the suffix of this row starts at pos
        if (row & mask) == 0:
            checked += 1
            if fm_sa(fm, row) != pos:     # a sampled row: its stored value (bit 32 included, wide layout)
                sa_bad += 1
        if fm_bwt(fm, row) != _t(pac, n, pos - 1):   # the base before it
            bad += 1
        row = fm_lf(fm, row)
    return bad, checked, sa_bad


@njit(cache=True)
def order(fm, pac, rows):
    """(pairs out of order, pairs undecided) over the rows r, r + 1 (r in rows, 1 <= r < n)."""
    n = fm.n
    bad = 0
    undecided = 0
    for j in range(rows.shape[0]):
        r = rows[j]
        a = fm_sa(fm, r)
        b = fm_sa(fm, r + 1)
        d = 0
        while d < (1 << 20):
            if b + d >= n:                 # the next row's suffix ended first: it is the smaller
                bad += 1
                break
            if a + d >= n:
                break
            x, y = _t(pac, n, a + d), _t(pac, n, b + d)
            if x != y:
                if x > y:
                    bad += 1
                break
            d += 1
        if d == (1 << 20):
            undecided += 1
    return bad, undecided


def main() -> int:
    prefix = sys.argv[1]
    k = int(float(sys.argv[2])) if len(sys.argv) > 2 else 10_000_000
    t = time.perf_counter()
    ref, fm = load_index(prefix)
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    bad, checked, sa_bad = walk(fm, ref.pac, k)
    t_walk = time.perf_counter() - t
    print(f"fm_walk {prefix}: loaded in {t_load:.1f} s; {min(k, fm.n):,} rows walked in {t_walk:.1f} s: {bad} wrong "
          f"bases, {checked:,} sampled rows checked, {sa_bad} wrong SA values", file=sys.stderr)
    if len(sys.argv) > 3:
        pairs = int(float(sys.argv[3]))
        rows = np.sort(np.random.default_rng(1).integers(1, fm.n, pairs))
        t = time.perf_counter()
        out, und = order(fm, ref.pac, rows)
        print(f"fm_walk {prefix}: {pairs:,} random rows against the next one in {time.perf_counter() - t:.1f} s: "
              f"{out} out of order, {und} undecided after 2**20 bases", file=sys.stderr)
        bad += out
    return 1 if bad or sa_bad else 0


if __name__ == "__main__":
    sys.exit(main())
