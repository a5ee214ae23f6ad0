"""aligner/nbshare.unowned: views without an owner reference count, for kernels run on many threads."""
from collections import namedtuple

import numba as nb
import numpy as np

from g3align.aligner.io.textbuf import put_char
from g3align.aligner.runtime.nbshare import keep_alive, owned_text, unowned

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



@nb.njit(cache=False)
def _write(n_bytes, cap):
    own = np.empty(cap, np.uint8)
    buf = unowned(own)  # as the range kernels' SAM buffers: writers rebind it, and may regrow it
    n = 0
    for i in range(n_bytes):
        buf, n = put_char(buf, n, 65 + i % 26)
    aux_own = np.zeros(2, np.int64)
    aux = unowned(aux_own)
    aux[1] = n
    keep_alive(aux_own)
    return owned_text(own, buf, n), aux_own[1]


def test_owned_text_with_and_without_regrowth():
    """owned_text returns the owner when the unowned buffer was never regrown, the regrown (owned) buffer
    otherwise; either way an array Python may keep after the kernel's scratch is gone."""
    import gc

    want = np.array([65 + i % 26 for i in range(300)], np.uint8)
    for cap in (1000, 16):  # no regrowth / regrown several times
        got, n = _write(300, cap)
        gc.collect()
        junk = [np.zeros(max(cap, 512), np.uint8) for _ in range(64)]  # would reuse a freed buffer's memory
        assert n == 300 and got.shape == (300,) and len(junk) == 64
        np.testing.assert_array_equal(got, want)
