"""Staged `g3align mem` for the GPU path: seeds -> chains -> batch extension -> regions.

The per-read CPU kernel (core.align1_core) seeds, chains and extends one read at a time. On the GPU the
batch goes through stages instead, each over the whole batch:

    seeds     collect_intv + seed positions (kernels/smem.cu) and rep_len (kernels/memext.cu)
    chains    chains, chain filter, flt_chained_seeds and each chain's reference window: on the GPU
              kernels/memchain.cu (chain_gpu; reads that need flt_chained_seeds' SW go to the CPU), with
              chain_range (numba nogil, read ranges on threads) as its twin
    extension every seed of every kept chain extended (left, then right from the left score) as one
              job: kernels/memext.cu (one thread per job) or ext_jobs_range, its numba twin
    regions   core.align1_from_chains: bwa's chain2aln decisions (which seeds are covered by earlier
              regions) read the precomputed extensions instead of extending; then dedup/patch.

Why this is exact: an extension's result depends only on the seed, the read and its chain's window,
never on which regions exist already; chain2aln only decides which seeds to extend. Extending every
chain seed is speculative (about 1.9 jobs per needed extension on 150 bp reads), and the regions are
the ones the per-read path builds, byte for byte (tests/test_memstage.py).

The batch's chain state travels as one tuple `pre` (see PRE_FIELDS), CSR over reads and chains.
"""
from __future__ import annotations

import numpy as np

from g3align.aligner.gpu.pinned import empty_pinned, pinned_class, to_device, to_host, upload_large  # noqa: F401
from g3align.aligner.mem.bns import get_seq
from g3align.aligner.mem.chain import chain_seeds, rep_len
from g3align.aligner.mem.extend import XF, chain_window, ext_seed, flt_chained_seeds
from g3align.aligner.runtime.nbshare import unowned
from g3align.jit import njit

# s_off: read r's seeds are [s_off[r], s_off[r+1]) of s_rbeg/s_qbeg/s_len/s_score;
# c_off: read r's kept chains are [c_off[r], c_off[r+1]) of ch_rid; cs_off: chain c's seeds are
# ch_seed[cs_off[c]:cs_off[c+1]] (indices into its read's seeds) and X[cs_off[c]:cs_off[c+1]] their
# extensions; fr: rep_len per read.
PRE_FIELDS = ("s_off", "s_rbeg", "s_qbeg", "s_len", "s_score", "c_off", "ch_rid", "cs_off", "ch_seed", "X", "fr")


def empty_pre() -> tuple:
    """The `pre` argument of the per-read path (no staged input)."""
    z = np.zeros(0, np.int64)
    z32 = np.zeros(0, np.int32)
    return (z, z, z32, z32, z32, z, z, z, z, np.zeros((0, XF), np.int64), z)


