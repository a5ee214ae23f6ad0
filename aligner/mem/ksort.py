"""Deterministic introsort with bwa's exact element movements (klib ksort.h semantics).

bwa sorts seeds, chains and alignment regions with klib's introsort, which is not stable: when two
records compare equal, their final order is decided by the exact sequence of swaps. Reproducing bwa
record for record therefore needs the same algorithm, not just "a sort by the same key".

`introsort(idx, n, K)` permutes `idx[0:n]` (record indices) exactly as ksort's `ks_introsort` would
permute the records themselves, where record i is "less than" record j when row K[i] is
lexicographically smaller than row K[j] (K: int64[n_records, n_keys]; a descending key is stored
negated, an unsigned 64-bit key with its top bit flipped). Comparisons only read keys, so sorting
indices moves them like the records. One comparator keeps every caller cacheable by numba.
"""
import numpy as np

from g3align.aligner.runtime.nbshare import unowned
from g3align.jit import njit


@njit(cache=True, inline="always")
def lt(K, i, j):
    for c in range(K.shape[1]):
        if K[i, c] != K[j, c]:
            return K[i, c] < K[j, c]
    return False


@njit(cache=True, inline="always")
def _insertsort(idx, s, t, K):
    # insertion sort of idx[s:t]
    i = s + 1
    while i < t:
        j = i
        while j > s and lt(K, idx[j], idx[j - 1]):
            tmp = idx[j]
            idx[j] = idx[j - 1]
            idx[j - 1] = tmp
            j -= 1
        i += 1


@njit(cache=True)
def _combsort(idx, s, n, K):
    shrink = 1.2473309501039786540366528676643
    gap = n
    while True:
        if gap > 2:
            gap = int(gap / shrink)
            if gap == 9 or gap == 10:
                gap = 11
        do_swap = False
        i = s
        while i < s + n - gap:
            j = i + gap
            if lt(K, idx[j], idx[i]):
                tmp = idx[i]
                idx[i] = idx[j]
                idx[j] = tmp
                do_swap = True
            i += 1
        if not (do_swap or gap > 2):
            break
    if gap != 1:
        _insertsort(idx, s, s + n, K)


@njit(cache=True)
def introsort(idx, n, K):
    """Sort idx[0:n] in place with ksort's introsort (median-of-3 quicksort, combsort fallback,
    final insertion sort over the whole array)."""
    introsort_ws(idx, n, K, np.empty((STACK_ROWS if n > 17 else 1, 3), np.int64))


STACK_ROWS = 2 * 64 + 4 + 64  # introsort_ws: rows of range stack any n needs (a push needs a side of 17+ records)


@njit(cache=True)
def introsort_ws(idx, n, K, stack):
    """introsort with its range stack given: int64[STACK_ROWS, 3] (or any rows when n <= 17), e.g. a view of
    a caller's scratch, so that the sort allocates nothing."""
    idx, K, stack = unowned((idx, K, stack))  # the caller holds all three: no reference counts per comparison
    if n < 1:
        return
    if n == 2:
        if lt(K, idx[1], idx[0]):
            tmp = idx[0]
            idx[0] = idx[1]
            idx[1] = tmp
        return
    d = 2
    while (1 << d) < n:
        d += 1
    # stack: (left, right, depth) per pushed range; at most 2 * d + 4 of them
    top = 0
    s = 0
    t = n - 1
    d <<= 1
    while True:
        if s < t:
            d -= 1
            if d == 0:
                _combsort(idx, s, t - s + 1, K)
                t = s
                continue
            i = s
            j = t
            k = i + ((j - i) >> 1) + 1
            if lt(K, idx[k], idx[i]):
                if lt(K, idx[k], idx[j]):
                    k = j
            else:
                k = i if lt(K, idx[j], idx[i]) else j
            rp = idx[k]
            if k != t:
                tmp = idx[k]
                idx[k] = idx[t]
                idx[t] = tmp
            while True:
                i += 1
                while lt(K, idx[i], rp):
                    i += 1
                j -= 1
                while i <= j and lt(K, rp, idx[j]):
                    j -= 1
                if j <= i:
                    break
                tmp = idx[i]
                idx[i] = idx[j]
                idx[j] = tmp
            tmp = idx[i]
            idx[i] = idx[t]
            idx[t] = tmp
            if i - s > t - i:
                if i - s > 16:
                    stack[top, 0] = s
                    stack[top, 1] = i - 1
                    stack[top, 2] = d
                    top += 1
                s = i + 1 if t - i > 16 else t
            else:
                if t - i > 16:
                    stack[top, 0] = i + 1
                    stack[top, 1] = t
                    stack[top, 2] = d
                    top += 1
                t = i - 1 if i - s > 16 else s
        else:
            if top == 0:
                _insertsort(idx, 0, n, K)
                return
            top -= 1
            s = stack[top, 0]
            t = stack[top, 1]
            d = stack[top, 2]


@njit(cache=True)
def sort_distinct_u64(a):
    """Sort a (distinct uint64 keys) ascending in place: insertion sort when short (no allocation),
    numba's quicksort otherwise."""
    n = a.shape[0]
    if n > 32:
        a.sort()
        return
    for i in range(1, n):
        v = a[i]
        j = i
        while j > 0 and a[j - 1] > v:
            a[j] = a[j - 1]
            j -= 1
        a[j] = v
