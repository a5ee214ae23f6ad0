"""Batch seeding on the GPU (kernels/smem.cu) and its CPU batch twins (numba).

Input: a batch of reads as struct-of-arrays (`seq` uint8 codes 0..4 concatenated, `seq_off` int64[n+1])
and the FM-index. Output, per batch, CSR arrays:

* `collect_intv_batch_{gpu,cpu}` -> (mb, me, mk, ms, off): read r's intervals are [off[r], off[r+1]),
  exactly what `aligner.smem.collect_intv` returns for that read (bwa's mem_collect_intv: three seeding
  rounds, introsort by start<<32|end), all int64.
* `seed_pos_batch_{gpu,cpu}` -> (s_rbeg int64, s_qbeg int32, s_len int32, s_rid int32, s_off int64):
  the seed occurrences of those intervals as `aligner.chain.make_seeds` samples them (at most max_occ
  per interval, evenly spaced rows; with `filter_rid` the seeds bridging contigs/strands are dropped,
  as make_seeds does), concatenated per read; read r's seeds are [s_off[r], s_off[r+1]).

The GPU versions equal the CPU twins byte for byte (tests/test_smem_gpu.py, scripts/gpu_seed_bench.py).
Kernel thread mapping is described at the top of kernels/smem.cu. Each GPU read keeps its intervals in
a fixed slot of `cap` records; a read that needs more is re-run with a 4x larger slot (no read lost).
"""
from __future__ import annotations

from collections import namedtuple

import numba as nb
import numpy as np

from g3align.aligner.mem.bns import intv2rid
from g3align.aligner.mem.smem import collect_intv
from g3align.index.fm import fm_sa
from g3align.jit import njit

__all__ = [
    "FMDevice",
    "fm_to_device",
    "fm_params_array",
    "collect_intv_batch_gpu",
    "collect_intv_batch_cpu",
    "seed_pos_batch_gpu",
    "seed_pos_batch_cpu",
    "seed_counts",
]

# FM-index arrays on the device: occ and sa (uint32), P = fm_params_array(fm) (int64[29]),
# wide (occ_wide: 0 or the superblock shift, kernels/smem.cu's OCC_WIDE), and the host copies of the scalars the
# launchers need.
FMDevice = namedtuple("FMDevice", ["occ", "sa", "P", "wide", "n", "l_pac"])


def fm_params_array(fm) -> np.ndarray:
    """The index scalars in the order kernels/smem.cu reads them (P_* constants)."""
    P = np.zeros(29, np.int64)
    P[0:6] = [fm.n, fm.primary, fm.row_sa1, fm.t0, fm.occ_stride, fm.sa_shift]
    P[6:12] = np.asarray(fm.C1, np.int64)
    P[12:29] = np.asarray(fm.C2, np.int64)
    if int(fm.occ_shift) != 6:
        raise ValueError("kernels/smem.cu assumes 64-row occurrence blocks (occ_shift 6)")
    return P


def fm_to_device(fm) -> FMDevice:
    """Copy the occurrence table and sampled SA to the current GPU."""
    import cupy as cp

    if fm.sa.dtype != np.uint32 or fm.occ.dtype != np.uint32:
        raise ValueError("occ and sa must be uint32 arrays (index/fm.py)")
    from g3align.aligner.mem.gpu.stage import upload_large

    return FMDevice(occ=upload_large(fm.occ), sa=upload_large(fm.sa), P=cp.asarray(fm_params_array(fm)),
                    wide=int(fm.occ_wide), n=int(fm.n), l_pac=int(fm.l_pac))


def _module(fm_dev, count_lookups=False):
    from g3align.kernels.loader import get_module

    d = {"OCC_WIDE": fm_dev.wide}
    if count_lookups:
        d["COUNT_LOOKUPS"] = 1
    return get_module("smem", d)


def _as_params(opt):
    """MemOpt (dataclass) or MemParams (numba tuple) -> MemParams, so ratios are C floats."""
    return opt.to_numba() if hasattr(opt, "to_numba") else opt