@njit(cache=True, nogil=True)
def chain_range(offsets, l_pac, pac, seq, seq_off, i0, i1, opt, mat, s_off, s_rbeg, s_qbeg, s_len, s_rid):
    """Chains of reads [i0, i1) from their seeds. Returns
    (s_score for seeds [s_off[i0], s_off[i1]), n_chains per read, ch_rid, ch_r0, ch_r1, ch_n, ch_seed):
    ch_n seeds per chain, ch_seed their indices into the read's seeds, [ch_r0, ch_r1) the window."""
    offsets, pac, seq, seq_off, mat, s_off, s_rbeg, s_qbeg, s_len, s_rid = unowned(
        (offsets, pac, seq, seq_off, mat, s_off, s_rbeg, s_qbeg, s_len, s_rid))
    base = s_off[i0]
    s_score = s_len[base:s_off[i1]].copy()
    n_ch = np.zeros(i1 - i0, np.int64)
    cap = 16 + 2 * (i1 - i0)
    ch_rid = np.empty(cap, np.int64)
    ch_r0 = np.empty(cap, np.int64)
    ch_r1 = np.empty(cap, np.int64)
    ch_n = np.empty(cap, np.int64)
    scap = 16 + 4 * (i1 - i0)
    ch_seed = np.empty(scap, np.int64)
    nc = 0
    ns = 0
    for i in range(i0, i1):
        L = seq_off[i + 1] - seq_off[i]
        if L < opt.min_seed_len:
            continue
        q = seq[seq_off[i]:seq_off[i + 1]]
        a, b = s_off[i], s_off[i + 1]
        rb, qb, ln = s_rbeg[a:b], s_qbeg[a:b], s_len[a:b]
        sc, c_off, c_seed, c_rid = chain_seeds(rb, qb, ln, s_rid[a:b], l_pac, opt)
        c_off, c_seed = flt_chained_seeds(opt, mat, offsets, l_pac, pac, L, q, rb, qb, ln, sc, c_off, c_seed)
        s_score[a - base:b - base] = sc
        m = c_off.shape[0] - 1
        if nc + m > ch_rid.shape[0]:
            k = 2 * (nc + m)
            ch_rid = _grow(ch_rid, nc, k)
            ch_r0 = _grow(ch_r0, nc, k)
            ch_r1 = _grow(ch_r1, nc, k)
            ch_n = _grow(ch_n, nc, k)
        if ns + c_seed.shape[0] > ch_seed.shape[0]:
            ch_seed = _grow(ch_seed, ns, 2 * (ns + c_seed.shape[0]))
        for c in range(m):
            sd = c_seed[c_off[c]:c_off[c + 1]]
            r0 = r1 = np.int64(0)
            if sd.shape[0] > 0:  # flt_chained_seeds may empty a chain: no jobs, chain2aln skips it
                r0, r1 = chain_window(opt, offsets, l_pac, L, rb, qb, ln, sd)
            ch_rid[nc] = c_rid[c]
            ch_r0[nc] = r0
            ch_r1[nc] = r1
            ch_n[nc] = sd.shape[0]
            nc += 1
        ch_seed[ns:ns + c_seed.shape[0]] = c_seed
        ns += c_seed.shape[0]
        n_ch[i - i0] = m
    return s_score, n_ch, ch_rid[:nc], ch_r0[:nc], ch_r1[:nc], ch_n[:nc], ch_seed[:ns]


@njit(cache=True)
def _grow(a, n, cap):
    b = np.empty(cap, a.dtype)
    b[:n] = a[:n]
    return b


@njit(cache=True)
def rep_len_csr(mb, me, ms, off, max_occ):
    """rep_len of every read of a batch's CSR intervals (CPU twin of memext.cu's rep_len_kernel)."""
    n = off.shape[0] - 1
    fr = np.empty(n, np.int64)
    for r in range(n):
        a, b = off[r], off[r + 1]
        fr[r] = rep_len(mb[a:b], me[a:b], ms[a:b], max_occ)
    return fr


@njit(cache=True, nogil=True)
def ext_jobs_range(opt, mat, l_pac, pac, seq, seq_off, j_read, j_sq, j_sr, j_sl, j_r0, j_r1, j0, j1, X):
    """CPU twin of kernels/memext.cu: ext_seed for jobs [j0, j1) into X[j]."""
    mat, pac, seq, seq_off, j_read, j_sq, j_sr, j_sl, j_r0, j_r1, X = unowned(
        (mat, pac, seq, seq_off, j_read, j_sq, j_sr, j_sl, j_r0, j_r1, X))
    lmax = 0
    wmax = 0
    for j in range(j0, j1):
        r = j_read[j]
        if seq_off[r + 1] - seq_off[r] > lmax:
            lmax = seq_off[r + 1] - seq_off[r]
        if j_r1[j] - j_r0[j] > wmax:
            wmax = j_r1[j] - j_r0[j]
    qs = np.empty(lmax, np.uint8)
    rs = np.empty(wmax + 1, np.uint8)
    rseq = np.empty(wmax, np.uint8)
    for j in range(j0, j1):
        r = j_read[j]
        q = seq[seq_off[r]:seq_off[r + 1]]
        r0 = j_r0[j]
        r1 = j_r1[j]
        get_seq(l_pac, pac, r0, r1, rseq)
        ext_seed(opt, mat, q.shape[0], q, rseq[:r1 - r0], r0, r1, np.int64(j_sq[j]), j_sr[j], np.int64(j_sl[j]),
                 qs, rs, X[j])


