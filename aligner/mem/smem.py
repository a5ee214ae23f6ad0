"""SMEM seeding by backward-only, double-step elongation (G3SA), reproducing bwa mem's seeds.

Input: one read's base codes `q` (0..4) and its reverse complement `rc`; the FM-index of
T = ref + revcomp(ref). Output: the SA intervals bwa's `mem_collect_intv()` returns, in the same order
(sorted with bwa's introsort on (start<<32|end)): `mb, me` (query [start,end)), `mk` (first SA row),
`ms` (number of occurrences).

bwa finds SMEMs with a bidirectional index (`bwt_smem1`: forward extension from x, then backward
extension of every distinct right end). We use only backward steps:

* Let b(e) be the leftmost start such that q[b..e) occurs >= min_intv times (stopping at N and at the
  read start). b is non-decreasing in e. bwt_smem1(x) returns exactly the matches [b(e), e) for the
  right ends e in (x, ret] with b(e) < b(e') for every e' > e, where ret is the end of the longest
  match starting at x. (Proof sketch in docs/DESIGN.md; tested against bwa's own seeds.)
* Forward extension of q[s..) equals backward extension of the reverse complement, because T holds
  both strands: count(P) == count(revcomp(P)). So "longest match starting at s" is a backward search
  over `rc` starting at len-s.
* Walk: e = ret; b = backward(e); emit; s = b-1; e = forward(s) (the next right end whose b is
  smaller); stop when e <= x. Every step is a backward search, two bases per FM lookup
  (double-step occurrence table), with one single step to resolve the last base when the pair
  overshoots the threshold.
"""
import numpy as np

from g3align.aligner.mem.ksort import introsort
from g3align.index.fm import fm_step1, fm_step2
from g3align.jit import njit


@njit(cache=True)
def backward_search(fm, s, e, lo, min_intv):
    """Extend the empty pattern leftwards over s[e-1], s[e-2], ... while the count stays >= min_intv,
    never past position lo and never over an ambiguous base (code > 3).
    Returns (b, k, l): s[b..e) is the longest such suffix and [k, l) its SA interval (b == e if even
    one base fails)."""
    k = np.int64(0)
    l = np.int64(fm.n + 1)
    i = e
    while i - 2 >= lo:
        a = s[i - 2]
        c = s[i - 1]
        if a > 3 or c > 3:
            break
        k2, l2 = fm_step2(fm, k, l, a, c)
        if l2 - k2 >= min_intv:
            k = k2
            l = l2
            i -= 2
        else:
            # the pair overshoots: one more single base may still be within the threshold
            k1, l1 = fm_step1(fm, k, l, c)
            if l1 - k1 >= min_intv:
                return i - 1, k1, l1
            return i, k, l
    if i - 1 >= lo:
        c = s[i - 1]
        if c <= 3:
            k1, l1 = fm_step1(fm, k, l, c)
            if l1 - k1 >= min_intv:
                return i - 1, k1, l1
    return i, k, l


@njit(cache=True)
def forward_end(fm, rc, L, s, min_intv):
    """End of the longest match starting at s that occurs >= min_intv times (s itself if none)."""
    b, k, l = backward_search(fm, rc, L - s, 0, min_intv)
    return L - b


@njit(cache=True)
def smem1(fm, q, rc, L, x, min_intv, ob, oe, ok, os_, n_out):
    """bwa's bwt_smem1(x, min_intv): append the matches containing x to (ob, oe, ok, os_) from
    index n_out in ascending start order; return (ret, n_out_new)."""
    if q[x] > 3:
        return x + 1, n_out
    if min_intv < 1:
        min_intv = 1
    ret = forward_end(fm, rc, L, x, min_intv)
    if ret == x:
        # even the single base occurs < min_intv times: bwa reports [x, x+1) with that interval
        k, l = fm_step1(fm, np.int64(0), np.int64(fm.n + 1), q[x])
        ob[n_out] = x
        oe[n_out] = x + 1
        ok[n_out] = k
        os_[n_out] = l - k
        return x + 1, n_out + 1
    start = n_out
    e = ret
    while True:
        b, k, l = backward_search(fm, q, e, 0, min_intv)
        ob[n_out] = b
        oe[n_out] = e
        ok[n_out] = k
        os_[n_out] = l - k
        n_out += 1
        s = b - 1
        if s < 0 or q[s] > 3:
            break
        e = forward_end(fm, rc, L, s, min_intv)
        if e <= x:
            break
    # emitted with decreasing start: reverse to ascending like bwa
    i = start
    j = n_out - 1
    while i < j:
        ob[i], ob[j] = ob[j], ob[i]
        oe[i], oe[j] = oe[j], oe[i]
        ok[i], ok[j] = ok[j], ok[i]
        os_[i], os_[j] = os_[j], os_[i]
        i += 1
        j -= 1
    return ret, n_out


