"""The sorts of the mem path: their allocation-free shortcuts must order records exactly as klib's introsort
(ksort.introsort, which reproduces bwa's element moves; tied keys included)."""
import numpy as np
import pytest

from g3align.aligner.mem.extend import NF
from g3align.aligner.mem.ksort import STACK_ROWS, introsort, introsort_ws, sort_distinct_u64
from g3align.aligner.mem.primary import KEY_HASH, KEY_HASH2, KEY_RE, KEY_SCORE_RB_QB, _row_key, _sort_rows


def test_sort_distinct_u64_sorts_short_and_long():
    rng = np.random.default_rng(1)
    for n in (0, 1, 2, 5, 31, 32, 33, 70):
        a = rng.choice(np.uint64(1) << np.uint64(40), n, replace=False).astype(np.uint64)
        want = np.sort(a)
        sort_distinct_u64(a)
        assert np.array_equal(a, want)


def test_introsort_ws_moves_as_introsort():
    rng = np.random.default_rng(2)
    stack = np.full((STACK_ROWS, 3), -7, np.int64)  # garbage in the scratch: must not matter
    for n in (0, 1, 2, 3, 17, 18, 40, 300):
        K = rng.integers(0, 6, (n, 2)).astype(np.int64)  # many ties: the order depends on the swaps
        a, b = np.arange(n), np.arange(n)
        introsort(a, n, K)
        introsort_ws(b, n, K, stack)
        assert np.array_equal(a, b)


@pytest.mark.parametrize("kind", [KEY_RE, KEY_SCORE_RB_QB, KEY_HASH, KEY_HASH2])
def test_sort_rows_shortcuts_match_introsort(kind):
    """_sort_rows' shortcuts (rows already in order; up to 16 rows with distinct keys sorted in place) give the
    rows in the order its introsort path gives, with and without tied keys."""
    from g3align.aligner.mem.extend import HASH, IS_ALT, RB, RE, SCORE

    rng = np.random.default_rng(3 + kind)
    for trial in range(300):
        n = int(rng.integers(1, 24))
        span = 4 if trial % 3 == 0 else 1 << 30  # small spans: ties
        R = rng.integers(0, 1 << 40, (n, NF)).astype(np.int64)
        for f in (RE, SCORE, RB, HASH):
            R[:, f] = rng.integers(0, span, n)
        R[:, IS_ALT] = rng.integers(0, 2, n)
        if trial % 5 == 0:  # already in order
            keys = [tuple(_row_key(R, i, kind)) for i in range(n)]
            R = R[sorted(range(n), key=lambda i: keys[i])]
        K = np.array([_row_key(R, i, kind) for i in range(n)], np.int64).reshape(n, 3)
        idx = np.arange(n)
        introsort(idx, n, K)
        want = R[idx]
        got = R.copy()
        _sort_rows(got, n, kind)
        assert np.array_equal(got, want), (trial, n)
