"""Batches of ksw2 extd2 jobs: kernels/ksw2.cu on the GPU (one warp per job, gridded traceback) and its CPU
twin (aligner/map/ksw2.py's extd2 per job, numba threads over the batch); both give the same arrays.

A job is one call of minimap2's ksw_extd2_sse: a query and a target given as views of two byte buffers
(codes 0-4) plus the call's band, Z-drop, end bonus and flags. A row of ``jobs`` (int64, J_NF columns):

* ``J_Q_OFF, J_Q_LEN, J_Q_MODE``: the query is ``Q[q_off:q_off + q_len]``, read backwards when
  ``q_mode & 1`` (MODE_REV) and complemented (A<->T, C<->G, N stays) when ``q_mode & 2`` (MODE_COMP);
* ``J_T_OFF, J_T_LEN, J_T_MODE``: the target likewise from ``T``;
* ``J_W, J_ZDROP, J_END_BONUS, J_FLAG``: ksw_extd2_sse's ``w, zdrop, end_bonus, flag``
  (KSW_EZ_GENERIC_SC is not supported: such jobs stay on the CPU, see ``gpu_ok``);
* ``J_PSET``: the row of ``P`` (int32, P_NF columns: q, e, q2, e2 and the 5x5 score matrix) it scores with.

Results: ``ez`` (n, EZ_N) int64 as aligner/map/ksw2.py returns it, and the CIGARs in a CSR of fixed capacity
per job (``cig_off``: q_len + t_len + 2 words each, ``n_cig``: the words used).
"""
from __future__ import annotations

import contextlib

import numba as nb
import numpy as np

from g3align.aligner.map.ksw2 import extd2
from g3align.aligner.map.types import EZ_N, KSW_EZ_APPROX_MAX, KSW_EZ_GENERIC_SC, KSW_EZ_SCORE_ONLY
from g3align.jit import njit

(J_Q_OFF, J_Q_LEN, J_Q_MODE, J_T_OFF, J_T_LEN, J_T_MODE, J_W, J_ZDROP, J_END_BONUS, J_FLAG, J_PSET) = range(11)
J_NF = 12
MODE_REV = 1
MODE_COMP = 2
P_NF = 29
GRID = 64  # anti-diagonals per traceback block (the forward pass checkpoints every GRID of them)
SCRATCH_BYTES = 2 << 30  # GPU scratch of one launch of extd2_batch_gpu (more jobs: more launches)
ERR_GEOMETRY = 1


def pset_row(q: int, e: int, q2: int, e2: int, mat: np.ndarray) -> np.ndarray:
    """One parameter set: the gap costs and the 5x5 matrix (int8 values) as an int32 row of P."""
    row = np.zeros(P_NF, np.int32)
    row[:4] = (q, e, q2, e2)
    row[4:] = np.asarray(mat, np.int8).astype(np.int32)[:25]
    return row


def parse_defines(spec: str) -> dict | None:
    """A compile-time variant of kernels/ksw2.cu as the benchmark scripts write it (scripts/ksw2_jobs.py --variants,
    ksw2_memcheck.py, ptx_negminmax.py): 'NAME=INT:NAME=INT' -> get_module's defines; '' or 'default' -> None."""
    if spec in ("", "default"):
        return None
    return {k: int(v) for k, v in (kv.split("=") for kv in spec.split(":"))}


def gpu_ok(jobs: np.ndarray) -> np.ndarray:
    """Jobs the GPU kernel takes (everything but generic scoring)."""
    return (jobs[:, J_FLAG] & KSW_EZ_GENERIC_SC) == 0


def cig_offsets(jobs: np.ndarray) -> np.ndarray:
    """CSR offsets of the CIGAR capacity per job (the traceback's bound q_len + t_len, plus 2)."""
    off = np.zeros(jobs.shape[0] + 1, np.int64)
    np.cumsum(jobs[:, J_Q_LEN] + jobs[:, J_T_LEN] + 2, out=off[1:])
    return off


