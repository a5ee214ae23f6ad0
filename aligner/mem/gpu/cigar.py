"""Traceback stage of `g3align mem`: the CIGAR, NM and MD of every alignment region of a part,
computed as one batch (kernels/memcigar.cu on the GPU, `cigar_jobs_cpu` as its numba twin) between the
regions and the pairing / SAM stages.

bwa computes a region's alignment (mem_reg2aln: bwa_gen_cigar2, a banded global alignment with traceback,
its band doubled while the score stays short of the region's true score) when it writes the record. The
result depends only on six fields of the region (samout.CG_FIELDS: query and reference interval, true
score, extension band), the read and the options, never on pairing or primary marking. So every region
of the part is aligned speculatively (about 1.45 per 150 bp read; a few are never printed) and the SAM
stage looks the alignment up by those fields (samout.cg_find) instead of aligning. Regions that appear
only later (mate rescue) or whose result does not fit the fixed slots are aligned by the SAM stage
itself, as in the per-read path; the output is the same either way.

Results (the `cg` tuple of sam_pe_range), one row per region row of the part's R_cat:
    keys     (m, 6) int64   the region's CG_FIELDS
    res      (m, 4) int32   score, NM, number of CIGAR ops (-1: not computed here), MD length
    cig_off  (m+1) int64    CSR of cig (uint32 ops, bwa's len<<4|op, gen_cigar2's orientation)
    md_off   (m+1) int64    CSR of md (ASCII)
A row is computed here unless its scratch bound exceeds MAX_JOB_SCRATCH, its CIGAR has more than CAP_CIG
ops or its MD more than CAP_MD bytes: then res = (0, 0, -1, 0) and the row is empty.
"""
from __future__ import annotations

import numpy as np

from g3align.aligner.mem.samout import CG_FIELDS, infer_bw, region_cigar
from g3align.aligner.runtime.nbshare import unowned
from g3align.jit import njit

CAP_CIG = 32  # CIGAR ops of a computed row (a 150 bp read has 1-5)
CAP_MD = 128  # MD bytes of a computed row
MAX_JOB_SCRATCH = 1 << 20  # bytes of DP scratch (H/E rows + banded direction matrix) a GPU job may use


_F = np.array(CG_FIELDS, np.int64)


@njit(cache=True, nogil=True)
def cigar_keys(R_cat, reg_off):
    """(keys (m, 6), read index of each row) of a part's regions."""
    m = R_cat.shape[0]
    keys = np.empty((m, 6), np.int64)
    j_read = np.empty(m, np.int64)
    for r in range(reg_off.shape[0] - 1):
        for j in range(reg_off[r], reg_off[r + 1]):
            for c in range(6):
                keys[j, c] = R_cat[j, _F[c]]
            j_read[j] = r
    return keys, j_read


@njit(cache=True, inline="always")
def _plan1(opt, mat, lq, tl, truesc, w_reg):
    tmp = infer_bw(lq, tl, truesc, opt.a, opt.o_del, opt.e_del)
    w2 = infer_bw(lq, tl, truesc, opt.a, opt.o_ins, opt.e_ins)
    w2 = w2 if w2 > tmp else tmp
    if w2 > opt.w:
        w2 = w2 if w2 < w_reg else w_reg
    if (w2 == 0 and lq == tl) or lq <= 0 or tl <= 0:
        return 0  # ungapped only, or rejected by gen_cigar2 before any DP
    max_ins = int((((lq + 1) >> 1) * mat[0] - opt.o_ins) / opt.e_ins + 1.0)
    max_del = int((((lq + 1) >> 1) * mat[0] - opt.o_del) / opt.e_del + 1.0)
    max_gap = max_ins if max_ins > max_del else max_del
    if max_gap < 1:
        max_gap = 1
    dl = tl - lq if tl > lq else lq - tl
    w = (max_gap + dl + 1) >> 1
    if w > (opt.w << 2):
        w = opt.w << 2
    if w < dl + 3:
        w = dl + 3
    ncol = lq if lq < 2 * w + 1 else 2 * w + 1
    b = 8 * (lq + 1) + ncol * tl
    b = (b + 7) & ~7
    return b if b <= MAX_JOB_SCRATCH else -1


