"""aligner/mem/kbtree.py: bwa's chain B-tree. Exactness against klib's C kbtree was checked with a C harness
(random insert/query sequences with many equal keys: 300 trials, 0 differences); here the properties
any B-tree must have, on the same kind of sequences."""
import numpy as np

from g3align.aligner.mem.kbtree import MAXK, T, interval_lower, new_tree, put, traverse


def test_tree_order_and_lookup():
    rng = np.random.default_rng(1)
    for trial in range(100):
        n = int(rng.integers(1, 400))
        pos = rng.integers(0, 20 if trial % 2 else 10**6, n).astype(np.int64)
        tree = new_tree(n)
        for c in range(n):
            put(tree, pos, c)
        nkey, internal, keys, ptr, meta = tree
        assert np.all(nkey[:meta[0]] <= MAXK)
        assert np.all(nkey[:meta[0]][np.arange(meta[0]) != meta[1]] >= T - 1)
        out = np.empty(n, np.int64)
        assert traverse(tree, out) == n
        assert sorted(out.tolist()) == list(range(n))
        assert np.all(np.diff(pos[out]) >= 0)
        for k in rng.integers(-5, pos.max() + 5, 50):
            lo = interval_lower(tree, pos, int(k))
            le = pos[pos <= k]
            assert (lo == -1) if le.size == 0 else pos[lo] == le.max()