def assemble(n, s_off, s_rbeg, s_qbeg, s_len, parts, fr):
    """Concatenate chain_range outputs (in read order) into the `pre` arrays and the job list.
    Returns (pre without X, jobs) where jobs = (j_read, j_sq, j_sr, j_sl, j_r0, j_r1)."""
    s_score = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
    n_ch = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    ch_rid = np.concatenate([p[2] for p in parts])
    ch_r0 = np.concatenate([p[3] for p in parts])
    ch_r1 = np.concatenate([p[4] for p in parts])
    ch_n = np.concatenate([p[5] for p in parts])
    ch_seed = np.concatenate([p[6] for p in parts])
    c_off = np.zeros(n + 1, np.int64)
    np.cumsum(n_ch, out=c_off[1:])
    cs_off = np.zeros(ch_n.shape[0] + 1, np.int64)
    np.cumsum(ch_n, out=cs_off[1:])
    ch_read = np.repeat(np.arange(n, dtype=np.int64), n_ch)
    j_chain = np.repeat(np.arange(ch_n.shape[0], dtype=np.int64), ch_n)
    j_read = ch_read[j_chain]
    gs = s_off[j_read] + ch_seed
    jobs = (j_read, s_qbeg[gs].astype(np.int64), s_rbeg[gs].astype(np.int64), s_len[gs].astype(np.int64),
            ch_r0[j_chain], ch_r1[j_chain])
    pre = [s_off, s_rbeg, s_qbeg, s_len, s_score, c_off, ch_rid, cs_off, ch_seed, None, fr]
    return pre, jobs


# ------------------------------------------------------------------------------------------------
# extension jobs: CPU twin and GPU launcher
# ------------------------------------------------------------------------------------------------

def ext_params(opt) -> np.ndarray:
    """The int32 scalars kernels/memext.cu reads (P_* order)."""
    return np.array([opt.o_del, opt.e_del, opt.o_ins, opt.e_ins, opt.w, opt.pen_clip5, opt.pen_clip3, opt.zdrop,
                     opt.a], np.int32)


def ext_jobs_cpu(opt, mat, l_pac, pac, seq, seq_off, jobs, map_fn=map, parts: int = 1) -> np.ndarray:
    """X (int64[n_jobs, XF]) by the numba twin; `map_fn` runs the job ranges (e.g. a thread pool's map)."""
    X = np.zeros((int(jobs[0].shape[0]), XF), np.int64)
    _in_ranges(X.shape[0], parts, map_fn,
               lambda a, b: ext_jobs_range(opt, mat, np.int64(l_pac), pac, seq, seq_off, *jobs, a, b, X))
    return X


def _in_ranges(n, parts, map_fn, fn):
    """fn(a, b) over about `parts` equal job ranges covering [0, n), through map_fn."""
    cuts = np.linspace(0, n, max(1, min(parts, n)) + 1).astype(np.int64)
    list(map_fn(lambda r: fn(*r), [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]))


_to_host = to_host  # the launchers' `to_host` flag shadows the function inside them


def gpu_halving(fn, n: int) -> list:
    """[fn(0, n)], or, when the GPU runs out of memory, fn over the two halves of [0, n) (recursively, the
    memory pool freed first): independent reads or jobs give the same result in pieces, so a batch
    that does not fit is processed in smaller parts instead of failing."""
    import cupy as cp

    def go(a, b):
        try:
            return [fn(a, b)]
        except cp.cuda.memory.OutOfMemoryError:
            if b - a <= 1:
                raise
            cp.get_default_memory_pool().free_all_blocks()
            m = (a + b) // 2
            return go(a, m) + go(m, b)
    return go(0, n)


