"""Batch seed lookup on the GPU (kernels/mmseed.cu) and its CPU twin (numba).

Input: the minimizers of a batch of reads in CSR form, as :mod:`aligner.mmsketch_gpu` returns them
(``mz`` (N, 2) uint64, ``mz_off`` int64[n+1]), the batch's ``seq_off`` (read lengths), the seed options
of ``aligner.mmseed.seed_read`` (``mid_occ``, ``max_max_occ``, ``occ_dist``, ``q_occ_frac``, ``flag``)
and the minimizer index arrays (``b, bkt_off, keys, key_off, pos`` of ``MMIndex.arrays()``,
``ref_len``; ``diag_rid`` per read and ``dual_skip`` for ``MM_F_NO_DIAG`` / ``MM_F_NO_DUAL``).

Output (:class:`SeedBatch`, every per-read array in CSR form over the batch): for each read r exactly
what ``seed_read`` returns for it, byte for byte —

* ``mv[mv_off[r]:mv_off[r+1]]`` the minimizers after ``seed_mz_flt`` (kept for a re-seed at max_occ),
* ``a[a_off[r]:a_off[r+1]]`` the anchors, in minimap2's order (radix_sort_x, or the heap merge of
  ``collect_seed_hits_heap`` with ``MM_F_HEAP_SORT``),
* ``rep_len[r]``,
* ``mini_pos[mini_off[r]:mini_off[r+1]]`` (their number is minimap2's ``n_mini_pos``).

A re-seed at ``max_occ`` (``seed_hits(mv, qlen, max_occ, ...)`` in mm_map_frag) is the same call on
``(mv, mv_off)`` with ``mid_occ = max_occ`` and ``q_occ_frac = 0`` (no query filter).

* :func:`seed_batch_gpu` — kernels/mmseed.cu: per-minimizer lookup, per-read seed selection, exact
  counts and exclusive scans (no fixed-size slots, so nothing to overflow or re-run), per-seed anchor
  writes, then one thread per read for the order-defining sort (minimap2's in-place radix sort, ties
  included) or heap merge. The pass order is written once in :func:`_seed_device` over an array module
  (CuPy here; NumPy plus the kernels compiled as host C++ in tests/test_mmseed_gpu.py).
* :func:`seed_batch_cpu` — numba ``prange`` over reads calling ``seed_mz_flt``, ``collect_matches`` (counts)
  and ``seed_hits`` (anchors) of aligner/map/seed.py.

Not yet used by ``g3align map``. Cost notes: the sort and the heap merge run one thread per read
(sequential, global memory; a read with 10^5 anchors keeps one thread busy), and a seed's occurrences
are written by one thread; a read must have fewer than 2^32 anchors (checked).
"""
from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np

from g3align.aligner import trace_mark
from g3align.aligner.map.seed import (
    MM_F_FOR_ONLY,
    MM_F_HEAP_SORT,
    MM_F_NO_DIAG,
    MM_F_NO_DUAL,
    MM_F_QSTRAND,
    MM_F_REV_ONLY,
    collect_matches,
    seed_hits,
    seed_mz_flt,
    skip_seed,
)
from g3align.jit import njit
from g3align.kernels.loader import fit_shared

__all__ = ["SeedBatch", "index_to_device", "seed_batch_cpu", "seed_batch_gpu"]

_BLOCK = 256       # thread-per-minimizer kernels
_BLOCK_READ = 64   # thread-per-read kernels
# the anchors' sort: sd_sort_block, a block of SB_THREADS per read, its anchors in shared memory up to SB_SMEM_MAX
# bytes (kernels/mmseed.cu). One thread per read in global memory took ~55 ms a 20 Mbp part of chr20 pbsim CLR
# reads, bound by the longest reads.
SB_THREADS = 128   # = kernels/mmseed.cu's SD_SB_THREADS
SB_SMEM_MAX = 200 << 10
_SKIP_FLAGS = MM_F_NO_DIAG | MM_F_NO_DUAL | MM_F_FOR_ONLY | MM_F_REV_ONLY


