"""Query side of minimap2 2.24's seeding (map.c, seed.c) for one read, as Numba functions.

Pipeline of one read (one fragment of ``n_seg`` segments; segment codes concatenated in ``seq``,
segment i = ``seq[seg_off[i]:seg_off[i+1]]``):

1. :func:`collect_minimizers` — minimizers of each segment with ``rid = segment index`` and the
   query position shifted by the length of the previous segments (minimap2's ``collect_minimizers``;
   SDUST masking, ``-T``, is not done: it is off in every preset).
2. :func:`seed_mz_flt` — drop minimizers repeated too often inside the query (``--q-occ-frac``).
3. :func:`seed_hits` — look the minimizers up (``mm_seed_collect_all``), pick the seeds of high-occurrence
   streaks (``mm_seed_select``), compute ``rep_len`` and ``mini_pos`` (``mm_collect_matches``) and
   write the anchors ``a`` (n, 2) uint64 in minimap2's layout and order: ``collect_seed_hits`` (anchors
   then minimap2's in-place radix sort on ``a[:,0]``) or, with ``MM_F_HEAP_SORT`` (preset sr),
   ``collect_seed_hits_heap`` (a k-way heap merge, forward-strand anchors first).

Anchor layout (docs/MM_PORT.md): ``a[:,0] = rev << 63 | rid << 32 | rpos``,
``a[:,1] = seg_id << 48 | flags | qspan << 32 | qpos``.

:func:`seed_params` gives the index parameters and seed-stage options of the presets map-ont, map-pb,
map-hifi and sr (options.c), :func:`resolve_mid_occ` the ``mid_occ`` of ``mm_mapopt_update``.
"""

from __future__ import annotations

import numpy as np

from g3align.aligner.map.sdust import dust_segments
from g3align.index.mmidx import cal_max_occ, mm_idx_get, sketch_into
from g3align.jit import njit

__all__ = [
    "MM_F_FOR_ONLY",
    "MM_F_HEAP_SORT",
    "MM_F_NO_DIAG",
    "MM_F_NO_DUAL",
    "MM_F_QSTRAND",
    "MM_F_REV_ONLY",
    "MM_F_SR",
    "collect_minimizers",
    "radix_sort_x",
    "resolve_mid_occ",
    "seed_hits",
    "seed_mz_flt",
    "seed_params",
    "seed_read",
    "skip_info",
]

# minimap.h option flags used by the seeding stage
MM_F_NO_DIAG = 0x001
MM_F_NO_DUAL = 0x002
MM_F_SR = 0x1000
MM_F_FRAG_MODE = 0x2000
MM_F_NO_PRINT_2ND = 0x4000
MM_F_2_IO_THREADS = 0x8000
MM_F_FOR_ONLY = 0x100000
MM_F_REV_ONLY = 0x200000
MM_F_HEAP_SORT = 0x400000
MM_F_QSTRAND = 0x100000000

_MAX_MAX_HIGH_OCC = 128  # at most this many seeds are kept per high-occurrence streak

# ------------------------------------------------------------------------------------------------
# presets (options.c: mm_idxopt_init, mm_mapopt_init, mm_set_opt) — seed stage only
# ------------------------------------------------------------------------------------------------

_BASE = dict(k=15, w=10, is_hpc=False, bucket_bits=14, mid_occ=0, mid_occ_frac=2e-4, min_mid_occ=10,
             max_mid_occ=1000000, max_occ=0, max_max_occ=4095, occ_dist=500, q_occ_frac=0.01, sdust_thres=0,
             flag=0)
_PRESETS = {
    "map-ont": {},
    "map-pb": dict(k=19, is_hpc=True),
    "map-hifi": dict(k=19, w=19, min_mid_occ=50, max_mid_occ=500),
    "sr": dict(k=21, w=11, mid_occ=1000, max_occ=5000,
               flag=MM_F_SR | MM_F_FRAG_MODE | MM_F_NO_PRINT_2ND | MM_F_2_IO_THREADS | MM_F_HEAP_SORT),
}


