"""pair.regions_claim (a part's regions with one pool task per thread, ranges claimed from a shared atomic
counter; nbshare.claim) == pair.regions_range over the whole batch, for any number of threads running it at
once and any range cut; nbshare.claim hands out every item exactly once; nbshare.preload loads cached code."""
import threading

import numba as nb
import numpy as np
import pytest
from test_memstage import _opt, make_data

from g3align.aligner.mem.pair import regions_claim, regions_range
from g3align.aligner.mem.pipeline import MemAligner
from g3align.aligner.runtime.nbshare import claim, preload


@pytest.fixture(scope="module")
def staged():
    data = make_data()
    batch = data["pe"]
    al = MemAligner(data["ref"], data["fm"], _opt("default"), staged=True)
    seq_off = al._read_arrays(batch)[4]
    return al, batch, seq_off, al._pre(batch, seq_off)


def _claimed(al, batch, seq_off, pre, bounds, n_threads):
    k = len(bounds) - 1
    counter = np.zeros(1, np.int64)
    cnt = np.full(batch.n, -1, np.int64)
    k_beg, k_end, k_own = (np.full(k, -1, np.int64) for _ in range(3))
    bufs = [None] * n_threads

    def run(t):
        bufs[t] = regions_claim(al.fm, al.offsets, al.l_pac, al.pac, batch.seq, seq_off, bounds, counter, cnt,
                                k_beg, k_end, k_own, t, al.params, al.mat, pre)
    ths = [threading.Thread(target=run, args=(t,)) for t in range(n_threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert (k_own >= 0).all() and (k_own < n_threads).all()
    return np.concatenate([bufs[t][a:b] for t, a, b in zip(k_own, k_beg, k_end)]), cnt


@pytest.mark.parametrize("n_threads", [1, 3, 8])
@pytest.mark.parametrize("n_ranges", [1, 7, 200])
def test_regions_claim_equals_regions_range(staged, n_threads, n_ranges):
    al, batch, seq_off, pre = staged
    want_R, want_cnt = regions_range(al.fm, al.offsets, al.l_pac, al.pac, batch.seq, seq_off, 0, batch.n,
                                     al.params, al.mat, pre)
    assert want_R.shape[0] > batch.n // 2
    rng = np.random.default_rng(n_threads * 1000 + n_ranges)
    cuts = np.sort(rng.integers(0, batch.n + 1, n_ranges - 1))  # empty ranges included
    bounds = np.concatenate([[0], cuts, [batch.n]]).astype(np.int64)
    R, cnt = _claimed(al, batch, seq_off, pre, bounds, n_threads)
    assert np.array_equal(cnt, want_cnt)
    assert np.array_equal(R, want_R)


@nb.njit(nogil=True)
def _take_all(counter, n, owner, t):
    while True:
        k = claim(counter)
        if k >= n:
            return
        owner[k] = t


def test_claim_hands_out_each_item_once():
    n = 300_000
    counter = np.zeros(1, np.int64)
    owner = np.full(n, -1, np.int64)
    ths = [threading.Thread(target=_take_all, args=(counter, n, owner, t)) for t in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert (owner >= 0).all() and counter[0] == n + 4  # each thread's last claim is past the end


def test_preload_loads_only_what_the_cache_holds():
    @nb.njit  # no cache: nothing to load, nothing compiled
    def f(x):
        return x + 1
    assert preload([f, len]) == 0 and not f.signatures
    f(1)
    assert preload([regions_range]) >= 0  # the cache index may hold it; loading twice is harmless