def job_geometry(jobs: np.ndarray, grid: int = GRID) -> tuple[np.ndarray, np.ndarray]:
    """Per job (scratch bytes, ckw, pw): the kernel's scratch size (16-aligned) and the widths of a
    checkpoint (ckw) and of a direction row (pw). Bounds: a band row holds at most min(qlen, tlen, w + 2)
    cells, widened by up to 15 on each side to whole 16-byte blocks; the columns a block of `grid`
    anti-diagonals touches add at most grid + 1 more (the band moves by at most one column per
    anti-diagonal), and a checkpoint starts up to 15 columns lower, at a 16-byte block (its rows are copied 16
    bytes at a time, so ckw is a multiple of 16). The kernel checks both and reports ERR_GEOMETRY if one is ever
    exceeded."""
    ql = jobs[:, J_Q_LEN]
    tl = jobs[:, J_T_LEN]
    w = jobs[:, J_W]
    w = np.where(w < 0, np.maximum(ql, tl), w)
    T = (tl + 15) // 16 * 16
    band = np.minimum(np.minimum(ql, tl), w + 2)
    pw = np.minimum(T, band + 30)
    # band + grid + 31 columns, + 15 for block_cols' start at a 16-byte block, rounded up to a multiple of 16
    ckw = np.minimum(T, (band + grid + 46 + 15) // 16 * 16)
    nr = np.maximum(ql + tl - 1, 0)
    n_blk = (nr + grid - 1) // grid
    flag = jobs[:, J_FLAG]
    cig = (flag & KSW_EZ_SCORE_ONLY) == 0
    exact = (flag & KSW_EZ_APPROX_MAX) == 0
    rows = np.minimum(nr, grid)  # direction rows of one block
    # u v x y x2 y2 s, the target (T) and the reversed query with its padding (kernels/ksw2.cu Ksw2Arr)
    size = 8 * T + (ql + 47) // 16 * 16 + np.where(exact, 4 * T, 0) + np.where(cig, n_blk * 7 * ckw + rows * pw, 0)
    size = np.where((ql > 0) & (tl > 0), (size + 15) // 16 * 16, 0)
    return size.astype(np.int64), np.stack([ckw, pw], 1).astype(np.int64)


# ----------------------------------------------------------------------------------------------- CPU twin
@njit(cache=True, nogil=True)
def job_seq(buf, off, n, mode):
    """A job's query or target as the kernel reads it (views of buf, reversed / complemented)."""
    out = np.empty(n, np.uint8)
    for k in range(n):
        c = buf[off + (n - 1 - k if mode & MODE_REV else k)]
        if mode & MODE_COMP:
            c = 3 - c if c < 4 else 4
        out[k] = c
    return out


@njit(cache=True, nogil=True)
def _one(Q, T, jobs, P, j, ez, cig, cig_off, n_cig):
    row = jobs[j]
    qs = job_seq(Q, row[J_Q_OFF], row[J_Q_LEN], row[J_Q_MODE])
    ts = job_seq(T, row[J_T_OFF], row[J_T_LEN], row[J_T_MODE])
    p = P[row[J_PSET]]
    mat = p[4:29].astype(np.int8)
    e, c = extd2(qs, ts, mat, p[0], p[1], p[2], p[3], row[J_W], row[J_ZDROP], row[J_END_BONUS], row[J_FLAG])
    ez[j, :] = e
    n_cig[j] = c.shape[0]
    cig[cig_off[j]:cig_off[j] + c.shape[0]] = c


@njit(cache=True, nogil=True, parallel=True)
def _batch_cpu(Q, T, jobs, P, ez, cig, cig_off, n_cig):
    for j in nb.prange(jobs.shape[0]):
        _one(Q, T, jobs, P, j, ez, cig, cig_off, n_cig)


def extd2_batch_cpu(Q, T, jobs, P):
    """The CPU twin: (ez, cig, cig_off, n_cig) for every job (numba threads over the jobs)."""
    n = jobs.shape[0]
    cig_off = cig_offsets(jobs)
    ez = np.zeros((n, EZ_N), np.int64)
    cig = np.zeros(int(cig_off[-1]), np.uint32)
    n_cig = np.zeros(n, np.int64)
    if n:
        _batch_cpu(np.ascontiguousarray(Q, np.uint8), np.ascontiguousarray(T, np.uint8),
                   np.ascontiguousarray(jobs, np.int64), np.ascontiguousarray(P, np.int32), ez, cig, cig_off, n_cig)
    return ez, cig, cig_off, n_cig


# ----------------------------------------------------------------------------------------------- GPU
def extd2_batch_gpu(Q, T, jobs, P, grid: int = GRID, block: int = 128, scratch_bytes: int = SCRATCH_BYTES,
                    to_host: bool = True, stats: dict | None = None, defines: dict | None = None,
                    compact: bool = False, gate=None):
    """kernels/ksw2.cu over the jobs (the largest first): (ez, cig, cig_off, n_cig), the same arrays as
    extd2_batch_cpu. Q and T may already be on the GPU. Jobs run in launches whose scratch fits
    scratch_bytes (a job larger than that runs alone). stats: gets 'launches', 'jobs' and 'cells' (DP cells
    the kernel computed, recomputation of the traceback included) added. defines: compile-time constants of
    kernels/ksw2.cu for benchmark variants (e.g. {"KSW2_MIN_BLOCKS": 6}). compact (with to_host): the CIGARs
    come back packed in job order (ksw_cig_offsets, ksw_cig_compact, queued right behind the launches), cig_off
    then being their CSR offsets in the packed array, copied back through pinned staging buffers (pinned.fetch): a
    chr20 map-pb part copies ~15 MB instead of the ~170 MB the kernel reserves for the longest CIGARs.
    gate: a context manager held from the launches to the return, the job geometry and the uploads before them
    outside it (aligner/map/align_batch.py's one-batch-at-a-time gate)."""
    with contextlib.ExitStack() as held:
        return _extd2_gpu(Q, T, jobs, P, grid, block, scratch_bytes, to_host, stats, defines, compact,
                          (lambda: held.enter_context(gate)) if gate is not None else None)


def launch_plan(size: np.ndarray, order: np.ndarray, scratch_bytes: int) -> tuple[list, np.ndarray]:
    """The launches of a batch: consecutive runs [start, end) of the size order whose scratch sums stay within
    scratch_bytes (at least one job each), with each launch's scratch bytes, and every job's offset in its
    launch's scratch."""
    n = order.shape[0]
    s_ord = size[order]
    offs = np.zeros(n, np.int64)
    runs = []
    start = 0
    while start < n:
        csum = np.cumsum(s_ord[start:])
        end = start + max(1, int(np.searchsorted(csum, scratch_bytes, side="right")))
        offs[order[start + 1:end]] = csum[:end - start - 1]
        runs.append((start, end, int(csum[end - start - 1])))
        start = end
    return runs, offs


def _extd2_gpu(Q, T, jobs, P, grid, block, scratch_bytes, to_host, stats, defines, compact, enter_gate):
    """extd2_batch_gpu's body; enter_gate() (unless None) is called as the launches begin."""
    import cupy as cp

    from g3align.aligner import trace_mark
    from g3align.kernels.loader import get_module

    trace_mark(None)
    n = int(jobs.shape[0])
    cig_off = cig_offsets(jobs)
    if n == 0:
        return (np.zeros((0, EZ_N), np.int64), np.zeros(0, np.uint32), cig_off, np.zeros(0, np.int64))
    if not gpu_ok(jobs).all():
        raise ValueError("ksw2 GPU jobs with KSW_EZ_GENERIC_SC")
    size, cp_w = job_geometry(jobs, grid)
    order = np.argsort(-(jobs[:, J_Q_LEN] * jobs[:, J_T_LEN]), kind="stable").astype(np.int64)
    runs, offs = launch_plan(size, order, scratch_bytes)
    geo = np.empty((n, 3), np.int64)
    geo[:, 0] = offs
    geo[:, 1:] = cp_w
    mod = get_module("ksw2", defines)
    kern = mod.get_function("ksw_extd2_warp")
    pack = compact and to_host
    trace_mark("ksw2: geometry, size order")
    if isinstance(Q, np.ndarray) and Q.dtype == np.uint8 and Q.flags.c_contiguous:  # through pinned memory
        from g3align.aligner.gpu.pinned import put
        Qd = put(Q)
    else:
        Qd = cp.asarray(Q, dtype=cp.uint8)
    trace_mark("ksw2: inputs: queries")
    Td = cp.asarray(T, dtype=cp.uint8)
    jd = cp.asarray(np.ascontiguousarray(jobs, np.int64))
    Pd = cp.asarray(np.ascontiguousarray(P, np.int32))
    gd = cp.asarray(geo)
    od = cp.asarray(order)
    ez = cp.empty((n, EZ_N), cp.int64)
    cig = cp.empty(int(cig_off[-1]), cp.uint32)
    n_cig = cp.empty(n, cp.int64)
    cod = cp.asarray(cig_off)
    trace_mark("ksw2: inputs: targets, jobs, outputs")
    err = cp.zeros(1, cp.int32)
    cells = cp.zeros(n, cp.int64) if stats is not None else np.uint64(0)  # 0: the kernel counts nothing
    if pack:
        out_off = cp.empty(n + 1, cp.int64)
        packed = cp.empty(max(1, int(cig_off[-1])), cp.uint32)  # (the bound; only the first out_off[n] are copied)
    trace_mark("ksw2: inputs: flags, packing buffers")
    if enter_gate is not None:
        enter_gate()
    trace_mark(None)  # (the gate's wait is its own event)
    for start, end, nbytes in runs:
        scratch = cp.empty(max(16, nbytes), cp.uint8)
        warps = end - start
        kern(((warps * 32 + block - 1) // block,), (block,),
             (Qd, Td, jd, gd, od[start:end], np.int64(warps), Pd, np.int32(grid), scratch, ez, cig, cod, n_cig, err,
              cells))
        del scratch
    if pack:  # the packed CIGARs' offsets and the packing behind the launches: no round trip to the host between
        mod.get_function("ksw_cig_offsets")((1,), (1024,), (n_cig, np.int64(n), out_off))
        mod.get_function("ksw_cig_compact")(
            ((n * 32 + block - 1) // block,), (block,), (cig, cod, n_cig, out_off, np.int64(n), packed))
    trace_mark("ksw2: launches")
    from g3align.aligner.gpu.pinned import drain
    drain()  # (a stream synchronize, not a blocking copy, waits for the kernels)
    if int(err.get()[0]):
        raise RuntimeError("ksw2 kernel: scratch geometry exceeded (a bug in job_geometry)")
    if stats is not None:
        stats["launches"] = stats.get("launches", 0) + len(runs)
        stats["jobs"] = stats.get("jobs", 0) + n
        stats["cells"] = stats.get("cells", 0) + int(cp.asnumpy(cells).sum())  # host sum: no CuPy reduction
    trace_mark("ksw2: wait for the kernels")
    if not to_host:
        return ez, cig, cig_off, n_cig
    if pack:
        from g3align.aligner.gpu.pinned import fetch
        off_h = fetch(out_off)
        res = fetch(ez), fetch(packed[:int(off_h[-1])]), off_h, np.diff(off_h)
        trace_mark("ksw2: results to the host")
        return res
    return cp.asnumpy(ez), cp.asnumpy(cig), cig_off, cp.asnumpy(n_cig)