def _split_len(min_seed_len, split_factor) -> int:
    """smem.collect_intv's expression with its argument types (float32 split_factor; bwa's C: int * float, then
    + .499 in double), in NumPy scalars: as a numba function its first call waited behind the preload thread's
    loads (numba's compiler lock), 0.19 s in every first seeding on the GPU box."""
    return int(np.float64(np.float32(min_seed_len) * np.float32(split_factor)) + .499)


# ------------------------------------------------------------------------------------------------
# CPU batch twin
# ------------------------------------------------------------------------------------------------


@njit(cache=True, parallel=True)
def _cpu_collect(fm, seq, seq_off, min_seed_len, split_factor, split_width, max_mem_intv, cap, sb, se, sk, ss,
                 cnt):
    n = seq_off.shape[0] - 1
    for r in nb.prange(n):
        q = seq[seq_off[r]:seq_off[r + 1]]
        mb, me, mk, ms = collect_intv(fm, q, q.shape[0], min_seed_len, split_factor, split_width, max_mem_intv)
        m = mb.shape[0]
        cnt[r] = m
        if m <= cap:
            sb[r, :m] = mb
            se[r, :m] = me
            sk[r, :m] = mk
            ss[r, :m] = ms


@njit(cache=True, parallel=True)
def _cpu_compact(fm, seq, seq_off, min_seed_len, split_factor, split_width, max_mem_intv, cap, sb, se, sk, ss,
                 cnt, off, mb_o, me_o, mk_o, ms_o):
    n = seq_off.shape[0] - 1
    for r in nb.prange(n):
        o = off[r]
        m = cnt[r]
        if m <= cap:
            mb_o[o:o + m] = sb[r, :m]
            me_o[o:o + m] = se[r, :m]
            mk_o[o:o + m] = sk[r, :m]
            ms_o[o:o + m] = ss[r, :m]
        else:  # rare: recompute rather than keep a slot this large for every read
            q = seq[seq_off[r]:seq_off[r + 1]]
            mb, me, mk, ms = collect_intv(fm, q, q.shape[0], min_seed_len, split_factor, split_width,
                                          max_mem_intv)
            mb_o[o:o + m] = mb
            me_o[o:o + m] = me
            mk_o[o:o + m] = mk
            ms_o[o:o + m] = ms


def collect_intv_batch_cpu(fm, seq, seq_off, opt, cap: int = 64):
    """smem.collect_intv over every read of a batch (numba prange over reads), CSR out:
    (mb, me, mk, ms, off), all int64, off has n_reads + 1 entries."""
    opt = _as_params(opt)
    seq = np.ascontiguousarray(seq, np.uint8)
    seq_off = np.ascontiguousarray(seq_off, np.int64)
    n = seq_off.shape[0] - 1
    sb = np.empty((n, cap), np.int64)
    se = np.empty((n, cap), np.int64)
    sk = np.empty((n, cap), np.int64)
    ss = np.empty((n, cap), np.int64)
    cnt = np.empty(n, np.int64)
    args = (fm, seq, seq_off, opt.min_seed_len, opt.split_factor, opt.split_width, opt.max_mem_intv, cap)
    _cpu_collect(*args, sb, se, sk, ss, cnt)
    off = np.zeros(n + 1, np.int64)
    np.cumsum(cnt, out=off[1:])
    tot = int(off[-1])
    out = [np.empty(tot, np.int64) for _ in range(4)]
    _cpu_compact(*args, sb, se, sk, ss, cnt, off, *out)
    return out[0], out[1], out[2], out[3], off


@njit(cache=True)
def seed_counts(ms, max_occ):
    """Occurrences make_seeds samples per interval: min(ceil(s/step), max_occ), step = s//max_occ
    when s > max_occ else 1."""
    c = np.empty(ms.shape[0], np.int64)
    for i in range(ms.shape[0]):
        s = ms[i]
        step = s // max_occ if s > max_occ else 1
        v = (s + step - 1) // step
        c[i] = v if v < max_occ else max_occ
    return c