class SeedBatch(NamedTuple):
    """Seeds of a batch in CSR form (see the module docstring)."""

    mv: object        # (N_mv, 2) uint64: minimizers after the query-occurrence filter
    mv_off: object    # int64[n+1]
    a: object         # (N_a, 2) uint64: anchors
    a_off: object     # int64[n+1]
    rep_len: object   # int64[n]
    mini_pos: object  # uint64[N_mp]: span << 32 | qpos of the seeds used
    mini_off: object  # int64[n+1]


def _check_args(mz_off, seq_off, flag, ref_len):
    if mz_off.shape[0] != seq_off.shape[0]:
        raise ValueError(f"mz_off has {mz_off.shape[0] - 1} reads, seq_off {seq_off.shape[0] - 1}")
    if (flag & MM_F_QSTRAND) and ref_len is None:
        raise ValueError("MM_F_QSTRAND needs ref_len")


def _host_opts(n, ref_len, diag_rid, dual_skip):
    ref_len = np.zeros(0, np.int64) if ref_len is None else np.ascontiguousarray(ref_len, np.int64)
    diag_rid = np.full(n, -1, np.int64) if diag_rid is None else np.ascontiguousarray(diag_rid, np.int64)
    dual_skip = np.zeros(0, np.uint8) if dual_skip is None else np.ascontiguousarray(dual_skip, np.uint8)
    if diag_rid.shape[0] != n:
        raise ValueError(f"diag_rid needs one entry per read ({n}), has {diag_rid.shape[0]}")
    return ref_len, diag_rid, dual_skip


def _empty_batch() -> SeedBatch:
    z = np.zeros(1, np.int64)
    e2 = np.empty((0, 2), np.uint64)
    return SeedBatch(e2, z, e2.copy(), z.copy(), np.zeros(0, np.int64), np.empty(0, np.uint64), z.copy())


def _host_int(xp, x) -> int:
    """int() of a scalar of xp; on the GPU after a stream synchronize (pinned.drain: a blocking copy that waits for
    kernels stalls the other threads' CUDA calls)."""
    return int(_host(xp, x))


def _host(xp, x):
    """x of xp as a NumPy value; on the GPU after a stream synchronize (pinned.drain)."""
    if xp is np:
        return x
    from g3align.aligner.gpu.pinned import drain
    drain()
    return x.get()


def _exclusive(xp, c):
    off = xp.zeros(c.shape[0] + 1, xp.int64)
    if c.shape[0]:
        xp.cumsum(c, out=off[1:])
    return off


# ------------------------------------------------------------------------------------------------
# CPU twin
# ------------------------------------------------------------------------------------------------

@njit(cache=True, parallel=True)
def _cpu_counts(mz, mz_off, qlen, mid_occ, max_max_occ, occ_dist, q_occ_frac, flag, b, bkt_off, keys, key_off,
                pos, diag_rid, dual_skip, mv_slot, n_mv, mp_slot, n_mp, n_a, rep_len):
    """Per read: filtered minimizers and mini_pos into slots laid out as mz (both are at most as many as
    the read's minimizers), and the exact anchor count."""
    for r in nb.prange(mz_off.shape[0] - 1):
        o = mz_off[r]
        mv = mz[o:mz_off[r + 1]].copy()
        if qlen[r] > 0 and np.float32(q_occ_frac) > np.float32(0.0):
            mv = seed_mz_flt(mv, mid_occ, q_occ_frac)
        m = mv.shape[0]
        n_mv[r] = m
        for j in range(m):
            mv_slot[o + j, 0] = mv[j, 0]
            mv_slot[o + j, 1] = mv[j, 1]
        n_mp[r] = 0
        n_a[r] = 0
        rep_len[r] = 0
        if qlen[r] == 0:
            continue
        qpos, span, seg, tan, cst, cn, na, rl, mini_pos = collect_matches(
            mv, qlen[r], mid_occ, max_max_occ, occ_dist, b, bkt_off, keys, key_off)
        nm = mini_pos.shape[0]
        for j in range(nm):
            mp_slot[o + j] = mini_pos[j]
        n_mp[r] = nm
        rep_len[r] = rl
        if flag & _SKIP_FLAGS:
            na = 0
            for i in range(nm):
                for t in range(cn[i]):
                    skip, _ = skip_seed(flag, pos[cst[i] + t], qpos[i], diag_rid[r], dual_skip)
                    if not skip:
                        na += 1
        n_a[r] = na


