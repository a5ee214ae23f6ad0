"""aligner/nbshare.unowned: views without an owner reference count, for kernels run on many threads."""
from collections import namedtuple

import numba as nb
import numpy as np
from g3align.aligner.nbshare import unowned

Pair = namedtuple("Pair", ["a", "k", "b"])


@nb.njit(cache=False)
def _use(x, t, p):
    x, t, p = unowned((x, t, p))
    s = 0
    for i in range(x.shape[0]):
        v = x[i:i + 2]  # slices of an unowned array are plain views
        s += v.sum()
    x[0] = 7  # writes go to the caller's array
    return s + t[0].sum() + t[1][1, 1] + p.a.sum() + p.k + p.b[0]


def test_unowned_reads_and_writes_through():
    x = np.arange(5, dtype=np.int64)
    t = (np.ones(3, np.int32), np.arange(4.0).reshape(2, 2))
    p = Pair(np.arange(3, dtype=np.uint8), 10, np.array([2], np.int64))
    want = sum(x[i:i + 2].sum() for i in range(5)) + 3 + 3.0 + 3 + 10 + 2
    assert _use(x, t, p) == want
    assert x[0] == 7


def test_unowned_in_python_is_identity():
    x = np.zeros(3)
    assert unowned(x) is x