def seed_params(preset: str) -> dict:
    """Index parameters (k, w, is_hpc, bucket_bits) and seed-stage options of a minimap2 preset.

    ``mid_occ`` 0 means "derive from the index" (:func:`resolve_mid_occ`). ``q_occ_frac`` and
    ``mid_occ_frac`` are C floats in minimap2; the njit code rounds them to float32 as C does.
    """
    if preset not in _PRESETS:
        raise ValueError(f"unknown preset {preset!r} (seed_params knows {', '.join(_PRESETS)})")
    p = dict(_BASE)
    p.update(_PRESETS[preset])
    return p


def resolve_mid_occ(params: dict, idx) -> int:
    """minimap2's mm_mapopt_update for mid_occ: from the index when not set, clamped to
    [min_mid_occ, max_mid_occ] (the upper clamp only when max_mid_occ > min_mid_occ)."""
    mid = int(params["mid_occ"])
    if mid <= 0:
        mid = cal_max_occ(idx, params["mid_occ_frac"])
        if mid < params["min_mid_occ"]:
            mid = int(params["min_mid_occ"])
        if params["max_mid_occ"] > params["min_mid_occ"] and mid > params["max_mid_occ"]:
            mid = int(params["max_mid_occ"])
    return mid


def skip_info(qname: str, qlen: int, ref):
    """(diag_rid, dual_skip) for MM_F_NO_DIAG / MM_F_NO_DUAL (self / all-vs-all mapping).

    diag_rid: the contig with the query's name and length (-1: none). dual_skip[rid] = 1 where the
    query name sorts after the contig name (byte order, as strcmp).
    """
    qb = qname.encode("utf-8", "surrogateescape")
    diag = -1
    dual = np.zeros(len(ref.names), np.uint8)
    for i, nm in enumerate(ref.names):
        nb = nm.encode("utf-8", "surrogateescape")
        if nb == qb and diag < 0 and int(ref.lengths[i]) == qlen:
            diag = i
        if qb > nb:
            dual[i] = 1
    return diag, dual