@njit(cache=True, nogil=True)
def cigar_plan(opt, mat, keys):
    """Per job: bytes of DP scratch the GPU needs (0: ungapped only, -1: over MAX_JOB_SCRATCH, left to the
    SAM stage). A job needs the DP unless reg2aln's band starts (and so stays) at 0 with equal query and
    reference lengths; then the bound is the widest band gen_cigar2 can choose, (max_gap + |dl| + 1) / 2
    capped by 4 * w, at least |dl| + 3."""
    n = keys.shape[0]
    out = np.zeros(n, np.int64)
    for j in range(n):
        out[j] = _plan1(opt, mat, keys[j, 1] - keys[j, 0], keys[j, 3] - keys[j, 2], keys[j, 4], keys[j, 5])
    return out


@njit(cache=True, nogil=True)
def cigar_jobs_range(opt, mat, l_pac, pac, seq, seq_off, keys, j_read, plan, j0, j1, res, cig_cap, md_cap):
    """CPU twin of mem_cigar_kernel for jobs [j0, j1): region_cigar of each, into fixed slots."""
    mat, pac, seq, seq_off, keys, j_read, plan, res, cig_cap, md_cap = unowned(
        (mat, pac, seq, seq_off, keys, j_read, plan, res, cig_cap, md_cap))
    for j in range(j0, j1):
        res[j, 0] = 0
        res[j, 1] = 0
        res[j, 2] = -1
        res[j, 3] = 0
        if plan[j] < 0:
            continue
        r = j_read[j]
        q = seq[seq_off[r]:seq_off[r + 1]]
        score, cig, nm, md = region_cigar(opt, mat, l_pac, pac, q, keys[j, 0], keys[j, 1], keys[j, 2],
                                          keys[j, 3], keys[j, 4], keys[j, 5])
        if cig.shape[0] > cig_cap.shape[1] or md.shape[0] > md_cap.shape[1]:
            continue
        res[j, 0] = score
        res[j, 1] = nm
        res[j, 2] = cig.shape[0]
        res[j, 3] = md.shape[0]
        cig_cap[j, :cig.shape[0]] = cig
        md_cap[j, :md.shape[0]] = md


def _compact(res, cig_cap, md_cap):
    """Fixed slots -> the CSR arrays of the module docstring (host numpy)."""
    nc = np.maximum(res[:, 2], 0).astype(np.int64)
    nmd = np.where(res[:, 2] >= 0, res[:, 3], 0).astype(np.int64)
    coff = np.zeros(res.shape[0] + 1, np.int64)
    np.cumsum(nc, out=coff[1:])
    moff = np.zeros(res.shape[0] + 1, np.int64)
    np.cumsum(nmd, out=moff[1:])
    cig = cig_cap[np.arange(cig_cap.shape[1]) < nc[:, None]]
    md = md_cap[np.arange(md_cap.shape[1]) < nmd[:, None]]
    return coff, np.ascontiguousarray(cig), moff, np.ascontiguousarray(md)


def cigar_jobs_cpu(opt, mat, l_pac, pac, seq, seq_off, keys, j_read, map_fn=map, parts: int = 1) -> tuple:
    """The cg tuple (module docstring) of jobs `keys` on reads `j_read`, on the CPU (job ranges through
    map_fn, e.g. a thread pool's map)."""
    n = int(keys.shape[0])
    plan = cigar_plan(opt, mat, keys)
    res = np.zeros((n, 4), np.int32)
    cig_cap = np.zeros((n, CAP_CIG), np.uint32)
    md_cap = np.zeros((n, CAP_MD), np.uint8)
    bounds = np.linspace(0, n, max(1, min(parts, n)) + 1).astype(np.int64)
    list(map_fn(lambda r: cigar_jobs_range(opt, mat, l_pac, pac, seq, seq_off, keys, j_read, plan, r[0], r[1],
                                           res, cig_cap, md_cap),
                [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]))
    return (keys, res) + _compact(res, cig_cap, md_cap)


