"""Seeds and chaining (bwa's mem_chain, mem_chain_weight, mem_chain_flt).

Input: the read's SA intervals from smem.collect_intv. Output: kept chains in bwa's order, as
CSR arrays: chain fields (rid, w, kept, first, is_alt) and `ch_off`/`ch_seed` listing each chain's
seeds (indices into the seed arrays s_rbeg/s_qbeg/s_len/s_score) in insertion order.

bwa keeps chains in a B-tree keyed by the first seed's reference position; a new seed is offered to
the closest chain at or left of it (`kb_intervalp`) and starts a new chain if it does not fit. With
equal keys the answer depends on the tree's node layout, so aligner/mem/kbtree.py emulates that B-tree.
"""
import numpy as np

from g3align.aligner.mem.bns import intv2rid
from g3align.aligner.mem.kbtree import interval_lower, new_tree, put, traverse
from g3align.aligner.mem.ksort import introsort
from g3align.aligner.mem.options import contig_is_alt
from g3align.index.fm import fm_sa
from g3align.jit import njit

f32 = np.float32  # bwa's ratios are C floats: products are rounded to single precision


@njit(cache=True)
def make_seeds(fm, offsets, l_pac, mb, me, mk, ms, max_occ):
    """Seed occurrences of every interval (at most max_occ, evenly sampled like bwa), skipping seeds
    that bridge contigs or strands. Returns (s_rbeg, s_qbeg, s_len, s_rid)."""
    n = mb.shape[0]
    tot = 0
    for i in range(n):
        s = ms[i]
        step = s // max_occ if s > max_occ else 1
        c = (s + step - 1) // step
        tot += c if c < max_occ else max_occ
    s_rbeg = np.empty(tot, np.int64)
    s_qbeg = np.empty(tot, np.int32)
    s_len = np.empty(tot, np.int32)
    s_rid = np.empty(tot, np.int32)
    m = 0
    for i in range(n):
        s = ms[i]
        step = s // max_occ if s > max_occ else 1
        slen = me[i] - mb[i]
        k = 0
        count = 0
        while k < s and count < max_occ:
            rb = fm_sa(fm, mk[i] + k)
            rid = intv2rid(offsets, l_pac, rb, rb + slen)
            if rid >= 0:
                s_rbeg[m] = rb
                s_qbeg[m] = mb[i]
                s_len[m] = slen
                s_rid[m] = rid
                m += 1
            k += step
            count += 1
    return s_rbeg[:m], s_qbeg[:m], s_len[:m], s_rid[:m]


@njit(cache=True)
def _test_and_merge(w, max_chain_gap, l_pac, first, last, s_rbeg, s_qbeg, s_len, c_rid, c, p, rid):
    """0: start a new chain; 1: merged or contained (bwa's test_and_merge)."""
    if rid != c_rid[c]:
        return 0
    f = first[c]
    la = last[c]
    qend = s_qbeg[la] + s_len[la]
    rend = s_rbeg[la] + s_len[la]
    if (s_qbeg[p] >= s_qbeg[f] and s_qbeg[p] + s_len[p] <= qend and s_rbeg[p] >= s_rbeg[f]
            and s_rbeg[p] + s_len[p] <= rend):
        return 1  # contained: nothing to add
    if (s_rbeg[la] < l_pac or s_rbeg[f] < l_pac) and s_rbeg[p] >= l_pac:
        return 0  # different strand
    x = np.int64(s_qbeg[p]) - s_qbeg[la]
    y = s_rbeg[p] - s_rbeg[la]
    if y >= 0 and x - y <= w and y - x <= w and x - s_len[la] < max_chain_gap and y - s_len[la] < max_chain_gap:
        return 2
    return 0