def ext_jobs_gpu(opt, mat, pac_d, l_pac, seq_d, seq_off_d, jobs, block: int = 128, ws_bytes: int = 256 << 20,
                 to_host: bool = True):
    """X on the GPU (kernels/memext.cu, one thread per job, jobs with the most bases to extend first).
    seq_d/seq_off_d/pac_d are device arrays; jobs are host or device int64 arrays. Out of GPU memory,
    the jobs run in halves (gpu_halving)."""
    return _in_halves(_ext_jobs_gpu, opt, mat, pac_d, l_pac, seq_d, seq_off_d, jobs, block, ws_bytes, to_host)


def _in_halves(inner, opt, mat, pac_d, l_pac, seq_d, seq_off_d, jobs, block, ws_bytes, to_host):
    """inner(...) over all jobs; with a host result, over halves of the jobs when out of GPU memory."""
    if not to_host:
        return inner(opt, mat, pac_d, l_pac, seq_d, seq_off_d, jobs, block, ws_bytes, False)
    parts = gpu_halving(lambda a, b: inner(opt, mat, pac_d, l_pac, seq_d, seq_off_d, tuple(j[a:b] for j in jobs),
                                           block, ws_bytes, True), int(jobs[0].shape[0]))
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


EXT_SH_BLOCK = 64  # threads per block of the shared-memory extension kernel
EXT_SH_MAX = 96 << 10  # bytes of dynamic shared memory per block at most (the kernel's opt-in limit)


def ext_shared_geometry(lmax: int, mx: int, block: int | None = None, cap: int | None = None):
    """(threads per block, dynamic shared bytes) of mem_ext_kernel_sh for reads of at most lmax bases and
    match score mx, or None where it does not apply: the scratch column of lmax + 2 words per thread does
    not fit `cap` bytes per block, or a score may not fit 16 bits (H and E are >= 0 and at most the seed's
    score plus the rest of the read's, i.e. below 2 * lmax * mx)."""
    block = EXT_SH_BLOCK if block is None else block
    cap = EXT_SH_MAX if cap is None else cap
    if 2 * lmax * max(mx, 1) >= 0xffff:
        return None
    smem = block * (lmax + 2) * 4
    return (block, smem) if smem <= cap else None