@njit(cache=True, parallel=True)
def _cpu_seed_pos(fm, offsets, l_pac, mb, me, mk, ms, occ_off, max_occ, s_rbeg, s_qbeg, s_len, s_rid):
    for i in nb.prange(mb.shape[0]):
        s = ms[i]
        step = s // max_occ if s > max_occ else 1
        slen = me[i] - mb[i]
        for j in range(occ_off[i + 1] - occ_off[i]):
            t = occ_off[i] + j
            rb = fm_sa(fm, mk[i] + j * step)
            s_rbeg[t] = rb
            s_qbeg[t] = mb[i]
            s_len[t] = slen
            s_rid[t] = intv2rid(offsets, l_pac, rb, rb + slen)


def _filter_rid(s_rbeg, s_qbeg, s_len, s_rid, occ_off, off, xp):
    # xp functions, not operators with a Python number: with CuPy arrays those go through NumPy's ufunc
    # override, whose first call imports cupyx.scipy.special (tests/test_mem.py test_gpu_mem_does_not_import_cupyx)
    keep = xp.greater_equal(s_rid, 0)
    ks = xp.zeros(keep.shape[0] + 1, np.int64)
    xp.cumsum(keep.astype(np.int64), out=ks[1:])
    s_off = ks[occ_off[off]]
    return s_rbeg[keep], s_qbeg[keep], s_len[keep], s_rid[keep], s_off


def seed_pos_batch_cpu(fm, offsets, mb, me, mk, ms, off, max_occ, filter_rid: bool = True):
    """make_seeds over a batch's CSR intervals (numba prange over intervals). Without filter_rid every
    sampled occurrence is kept (s_rid -1/-2 marks the ones make_seeds drops)."""
    occ_off = np.zeros(mb.shape[0] + 1, np.int64)
    np.cumsum(seed_counts(ms, max_occ), out=occ_off[1:])
    tot = int(occ_off[-1])
    s_rbeg = np.empty(tot, np.int64)
    s_qbeg = np.empty(tot, np.int32)
    s_len = np.empty(tot, np.int32)
    s_rid = np.empty(tot, np.int32)
    _cpu_seed_pos(fm, np.asarray(offsets, np.int64), np.int64(fm.l_pac), mb, me, mk, ms, occ_off,
                  np.int64(max_occ), s_rbeg, s_qbeg, s_len, s_rid)
    if filter_rid:
        return _filter_rid(s_rbeg, s_qbeg, s_len, s_rid, occ_off, off, np)
    return s_rbeg, s_qbeg, s_len, s_rid, occ_off[off]


# ------------------------------------------------------------------------------------------------
# GPU launchers
# ------------------------------------------------------------------------------------------------


