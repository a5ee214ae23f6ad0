"""Batches of ksw2 extd2 jobs: kernels/ksw2.cu on the GPU (one warp per job, gridded traceback) and its CPU
twin (aligner/ksw2.py's extd2 per job, numba threads over the batch); both give the same arrays.

A job is one call of minimap2's ksw_extd2_sse: a query and a target given as views of two byte buffers
(codes 0-4) plus the call's band, Z-drop, end bonus and flags. A row of ``jobs`` (int64, J_NF columns):

* ``J_Q_OFF, J_Q_LEN, J_Q_MODE``: the query is ``Q[q_off:q_off + q_len]``, read backwards when
  ``q_mode & 1`` (MODE_REV) and complemented (A<->T, C<->G, N stays) when ``q_mode & 2`` (MODE_COMP);
* ``J_T_OFF, J_T_LEN, J_T_MODE``: the target likewise from ``T``;
* ``J_W, J_ZDROP, J_END_BONUS, J_FLAG``: ksw_extd2_sse's ``w, zdrop, end_bonus, flag``
  (KSW_EZ_GENERIC_SC is not supported: such jobs stay on the CPU, see ``gpu_ok``);
* ``J_PSET``: the row of ``P`` (int32, P_NF columns: q, e, q2, e2 and the 5x5 score matrix) it scores with.

Results: ``ez`` (n, EZ_N) int64 as aligner/ksw2.py returns it, and the CIGARs in a CSR of fixed capacity
per job (``cig_off``: q_len + t_len + 2 words each, ``n_cig``: the words used).
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .ksw2 import extd2
from .mm_types import EZ_N, KSW_EZ_GENERIC_SC, KSW_EZ_SCORE_ONLY

(J_Q_OFF, J_Q_LEN, J_Q_MODE, J_T_OFF, J_T_LEN, J_T_MODE, J_W, J_ZDROP, J_END_BONUS, J_FLAG, J_PSET) = range(11)
J_NF = 12
MODE_REV = 1
MODE_COMP = 2
P_NF = 29
GRID = 64  # anti-diagonals per traceback block (the forward pass checkpoints every GRID of them)
ERR_GEOMETRY = 1


def pset_row(q: int, e: int, q2: int, e2: int, mat: np.ndarray) -> np.ndarray:
    """One parameter set: the gap costs and the 5x5 matrix (int8 values) as an int32 row of P."""
    row = np.zeros(P_NF, np.int32)
    row[:4] = (q, e, q2, e2)
    row[4:] = np.asarray(mat, np.int8).astype(np.int32)[:25]
    return row


def gpu_ok(jobs: np.ndarray) -> np.ndarray:
    """Jobs the GPU kernel takes (everything but generic scoring)."""
    return (jobs[:, J_FLAG] & KSW_EZ_GENERIC_SC) == 0


def cig_offsets(jobs: np.ndarray) -> np.ndarray:
    """CSR offsets of the CIGAR capacity per job (the traceback's bound q_len + t_len, plus 2)."""
    off = np.zeros(jobs.shape[0] + 1, np.int64)
    np.cumsum(jobs[:, J_Q_LEN] + jobs[:, J_T_LEN] + 2, out=off[1:])
    return off


def job_geometry(jobs: np.ndarray, grid: int = GRID) -> dict:
    """The kernel's geometry of every job (kernels/ksw2.cu geometry()): W (circular buffer slots, a power of
    two >= band + 64 where band = min(qlen, tlen, w + 2)), pw (direction row stride), n_blk (checkpoints of
    7*W + 16 bytes), rows (direction rows of one block) and `scratch`: the global bytes its traceback needs
    (checkpoints + direction rows, none for score-only jobs); a job whose buffers do not fit the launch's
    shared memory needs 11*W more."""
    ql = jobs[:, J_Q_LEN]
    tl = jobs[:, J_T_LEN]
    w = jobs[:, J_W]
    w = np.where(w < 0, np.maximum(ql, tl), w)
    T = (tl + 15) // 16 * 16
    band = np.minimum(np.minimum(ql, tl), w + 2)
    W = np.full(jobs.shape[0], 128, np.int64)
    while True:
        small = W < band + 64
        if not small.any():
            break
        W[small] <<= 1
    pw = (np.minimum(band + 30, T) + 15) // 16 * 16
    nr = np.maximum(ql + tl - 1, 0)
    n_blk = (nr + grid - 1) // grid
    rows = np.minimum(nr, grid)
    cig = (jobs[:, J_FLAG] & KSW_EZ_SCORE_ONLY) == 0
    scratch = np.where(cig, n_blk * (7 * W + 16) + rows * pw, 0)
    run = (ql > 0) & (tl > 0)
    return {"W": W, "pw": pw, "n_blk": n_blk, "rows": rows, "scratch": np.where(run, scratch, 0),
            "cost": np.where(run, (ql + tl) * np.minimum(band, T), 0)}


SMEM_CLASSES = (256, 512, 1024, 2048)  # per-warp shared-memory share (slots) of the launches; larger W: global


def launch_plan(jobs: np.ndarray, grid: int = GRID, classes=SMEM_CLASSES, max_warps: int = 132 * 16,
                scratch_bytes: int = 4 << 30) -> list[dict]:
    """Launches of a batch: jobs grouped by the smallest shared-memory class their W fits (the rest in one
    class of global buffers), each class sorted by cost (largest first) with its per-warp scratch (the most
    any of its jobs needs) and number of warps (at most max_warps, and within scratch_bytes)."""
    g = job_geometry(jobs, grid)
    W = g["W"]
    cls = np.searchsorted(np.asarray(classes), W)  # index of the first class >= W; len(classes): global
    out = []
    for c in range(len(classes) + 1):
        ids = np.nonzero(cls == c)[0]
        if ids.size == 0:
            continue
        sm_w = classes[c] if c < len(classes) else 0
        need = g["scratch"][ids] + np.where(W[ids] > sm_w, 11 * W[ids], 0)
        warp_bytes = int(max(16, (int(need.max()) + 15) // 16 * 16))
        n_warps = int(max(1, min(ids.size, max_warps, scratch_bytes // warp_bytes)))
        order = ids[np.argsort(-g["cost"][ids], kind="stable")].astype(np.int64)
        out.append({"order": order, "sm_w": sm_w, "warp_bytes": warp_bytes, "n_warps": n_warps})
    return out


# ----------------------------------------------------------------------------------------------- CPU twin
@nb.njit(cache=True, nogil=True)
def job_seq(buf, off, n, mode):
    """A job's query or target as the kernel reads it (views of buf, reversed / complemented)."""
    out = np.empty(n, np.uint8)
    for k in range(n):
        c = buf[off + (n - 1 - k if mode & MODE_REV else k)]
        if mode & MODE_COMP:
            c = 3 - c if c < 4 else 4
        out[k] = c
    return out


@nb.njit(cache=True, nogil=True)
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


@nb.njit(cache=True, nogil=True, parallel=True)
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
def extd2_batch_gpu(Q, T, jobs, P, grid: int = GRID, block: int = 128, scratch_bytes: int = 4 << 30,
                    to_host: bool = True, stats: dict | None = None, classes=SMEM_CLASSES, defines: dict | None = None):
    """kernels/ksw2.cu over the jobs: (ez, cig, cig_off, n_cig), the same arrays as extd2_batch_cpu. Q and T
    may already be on the GPU. One launch per shared-memory class (launch_plan), each on its own stream, its
    warps taking jobs largest first. stats: gets 'launches', 'jobs' and 'cells' (DP cells the kernel
    computed, the traceback's recomputation included) added. defines: compile-time switches of the kernel."""
    import cupy as cp
    from g3align.kernels.loader import get_module

    n = int(jobs.shape[0])
    cig_off = cig_offsets(jobs)
    if n == 0:
        return (np.zeros((0, EZ_N), np.int64), np.zeros(0, np.uint32), cig_off, np.zeros(0, np.int64))
    if not gpu_ok(jobs).all():
        raise ValueError("ksw2 GPU jobs with KSW_EZ_GENERIC_SC")
    kern = get_module("ksw2", defines).get_function("ksw_extd2_warp")
    Qd = cp.asarray(Q, dtype=cp.uint8)
    Td = cp.asarray(T, dtype=cp.uint8)
    jd = cp.asarray(np.ascontiguousarray(jobs, np.int64))
    Pd = cp.asarray(np.ascontiguousarray(P, np.int32))
    ez = cp.empty((n, EZ_N), cp.int64)
    cig = cp.empty(int(cig_off[-1]), cp.uint32)
    n_cig = cp.empty(n, cp.int64)
    cod = cp.asarray(cig_off)
    err = cp.zeros(1, cp.int32)
    cells = cp.zeros(n, cp.int64) if stats is not None else np.uint64(0)  # 0: the kernel counts nothing
    plan = launch_plan(jobs, grid, classes, scratch_bytes=scratch_bytes)
    main = cp.cuda.get_current_stream()
    done = main.record()
    keep = []
    for L in plan:
        s = cp.cuda.Stream(non_blocking=True)
        s.wait_event(done)
        with s:
            scratch = cp.empty(L["n_warps"] * L["warp_bytes"], cp.uint8)
            ctr = cp.zeros(1, cp.uint64)
            od = cp.asarray(L["order"])
            smem = (block // 32) * 11 * L["sm_w"]
            if smem > 48 * 1024:
                kern.max_dynamic_shared_size_bytes = smem
            kern(((L["n_warps"] * 32 + block - 1) // block,), (block,),
                 (Qd, Td, jd, od, np.int64(od.shape[0]), Pd, np.int32(grid), np.int32(L["sm_w"]), scratch,
                  np.int64(L["warp_bytes"]), np.int64(L["n_warps"]), ctr, ez, cig, cod, n_cig, err, cells),
                 shared_mem=smem)
            keep.append((s, scratch, ctr, od))
    for s, *_ in keep:
        main.wait_event(s.record())
    if int(err.get()[0]):
        raise RuntimeError("ksw2 kernel: scratch geometry exceeded (a bug in job_geometry)")
    del keep
    if stats is not None:
        stats["launches"] = stats.get("launches", 0) + len(plan)
        stats["jobs"] = stats.get("jobs", 0) + n
        stats["cells"] = stats.get("cells", 0) + int(cells.sum())
    if not to_host:
        return ez, cig, cig_off, n_cig
    return cp.asnumpy(ez), cp.asnumpy(cig), cig_off, cp.asnumpy(n_cig)