@njit(cache=True, parallel=True)
def _cpu_fill(mz_off, qlen, mid_occ, max_max_occ, occ_dist, flag, b, bkt_off, keys, key_off, pos, ref_len,
              diag_rid, dual_skip, mv_slot, mp_slot, mv_off, mp_off, a_off, mv, mini_pos, a):
    """Slots -> CSR; anchors of each read by seed_hits straight into the CSR."""
    for r in nb.prange(mz_off.shape[0] - 1):
        o = mz_off[r]
        m = mv_off[r + 1] - mv_off[r]
        for j in range(m):
            mv[mv_off[r] + j, 0] = mv_slot[o + j, 0]
            mv[mv_off[r] + j, 1] = mv_slot[o + j, 1]
        for j in range(mp_off[r + 1] - mp_off[r]):
            mini_pos[mp_off[r] + j] = mp_slot[o + j]
        if a_off[r + 1] == a_off[r]:
            continue
        ar, _, _ = seed_hits(mv_slot[o:o + m], qlen[r], mid_occ, max_max_occ, occ_dist, flag, b, bkt_off, keys,
                             key_off, pos, ref_len, diag_rid[r], dual_skip)
        ao = a_off[r]
        for j in range(ar.shape[0]):
            a[ao + j, 0] = ar[j, 0]
            a[ao + j, 1] = ar[j, 1]


def seed_batch_cpu(mz, mz_off, seq_off, mid_occ: int, max_max_occ: int, occ_dist: int, q_occ_frac: float,
                   flag: int, b: int, bkt_off, keys, key_off, pos, ref_len, diag_rid=None,
                   dual_skip=None) -> SeedBatch:
    """``seed_read`` of every read of the batch from its minimizers (CSR); numba threads over reads.

    ``ref_len`` is read only with MM_F_QSTRAND (may be None otherwise); ``diag_rid`` (int64 per read,
    default -1) and ``dual_skip`` (uint8 per contig) only with MM_F_NO_DIAG / MM_F_NO_DUAL.
    """
    mz = np.ascontiguousarray(mz, np.uint64).reshape(-1, 2)
    mz_off = np.ascontiguousarray(mz_off, np.int64)
    seq_off = np.ascontiguousarray(seq_off, np.int64)
    flag = int(flag)
    _check_args(mz_off, seq_off, flag, ref_len)
    n = seq_off.shape[0] - 1
    if n <= 0:
        return _empty_batch()
    ref_len, diag_rid, dual_skip = _host_opts(n, ref_len, diag_rid, dual_skip)
    qlen = np.diff(seq_off)
    n_mz = int(mz_off[-1])
    mv_slot = np.empty((n_mz, 2), np.uint64)
    mp_slot = np.empty(n_mz, np.uint64)
    n_mv, n_mp, n_a, rep_len = (np.zeros(n, np.int64) for _ in range(4))
    args = (int(mid_occ), int(max_max_occ), int(occ_dist))
    idx = (int(b), np.ascontiguousarray(bkt_off, np.int64), np.ascontiguousarray(keys, np.uint64),
           np.ascontiguousarray(key_off, np.int64), np.ascontiguousarray(pos, np.uint64))
    _cpu_counts(mz, mz_off, qlen, *args, float(q_occ_frac), flag, *idx, diag_rid, dual_skip, mv_slot, n_mv, mp_slot,
                n_mp, n_a, rep_len)
    mv_off, mp_off, a_off = _exclusive(np, n_mv), _exclusive(np, n_mp), _exclusive(np, n_a)
    mv = np.empty((int(mv_off[-1]), 2), np.uint64)
    mini_pos = np.empty(int(mp_off[-1]), np.uint64)
    a = np.empty((int(a_off[-1]), 2), np.uint64)
    _cpu_fill(mz_off, qlen, *args, flag, *idx, ref_len, diag_rid, dual_skip, mv_slot, mp_slot, mv_off, mp_off, a_off,
              mv, mini_pos, a)
    return SeedBatch(mv, mv_off, a, a_off, rep_len, mini_pos, mp_off)


