"""GPU DP chaining scores (kernels/lchain.cu, aligner/map/gpu/lchain.py) against the numba twin and minimap2.

Input: every mg_lchain_dp call dumped from minimap2 2.24 in tests/data/mmhit_*.bin.gz (ONT, PacBio, HiFi,
sr, sr paired-end, random reads, random chains), batched per preset in CSR form.
1. lchain_dp_kernel compiled as host C++ (CUDA built-ins shimmed, one emulated thread at a time, garbage in
   the outputs and scratch) == lchain_gpu.dp_scores_batch (the twin) for f and p, and backtracking the
   kernel's f/p (lchain.dp_chains) gives minimap2's dumped chains and chained anchors (needs g++).
2. nvcc -arch=sm_90 compiles it without spills (needs nvcc).
3. dp_scores_gpu == the twin (needs CuPy and a GPU; skipped otherwise).
"""
import ctypes
import gzip
import os
from pathlib import Path

import numpy as np
import pytest
from test_lchain import HERE, STORED, pair_records, read_records

from g3align.aligner.map import lchain as lc
from g3align.aligner.map.gpu import lchain as lg
from g3align.kernels import loader

CU = Path(loader.__file__).resolve().parent / "lchain.cu"

SHIM = r"""
#include <cstdint>
struct dim3h { unsigned x, y, z; };
static dim3h threadIdx, blockIdx, blockDim, gridDim;
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
// warp intrinsics of lchain_dp_warp_kernel: declared so the file compiles; that kernel is not run here
// (its algorithm is checked by lchain_gpu.warp_emulate, the kernel itself on a GPU)
static inline void __syncwarp(unsigned = 0xffffffffu) {}
static inline unsigned __ballot_sync(unsigned, bool v) { return v; }
static inline int __ffs(unsigned v) { return __builtin_ffs((int)v); }
template <class T> static inline T __shfl_sync(unsigned, T v, int, int = 32) { return v; }
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int, int = 32) { return v; }
#include KERNEL_FILE
extern "C" void host_dp(long long n_thr, unsigned block, const u64* ax, const u64* ay, const i64* off, i64 n_reads,
    const i64* mdx, const i64* mdy, const i64* nseg, int bw, int max_skip, int max_iter, float pg, float ps,
    int is_cdna, i64* f, i64* p, i64* t) {
  blockDim.x = block; gridDim.x = (unsigned)(n_thr / block);
  for (long long k = 0; k < n_thr; ++k) {
    blockIdx.x = (unsigned)(k / block); threadIdx.x = (unsigned)(k % block);
    lchain_dp_kernel(ax, ay, off, n_reads, mdx, mdy, nseg, bw, max_skip, max_iter, pg, ps, is_cdna, f, p, t);
  }
}
"""


def _batches():
    """{(dump, bw, max_skip, max_iter, pg, ps, is_cdna): [(a, mdx, mdy, n_seg, min_cnt, min_sc, a_out, u_out)]}"""
    out = {}
    for name in STORED:
        with gzip.open(os.path.join(HERE, "data", f"mmhit_{name}.bin.gz"), "rb") as fh:
            recs = read_records(fh.read())
        for ri, ro in pair_records(recs):
            if ri["fid"] != 14:
                continue
            q = [int(v) for v in ri["par"]]
            key = (name, q[2], q[3], q[4], float(np.float32(ri["par"][7])), float(np.float32(ri["par"][8])), q[9])
            out.setdefault(key, []).append((ri["a"], q[0], q[1], q[10], q[5], q[6], ro["a"], ro["u"]))
    return out


BATCHES = _batches()


def _csr(items):
    a = np.concatenate([it[0] for it in items]) if items else np.zeros((0, 2), np.uint64)
    off = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(it[0]) for it in items], out=off[1:])
    col = [np.array([it[k] for it in items], np.int64) for k in (1, 2, 3)]
    return np.ascontiguousarray(a), off, col


@pytest.fixture(scope="module")
def lib(host_cuda):
    return host_cuda(CU, SHIM, ("-O2", "-ffp-contract=off"))

def _p(x):
    assert x.flags.c_contiguous
    return ctypes.c_void_p(x.ctypes.data)


def test_dumps_hold_dp_calls():
    n_calls = sum(len(v) for v in BATCHES.values())
    n_anchors = sum(len(it[0]) for v in BATCHES.values() for it in v)
    dumps = {k[0] for k in BATCHES}
    assert n_calls >= 100 and n_anchors >= 50000, (n_calls, n_anchors)
    assert {"ont", "pb", "sr", "srpe", "rndchain"} <= dumps


@pytest.mark.parametrize("key", list(BATCHES), ids=[f"{k[0]}-bw{k[1]}" for k in BATCHES])
def test_host_kernel_equals_twin_and_minimap2(lib, key):
    name, bw, max_skip, max_iter, pg, ps, is_cdna = key
    items = BATCHES[key]
    a, off, (mdx0, mdy0, nseg) = _csr(items)
    mdx, mdy = lg.limits_batch(mdx0, mdy0, bw, is_cdna)
    f0, p0 = lg.dp_scores_batch(a, off, mdx, mdy, nseg, bw, max_skip, max_iter, np.float32(pg), np.float32(ps),
                                is_cdna)
    n = a.shape[0]
    f = np.full(n, -77, np.int64)
    p = np.full(n, -77, np.int64)
    t = np.full(n, 123456, np.int64)
    ax, ay = np.ascontiguousarray(a[:, 0]), np.ascontiguousarray(a[:, 1])
    block = 32
    n_thr = (len(items) + block - 1) // block * block
    i64 = ctypes.c_int64
    lib.host_dp(ctypes.c_longlong(n_thr), ctypes.c_uint(block), _p(ax), _p(ay), _p(off), i64(len(items)), _p(mdx),
                _p(mdy), _p(nseg), ctypes.c_int(bw), ctypes.c_int(max_skip), ctypes.c_int(max_iter),
                ctypes.c_float(pg), ctypes.c_float(ps), ctypes.c_int(is_cdna), _p(f), _p(p), _p(t))
    np.testing.assert_array_equal(f, f0)
    np.testing.assert_array_equal(p, p0)
    for r, it in enumerate(items):  # the kernel's scores, backtracked, give minimap2's chains
        b, e = off[r], off[r + 1]
        if e == b:
            continue
        _, _, max_drop = lc.dp_limits(it[1], it[2], bw, is_cdna)
        a2, u2 = lc.dp_chains(max_drop, it[4], it[5], a[b:e], f[b:e], p[b:e], np.zeros(e - b, np.int64),
                              np.zeros(e - b, np.int64))
        assert np.array_equal(a2, it[6]) and np.array_equal(u2, it[7]), (name, r)