@njit(cache=True)
def build_chains(s_rbeg, s_qbeg, s_len, s_rid, l_pac, w, max_chain_gap):
    """Greedy chaining in seed order through bwa's B-tree. Returns (chain ids in tree order, seed->chain
    id, n_chains, c_rid)."""
    n = s_rbeg.shape[0]
    seed_chain = np.full(n, -1, np.int64)
    first = np.empty(n, np.int64)
    last = np.empty(n, np.int64)
    c_pos = np.empty(n, np.int64)
    c_rid = np.empty(n, np.int64)
    tree = new_tree(n)
    nc = 0
    for p in range(n):
        to_add = True
        if nc > 0:
            c = interval_lower(tree, c_pos, s_rbeg[p])
            if c >= 0:
                r = _test_and_merge(w, max_chain_gap, l_pac, first, last, s_rbeg, s_qbeg, s_len, c_rid, c,
                                    p, s_rid[p])
                if r > 0:
                    to_add = False
                    if r == 2:
                        seed_chain[p] = c
                        last[c] = p
        if to_add:
            c = nc
            nc += 1
            first[c] = p
            last[c] = p
            c_pos[c] = s_rbeg[p]
            c_rid[c] = s_rid[p]
            seed_chain[p] = c
            put(tree, c_pos, c)
    order = np.empty(nc, np.int64)
    traverse(tree, order)
    return order, seed_chain, nc, c_rid[:nc]


@njit(cache=True)
def chain_weight(seeds, s_rbeg, s_qbeg, s_len):
    """min(query coverage, reference coverage) of the chain's seeds (mem_chain_weight)."""
    w = 0
    end = np.int64(0)
    for j in range(seeds.shape[0]):
        s = seeds[j]
        qb = np.int64(s_qbeg[s])
        if qb >= end:
            w += s_len[s]
        elif qb + s_len[s] > end:
            w += qb + s_len[s] - end
        if qb + s_len[s] > end:
            end = qb + s_len[s]
    tmp = w
    w = 0
    end = 0
    for j in range(seeds.shape[0]):
        s = seeds[j]
        rb = s_rbeg[s]
        if rb >= end:
            w += s_len[s]
        elif rb + s_len[s] > end:
            w += rb + s_len[s] - end
        if rb + s_len[s] > end:
            end = rb + s_len[s]
    if tmp < w:
        w = tmp
    return w if w < (1 << 30) else (1 << 30) - 1


@njit(cache=True)
def chain_and_filter(fm, offsets, l_pac, mb, me, mk, ms, opt):
    """mem_chain + mem_chain_flt for one read.
    Returns seeds (s_rbeg, s_qbeg, s_len, s_score) and the kept chains in bwa's order as CSR:
    (ch_off, ch_seed, ch_rid)."""
    s_rbeg, s_qbeg, s_len, s_rid = make_seeds(fm, offsets, l_pac, mb, me, mk, ms, opt.max_occ)
    s_score, ch_off, ch_seed, ch_rid = chain_seeds(s_rbeg, s_qbeg, s_len, s_rid, l_pac, opt)
    return s_rbeg, s_qbeg, s_len, s_score, ch_off, ch_seed, ch_rid