def _blocks(n, block):
    return ((int(n) + block - 1) // block,)


def collect_intv_batch_gpu(fm_dev, seq, seq_off, opt, cap: int = 64, block: int = 128, to_host: bool = False,
                           count_lookups: bool = False, stats: dict | None = None):
    """GPU twin of collect_intv_batch_cpu: (mb, me, mk, ms, off) as cupy arrays (numpy with to_host).

    seq/seq_off may be numpy (copied) or cupy arrays. `stats` (optional dict) receives the time of the
    first collect_intv_kernel launch over all reads (CUDA events, slot allocation included), the number
    of reads re-run for slot overflow and, with count_lookups, the number of occurrence-block visits."""
    import cupy as cp

    opt = _as_params(opt)
    mod = _module(fm_dev, count_lookups)
    k_collect = mod.get_function("collect_intv_kernel")
    k_compact = mod.get_function("compact_kernel")
    if count_lookups:
        g = cp.ndarray((1,), cp.uint64, memptr=mod.get_global("g_lookups"))
        g.fill(0)
    seq_d = cp.asarray(seq, dtype=cp.uint8)
    off_d = cp.asarray(seq_off, dtype=cp.int64)
    n = int(off_d.shape[0]) - 1
    split_len = _split_len(opt.min_seed_len, opt.split_factor)
    scal = (np.int32(opt.min_seed_len), np.int32(split_len), np.int32(opt.split_width),
            np.int32(opt.max_mem_intv))

    def launch(ids, c):
        m = int(ids.shape[0])
        skey = cp.empty(m * c, cp.int64)
        sk = cp.empty(m * c, cp.int64)
        ss = cp.empty(m * c, cp.int64)
        cnt = cp.empty(m, cp.int32)
        if m:
            k_collect(_blocks(m, block), (block,),
                      (fm_dev.occ, fm_dev.sa, fm_dev.P, seq_d, off_d, ids, np.int64(m), *scal, np.int32(c),
                       skey, sk, ss, cnt))
        return skey, sk, ss, cnt

    ids = cp.arange(n, dtype=cp.int64)
    if stats is not None:
        ev = [cp.cuda.Event(), cp.cuda.Event()]
        ev[0].record()
    runs = [(ids, launch(ids, cap))]
    if stats is not None:
        ev[1].record()
    cnt_all = runs[0][1][3].copy()
    c = cap
    n_rerun = 0
    while True:
        # the reads over capacity found on the host (one count per read): cp.nonzero is a scan kernel that CuPy
        # compiles with NVRTC at its first call on a machine
        bad_h = np.flatnonzero(cp.asnumpy(runs[-1][1][3]) < 0)
        if bad_h.shape[0] == 0:
            break
        bad = cp.asarray(bad_h)
        c *= 4
        ids_b = runs[-1][0][bad]
        n_rerun += int(bad.shape[0])
        runs.append((ids_b, launch(ids_b, c)))
        cnt_all[ids_b] = runs[-1][1][3]
    off = cp.zeros(n + 1, cp.int64)
    cp.cumsum(cnt_all, out=off[1:])
    tot = int(off[-1])
    out = [cp.empty(tot, cp.int64) for _ in range(4)]
    for ids_r, (skey, sk, ss, cnt) in runs:
        m = int(ids_r.shape[0])
        if m:
            k_compact(_blocks(m, block), (block,), (skey, sk, ss, cnt, off[ids_r], np.int64(m), *out))
    if stats is not None:
        ev[1].synchronize()
        stats["collect_kernel_ms"] = cp.cuda.get_elapsed_time(ev[0], ev[1])  # first launch, all reads
        stats["rerun_reads"] = n_rerun
        if count_lookups:
            stats["occ_lookups"] = int(g.get()[0])
    if to_host:
        return tuple(cp.asnumpy(a) for a in out) + (cp.asnumpy(off),)
    return out[0], out[1], out[2], out[3], off


def seed_pos_batch_gpu(fm_dev, offsets, mb, me, mk, ms, off, max_occ, filter_rid: bool = True, block: int = 128,
                       to_host: bool = False):
    """GPU twin of seed_pos_batch_cpu (one thread per sampled occurrence)."""
    import cupy as cp

    mod = _module(fm_dev)
    kern = mod.get_function("seed_pos_kernel")
    mb, me, mk, ms, off = (cp.asarray(a, dtype=cp.int64) for a in (mb, me, mk, ms, off))
    s = ms
    # CuPy functions, not operators with a Python number (no cupyx import: _filter_rid)
    step = cp.where(cp.greater(s, max_occ), cp.floor_divide(s, max_occ), 1)
    c = cp.minimum(cp.floor_divide(cp.subtract(s + step, 1), step), max_occ)
    occ_off = cp.zeros(c.shape[0] + 1, cp.int64)
    cp.cumsum(c, out=occ_off[1:])
    tot = int(occ_off[-1])
    s_rbeg = cp.empty(tot, cp.int64)
    s_qbeg = cp.empty(tot, cp.int32)
    s_len = cp.empty(tot, cp.int32)
    s_rid = cp.empty(tot, cp.int32)
    ctg = cp.asarray(np.asarray(offsets, np.int64))
    if tot:
        kern(_blocks(tot, block), (block,),
             (fm_dev.occ, fm_dev.sa, fm_dev.P, mb, me, mk, ms, occ_off, np.int64(mb.shape[0]), np.int64(tot),
              np.int32(max_occ), ctg, np.int64(ctg.shape[0] - 1), np.int64(fm_dev.l_pac),
              s_rbeg, s_qbeg, s_len, s_rid))
    if filter_rid:
        res = _filter_rid(s_rbeg, s_qbeg, s_len, s_rid, occ_off, off, cp)
    else:
        res = (s_rbeg, s_qbeg, s_len, s_rid, occ_off[off])
    if to_host:
        return tuple(cp.asnumpy(a) for a in res)
    return res
