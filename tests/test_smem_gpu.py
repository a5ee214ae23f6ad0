"""GPU seeding (kernels/smem.cu, aligner/mem/gpu/smem.py) against the CPU twins.

1. CPU batch twins == per-read smem.collect_intv / chain.make_seeds (random refs with repeats and N
   holes, reads of length 0, 1, k-1, k, k+1, 150, 301, N bases, homopolymers).
2. kernels/smem.cu compiled as plain C++ on the host (a few shims for CUDA built-ins, one emulated
   thread at a time) == the CPU twins: checks the kernel code's logic without a GPU (needs g++).
3. nvcc -arch=sm_90 -cubin compiles the kernels (needs nvcc, no GPU).
4. GPU == CPU, byte for byte (needs CuPy and a GPU; skipped otherwise).
"""
import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import cupy_or_none

from g3align.aligner.mem.chain import make_seeds
from g3align.aligner.mem.gpu import smem as sg
from g3align.aligner.mem.options import MemOpt
from g3align.aligner.mem.smem import collect_intv
from g3align.index.fm import build_fm
from g3align.kernels import loader

CU = Path(loader.__file__).resolve().parent / "smem.cu"

OPT = MemOpt().to_numba()


def _ref(rng, n, n_ctg=3):
    s = rng.integers(0, 4, n).astype(np.uint8)
    for ln in (37, 60, 151):  # repeats (counts > 1, re-seeding, third round)
        unit = rng.integers(0, 4, ln)
        for _ in range(int(rng.integers(2, 12))):
            p = int(rng.integers(0, n - ln))
            s[p:p + ln] = unit
    s[n // 3:n // 3 + 40] = 0  # homopolymer run
    offsets = np.linspace(0, n, n_ctg + 1).astype(np.int64)
    return s, offsets


def _reads(rng, T, n):
    """Reads from both strands of T with substitutions, N bases, and edge lengths."""
    lens = [0, 1, 2, 18, 19, 20, 31, 32, 33, 64, 100, 150, 150, 150, 151, 250, 301]
    seqs = []
    for i in range(n):
        L = lens[i % len(lens)] if i < 3 * len(lens) else int(rng.choice([150, 150, 100, int(rng.integers(0, 320))]))
        L = min(L, len(T))
        p = int(rng.integers(0, len(T) - L + 1))
        q = T[p:p + L].copy()
        if L:
            for _ in range(int(rng.integers(0, 6))):
                q[rng.integers(0, L)] = rng.integers(0, 4)
            if rng.random() < 0.15:
                q[rng.integers(0, L)] = 4
            if rng.random() < 0.03:
                q[:] = rng.integers(0, 4)  # homopolymer read
            if rng.random() < 0.05:
                q = rng.integers(0, 4, L)  # random read: short SMEMs only
        seqs.append(q.astype(np.uint8))
    off = np.zeros(n + 1, np.int64)
    np.cumsum([len(s) for s in seqs], out=off[1:])
    return (np.concatenate(seqs) if n else np.zeros(0, np.uint8)), off


# wide: superblocks of 2**12 rows (the layout of 2**32 rows or more, whose superblocks are 2**31 rows), so that a
# small reference crosses many of them
@pytest.fixture(scope="module", params=[(1, 0), (2, 12)], ids=["narrow", "wide"])
def setup(request):
    seed, wide = request.param
    rng = np.random.default_rng(seed)
    pac, offsets = _ref(rng, 20000)
    fm = build_fm(pac, sa_intv=8, wide=wide)
    T = np.concatenate([pac, 3 - pac[::-1]])
    seq, seq_off = _reads(rng, T, 400)
    return fm, offsets, seq, seq_off


def _per_read(fm, seq, seq_off, opt=OPT):
    res = []
    for r in range(len(seq_off) - 1):
        q = seq[seq_off[r]:seq_off[r + 1]]
        res.append(collect_intv(fm, q, len(q), opt.min_seed_len, opt.split_factor, opt.split_width,
                                opt.max_mem_intv))
    return res


def _check_csr(res, mb, me, mk, ms, off):
    assert off[0] == 0 and len(off) == len(res) + 1
    for r, (a, b, c, d) in enumerate(res):
        s = slice(off[r], off[r + 1])
        for x, y in ((a, mb), (b, me), (c, mk), (d, ms)):
            np.testing.assert_array_equal(x, y[s])
    for x in (mb, me, mk, ms, off):
        assert x.dtype == np.int64


@pytest.mark.parametrize("cap", [2, 64])
def test_cpu_batch_equals_per_read(setup, cap):
    fm, offsets, seq, seq_off = setup
    out = sg.collect_intv_batch_cpu(fm, seq, seq_off, OPT, cap=cap)
    _check_csr(_per_read(fm, seq, seq_off), *out)


def test_cpu_batch_options(setup):
    fm, offsets, seq, seq_off = setup
    opt = MemOpt()
    opt.min_seed_len, opt.split_factor, opt.split_width, opt.max_mem_intv = 15, 1.3, 20, 0
    out = sg.collect_intv_batch_cpu(fm, seq, seq_off, opt)
    _check_csr(_per_read(fm, seq, seq_off, opt.to_numba()), *out)


def test_cpu_empty_batch(setup):
    fm = setup[0]
    mb, me, mk, ms, off = sg.collect_intv_batch_cpu(fm, np.zeros(0, np.uint8), np.zeros(1, np.int64), OPT)
    assert len(mb) == 0 and list(off) == [0]


@pytest.mark.parametrize("max_occ", [1, 3, 500])
def test_seed_pos_cpu_equals_make_seeds(setup, max_occ):
    fm, offsets, seq, seq_off = setup
    mb, me, mk, ms, off = sg.collect_intv_batch_cpu(fm, seq, seq_off, OPT)
    s_rbeg, s_qbeg, s_len, s_rid, s_off = sg.seed_pos_batch_cpu(fm, offsets, mb, me, mk, ms, off, max_occ)
    for r in range(len(off) - 1):
        a, b = off[r], off[r + 1]
        ref = make_seeds(fm, offsets, fm.l_pac, mb[a:b], me[a:b], mk[a:b], ms[a:b], max_occ)
        s = slice(s_off[r], s_off[r + 1])
        for x, y in zip(ref, (s_rbeg, s_qbeg, s_len, s_rid)):
            np.testing.assert_array_equal(x, y[s])
    # unfiltered: the kept ones are exactly those with rid >= 0
    u = sg.seed_pos_batch_cpu(fm, offsets, mb, me, mk, ms, off, max_occ, filter_rid=False)
    np.testing.assert_array_equal(u[0][u[3] >= 0], s_rbeg)


# ------------------------------------------------------------------------------------------------
# kernels/smem.cu as host C++ (logic check without a GPU)
# ------------------------------------------------------------------------------------------------

HOST_SHIM = r"""
#include <cstdint>
struct dim3h { unsigned x, y, z; };
static dim3h threadIdx, blockIdx, blockDim;
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __syncthreads() ((void)0)
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    unsigned long long o = *p; *p += v; return o; }
#include KERNEL_FILE
// one emulated thread at a time; a first pass with no work fills each kernel's shared parameters
#define EMULATE(n, call0, call) do { blockDim.x = 32; blockIdx.x = 0; \
    for (unsigned x = 0; x < 32; ++x) { threadIdx.x = x; call0; } \
    for (long long t = 0; t < (n); ++t) { blockIdx.x = t / 32; threadIdx.x = t % 32; call; } } while (0)
extern "C" void host_collect(const occ_t* occ, const occ_t* sa, const i64* P, const unsigned char* seq,
    const i64* seq_off, const i64* ids, i64 n, int msl, int split_len, int split_width, int max_mem_intv,
    int cap, i64* skey, i64* sk, i64* ss, int* cnt) {
  EMULATE(n, collect_intv_kernel(occ, sa, P, seq, seq_off, ids, 0, msl, split_len, split_width, max_mem_intv,
                                 cap, skey, sk, ss, cnt),
          collect_intv_kernel(occ, sa, P, seq, seq_off, ids, n, msl, split_len, split_width, max_mem_intv,
                              cap, skey, sk, ss, cnt));
}
extern "C" void host_compact(const i64* skey, const i64* sk, const i64* ss, const int* cnt, const i64* off,
    i64 n, i64* mb, i64* me, i64* mk, i64* ms) {
  EMULATE(n, (void)0, compact_kernel(skey, sk, ss, cnt, off, n, mb, me, mk, ms));
}
extern "C" void host_seed_pos(const occ_t* occ, const occ_t* sa, const i64* P, const i64* mb, const i64* me,
    const i64* mk, const i64* ms, const i64* occ_off, i64 n_intv, i64 n_seeds, int max_occ, const i64* ctg,
    i64 n_ctg, i64 l_pac, i64* s_rbeg, int* s_qbeg, int* s_len, int* s_rid) {
  EMULATE(n_seeds, seed_pos_kernel(occ, sa, P, mb, me, mk, ms, occ_off, n_intv, 0, max_occ, ctg, n_ctg, l_pac,
                                   s_rbeg, s_qbeg, s_len, s_rid),
          seed_pos_kernel(occ, sa, P, mb, me, mk, ms, occ_off, n_intv, n_seeds, max_occ, ctg, n_ctg, l_pac,
                          s_rbeg, s_qbeg, s_len, s_rid));
}
"""


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    d = tmp_path_factory.mktemp("smemhost")
    libs = {}
    for wide in (0, 12):
        src = d / f"shim{wide}.cpp"
        src.write_text(f"#define OCC_WIDE {wide}\n#define COUNT_LOOKUPS 1\n"
                       + HOST_SHIM.replace("KERNEL_FILE", f'"{CU}"'))
        so = d / f"libsmem{wide}.so"
        subprocess.run(["g++", "-O1", "-std=c++17", "-shared", "-fPIC", "-Wno-unknown-pragmas", str(src), "-o",
                        str(so)], check=True)
        libs[wide] = ctypes.CDLL(str(so))
    return libs


def _p(a):
    return a.ctypes.data_as(ctypes.c_void_p)


def test_split_len_is_collect_intv_expression():
    """_split_len (NumPy scalars, no numba load in the first seeding) == smem.collect_intv's compiled expression
    with a float32 split_factor, over many -k / -r values (ties at .5 included: 1.5 x odd lengths)."""
    import numba as nb

    @nb.njit
    def compiled(m, f):
        return int(np.float64(np.float32(m) * f) + .499)
    fs = np.concatenate([np.random.default_rng(3).uniform(0.5, 5, 300), np.arange(5, 60) / 10]).astype(np.float32)
    for m in range(1, 160):
        for f in fs:
            assert sg._split_len(m, float(f)) == compiled(m, f)


def test_host_emulated_kernels(setup, host_lib):
    fm, offsets, seq, seq_off = setup
    lib = host_lib[int(fm.occ_wide)]
    P = sg.fm_params_array(fm)
    n = len(seq_off) - 1
    ids = np.arange(n, dtype=np.int64)
    split_len = sg._split_len(OPT.min_seed_len, OPT.split_factor)
    i64, i32 = ctypes.c_int64, ctypes.c_int32
    res = _per_read(fm, seq, seq_off)
    want = np.array([len(r[0]) for r in res])
    assert want.max() > 64  # the homopolymer reads overflow the default GPU slot
    for cap in (3, int(want.max())):
        skey, sk, ss = (np.full(n * cap, -7, np.int64) for _ in range(3))
        cnt = np.full(n, -9, np.int32)
        lib.host_collect(_p(fm.occ), _p(fm.sa), _p(P), _p(seq), _p(seq_off), _p(ids), i64(n), i32(OPT.min_seed_len),
                         i32(split_len), i32(OPT.split_width), i32(OPT.max_mem_intv), i32(cap), _p(skey), _p(sk),
                         _p(ss), _p(cnt))
        np.testing.assert_array_equal(cnt, np.where(want > cap, -1, want))
        if cap == 3:
            continue
        off = np.zeros(n + 1, np.int64)
        np.cumsum(cnt, out=off[1:])
        out = [np.full(off[-1], -5, np.int64) for _ in range(4)]
        lib.host_compact(_p(skey), _p(sk), _p(ss), _p(cnt), _p(off), i64(n), *map(_p, out))
        _check_csr(res, *out, off)
    # seed positions, unfiltered, with a small max_occ so sampling steps > 1 occur
    mb, me, mk, ms, off = sg.collect_intv_batch_cpu(fm, seq, seq_off, OPT)
    for max_occ in (2, 500):
        want = sg.seed_pos_batch_cpu(fm, offsets, mb, me, mk, ms, off, max_occ, filter_rid=False)
        occ_off = np.zeros(len(mb) + 1, np.int64)
        np.cumsum(sg.seed_counts(ms, max_occ), out=occ_off[1:])
        tot = int(occ_off[-1])
        got = [np.full(tot, -3, np.int64)] + [np.full(tot, -3, np.int32) for _ in range(3)]
        lib.host_seed_pos(_p(fm.occ), _p(fm.sa), _p(P), _p(mb), _p(me), _p(mk), _p(ms), _p(occ_off),
                          i64(len(mb)), i64(tot), i32(max_occ), _p(offsets), i64(len(offsets) - 1), i64(fm.l_pac),
                          *map(_p, got))
        for x, y in zip(want[:4], got):
            np.testing.assert_array_equal(x, y)


def test_nvcc_compiles(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    for wide in (0, 31):
        for cnt in (0, 1):
            r = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", f"-DOCC_WIDE={wide}",
                                f"-DCOUNT_LOOKUPS={cnt}", str(CU), "-o", str(tmp_path / "smem.cubin")],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            assert "spill stores" in r.stderr and " 0 bytes spill stores" in r.stderr


# ------------------------------------------------------------------------------------------------
# GPU == CPU (skipped without a GPU)
# ------------------------------------------------------------------------------------------------


def _gpu():
    return cupy_or_none()


@pytest.mark.parametrize("cap", [2, 64])
def test_gpu_equals_cpu(setup, cap):
    cp = _gpu()
    if cp is None:
        pytest.skip("no GPU")
    fm, offsets, seq, seq_off = setup
    fd = sg.fm_to_device(fm)
    want = sg.collect_intv_batch_cpu(fm, seq, seq_off, OPT)
    got = sg.collect_intv_batch_gpu(fd, seq, seq_off, OPT, cap=cap, to_host=True)
    for x, y in zip(want, got):
        np.testing.assert_array_equal(x, y)
        assert x.dtype == y.dtype
    for max_occ in (2, 500):
        for flt in (True, False):
            w = sg.seed_pos_batch_cpu(fm, offsets, *want, max_occ, filter_rid=flt)
            g = sg.seed_pos_batch_gpu(fd, offsets, *want, max_occ, filter_rid=flt, to_host=True)
            for x, y in zip(w, g):
                np.testing.assert_array_equal(x, y)
                assert x.dtype == y.dtype