@njit(cache=True)
def chain_seeds(s_rbeg, s_qbeg, s_len, s_rid, l_pac, opt):
    """mem_chain + mem_chain_flt on a read's seeds (make_seeds' output, from the CPU or the GPU).
    Returns s_score and the kept chains in bwa's order as CSR: (s_score, ch_off, ch_seed, ch_rid)."""
    s_score = s_len.copy()
    order, seed_chain, nc, c_rid = build_chains(s_rbeg, s_qbeg, s_len, s_rid, l_pac, opt.w, opt.max_chain_gap)
    # CSR of seeds per chain id (insertion order)
    cnt = np.zeros(nc + 1, np.int64)
    for p in range(s_rbeg.shape[0]):
        if seed_chain[p] >= 0:
            cnt[seed_chain[p] + 1] += 1
    for c in range(nc):
        cnt[c + 1] += cnt[c]
    cs = np.empty(cnt[nc], np.int64)
    fill = cnt[:nc].copy()
    for p in range(s_rbeg.shape[0]):
        c = seed_chain[p]
        if c >= 0:
            cs[fill[c]] = p
            fill[c] += 1
    # chains in tree (position) order, weights, drop light chains
    w = np.empty(nc, np.int64)
    ids = np.empty(nc, np.int64)
    k = 0
    for i in range(nc):
        c = order[i]
        wc = chain_weight(cs[cnt[c]:cnt[c + 1]], s_rbeg, s_qbeg, s_len)
        if wc >= opt.min_chain_weight:
            ids[k] = c
            w[k] = wc
            k += 1
    n = k
    ids = ids[:n]
    w = w[:n]
    perm = np.arange(n)
    wkey = np.empty((n, 1), np.int64)
    for i in range(n):
        wkey[i, 0] = -w[i]  # by weight, descending
    introsort(perm, n, wkey)
    ids = ids[perm]
    w = w[perm]
    kept = np.zeros(n, np.int64)
    firstsh = np.full(n, -1, np.int64)
    is_alt = np.zeros(n, np.int64)
    cb = np.empty(n, np.int64)
    ce = np.empty(n, np.int64)
    for i in range(n):
        c = ids[i]
        is_alt[i] = contig_is_alt(opt, c_rid[c])
        f = cs[cnt[c]]
        la = cs[cnt[c + 1] - 1]
        cb[i] = s_qbeg[f]
        ce[i] = s_qbeg[la] + s_len[la]
    if n > 0:
        kept[0] = 3
        chains = np.empty(n, np.int64)
        chains[0] = 0
        n_ch = 1
        for i in range(1, n):
            large_ovlp = 0
            k = 0
            while k < n_ch:
                j = chains[k]
                b_max = cb[j] if cb[j] > cb[i] else cb[i]
                e_min = ce[j] if ce[j] < ce[i] else ce[i]
                if e_min > b_max and (is_alt[j] == 0 or is_alt[i] != 0):
                    li = ce[i] - cb[i]
                    lj = ce[j] - cb[j]
                    min_l = li if li < lj else lj
                    if f32(e_min - b_max) >= f32(min_l) * opt.mask_level and min_l < opt.max_chain_gap:
                        large_ovlp = 1
                        if firstsh[j] < 0:
                            firstsh[j] = i
                        if f32(w[i]) < f32(w[j]) * opt.drop_ratio and w[j] - w[i] >= (opt.min_seed_len << 1):
                            break
                k += 1
            if k == n_ch:
                chains[n_ch] = i
                n_ch += 1
                kept[i] = 2 if large_ovlp else 3
        for i in range(n_ch):
            c = chains[i]
            if firstsh[c] >= 0:
                kept[firstsh[c]] = 1
        k = 0
        i = 0
        while i < n:
            if not (kept[i] == 0 or kept[i] == 3):
                k += 1
                if k >= opt.max_chain_extend:
                    break
            i += 1
        while i < n:
            if kept[i] < 3:
                kept[i] = 0
            i += 1
    # compact kept chains
    m = 0
    tot = 0
    for i in range(n):
        if kept[i] != 0:
            m += 1
            c = ids[i]
            tot += cnt[c + 1] - cnt[c]
    ch_off = np.zeros(m + 1, np.int64)
    ch_seed = np.empty(tot, np.int64)
    ch_rid = np.empty(m, np.int64)
    j = 0
    for i in range(n):
        if kept[i] != 0:
            c = ids[i]
            nseed = cnt[c + 1] - cnt[c]
            ch_seed[ch_off[j]:ch_off[j] + nseed] = cs[cnt[c]:cnt[c + 1]]
            ch_off[j + 1] = ch_off[j] + nseed
            ch_rid[j] = c_rid[c]
            j += 1
    return s_score, ch_off, ch_seed, ch_rid


@njit(cache=True)
def rep_len(mb, me, ms, max_occ):
    """Read bases covered by seeds occurring more than max_occ times (bwa's l_rep; frac_rep is
    float32(l_rep)/float32(read length))."""
    b = 0
    e = 0
    l_rep = 0
    for i in range(mb.shape[0]):
        if ms[i] <= max_occ:
            continue
        sb = mb[i]
        se = me[i]
        if sb > e:
            l_rep += e - b
            b = sb
            e = se
        else:
            e = e if e > se else se
    l_rep += e - b
    return l_rep