# ------------------------------------------------------------------------------------------------
# device pass order (array module xp + kernel launcher)
# ------------------------------------------------------------------------------------------------

def _pow2_at_least(xp, v):
    """Smallest power of two >= v (int64 array, v >= 1); xp functions throughout (see _seed_device)."""
    v = xp.subtract(v, 1)
    for s in (1, 2, 4, 8, 16, 32):
        v = xp.bitwise_or(v, xp.right_shift(v, s))
    return xp.add(v, 1)


def _seed_device(xp, launch, mz, mz_off, qlen, mid_occ, max_max_occ, occ_dist, q_occ_frac, flag, b, bkt_off,
                 keys, key_off, pos, ref_len, diag_rid, dual_skip, sort_by_length=True):
    """The kernels of kernels/mmseed.cu in order. ``launch(name, n_threads, args, block)`` runs one
    kernel over n_threads threads (never called with 0). Returns a SeedBatch of xp arrays."""
    i64 = np.int64
    n = int(qlen.shape[0])
    n_mz = int(mz_off[-1])
    flag = int(flag)
    n_dual = i64(dual_skip.shape[0])
    rid = xp.empty(n_mz, xp.int32)
    launch("sd_fill_rid", n * 32, (mz_off, i64(n), rid), _BLOCK)

    # seed_mz_flt: reads with more than q_occ_max minimizers get a count table (power of two >= 2n)
    mv, mv_off, rid_f = mz, mz_off, rid
    frac = np.float32(q_occ_frac)
    if n_mz and frac > np.float32(0.0) and mid_occ > 0:
        nz = mz_off[1:] - mz_off[:-1]
        # xp functions, not operators with a Python number (mmsketch_gpu.sketch_batch_gpu: no cupyx import)
        filt = xp.greater(qlen, 0) & xp.greater(nz, mid_occ)
        # no reduction (filt.any()): CuPy's CUB reductions are compiled per input size at their first call, and
        # chr20's size cost 9 s of NVRTC on a fresh box (2026-11-26, py-spy); the table sizes' sum says the same
        tbl_off = _exclusive(xp, xp.where(filt, _pow2_at_least(xp, xp.multiply(xp.maximum(nz, 1), 2)), 0))
        n_tbl = _host_int(xp, tbl_off[-1])
        trace_mark("seed: read ids, q-occ table sizes")
        if n_tbl:
            tkey = xp.zeros(n_tbl, xp.uint32)
            tcnt = xp.zeros(n_tbl, xp.uint32)
            launch("sd_qocc_insert", n_mz, (mz, mz_off, rid, i64(n_mz), tbl_off, tkey, tcnt), _BLOCK)
            keep = xp.empty(n_mz, xp.int64)
            launch("sd_qocc_keep", n_mz, (mz, mz_off, rid, i64(n_mz), tbl_off, tkey, tcnt, i64(mid_occ), frac, keep),
                   _BLOCK)
            del tkey, tcnt
            kscan = _exclusive(xp, keep)
            n_mv = _host_int(xp, kscan[-1])
            if n_mv < n_mz:
                mv = xp.empty((n_mv, 2), xp.uint64)
                rid_f = xp.empty(n_mv, xp.int32)
                launch("sd_compact", n_mz, (mz, rid, i64(n_mz), kscan, mv, rid_f), _BLOCK)
                mv_off = kscan[mz_off]
    n_mv = int(mv.shape[0])
    trace_mark("seed: q-occ filter")

    # lookup, seed selection, counts
    s_st = xp.empty(n_mv, xp.int64)
    s_n = xp.empty(n_mv, xp.int64)
    s_tan = xp.empty(n_mv, xp.uint8)
    s_flt = xp.zeros(n_mv, xp.uint8)
    rep_len = xp.zeros(n, xp.int64)
    if n_mv:
        launch("sd_lookup", n_mv, (mv, mv_off, rid_f, i64(n_mv), qlen, np.int32(b), bkt_off, keys, key_off, s_st, s_n,
                                   s_tan), _BLOCK)
        reads = xp.argsort(mv_off[:-1] - mv_off[1:]).astype(xp.int64) if sort_by_length else None
        launch("sd_select", n, (reads, i64(n), mv, mv_off, qlen, s_n, i64(mid_occ), i64(max_max_occ), i64(occ_dist),
                                s_flt, rep_len), _BLOCK_READ)
    kept = xp.zeros(n_mv, xp.int64)
    n_anc = xp.zeros(n_mv, xp.int64)
    if n_mv:
        launch("sd_count", n_mv, (mv, rid_f, i64(n_mv), s_st, s_n, s_flt, i64(flag), pos, diag_rid, dual_skip, n_dual,
                                  kept, n_anc), _BLOCK)
    mp_scan = _exclusive(xp, kept)
    a_scan = _exclusive(xp, n_anc)
    n_mp = _host_int(xp, mp_scan[-1])
    n_a = int(a_scan[-1])  # (mp_scan's wait covers it)
    trace_mark("seed: lookup, select, count")
    mini_pos = xp.empty(n_mp, xp.uint64)
    a = xp.empty((n_a, 2), xp.uint64)
    heap = bool(flag & MM_F_HEAP_SORT)
    kept_j = xp.empty(n_mp, xp.int64) if heap else None
    if n_mp:
        launch("sd_emit", n_mv, (mv, rid_f, i64(n_mv), qlen, s_st, s_n, s_tan, s_flt, mp_scan, a_scan, i64(flag), pos,
                                 ref_len, diag_rid, dual_skip, n_dual, mini_pos, kept_j, a), _BLOCK)
    mp_off = mp_scan[mv_off]
    a_off = a_scan[mv_off]
    del s_flt, kept, n_anc
    if n_a:
        n_ar = a_off[1:] - a_off[:-1]
        if heap:
            reads = xp.argsort(-n_ar).astype(xp.int64) if sort_by_length else None
            hx = xp.empty(n_mp, xp.uint64)
            hy = xp.empty(n_mp, xp.uint64)
            rev = xp.empty((n_a, 2), xp.uint64)
            launch("sd_heap", n, (reads, i64(n), mv, mp_off, kept_j, s_st, s_n, s_tan, qlen, i64(flag), pos, ref_len,
                                  diag_rid, dual_skip, n_dual, a_off, hx, hy, rev, a), _BLOCK_READ)
        else:
            # the counts on the host (one number per read): the reads to sort, longest first, and the block's
            # shared memory from the longest (anchors of reads above SB_SMEM_MAX stay in global memory)
            nh = np.asarray(_host(xp, n_ar), np.int64)
            trace_mark("seed: emit, counts to the host")
            if int(nh.max()) >= 1 << 32:
                raise NotImplementedError("a read with 2^32 or more anchors (sd_sort_block counts in 32 bits)")
            order = np.argsort(-nh, kind="stable")[:int(np.count_nonzero(nh > 1))]
            if order.size:
                cap = min(int(nh[order[0]]), SB_SMEM_MAX // 16)
                launch("sd_sort_block", int(order.size) * SB_THREADS,
                       (xp.asarray(order.astype(np.int64)), i64(order.size), a_off, a, i64(cap)), SB_THREADS, 16 * cap)
    trace_mark("seed: sort launch")
    return SeedBatch(mv, mv_off, a, a_off, rep_len, mini_pos, mp_off)


# ------------------------------------------------------------------------------------------------
# GPU
# ------------------------------------------------------------------------------------------------

def _module():
    from g3align.kernels.loader import get_module

    return get_module("mmseed")


def _launch(mod, name: str, n_threads: int, args: tuple, block: int, smem: int = 0) -> None:
    """One kernel of ``mod`` over n_threads threads in blocks of ``block`` (None arguments: null pointers), its
    dynamic shared memory limit raised first where ``smem`` needs it."""
    args = tuple(np.uint64(0) if x is None else x for x in args)
    f = mod.get_function(name)
    fit_shared(f, smem, SB_SMEM_MAX)
    f(((n_threads + block - 1) // block,), (block,), args, shared_mem=smem)


def index_to_device(b, bkt_off, keys, key_off, pos, ref_len=None):
    """The index arrays on the current GPU (pass them to :func:`seed_batch_gpu` to keep them resident)."""
    import cupy as cp

    ref_len = np.zeros(0, np.int64) if ref_len is None else ref_len
    return (int(b), cp.asarray(bkt_off, cp.int64), cp.asarray(keys, cp.uint64), cp.asarray(key_off, cp.int64),
            cp.asarray(pos, cp.uint64), cp.asarray(ref_len, cp.int64))


def seed_batch_gpu(mz, mz_off, seq_off, mid_occ: int, max_max_occ: int, occ_dist: int, q_occ_frac: float,
                   flag: int, b: int, bkt_off, keys, key_off, pos, ref_len, diag_rid=None, dual_skip=None,
                   to_host: bool = True, sort_by_length: bool = True, timings: dict | None = None) -> SeedBatch:
    """:func:`seed_batch_cpu` on the current GPU. Arrays may be host or CuPy arrays (index arrays are
    copied to the device on every call unless they already are CuPy arrays: see :func:`index_to_device`).

    Returns a SeedBatch of NumPy arrays (``to_host``) or CuPy arrays. ``timings`` (optional dict)
    receives the device time of the whole device part in ms under ``"kernels_ms"`` (CUDA events; the
    scans' host syncs included).
    """
    import cupy as cp

    trace_mark(None)
    flag = int(flag)
    mz_d = cp.ascontiguousarray(cp.asarray(mz, cp.uint64)).reshape(-1, 2)
    mz_off_d = cp.ascontiguousarray(cp.asarray(mz_off, cp.int64))
    seq_off_d = cp.ascontiguousarray(cp.asarray(seq_off, cp.int64))
    _check_args(mz_off_d, seq_off_d, flag, ref_len)
    n = int(seq_off_d.shape[0]) - 1
    if n <= 0:
        res = _empty_batch()
        return res if to_host else SeedBatch(*(cp.asarray(x) for x in res))
    if diag_rid is None:
        diag_rid = cp.full(n, -1, cp.int64)
    diag_d = cp.ascontiguousarray(cp.asarray(diag_rid, cp.int64))
    if diag_d.shape[0] != n:
        raise ValueError(f"diag_rid needs one entry per read ({n}), has {diag_d.shape[0]}")
    dual_d = cp.asarray(np.zeros(0, np.uint8) if dual_skip is None else dual_skip, cp.uint8)
    ref_len_d = cp.asarray(np.zeros(0, np.int64) if ref_len is None else ref_len, cp.int64)
    idx = (cp.asarray(bkt_off, cp.int64), cp.asarray(keys, cp.uint64), cp.asarray(key_off, cp.int64),
           cp.asarray(pos, cp.uint64))
    mod = _module()
    trace_mark("seed: inputs")

    def launch(name, n_threads, args, block, smem=0):
        _launch(mod, name, n_threads, args, block, smem)

    ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
    ev0.record()
    qlen = seq_off_d[1:] - seq_off_d[:-1]
    res = _seed_device(cp, launch, mz_d, mz_off_d, qlen, int(mid_occ), int(max_max_occ), int(occ_dist),
                       float(q_occ_frac), flag, int(b), *idx, ref_len_d, diag_d, dual_d, sort_by_length)
    ev1.record()
    ev1.synchronize()
    trace_mark("seed: wait for the kernels")
    if timings is not None:
        timings["kernels_ms"] = cp.cuda.get_elapsed_time(ev0, ev1)
    if to_host:
        return SeedBatch(*(cp.asnumpy(x) for x in res))
    return res