def test_nvcc_compiles(nvcc_spill_free):
    nvcc_spill_free(CU, ("lchain_dp_kernel", "lchain_dp_warp_kernel"))


def _emulate(a, off, mdx, mdy, nseg, bw, max_skip, max_iter, pg, ps, is_cdna):
    n = a.shape[0]
    f = np.full(n, -77, np.int64)
    p = np.full(n, -77, np.int64)
    t = np.full(n, 123456, np.int64)
    for r in range(off.shape[0] - 1):
        b, e = off[r], off[r + 1]
        lg.warp_emulate(mdx[r], mdy[r], bw, max_skip, max_iter, np.float32(pg), np.float32(ps), is_cdna, nseg[r],
                        a[b:e], f[b:e], p[b:e], t[b:e])
    return f, p


def _dump_case(key):
    """(arguments of the dp_scores_* functions, the twin's (f, p)) for one minimap2 dump batch."""
    name, bw, max_skip, max_iter, pg, ps, is_cdna = key
    a, off, (mdx0, mdy0, nseg) = _csr(BATCHES[key])
    mdx, mdy = lg.limits_batch(mdx0, mdy0, bw, is_cdna)
    args = (a, off, mdx, mdy, nseg, bw, max_skip, max_iter, pg, ps, is_cdna)
    return args, lg.dp_scores_batch(*args[:8], np.float32(pg), np.float32(ps), is_cdna)


@pytest.mark.parametrize("key", list(BATCHES), ids=[f"{k[0]}-bw{k[1]}" for k in BATCHES])
def test_warp_algorithm_equals_twin(key):
    """lchain_dp_warp_kernel's algorithm (lanes run in turn between its sync points) == the twin."""
    args, want = _dump_case(key)
    got = _emulate(*args)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def dense_reads(seed, n_reads=6, n_anchors=3000):
    """Synthetic reads whose anchors crowd one diagonal band with noise, repeats and a second contig/strand:
    thousands of predecessors in range, many equal scores, max_skip breaks (anchors sorted as minimap2
    sorts them: by x, then y)."""
    rng = np.random.default_rng(seed)
    items = []
    for _ in range(n_reads):
        m = int(rng.integers(1, n_anchors))
        rid = rng.integers(0, 2, m).astype(np.uint64)
        rev = rng.integers(0, 2, m).astype(np.uint64)
        q = np.sort(rng.integers(0, 20000, m))
        rpos = q + 1000 + rng.integers(-60, 60, m) * (rng.random(m) < 0.5)  # the band, half of it jittered
        off_diag = rng.random(m) < 0.1
        rpos[off_diag] += rng.integers(0, 4000, int(off_diag.sum()))  # and some noise off it
        span = rng.integers(10, 20, m).astype(np.uint64)
        x = (rev << np.uint64(63)) | (rid << np.uint64(32)) | rpos.astype(np.uint64)
        y = (span << np.uint64(32)) | q.astype(np.uint64)
        a = np.stack([x, y], 1)
        a = a[np.lexsort((a[:, 1], a[:, 0]))]
        items.append((np.ascontiguousarray(a), 5000, 5000, 1))
    return items


def dense_args(items, max_skip):
    """dp_scores_* arguments for dense_reads items: anchors in CSR, limits of 5000 bases, bw 500."""
    a = np.concatenate([it[0] for it in items])
    off = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(it[0]) for it in items], out=off[1:])
    one = np.ones(len(items), np.int64)
    mdx, mdy = lg.limits_batch(5000 * one, 5000 * one, 500, 0)
    return (a, off, mdx, mdy, one, 500, max_skip, 5000, np.float32(0.12), np.float32(0.0), 0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("max_skip", [0, 2, 25])
def test_warp_algorithm_dense(seed, max_skip):
    args = dense_args(dense_reads(seed), max_skip)
    want = lg.dp_scores_batch(*args)
    got = _emulate(*args)
    assert (want[1] >= 0).mean() > 0.5  # most anchors chain
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.gpu
@pytest.mark.parametrize("key", list(BATCHES), ids=[f"{k[0]}-bw{k[1]}" for k in BATCHES])
def test_gpu_kernel_equals_twin(key):
    args, want = _dump_case(key)
    for got in (lg.dp_scores_gpu(*args), lg.dp_scores_gpu_warp(*args)):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.gpu
@pytest.mark.parametrize("max_skip", [0, 2, 25])
def test_gpu_warp_kernel_dense(max_skip):
    args = dense_args([it for seed in range(4) for it in dense_reads(seed)], max_skip)
    want = lg.dp_scores_batch(*args)
    for got in (lg.dp_scores_gpu(*args), lg.dp_scores_gpu_warp(*args)):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
