"""bwa's chain B-tree (klib kbtree.h, t = 5 for mem_chain_t), emulated exactly in numba.

bwa keeps chains in a B-tree keyed by the position of the chain's first seed and offers each new seed
to the chain `kb_intervalp` returns as `lower`. Several chains can share a key (e.g. a tandem repeat
puts two chains at one reference position); which of them `lower` returns then depends on the B-tree's
node layout (leaf inserts go after the first equal key of a node, splits move medians up, and the search
stops at an internal node holding an equal key). A sorted array does not reproduce that, so this module
mirrors kbtree's nodes, splits, lookups and in-order traversal. Keys are chain ids; `pos[id]` is the key.
"""
import numpy as np

from g3align.jit import njit

T = 5                # kbtree's t for 40-byte mem_chain_t and KB_DEFAULT_SIZE 512
MAXK = 2 * T - 1     # keys per node


@njit(cache=True)
def new_tree(cap):
    """(n_keys[node], internal[node], keys[node, MAXK], ptr[node, MAXK+1], n_nodes, root) as arrays."""
    nodes = max(4, cap // (T - 1) + 4)
    nkey = np.zeros(nodes, np.int64)
    internal = np.zeros(nodes, np.int64)
    keys = np.full((nodes, MAXK), -1, np.int64)
    ptr = np.full((nodes, MAXK + 1), -1, np.int64)
    meta = np.zeros(2, np.int64)  # [n_nodes, root]
    meta[0] = 1
    meta[1] = 0
    return nkey, internal, keys, ptr, meta


@njit(cache=True, inline="always")
def _cmp(a, b):
    return (1 if a > b else 0) - (1 if a < b else 0)


@njit(cache=True)
def _getp_aux(nkey, keys, pos, x, k):
    """kbtree's __kb_getp_aux: (index, r) with r = cmp(k, key[index]) semantics."""
    n = nkey[x]
    if n == 0:
        return -1, 0
    begin = 0
    end = n
    while begin < end:
        mid = (begin + end) >> 1
        if _cmp(pos[keys[x, mid]], k) < 0:
            begin = mid + 1
        else:
            end = mid
    if begin == n:
        return n - 1, 1
    r = _cmp(k, pos[keys[x, begin]])
    if r < 0:
        begin -= 1
    return begin, r


@njit(cache=True)
def interval_lower(tree, pos, k):
    """kb_intervalp's `lower` for key k: a chain id, or -1."""
    nkey, internal, keys, ptr, meta = tree
    x = meta[1]
    lower = -1
    while x >= 0:
        i, r = _getp_aux(nkey, keys, pos, x, k)
        if i >= 0 and r == 0:
            return keys[x, i]
        if i >= 0:
            lower = keys[x, i]
        if internal[x] == 0:
            return lower
        x = ptr[x, i + 1]
    return lower


@njit(cache=True)
def _alloc(tree, is_internal):
    nkey, internal, keys, ptr, meta = tree
    z = meta[0]
    meta[0] += 1
    nkey[z] = 0
    internal[z] = is_internal
    return z


@njit(cache=True)
def _split(tree, x, i, y):
    nkey, internal, keys, ptr, meta = tree
    z = _alloc(tree, internal[y])
    nkey[z] = T - 1
    for j in range(T - 1):
        keys[z, j] = keys[y, T + j]
    if internal[y]:
        for j in range(T):
            ptr[z, j] = ptr[y, T + j]
    nkey[y] = T - 1
    for j in range(nkey[x], i, -1):
        ptr[x, j + 1] = ptr[x, j]
    ptr[x, i + 1] = z
    for j in range(nkey[x] - 1, i - 1, -1):
        keys[x, j + 1] = keys[x, j]
    keys[x, i] = keys[y, T - 1]
    nkey[x] += 1


@njit(cache=True)
def put(tree, pos, cid):
    """kb_putp of chain id `cid` (key pos[cid]). The tree arrays must have room for one more node."""
    nkey, internal, keys, ptr, meta = tree
    r = meta[1]
    if nkey[r] == MAXK:
        s = _alloc(tree, 1)
        meta[1] = s
        ptr[s, 0] = r
        _split(tree, s, 0, r)
        r = s
    k = pos[cid]
    x = r
    while True:
        if internal[x] == 0:
            i, _ = _getp_aux(nkey, keys, pos, x, k)
            for j in range(nkey[x] - 1, i, -1):
                keys[x, j + 1] = keys[x, j]
            keys[x, i + 1] = cid
            nkey[x] += 1
            return
        i, _ = _getp_aux(nkey, keys, pos, x, k)
        i += 1
        c = ptr[x, i]
        if nkey[c] == MAXK:
            _split(tree, x, i, c)
            if _cmp(k, pos[keys[x, i]]) > 0:
                i += 1
        x = ptr[x, i]


@njit(cache=True)
def traverse(tree, out):
    """In-order chain ids (kbtree's __kb_traverse) into out; returns the count."""
    nkey, internal, keys, ptr, meta = tree
    stack_x = np.empty(64, np.int64)
    stack_i = np.empty(64, np.int64)
    sp = 0
    stack_x[0] = meta[1]
    stack_i[0] = 0
    m = 0
    while True:
        while stack_x[sp] >= 0 and stack_i[sp] <= nkey[stack_x[sp]]:
            x = stack_x[sp]
            stack_x[sp + 1] = ptr[x, stack_i[sp]] if internal[x] else -1
            stack_i[sp + 1] = 0
            sp += 1
        sp -= 1
        if sp >= 0:
            x = stack_x[sp]
            if x >= 0 and stack_i[sp] < nkey[x]:
                out[m] = keys[x, stack_i[sp]]
                m += 1
            stack_i[sp] += 1
        else:
            break
    return m
