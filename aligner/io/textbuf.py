"""Text into a growing byte buffer from numba code: the writers of SAM (aligner/mem/samout.py) and PAF/SAM
(aligner/map/format.py) records. Each takes (buf, n) -- a uint8 array and the bytes used -- and returns the
(possibly reallocated) buffer and the new length."""
import math

import numpy as np

from g3align.jit import njit


@njit(cache=True, specialize_literals=False)
def reserve(buf, n, extra):
    """buf, or a copy twice as large (or more) with buf[:n] in it, so that extra more bytes fit after n."""
    if n + extra <= buf.shape[0]:
        return buf
    cap = buf.shape[0] * 2
    while cap < n + extra:
        cap *= 2
    b2 = np.empty(cap, np.uint8)
    b2[:n] = buf[:n]
    return b2


@njit(cache=True, specialize_literals=False)
def put_bytes(buf, n, src):
    buf = reserve(buf, n, src.shape[0])
    buf[n:n + src.shape[0]] = src
    return buf, n + src.shape[0]


@njit(cache=True, specialize_literals=False)
def put_char(buf, n, c):
    buf = reserve(buf, n, 1)
    buf[n] = c
    return buf, n + 1


@njit(cache=True, specialize_literals=False)
def put_int(buf, n, v):
    buf = reserve(buf, n, 24)
    v = np.int64(v)
    if v < 0:
        buf[n] = 45  # '-'
        n += 1
        v = -v
    k = 1  # digits, then written from the last one back (no scratch array)
    t = v
    while t >= 10:
        t //= 10
        k += 1
    for i in range(k - 1, -1, -1):
        buf[n + i] = 48 + v % 10
        v //= 10
    return buf, n + k


@njit(cache=True, specialize_literals=False)
def put_fixed3(buf, n, x):
    """printf's "%.3f" of the double x (finite): the exact binary value rounded half to even, as glibc does."""
    buf = reserve(buf, n, 40)
    if x < 0:
        buf[n] = 45  # '-'
        n += 1
        x = -x
    f, e = math.frexp(x)  # x = f * 2**e, 0.5 <= f < 1 (or x == 0)
    m = np.uint64(f * 9007199254740992.0)  # f * 2**53: exact
    s = 53 - e  # x = m / 2**s
    if s <= 0:
        q = np.uint64(m << np.uint64(-s)) * np.uint64(1000)
    elif s >= 64:
        q = np.uint64(0)  # x * 1000 < 2**63 / 2**64: rounds to 0
    else:
        big = m * np.uint64(1000)  # < 2**63
        q = big >> np.uint64(s)
        r = big - (q << np.uint64(s))
        half = np.uint64(1) << np.uint64(s - 1)
        if r > half or (r == half and (q & np.uint64(1)) != 0):
            q += np.uint64(1)
    buf, n = put_int(buf, n, np.int64(q // np.uint64(1000)))
    buf[n] = 46  # '.'
    frac = np.int64(q % np.uint64(1000))
    buf[n + 1] = 48 + frac // 100
    buf[n + 2] = 48 + frac // 10 % 10
    buf[n + 3] = 48 + frac % 10
    return buf, n + 4