def cigar_params(opt) -> np.ndarray:
    """P of kernels/memcigar.cu (int32): a, o_del, e_del, o_ins, e_ins, w."""
    return np.array([opt.a, opt.o_del, opt.e_del, opt.o_ins, opt.e_ins, opt.w], np.int32)


@njit(cache=True, nogil=True)
def job_table(plan, keys, j_read, ws_bytes):
    """The GPU's packed jobs J (m, 8) int64 = keys, read, scratch offset (kernels/memcigar.cu), the
    launches as bounds (consecutive jobs whose DP scratch, cigar_plan, fits ws_bytes; offsets within it;
    a single job may exceed it) and the scratch bytes the largest launch needs."""
    n = keys.shape[0]
    J = np.empty((n, 8), np.int64)
    bounds = np.empty(n + 1, np.int64)
    nb_ = 1
    bounds[0] = 0
    extent = 0
    used = 0
    for j in range(n):
        for c in range(6):
            J[j, c] = keys[j, c]
        J[j, 6] = j_read[j]
        need = plan[j] if plan[j] > 0 else 0
        if used + need > ws_bytes and j > bounds[nb_ - 1]:
            bounds[nb_] = j
            nb_ += 1
            used = 0
        J[j, 7] = used if plan[j] > 0 else (-2 if plan[j] < 0 else -1)
        used += need
        extent = used if used > extent else extent
    bounds[nb_] = n
    return J, bounds[:nb_ + 1], extent


def cigar_jobs_gpu(opt, mat, pac_d, l_pac, seq_d, seq_off_d, keys, j_read, block: int = 128,
                   ws_bytes: int = 256 << 20) -> tuple:
    """cigar_jobs_cpu on the GPU (kernels/memcigar.cu, one thread per job): jobs in consecutive chunks whose
    DP scratch fits ws_bytes; the slots compacted on the GPU; host arrays out, equal to the twin's."""
    import cupy as cp

    from g3align.aligner.mem.gpu.stage import to_device, to_host
    from g3align.kernels.loader import get_module

    n = int(keys.shape[0])
    if n == 0:
        return cigar_jobs_cpu(opt, mat, l_pac, None, None, None, keys, j_read)
    plan = cigar_plan(opt, mat, keys)
    J, bounds, extent = job_table(plan, keys, j_read, ws_bytes)
    chunks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    mod = get_module("memcigar", {"CAP_CIG": CAP_CIG, "CAP_MD": CAP_MD})
    res = cp.empty((n, 4), cp.int32)
    cig_cap = cp.empty((n, CAP_CIG), cp.uint32)
    md_cap = cp.empty((n, CAP_MD), cp.uint8)
    J_d = to_device(J)
    ws = cp.empty(extent + 8, cp.uint8)
    k = mod.get_function("mem_cigar_kernel")
    P = cp.asarray(cigar_params(opt))
    m8 = cp.asarray(mat.astype(np.int8))
    for a, b in chunks:
        k(((b - a + block - 1) // block,), (block,),
          (seq_d, seq_off_d, pac_d, np.int64(l_pac), P, m8, np.int64(b - a), J_d[a:b], ws, res[a:b], cig_cap[a:b],
           md_cap[a:b]))
    r = to_host(res)
    nc = np.maximum(r[:, 2], 0).astype(np.int64)
    coff = np.zeros(n + 1, np.int64)
    np.cumsum(nc, out=coff[1:])
    moff = np.zeros(n + 1, np.int64)
    np.cumsum(np.where(r[:, 2] >= 0, r[:, 3], 0), out=moff[1:])
    cig = cp.empty(int(coff[-1]), cp.uint32)
    md = cp.empty(int(moff[-1]), cp.uint8)
    mod.get_function("cigar_compact")((min(1024, (n + block - 1) // block),), (block,),
                                      (np.int64(n), res, cig_cap, md_cap, to_device(coff), to_device(moff), cig, md))
    return keys, np.asarray(r), coff, to_host(cig), moff, to_host(md)