# ------------------------------------------------------------------------------------------------
# query minimizers
# ------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def collect_minimizers(seq, seg_off, w, k, is_hpc):
    """Minimizers of all segments: y = seg << 32 | (offset_of_segment + pos) << 1 | strand."""
    n_seg = seg_off.shape[0] - 1
    total = seg_off[n_seg] - seg_off[0]
    out = np.empty((total * 2 // (w + 1) + 16, 2), np.uint64)
    n = 0
    for s in range(n_seg):
        n0 = n
        out, n = sketch_into(seq, seg_off[s], seg_off[s + 1], w, k, s, is_hpc, out, n)
        shift = np.uint64(seg_off[s] - seg_off[0]) << np.uint64(1)
        for j in range(n0, n):
            out[j, 1] += shift
    return out[:n].copy()


@njit(cache=True, nogil=True)
def seed_mz_flt(mv, q_occ_max, q_occ_frac):
    """Remove every minimizer (same hash and span) occurring more than q_occ_max times and more than
    q_occ_frac of all query minimizers (float arithmetic as in C). Returns a new array."""
    n = mv.shape[0]
    frac = np.float32(q_occ_frac)
    if n <= q_occ_max or frac <= np.float32(0.0) or q_occ_max <= 0:
        return mv
    order = np.argsort(mv[:, 0])
    lim = np.float32(n) * frac
    keep = np.ones(n, np.bool_)
    st = 0
    for i in range(1, n + 1):
        if i == n or mv[order[i], 0] != mv[order[st], 0]:
            cnt = i - st
            if cnt > q_occ_max and np.float32(cnt) > lim:
                for j in range(st, i):
                    keep[order[j]] = False
            st = i
    m = 0
    for i in range(n):
        if keep[i] and mv[i, 0] != 0:
            m += 1
    out = np.empty((m, 2), np.uint64)
    m = 0
    for i in range(n):
        if keep[i] and mv[i, 0] != 0:
            out[m, 0] = mv[i, 0]
            out[m, 1] = mv[i, 1]
            m += 1
    return out


# ------------------------------------------------------------------------------------------------
# heaps and sorts with minimap2's exact tie behaviour (ksort.h)
# ------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _maxheap_down(h, i, n):
    """Sift down in a max-heap of uint64 (ks_heapdown with '<')."""
    tmp = h[i]
    k = i
    while True:
        k = (k << 1) + 1
        if k >= n:
            break
        if k != n - 1 and h[k] < h[k + 1]:
            k += 1
        if h[k] < tmp:
            break
        h[i] = h[k]
        i = k
    h[i] = tmp


@njit(cache=True, nogil=True)
def _minheap_down(hx, hy, i, n):
    """Sift down in a min-heap of (x, y) ordered by x only (minimap2's heap_lt: a.x > b.x)."""
    tx = hx[i]
    ty = hy[i]
    k = i
    while True:
        k = (k << 1) + 1
        if k >= n:
            break
        if k != n - 1 and hx[k] > hx[k + 1]:
            k += 1
        if hx[k] > tx:
            break
        hx[i] = hx[k]
        hy[i] = hy[k]
        i = k
    hx[i] = tx
    hy[i] = ty


@njit(cache=True, nogil=True)
def _insertion_sort_x(a, beg, end):
    for i in range(beg + 1, end):
        if a[i, 0] < a[i - 1, 0]:
            tx = a[i, 0]
            ty = a[i, 1]
            j = i
            while j > beg and tx < a[j - 1, 0]:
                a[j, 0] = a[j - 1, 0]
                a[j, 1] = a[j - 1, 1]
                j -= 1
            a[j, 0] = tx
            a[j, 1] = ty


@njit(cache=True, nogil=True)
def radix_sort_x(a):
    """Sort the rows of a (n, 2) uint64 by a[:,0] in place, leaving equal keys in exactly the order
    minimap2's radix_sort_128x leaves them (in-place MSD radix, 8 bits a pass, insertion sort for
    at most 64 rows; not stable)."""
    n = a.shape[0]
    if n <= 64:
        _insertion_sort_x(a, 0, n)
        return
    bb = np.empty(256, np.int64)  # moving begin of each bucket
    be = np.empty(256, np.int64)  # end of each bucket
    stack = np.empty((8 * 256 + 8, 3), np.int64)  # at most 8 levels of 255 pending buckets
    stack[0, 0] = 0
    stack[0, 1] = n
    stack[0, 2] = 56
    top = 1
    m = np.uint64(255)
    while top > 0:
        top -= 1
        beg = stack[top, 0]
        end = stack[top, 1]
        s = stack[top, 2]
        sh = np.uint64(s)
        for c in range(256):
            be[c] = 0
        for i in range(beg, end):
            be[np.int64((a[i, 0] >> sh) & m)] += 1
        acc = beg
        for c in range(256):
            bb[c] = acc
            acc += be[c]
            be[c] = acc
        c = 0
        while c < 256:
            if bb[c] != be[c]:
                l = np.int64((a[bb[c], 0] >> sh) & m)
                if l != c:
                    tx = a[bb[c], 0]
                    ty = a[bb[c], 1]
                    while True:
                        sx = tx
                        sy = ty
                        tx = a[bb[l], 0]
                        ty = a[bb[l], 1]
                        a[bb[l], 0] = sx
                        a[bb[l], 1] = sy
                        bb[l] += 1
                        l = np.int64((tx >> sh) & m)
                        if l == c:
                            break
                    a[bb[c], 0] = tx
                    a[bb[c], 1] = ty
                    bb[c] += 1
                else:
                    bb[c] += 1
            else:
                c += 1
        if s > 0:
            s2 = s - 8 if s > 8 else 0
            prev = beg
            for c in range(256):
                st = prev
                en = be[c]
                prev = en
                if en - st > 64:
                    stack[top, 0] = st
                    stack[top, 1] = en
                    stack[top, 2] = s2
                    top += 1
                elif en - st > 1:
                    _insertion_sort_x(a, st, en)


# ------------------------------------------------------------------------------------------------
# seeds: lookup, high-occurrence selection, anchors
# ------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _seed_select(s_n, s_qpos, s_flt, qlen, max_occ, max_max_occ, dist):
    """mm_seed_select: in each streak of seeds with more than max_occ hits keep (flt=0) the
    round((pe-ps)/dist) seeds with the fewest hits (at most 128), and never one above max_max_occ."""
    n = s_n.shape[0]
    if n == 0 or n == 1:
        return
    m = 0
    for i in range(n):
        if s_n[i] > max_occ:
            m += 1
    if m == 0:
        return
    heap = np.empty(_MAX_MAX_HIGH_OCC, np.uint64)
    last0 = -1
    for i in range(n + 1):
        if i == n or s_n[i] <= max_occ:
            if i - last0 > 1:
                ps = 0 if last0 < 0 else np.int64(s_qpos[last0] >> 1)
                pe = qlen if i == n else np.int64(s_qpos[i] >> 1)
                st = last0 + 1
                en = i
                max_high_occ = np.int64(np.float64(pe - ps) / dist + 0.499)
                if max_high_occ > 0:
                    if max_high_occ > _MAX_MAX_HIGH_OCC:
                        max_high_occ = _MAX_MAX_HIGH_OCC
                    j = st
                    k = 0
                    while j < en and k < max_high_occ:
                        heap[k] = (np.uint64(s_n[j]) << np.uint64(32)) | np.uint64(j)
                        j += 1
                        k += 1
                    for t in range((k >> 1) - 1, -1, -1):
                        _maxheap_down(heap, t, k)
                    while j < en:
                        if s_n[j] < np.int64(heap[0] >> np.uint64(32)):
                            heap[0] = (np.uint64(s_n[j]) << np.uint64(32)) | np.uint64(j)
                            _maxheap_down(heap, 0, k)
                        j += 1
                    for t in range(k):
                        s_flt[np.int64(heap[t] & np.uint64(0xFFFFFFFF))] = 1
                for j in range(st, en):
                    s_flt[j] ^= 1
                for j in range(st, en):
                    if s_n[j] > max_max_occ:
                        s_flt[j] = 1
            last0 = i


@njit(cache=True, nogil=True)
def collect_matches(mv, qlen, max_occ, max_max_occ, dist, b, bkt_off, keys, key_off):
    """mm_collect_matches: kept seeds as parallel arrays, plus n_a, rep_len and mini_pos."""
    nmv = mv.shape[0]
    s_qpos = np.empty(nmv, np.int64)   # (uint32)y: pos << 1 | strand
    s_span = np.empty(nmv, np.int64)
    s_seg = np.empty(nmv, np.int64)
    s_tan = np.zeros(nmv, np.uint8)
    s_st = np.empty(nmv, np.int64)
    s_n = np.empty(nmv, np.int64)
    m0 = 0
    for i in range(nmv):
        h = mv[i, 0] >> np.uint64(8)
        st, cnt = mm_idx_get(b, bkt_off, keys, key_off, h)
        if cnt == 0:
            continue
        s_qpos[m0] = np.int64(mv[i, 1] & np.uint64(0xFFFFFFFF))
        s_span[m0] = np.int64(mv[i, 0] & np.uint64(0xFF))
        s_seg[m0] = np.int64(mv[i, 1] >> np.uint64(32))
        s_st[m0] = st
        s_n[m0] = cnt
        if i > 0 and h == mv[i - 1, 0] >> np.uint64(8):
            s_tan[m0] = 1
        if i < nmv - 1 and h == mv[i + 1, 0] >> np.uint64(8):
            s_tan[m0] = 1
        m0 += 1
    s_qpos = s_qpos[:m0]
    s_n = s_n[:m0]
    s_flt = np.zeros(m0, np.uint8)
    if dist > 0 and max_max_occ > max_occ:
        _seed_select(s_n, s_qpos, s_flt, qlen, max_occ, max_max_occ, dist)
    else:
        for i in range(m0):
            if s_n[i] > max_occ:
                s_flt[i] = 1
    rep_len = 0
    rep_st = 0
    rep_en = 0
    n_a = 0
    nm = 0
    mini_pos = np.empty(m0, np.uint64)
    keep = np.empty(m0, np.int64)
    for i in range(m0):
        if s_flt[i]:
            en = (s_qpos[i] >> 1) + 1
            st = en - s_span[i]
            if st > rep_en:
                rep_len += rep_en - rep_st
                rep_st = st
                rep_en = en
            else:
                rep_en = en
        else:
            n_a += s_n[i]
            mini_pos[nm] = (np.uint64(s_span[i]) << np.uint64(32)) | np.uint64(s_qpos[i] >> 1)
            keep[nm] = i
            nm += 1
    rep_len += rep_en - rep_st
    keep = keep[:nm]
    return (s_qpos[keep], s_span[keep], s_seg[keep], s_tan[keep], s_st[keep], s_n[keep], n_a, rep_len,
            mini_pos[:nm].copy())


@njit(cache=True, nogil=True)
def skip_seed(flag, r, qpos, diag_rid, dual_skip):
    """minimap2's skip_seed: returns (skip, is_self)."""
    is_self = False
    if flag & (MM_F_NO_DIAG | MM_F_NO_DUAL):
        rid = np.int64(r >> np.uint64(32))
        if (flag & MM_F_NO_DIAG) and rid == diag_rid:
            if np.int64((r & np.uint64(0xFFFFFFFF)) >> np.uint64(1)) == (qpos >> 1):
                return True, False
            if np.int64(r & np.uint64(1)) == (qpos & 1):
                is_self = True
        if (flag & MM_F_NO_DUAL) and dual_skip.shape[0] > rid and dual_skip[rid] != 0:
            return True, is_self
    if flag & (MM_F_FOR_ONLY | MM_F_REV_ONLY):
        if np.int64(r & np.uint64(1)) == (qpos & 1):
            if flag & MM_F_REV_ONLY:
                return True, is_self
        else:
            if flag & MM_F_FOR_ONLY:
                return True, is_self
    return False, is_self


@njit(cache=True, nogil=True)
def _anchor(a, i, r, qpos, span, seg, tan, is_self, qlen, flag, ref_len):
    hi = r & np.uint64(0xFFFFFFFF00000000)
    rpos = (r & np.uint64(0xFFFFFFFF)) >> np.uint64(1)
    spanu = np.uint64(span) << np.uint64(32)
    if np.int64(r & np.uint64(1)) == (qpos & 1):
        a[i, 0] = hi | rpos
        a[i, 1] = spanu | np.uint64(qpos >> 1)
    elif not (flag & MM_F_QSTRAND):
        a[i, 0] = np.uint64(1) << np.uint64(63) | hi | rpos
        a[i, 1] = spanu | np.uint64(qlen - ((qpos >> 1) + 1 - span) - 1)
    else:
        ln = ref_len[np.int64(r >> np.uint64(32))]
        a[i, 0] = np.uint64(1) << np.uint64(63) | hi | np.uint64(ln - (np.int64(rpos) + 1 - span) - 1)
        a[i, 1] = spanu | np.uint64(qpos >> 1)
    a[i, 1] |= np.uint64(seg) << np.uint64(48)
    if tan:
        a[i, 1] |= np.uint64(1) << np.uint64(42)   # MM_SEED_TANDEM
    if is_self:
        a[i, 1] |= np.uint64(1) << np.uint64(43)   # MM_SEED_SELF


@njit(cache=True, nogil=True)
def seed_hits(mv, qlen, max_occ, max_max_occ, occ_dist, flag, b, bkt_off, keys, key_off, pos, ref_len,
              diag_rid, dual_skip):
    """Anchors of one read: minimap2's collect_seed_hits, or collect_seed_hits_heap when
    ``flag & MM_F_HEAP_SORT``. ``max_occ`` is the occurrence cut (minimap2 passes mid_occ, and max_occ
    when it re-seeds a short read). ``ref_len`` is only read with MM_F_QSTRAND, ``diag_rid`` /
    ``dual_skip`` only with MM_F_NO_DIAG / MM_F_NO_DUAL (see :func:`skip_info`).

    Returns (a (n, 2) uint64, rep_len, mini_pos uint64[]).
    """
    qpos, span, seg, tan, cst, cn, n_a, rep_len, mini_pos = collect_matches(
        mv, qlen, max_occ, max_max_occ, occ_dist, b, bkt_off, keys, key_off)
    nm = qpos.shape[0]
    a = np.empty((n_a, 2), np.uint64)
    if not (flag & MM_F_HEAP_SORT):
        na = 0
        for i in range(nm):
            for t in range(cn[i]):
                r = pos[cst[i] + t]
                skip, is_self = skip_seed(flag, r, qpos[i], diag_rid, dual_skip)
                if skip:
                    continue
                _anchor(a, na, r, qpos[i], span[i], seg[i], tan[i], is_self, qlen, flag, ref_len)
                na += 1
        a = a[:na]
        radix_sort_x(a)
        return a, rep_len, mini_pos
    # k-way merge of the (sorted) position lists with a heap keyed on the reference position
    hx = np.empty(nm, np.uint64)
    hy = np.empty(nm, np.uint64)
    hs = 0
    for i in range(nm):
        if cn[i] > 0:
            hx[hs] = pos[cst[i]]
            hy[hs] = np.uint64(i) << np.uint64(32)
            hs += 1
    for t in range((hs >> 1) - 1, -1, -1):
        _minheap_down(hx, hy, t, hs)
    rev = np.empty((n_a, 2), np.uint64)
    n_for = 0
    n_rev = 0
    while hs > 0:
        i = np.int64(hy[0] >> np.uint64(32))
        r = hx[0]
        skip, is_self = skip_seed(flag, r, qpos[i], diag_rid, dual_skip)
        if not skip:
            if np.int64(r & np.uint64(1)) == (qpos[i] & 1):
                _anchor(a, n_for, r, qpos[i], span[i], seg[i], tan[i], is_self, qlen, flag, ref_len)
                n_for += 1
            else:
                _anchor(rev, n_rev, r, qpos[i], span[i], seg[i], tan[i], is_self, qlen, 0, ref_len)
                n_rev += 1
        j = np.int64(hy[0] & np.uint64(0xFFFFFFFF))
        if j < cn[i] - 1:
            hy[0] += np.uint64(1)
            hx[0] = pos[cst[i] + j + 1]
        else:
            hx[0] = hx[hs - 1]
            hy[0] = hy[hs - 1]
            hs -= 1
        _minheap_down(hx, hy, 0, hs)
    for t in range(n_rev):
        a[n_for + t, 0] = rev[t, 0]
        a[n_for + t, 1] = rev[t, 1]
    return a[:n_for + n_rev], rep_len, mini_pos


@njit(cache=True, nogil=True)
def seed_read(seq, seg_off, w, k, is_hpc, mid_occ, max_max_occ, occ_dist, q_occ_frac, flag,
              b, bkt_off, keys, key_off, pos, ref_len, diag_rid, dual_skip, sdust_thres=0):
    """The seeding part of mm_map_frag for one fragment: minimizers (SDUST-masked with -T), query-occurrence
    filter, anchors at the mid_occ cut. Returns (mv, a, rep_len, mini_pos); ``mv`` is kept for a re-seed at
    max_occ (call :func:`seed_hits` again). A fragment of total length 0 gives nothing."""
    qlen = seg_off[seg_off.shape[0] - 1] - seg_off[0]
    mv = collect_minimizers(seq, seg_off, w, k, is_hpc)
    if sdust_thres > 0:
        mv = dust_segments(mv, seq, seg_off, sdust_thres)
    if qlen == 0:
        return mv, np.empty((0, 2), np.uint64), 0, np.empty(0, np.uint64)
    if np.float32(q_occ_frac) > np.float32(0.0):
        mv = seed_mz_flt(mv, mid_occ, q_occ_frac)
    a, rep_len, mini_pos = seed_hits(mv, qlen, mid_occ, max_max_occ, occ_dist, flag, b, bkt_off, keys, key_off,
                                     pos, ref_len, diag_rid, dual_skip)
    return mv, a, rep_len, mini_pos