@njit(cache=True)
def seed_strategy1(fm, q, rc, L, x, min_len, max_intv):
    """bwa's bwt_seed_strategy1 (third seeding round): the shortest match q[x..r) with r-x > min_len
    occurring < max_intv times. Returns (next_x, found, r, k, size)."""
    if q[x] > 3:
        return x + 1, False, 0, 0, 0
    rstar = forward_end(fm, rc, L, x, max_intv)  # longest prefix occurring >= max_intv times
    # first ambiguous base at or after x
    amb = x
    while amb < L and q[amb] <= 3:
        amb += 1
    r = rstar + 1
    if r < x + min_len + 1:
        r = x + min_len + 1
    if r > amb:  # an N (or the read end) comes first
        if amb < L:
            return amb + 1, False, 0, 0, 0
        return L, False, 0, 0, 0
    b, k, l = backward_search(fm, q, r, x, 0)  # exact interval, possibly empty
    return r, True, r, k, l - k


@njit(cache=True)
def collect_intv(fm, q, L, min_seed_len, split_factor, split_width, max_mem_intv):
    """bwa's mem_collect_intv(): three seeding rounds, then introsort by (start<<32|end).
    Returns arrays (mb, me, mk, ms) of the kept intervals."""
    rc = np.empty(L, np.uint8)
    for i in range(L):
        c = q[L - 1 - i]
        rc[i] = 3 - c if c < 4 else 4
    cap = 4 * L + 16
    mb = np.empty(cap, np.int64)
    me = np.empty(cap, np.int64)
    mk = np.empty(cap, np.int64)
    ms = np.empty(cap, np.int64)
    n = 0
    tb = np.empty(L + 2, np.int64)
    te = np.empty(L + 2, np.int64)
    tk = np.empty(L + 2, np.int64)
    ts = np.empty(L + 2, np.int64)
    split_len = int(np.float64(np.float32(min_seed_len) * split_factor) + .499)
    # round 1: all SMEMs
    x = 0
    while x < L:
        if q[x] < 4:
            x, nt = smem1(fm, q, rc, L, x, 1, tb, te, tk, ts, 0)
            for i in range(nt):
                if te[i] - tb[i] >= min_seed_len:
                    mb, me, mk, ms, n = _push(mb, me, mk, ms, n, tb[i], te[i], tk[i], ts[i])
        else:
            x += 1
    # round 2: re-seed long SMEMs with few occurrences
    old_n = n
    for j in range(old_n):
        start = mb[j]
        end = me[j]
        if end - start < split_len or ms[j] > split_width:
            continue
        _, nt = smem1(fm, q, rc, L, (start + end) >> 1, ms[j] + 1, tb, te, tk, ts, 0)
        for i in range(nt):
            if te[i] - tb[i] >= min_seed_len:
                mb, me, mk, ms, n = _push(mb, me, mk, ms, n, tb[i], te[i], tk[i], ts[i])
    # round 3: LAST-like seeds
    if max_mem_intv > 0:
        x = 0
        while x < L:
            if q[x] < 4:
                x0 = x
                x, found, r, k, s = seed_strategy1(fm, q, rc, L, x0, min_seed_len, max_mem_intv)
                if found and s > 0:
                    mb, me, mk, ms, n = _push(mb, me, mk, ms, n, x0, r, k, s)
            else:
                x += 1
    keys = np.empty((n, 1), np.int64)
    for i in range(n):
        keys[i, 0] = (mb[i] << 32) | me[i]
    idx = np.arange(n)
    introsort(idx, n, keys)
    return mb[idx], me[idx], mk[idx], ms[idx]


@njit(cache=True)
def _push(mb, me, mk, ms, n, b, e, k, s):
    """Append one interval to the growable (mb, me, mk, ms) arrays; returns them and the new count."""
    if n == mb.shape[0]:
        cap = 2 * n
        mb2 = np.empty(cap, np.int64); mb2[:n] = mb
        me2 = np.empty(cap, np.int64); me2[:n] = me
        mk2 = np.empty(cap, np.int64); mk2[:n] = mk
        ms2 = np.empty(cap, np.int64); ms2[:n] = ms
        mb, me, mk, ms = mb2, me2, mk2, ms2
    mb[n] = b
    me[n] = e
    mk[n] = k
    ms[n] = s
    return mb, me, mk, ms, n + 1
