#!/usr/bin/env python3
"""Check an FM-index against its text: walk it backwards from the row of '$' for K steps (LF mapping) and compare
each row's BWT base with the text base before its suffix, and each sampled row's SA value with its text position
(the walk starts at the text's end: on a 3.1 Gbp index its positions are above 2**32, the wide layout's bit 32).
A wrong row anywhere on the walk shows as a wrong base or SA from there on. Used on indexes too large to build on
the CPU (scripts/gpu_index.sh).

    python scripts/fm_walk.py PREFIX [K]      (PREFIX.g3i; prints one line, exits 1 on a mismatch)
"""
from __future__ import annotations

import sys
import time

import numpy as np

from g3align.index.fm import fm_bwt, fm_lf, fm_sa
from g3align.index.store import load_index
from g3align.jit import njit


@njit(cache=True)
def walk(fm, pac, k):
    """(base mismatches, sampled rows checked, SA mismatches) over the first k rows of the walk from row 0."""
    n = fm.n
    lp = pac.shape[0]
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
        q = pos - 1                      # the base before it: T[q]
        t = np.int64(pac[q]) if q < lp else np.int64(3 - pac[n - 1 - q])
        if fm_bwt(fm, row) != t:
            bad += 1
        row = fm_lf(fm, row)
    return bad, checked, sa_bad


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
    return 1 if bad or sa_bad else 0


if __name__ == "__main__":
    sys.exit(main())