def _ext_jobs_gpu(opt, mat, pac_d, l_pac, seq_d, seq_off_d, jobs, block, ws_bytes, to_host):
    import cupy as cp

    from g3align.kernels.loader import get_module

    n = int(jobs[0].shape[0])
    X = cp.zeros((n, XF), cp.int64)
    if n == 0:
        return _to_host(X) if to_host else X
    jd = [cp.asarray(a, dtype=cp.int64) for a in jobs]
    j_read, j_sl = jd[0], jd[3]
    # CuPy functions, not operators with a Python number (`j_read + 1`): those go through NumPy's ufunc
    # override, whose first call imports cupyx.scipy.special (tests/test_mem.py test_gpu_mem_does_not_import_cupyx)
    rl = (seq_off_d[cp.add(j_read, 1)] - seq_off_d[j_read]).astype(cp.int64)
    # warps of jobs with similar work: most query bases to extend first (left + right of the seed)
    order = cp.argsort(j_sl - rl, kind="stable").astype(cp.int64)
    lmax = int(cp.asnumpy(rl).max())  # on the host: a CuPy reduction is compiled (NVRTC) at its first call
    args = (seq_d, seq_off_d, pac_d, np.int64(l_pac), cp.asarray(ext_params(opt)), cp.asarray(mat.astype(np.int8)),
            order, np.int64(n), *jd)
    geo = ext_shared_geometry(lmax, int(mat.max()))
    if geo is not None:
        # the scratch column of each thread in shared memory (global memory: DRAM traffic of ~16 bytes a cell)
        sb, smem = geo
        k = get_module("memext").get_function("mem_ext_kernel_sh")
        if k.max_dynamic_shared_size_bytes < EXT_SH_MAX:  # the same value from every thread: no race
            k.max_dynamic_shared_size_bytes = EXT_SH_MAX
        k(((n + sb - 1) // sb,), (sb,), args + (X,), shared_mem=smem)
        return _to_host(X) if to_host else X
    k = get_module("memext").get_function("mem_ext_kernel")
    # scratch: one int2 column of lmax + 2 cells per thread
    t_max = max(block, ws_bytes // (8 * (lmax + 2)) // block * block)
    n_thr = min(t_max, (n + block - 1) // block * block)
    ws = cp.empty((lmax + 2) * n_thr * 2, cp.int32)
    k((n_thr // block,), (block,), args + (ws, X))
    return _to_host(X) if to_host else X


def rep_len_gpu(mb, me, ms, off, max_occ, block: int = 128):
    """rep_len per read on the GPU (device int64 CSR intervals) -> device int64[n]."""
    import cupy as cp

    from g3align.kernels.loader import get_module

    n = int(off.shape[0]) - 1
    fr = cp.zeros(n, cp.int64)
    if n > 0:
        get_module("memext").get_function("rep_len_kernel")(
            ((n + block - 1) // block,), (block,), (mb, me, ms, off, np.int64(n), np.int64(max_occ), fr))
    return fr


# ------------------------------------------------------------------------------------------------
# mate rescue alignments: CPU twin and GPU launcher
# ------------------------------------------------------------------------------------------------

def assemble_rescue(n_pairs, parts):
    """Concatenate rescue_jobs_range outputs (pair order) -> (sw_off, key, jobs=(mate, rb, re, rev, xtra))."""
    cnt = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
    sw_off = np.zeros(n_pairs + 1, np.int64)
    np.cumsum(cnt, out=sw_off[1:])
    J = np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, 6), np.int64)
    return sw_off, np.ascontiguousarray(J[:, 0]), tuple(np.ascontiguousarray(J[:, f]) for f in range(1, 6))


def rescue_sw_cpu(opt, mat, l_pac, pac, seq, seq_off, jobs, map_fn=map, parts: int = 1) -> np.ndarray:
    """Rescue alignments (int64[n, 8]: score, te, qe, score2, te2, tb, qb) by the numba twin."""
    from g3align.aligner.mem.pair import rescue_sw_range

    res = np.zeros((int(jobs[0].shape[0]), 8), np.int64)
    _in_ranges(res.shape[0], parts, map_fn,
               lambda a, b: rescue_sw_range(opt, mat, np.int64(l_pac), pac, seq, seq_off, *jobs, a, b, res))
    return res


def rescue_sw_gpu(opt, mat, pac_d, l_pac, seq_d, seq_off_d, jobs, block: int = 128, ws_bytes: int = 256 << 20,
                  to_host: bool = True, warp: bool = True):
    """Rescue alignments on the GPU (kernels/memext.cu): one warp per job (mem_sw_warp<C>, mates of at most
    SW_WARP_MAX bases; `warp` False: none) and one thread per job (mem_sw_kernel) for the rest, largest
    windows first. Only for o_ins > 0 (bwa's SIMD order differs otherwise: the caller uses the CPU twin).
    Out of GPU memory, the jobs run in halves (gpu_halving)."""
    return _in_halves(lambda *a: _rescue_sw_gpu(*a, warp=warp), opt, mat, pac_d, l_pac, seq_d, seq_off_d, jobs,
                      block, ws_bytes, to_host)


SW_WARP_MAX = 256  # longest mate for mem_sw_warp<C> (32 lanes x C <= 8 padded query columns)


def _rescue_sw_gpu(opt, mat, pac_d, l_pac, seq_d, seq_off_d, jobs, block, ws_bytes, to_host, warp=True):
    import cupy as cp

    from g3align.kernels.loader import get_module

    if opt.o_ins <= 0:
        raise ValueError("rescue_sw_gpu: o_ins <= 0 needs the striped CPU path")
    n = int(jobs[0].shape[0])
    R = cp.zeros((n, 8), cp.int64)
    if n == 0:
        return _to_host(R) if to_host else R
    mod = get_module("memext")
    mate, wrb, wre, wrev, wx = (cp.asarray(a, dtype=cp.int64) for a in jobs)
    tlen = wre - wrb
    bl_off = cp.zeros(n + 1, cp.int64)
    cp.cumsum(cp.multiply(cp.add(tlen, 1), 2), out=bl_off[1:])  # CuPy functions: no cupyx import (_ext_jobs_gpu)
    bl = cp.empty(int(bl_off[-1]), cp.int32)
    lm = seq_off_d[cp.add(mate, 1)] - seq_off_d[mate]
    order = cp.argsort(-(tlen * lm), kind="stable").astype(cp.int64)
    P = cp.asarray(ext_params(opt))
    M = cp.asarray(mat.astype(np.int8))
    if warp:
        in_warp = cp.less_equal(lm[order], SW_WARP_MAX)
        ow = order[in_warp]
        order = order[~in_warp]
        if ow.shape[0]:
            padded = (int(cp.asnumpy(lm[ow]).max()) + 15) // 16 * 16   # host max: no CuPy reduction to compile
            c = max(1, (padded + 31) // 32)
            wb = max(32, block // 32 * 32)
            n_blk = min((int(ow.shape[0]) * 32 + wb - 1) // wb, 1 << 20)
            mod.get_function(f"mem_sw_warp{c}")(
                (n_blk,), (wb,), (seq_d, seq_off_d, pac_d, np.int64(l_pac), P, M, ow, np.int64(ow.shape[0]), mate,
                                  wrb, wre, wrev, wx, bl_off, bl, R))
    m = int(order.shape[0])
    if m:
        nmax = (int(cp.asnumpy(lm[order]).max()) + 15) // 16 * 16 + 16
        t_max = max(block, ws_bytes // (4 * 3 * nmax) // block * block)
        n_thr = min(t_max, (m + block - 1) // block * block)
        ws = cp.empty(3 * nmax * n_thr, cp.int32)
        mod.get_function("mem_sw_kernel")(
            (n_thr // block,), (block,), (seq_d, seq_off_d, pac_d, np.int64(l_pac), P, M, order, np.int64(m), mate,
                                         wrb, wre, wrev, wx, bl_off, ws, np.int32(nmax), bl, R))
    return _to_host(R) if to_host else R


# ------------------------------------------------------------------------------------------------
# chaining on the GPU (kernels/memchain.cu; chain_range is its CPU twin)
# ------------------------------------------------------------------------------------------------

def chain_params(opt) -> np.ndarray:
    """The int32 scalars kernels/memchain.cu reads (CP_* order)."""
    return np.array([opt.w, opt.max_chain_gap, opt.min_chain_weight, opt.min_seed_len,
                     min(opt.max_chain_extend, 2**31 - 1), opt.a, opt.o_del, opt.e_del, opt.o_ins, opt.e_ins],
                    np.int32)


def chain_scratch_words(n_seeds, xp=np):
    """int32 scratch words per read of memchain.cu's chain_kernel (its chain_scratch_words); n_seeds a NumPy
    or (xp=cupy) CuPy array. xp functions, not operators with Python numbers: with CuPy arrays those (and
    np.maximum) go through NumPy's ufunc override, whose first call imports cupyx.scipy.special."""
    nodes = xp.maximum(xp.add(xp.floor_divide(n_seeds, 4), 4), 4)
    return xp.add(xp.add(xp.multiply(n_seeds, 17), 8), xp.multiply(nodes, 21))


@njit(cache=True, nogil=True)
def chain_reads(idx, offsets, l_pac, pac, seq, seq_off, opt, mat, s_off, s_rbeg, s_qbeg, s_len, s_rid,
                s_score, sl_rid, sl_r0, sl_r1, sl_n, sl_seed, n_ch, n_cs):
    """chain_range for the reads idx (the ones chain_kernel leaves to the CPU), written into the kernel's
    per-read slot arrays (host copies) and s_score."""
    for i in idx:
        sc, nch, rid, r0, r1, chn, chs = chain_range(offsets, l_pac, pac, seq, seq_off, i, i + 1, opt, mat, s_off,
                                                     s_rbeg, s_qbeg, s_len, s_rid)
        a = s_off[i]
        s_score[a:s_off[i + 1]] = sc
        m = rid.shape[0]
        sl_rid[a:a + m] = rid
        sl_r0[a:a + m] = r0
        sl_r1[a:a + m] = r1
        sl_n[a:a + m] = chn
        sl_seed[a:a + chs.shape[0]] = chs
        n_ch[i] = m
        n_cs[i] = chs.shape[0]


FLT_WARP_BLOCKS = 128  # blocks of 4 warps of chain_flt_warp_kernel (grid-stride over the reads chain_kernel left it)


def _slot_positions(starts, counts):
    """The flat positions starts[k] + [0, counts[k]) of every k, in order (int64)."""
    counts = np.asarray(counts, np.int64)
    tot = int(counts.sum())
    if tot == 0:
        return np.zeros(0, np.int64)
    first = np.zeros(counts.shape[0], np.int64)
    np.cumsum(counts[:-1], out=first[1:])
    return np.repeat(np.asarray(starts, np.int64) - first, counts) + np.arange(tot, dtype=np.int64)


def chain_gpu(opt, mat, offsets, l_pac, pac, seq, seq_off, seq_off_d, seeds_d, read_base: int = 0,
              block: int = 64, host_seeds=None):
    """Chains of a batch's reads on the GPU (kernels/memchain.cu) from device seeds
    (s_rbeg, s_qbeg, s_len, s_rid, s_off). Reads that need mem_flt_chained_seeds (long reads) are chained
    by the CPU twin (chain_reads; seq/seq_off: the reads on the host), and so are reads with a seed on an ALT
    contig (opt.alt). Returns the host part of `pre`
    (s_score, c_off, ch_rid, cs_off, ch_seed) and the extension jobs as device arrays (j_read counts from
    read_base), the same as chain_range + assemble. host_seeds: host copies of (s_off, s_rbeg, s_qbeg, s_len) when
    the caller has them."""
    import cupy as cp

    from g3align.kernels.loader import get_module

    s_rbeg, s_qbeg, s_len, s_rid, s_off = seeds_d
    n = int(s_off.shape[0]) - 1
    tot = int(s_off[-1]) if n > 0 else 0
    mod = get_module("memchain")
    scr_off = cp.zeros(n + 1, cp.int64)
    cp.cumsum(chain_scratch_words(cp.diff(s_off), cp), out=scr_off[1:])
    scr = cp.empty(int(scr_off[-1]) if n > 0 else 0, cp.int32)
    sl = [cp.empty(tot, cp.int64) for _ in range(5)]  # rid, r0, r1, n, seed
    n_ch = cp.empty(n, cp.int64)
    n_cs = cp.empty(n, cp.int64)
    cpu = cp.empty(n, cp.int32)
    pend = cp.empty(max(n, 1), cp.int32)  # reads whose chain filter a warp does (chain_flt_warp_kernel)
    n_pend = cp.zeros(1, cp.int32)
    ctg = cp.asarray(np.asarray(offsets, np.int64))
    grid = ((n + block - 1) // block,)
    if n > 0:
        P = cp.asarray(chain_params(opt))
        common = (seq_off_d, s_off, s_rbeg, s_qbeg, s_len, s_rid, ctg, np.int64(ctg.shape[0] - 1), np.int64(l_pac), P,
                  np.float32(opt.mask_level), np.float32(opt.drop_ratio))
        alt = cp.asarray(opt.alt) if opt.alt.shape[0] else cp.zeros(1, cp.int8)
        mod.get_function("chain_kernel")(grid, (block,), common + (np.int64(n), scr_off, scr, *sl, n_ch, n_cs, cpu,
                                                                   pend, n_pend, alt, np.int64(opt.alt.shape[0])))
        # a fixed grid of warps over however many reads were left (no host wait for the count)
        mod.get_function("chain_flt_warp_kernel")((FLT_WARP_BLOCKS,), (128,),
                                                  common + (scr_off, scr, *sl, n_ch, n_cs, pend, n_pend))
    del scr
    s_score = to_host(s_len)
    idx = np.nonzero(cp.asnumpy(cpu))[0].astype(np.int64)
    if idx.shape[0]:  # long reads, reads with a seed on an ALT contig: the CPU twin; only their slots go to the device
        h = list(host_seeds) if host_seeds is not None else [cp.asnumpy(a) for a in (s_off, s_rbeg, s_qbeg, s_len)]
        h.append(cp.asnumpy(s_rid))
        hs = [np.zeros(tot, np.int64) for _ in range(5)]
        hn = [np.zeros(n, np.int64), np.zeros(n, np.int64)]
        chain_reads(idx, np.asarray(offsets, np.int64), np.int64(l_pac), pac, seq, seq_off, opt, mat, *h, s_score,
                    *hs, *hn)
        starts = h[0][idx]
        pc = _slot_positions(starts, hn[0][idx])
        ps = _slot_positions(starts, hn[1][idx])
        if pc.shape[0]:
            pc_d = cp.asarray(pc)
            for k in range(4):
                sl[k][pc_d] = cp.asarray(hs[k][pc])
        if ps.shape[0]:
            sl[4][cp.asarray(ps)] = cp.asarray(hs[4][ps])
        idx_d = cp.asarray(idx)
        n_ch[idx_d] = cp.asarray(hn[0][idx])
        n_cs[idx_d] = cp.asarray(hn[1][idx])
    c_off = cp.zeros(n + 1, cp.int64)
    g_off = cp.zeros(n + 1, cp.int64)
    if n > 0:
        cp.cumsum(n_ch, out=c_off[1:])
        cp.cumsum(n_cs, out=g_off[1:])
    nc, ng = (int(v) for v in cp.asnumpy(cp.stack([c_off[-1], g_off[-1]])))
    ch_rid = cp.empty(nc, cp.int64)
    cs_off = cp.empty(nc + 1, cp.int64)
    ch_seed = cp.empty(ng, cp.int64)
    jobs = tuple(cp.empty(ng, cp.int64) for _ in range(6))
    if n > 0:
        mod.get_function("chain_compact_kernel")(
            grid, (block,), (s_off, s_rbeg, s_qbeg, s_len, c_off, g_off, np.int64(n), np.int64(read_base), *sl,
                             ch_rid, cs_off, ch_seed, *jobs))
    cs_off[nc] = ng
    host = (s_score, to_host(c_off), to_host(ch_rid), to_host(cs_off), to_host(ch_seed))
    return host, jobs


def concat_offsets(offs):
    """Concatenate CSR offset arrays (each starting at 0) into one."""
    out = [offs[0]]
    base = int(offs[0][-1])
    for o in offs[1:]:
        out.append(o[1:] + base)
        base += int(o[-1])
    return np.concatenate(out) if len(out) > 1 else out[0]


def join_pieces(got):
    """The GPU path's `pre` (list, X still None) and device jobs from the pieces a batch was seeded and
    chained in (one piece, or several after an out-of-memory split): each piece is
    ([s_off, s_rbeg, s_qbeg, s_len], (s_score, c_off, ch_rid, cs_off, ch_seed), fr, jobs)."""
    if len(got) == 1:
        (s_off, s_rbeg, s_qbeg, s_len), (s_score, c_off, ch_rid, cs_off, ch_seed), fr, jobs = got[0]
    else:
        import cupy as cp

        cat = np.concatenate
        s_off = concat_offsets([g[0][0] for g in got])
        s_rbeg, s_qbeg, s_len = (cat([g[0][f] for g in got]) for f in (1, 2, 3))
        s_score, ch_rid, ch_seed = (cat([g[1][f] for g in got]) for f in (0, 2, 4))
        c_off = concat_offsets([g[1][1] for g in got])
        cs_off = concat_offsets([g[1][3] for g in got])
        fr = cat([g[2] for g in got])
        jobs = tuple(cp.concatenate([g[3][f] for g in got]) for f in range(6))
    return [s_off, s_rbeg, s_qbeg, s_len, s_score, c_off, ch_rid, cs_off, ch_seed, None, fr], jobs
