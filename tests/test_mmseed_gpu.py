"""Batch seed lookup: aligner/map/gpu/seed.py and kernels/mmseed.cu.

1. The CPU batch twin (seed_batch_cpu on sketch_batch_cpu's minimizers) equals per-read ``seed_read``
   (mv, anchors in order, rep_len, mini_pos) on a synthetic reference built to stress every branch
   (a 40 kb period-7 tandem: occurrence counts above max_max_occ and reads whose minimizers the q-occ
   filter removes entirely; a 1.5 kb interspersed repeat in 25 mutated copies: seed-selection
   streaks; N runs; an empty contig) with reads of length 0, 1, k-1, k, ..., N bases, homopolymers,
   random reads; for map-ont, map-pb, map-hifi, sr (heap merge) and option variants (tiny mid_occ,
   max_max_occ <= mid_occ, occ_dist 0 / 50, q_occ_frac 0, --for-only / --rev-only / --qstrand, -D / -P
   skips, the max_occ re-seed); on data/lambda + data/lambda_pbsim.fq.gz; on E. coli reads from the
   shared data when present.
2. kernels/mmseed.cu compiled as host C++ (CUDA built-ins shimmed, one emulated thread at a time)
   driven by the same pass order as the GPU launcher (``_seed_device`` over NumPy) == the CPU twin:
   checks the kernels' logic and the launcher's scans without a GPU (needs g++).
3. nvcc -arch=sm_90 -cubin compiles every kernel without spills (needs nvcc, no GPU).
4. GPU == CPU byte for byte (needs CuPy and a GPU; skipped otherwise), including sketch_batch_gpu's
   device-resident minimizers fed straight into seed_batch_gpu.
"""
import ctypes
import gzip
import itertools
from pathlib import Path

import numpy as np
import pytest

from g3align.aligner.map import seed as mmseed
from g3align.aligner.map.gpu import seed as sg
from g3align.aligner.map.gpu.sketch import sketch_batch_cpu
from g3align.index import mmidx

ROOT = Path(__file__).resolve().parent.parent
CU = ROOT / "kernels" / "mmseed.cu"
LAMBDA = ROOT / "data" / "lambda.fa.gz"
PBSIM = ROOT / "data" / "lambda_pbsim.fq.gz"
_CANDIDATES = [ROOT.parent / "shared" / "data", Path("/work/shared/data")]
SHARED = next((d for d in _CANDIDATES if d.is_dir()), _CANDIDATES[0])
ECOLI = SHARED / "ref" / "ecoli_K12_MG1655.fa.gz"
ECOLI_PB_REF = SHARED / "ref" / "ecoli_K12_PBcR_reference.fa.gz"
ONT = SHARED / "reads" / "ecoli_K12_ont_R9_nanoget.fastq.gz"
PB = SHARED / "reads" / "ecoli_K12_pacbio_RSII_first3000.fastq.gz"
SR1 = SHARED / "reads" / "ecoli_illumina_spades_1K_R1.fastq.gz"

F = mmseed
# (preset, overrides of the seed options): presets, then variants that reach the other branches
VARIANTS = [
    ("map-ont", {}), ("map-pb", {}), ("map-hifi", {}), ("sr", {}),
    ("map-ont", dict(mid_occ=3)),                      # q-occ filter and seed selection everywhere
    ("map-ont", dict(mid_occ=3, max_max_occ=2)),       # max_max_occ <= max_occ: plain cut
    ("map-ont", dict(occ_dist=0)),                     # no seed selection
    ("map-ont", dict(mid_occ=2, occ_dist=20)),
    ("map-ont", dict(mid_occ=2, occ_dist=1)),          # streaks of more than 128 seeds: the heap is full
    ("map-pb", dict(q_occ_frac=0.0)),                  # no query filter
    ("map-ont", dict(flag=F.MM_F_REV_ONLY)),
    ("map-ont", dict(flag=F.MM_F_FOR_ONLY)),
    ("map-ont", dict(flag=F.MM_F_QSTRAND)),
    ("map-ont", dict(flag=F.MM_F_NO_DIAG | F.MM_F_NO_DUAL, skips=True)),
    ("sr", dict(mid_occ=3)),
    ("sr", dict(flag=F.seed_params("sr")["flag"] | F.MM_F_NO_DIAG | F.MM_F_NO_DUAL | F.MM_F_QSTRAND, skips=True)),
]
VIDS = [f"{p}-{'-'.join(f'{k}={v}' for k, v in o.items()) or 'default'}" for p, o in VARIANTS]


# ------------------------------------------------------------------------------------------------
# data
# ------------------------------------------------------------------------------------------------

def _revcomp(s):
    return np.where(s < 4, 3 - s, 4).astype(np.uint8)[::-1].copy()


def _synth_ref(seed=7):
    rng = np.random.default_rng(seed)
    c1 = rng.integers(0, 4, 60000).astype(np.uint8)
    unit = rng.integers(0, 4, 1500).astype(np.uint8)
    for _ in range(25):  # interspersed repeat, 1 % substitutions per copy, both strands
        u = unit.copy()
        m = rng.random(len(u)) < 0.01
        u[m] = rng.integers(0, 4, int(m.sum()))
        if rng.random() < 0.5:
            u = _revcomp(u)
        p = int(rng.integers(0, len(c1) - len(u)))
        c1[p:p + len(u)] = u
    per = np.array([0, 1, 3, 2, 0, 3, 1], np.uint8)  # period 7, no homopolymer inside or across copies
    c2 = np.concatenate([rng.integers(0, 4, 10000), np.resize(per, 40000), rng.integers(0, 4, 10000)]).astype(np.uint8)
    c3 = rng.integers(0, 4, 500).astype(np.uint8)
    c4 = rng.integers(0, 4, 20000).astype(np.uint8)
    for _ in range(20):
        p = int(rng.integers(0, len(c4)))
        c4[p:p + int(rng.integers(1, 300))] = 4
    c5 = rng.integers(0, 4, 30000).astype(np.uint8)
    unit = rng.integers(0, 4, 3000).astype(np.uint8)
    for i in range(6):  # exact copies: streaks of hundreds of high-occurrence seeds
        c5[1000 + i * 4800:4000 + i * 4800] = unit
    seqs = [c1, c2, c3, np.zeros(0, np.uint8), c4, c5]
    lengths = np.array([len(s) for s in seqs], np.int64)
    off = np.zeros(len(seqs) + 1, np.int64)
    off[1:] = np.cumsum(lengths)
    return mmidx.MMRef(names=[f"c{i}" for i in range(len(seqs))], lengths=lengths, ref_off=off,
                       ref_seq=np.concatenate(seqs).astype(np.uint8))


def _synth_reads(ref, seed=3, n=150):
    """Reads from both strands (substitutions, indels), some with N runs, homopolymers, random or
    all-tandem; the first ones have edge lengths. Returns (seq, seq_off, origin contig per read)."""
    rng = np.random.default_rng(seed)
    edge = [0, 1, 2, 14, 15, 16, 18, 19, 20, 21, 22, 30, 31, 40, 64, 100]
    T = [ref.seq(i) for i in range(ref.n_seq)]
    seqs, origin = [], []
    for i in range(n):
        L = edge[i] if i < len(edge) else int(rng.choice([int(rng.integers(100, 600)), int(rng.integers(500, 9000))]))
        c = int(rng.choice([0, 0, 1, 1, 2, 4, 5, 5]))
        kind = rng.random()
        if c == 1 and kind < 0.3:  # inside the tandem: the q-occ filter empties mv
            p = 10000 + int(rng.integers(0, 40000 - min(L, 39000)))
            s = T[1][p:p + L].copy()
        else:
            L = min(L, len(T[c]))
            p = int(rng.integers(0, len(T[c]) - L + 1))
            s = T[c][p:p + L].copy()
        if len(s) and rng.random() < 0.15:  # error free
            pass
        elif len(s):
            m = rng.random(len(s)) < 0.04
            s[m] = rng.integers(0, 4, int(m.sum()))
            for _ in range(int(rng.integers(0, 1 + len(s) // 300))):  # small indels
                q = int(rng.integers(0, len(s)))
                s = np.delete(s, slice(q, q + int(rng.integers(1, 4)))) if rng.random() < 0.5 else \
                    np.insert(s, q, rng.integers(0, 4, int(rng.integers(1, 4))))
            if rng.random() < 0.15:
                q = int(rng.integers(0, len(s)))
                s[q:q + int(rng.integers(1, 60))] = 4
            if rng.random() < 0.05:
                s[:] = rng.integers(0, 4)  # homopolymer read
            if rng.random() < 0.05:
                s = rng.integers(0, 4, len(s))  # random read
        if rng.random() < 0.5:
            s = _revcomp(s)
        seqs.append(np.asarray(s, np.uint8))
        origin.append(c)
    off = np.zeros(n + 1, np.int64)
    off[1:] = np.cumsum([len(s) for s in seqs])
    return np.concatenate(seqs).astype(np.uint8), off, np.array(origin, np.int64)


_IDX: dict = {}


def _index(ref, key, preset):
    k = (key, preset)
    if k not in _IDX:
        P = mmseed.seed_params(preset)
        _IDX[k] = mmidx.build_mm_index(ref, P["k"], P["w"], P["is_hpc"], P["bucket_bits"])
    return _IDX[k]


def _opts(idx, preset, over):
    P = mmseed.seed_params(preset)
    o = dict(mid_occ=mmseed.resolve_mid_occ(P, idx), max_max_occ=P["max_max_occ"], occ_dist=P["occ_dist"],
             q_occ_frac=P["q_occ_frac"], flag=P["flag"])
    o.update({k: v for k, v in over.items() if k != "skips"})
    return o


def _skips(over, ref, origin):
    """diag_rid / dual_skip for the -D / -P variants: diagonal = the read's contig of origin."""
    if not over.get("skips"):
        return None, None
    dual = np.zeros(ref.n_seq, np.uint8)
    dual[1::2] = 1
    return origin.copy(), dual


def _read_fastx(path, n):
    with gzip.open(path, "rt") as fh:
        data = "".join("".join(rec) for rec in itertools.islice(zip(*[fh] * 4), n)).encode()
    _, _, off, codes = mmidx.parse_mm_seqs(data, str(path))
    return codes, off


# ------------------------------------------------------------------------------------------------
# oracle and comparison
# ------------------------------------------------------------------------------------------------

def _per_read(seq, seq_off, idx, o, diag=None, dual=None):
    """seed_read of every read, concatenated into SeedBatch form."""
    b, bkt, keys, koff, pos = idx.arrays()
    n = len(seq_off) - 1
    dual = np.zeros(0, np.uint8) if dual is None else dual
    res = [[], [], [], []]
    for r in range(n):
        s = seq[seq_off[r]:seq_off[r + 1]]
        mv, a, rep, mp = mmseed.seed_read(s, np.array([0, len(s)], np.int64), idx.w, idx.k, idx.is_hpc,
                                          o["mid_occ"], o["max_max_occ"], o["occ_dist"], o["q_occ_frac"], o["flag"],
                                          b, bkt, keys, koff, pos, idx.ref.lengths, -1 if diag is None else diag[r],
                                          dual)
        res[0].append(mv.reshape(-1, 2))
        res[1].append(a.reshape(-1, 2))
        res[2].append(rep)
        res[3].append(mp)

    def csr(parts, shape):
        off = np.zeros(n + 1, np.int64)
        off[1:] = np.cumsum([len(p) for p in parts])
        v = np.concatenate(parts).astype(np.uint64) if parts else np.empty(shape, np.uint64)
        return v.reshape(shape), off

    mv, mv_off = csr(res[0], (-1, 2))
    a, a_off = csr(res[1], (-1, 2))
    mp, mp_off = csr(res[3], (-1,))
    return sg.SeedBatch(mv, mv_off, a, a_off, np.array(res[2], np.int64), mp, mp_off)


def _batch_cpu(seq, seq_off, idx, o, diag=None, dual=None):
    mz, mz_off = sketch_batch_cpu(seq, seq_off, idx.w, idx.k, idx.is_hpc)
    return sg.seed_batch_cpu(mz, mz_off, seq_off, **o, b=idx.b, bkt_off=idx.bkt_off, keys=idx.keys,
                             key_off=idx.key_off, pos=idx.pos, ref_len=idx.ref.lengths, diag_rid=diag, dual_skip=dual)


def _check(got, want):
    for name, x, y in zip(sg.SeedBatch._fields, got, want):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype, name
        np.testing.assert_array_equal(x, y, err_msg=name)


@pytest.fixture(scope="module")
def synth():
    ref = _synth_ref()
    seq, seq_off, origin = _synth_reads(ref)
    return ref, seq, seq_off, origin


# ------------------------------------------------------------------------------------------------
# 1. CPU twin == per-read seed_read
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("preset,over", VARIANTS, ids=VIDS)
def test_cpu_batch_equals_per_read(synth, preset, over):
    ref, seq, seq_off, origin = synth
    idx = _index(ref, "synth", preset)
    o = _opts(idx, preset, over)
    diag, dual = _skips(over, ref, origin)
    want = _per_read(seq, seq_off, idx, o, diag, dual)
    got = _batch_cpu(seq, seq_off, idx, o, diag, dual)
    _check(got, want)
    if not over:  # the set reaches what it is meant to reach
        cnt = np.diff(idx.key_off)
        assert cnt.max() > o["max_max_occ"]
        assert (np.diff(got.mv_off) < np.diff(sketch_batch_cpu(seq, seq_off, idx.w, idx.k, idx.is_hpc)[1])).any()
        assert (got.rep_len > 0).any() and got.a.shape[0] > 10000


def test_cpu_reseed_at_max_occ(synth):
    """The max_occ re-seed of mm_map_frag: the batch call on mv with q_occ_frac 0 == seed_hits per read."""
    ref, seq, seq_off, _ = synth
    idx = _index(ref, "synth", "map-ont")
    o = _opts(idx, "map-ont", dict(mid_occ=4))
    first = _batch_cpu(seq, seq_off, idx, o)
    b, bkt, keys, koff, pos = idx.arrays()
    got = sg.seed_batch_cpu(first.mv, first.mv_off, seq_off, 300, o["max_max_occ"], o["occ_dist"], 0.0, o["flag"],
                            b, bkt, keys, koff, pos, idx.ref.lengths)
    for r in range(len(seq_off) - 1):
        qlen = int(seq_off[r + 1] - seq_off[r])
        if qlen == 0:
            continue
        a, rep, mp = mmseed.seed_hits(first.mv[first.mv_off[r]:first.mv_off[r + 1]], qlen, 300, o["max_max_occ"],
                                      o["occ_dist"], o["flag"], b, bkt, keys, koff, pos, idx.ref.lengths, -1,
                                      np.zeros(0, np.uint8))
        np.testing.assert_array_equal(got.a[got.a_off[r]:got.a_off[r + 1]], a)
        np.testing.assert_array_equal(got.mini_pos[got.mini_off[r]:got.mini_off[r + 1]], mp)
        assert got.rep_len[r] == rep


def _pbsim_reads():
    """data/lambda_pbsim.fq.gz as (codes, offsets)."""
    with gzip.open(PBSIM, "rb") as fh:
        _, _, seq_off, seq = mmidx.parse_mm_seqs(fh.read(), str(PBSIM))
    return seq, seq_off


def _lambda_pbsim(preset):
    """Index of data/lambda.fa.gz for the preset, the pbsim reads, and the preset's seed options."""
    idx = _index(mmidx.read_mm_ref(LAMBDA), "lambda", preset)
    seq, seq_off = _pbsim_reads()
    return idx, seq, seq_off, _opts(idx, preset, {})


@pytest.mark.parametrize("preset", ["map-ont", "map-pb", "map-hifi", "sr"])
def test_cpu_lambda_pbsim(preset):
    idx, seq, seq_off, o = _lambda_pbsim(preset)
    got = _batch_cpu(seq, seq_off, idx, o)
    assert got.a.shape[0] > 200
    _check(got, _per_read(seq, seq_off, idx, o))


def test_cpu_empty_batch_and_reads():
    idx = _index(_synth_ref(), "synth", "map-ont")
    o = _opts(idx, "map-ont", {})
    got = _batch_cpu(np.zeros(0, np.uint8), np.zeros(1, np.int64), idx, o)
    assert [x.shape[0] for x in got] == [0, 1, 0, 1, 0, 0, 1]
    seq = np.array([4] * 30 + [0, 1, 2], np.uint8)  # empty, all-N, shorter than k
    seq_off = np.array([0, 0, 30, 33, 33], np.int64)
    got = _batch_cpu(seq, seq_off, idx, o)
    _check(got, _per_read(seq, seq_off, idx, o))
    assert got.a.shape[0] == 0 and got.rep_len.tolist() == [0, 0, 0, 0]


def test_bad_args():
    idx = _index(_synth_ref(), "synth", "map-ont")
    with pytest.raises(ValueError):  # --qstrand without ref_len
        sg.seed_batch_cpu(np.zeros((0, 2), np.uint64), np.zeros(2, np.int64), np.array([0, 5]), 10, 4095, 500, 0.01,
                          F.MM_F_QSTRAND, *idx.arrays(), None)
    with pytest.raises(ValueError):  # offsets of different batches
        sg.seed_batch_cpu(np.zeros((0, 2), np.uint64), np.zeros(3, np.int64), np.array([0, 5]), 10, 4095, 500, 0.01,
                          0, *idx.arrays(), idx.ref.lengths)


ecoli = pytest.mark.skipif(not (ECOLI.exists() and ONT.exists() and PB.exists()), reason="shared E. coli data missing")


def _ecoli(preset, reads, n):
    """E. coli index for the preset (the PBcR reference for map-pb), n reads, the seed options."""
    ref = mmidx.read_mm_ref(ECOLI_PB_REF if preset == "map-pb" else ECOLI)
    idx = _index(ref, "ecoli-pb" if preset == "map-pb" else "ecoli", preset)
    seq, seq_off = _read_fastx(reads, n)
    return idx, seq, seq_off, _opts(idx, preset, {})


@ecoli
@pytest.mark.parametrize("preset,reads,n", [("map-ont", ONT, 40), ("map-pb", PB, 60), ("map-hifi", PB, 60),
                                            ("sr", SR1, 300)])
def test_cpu_ecoli(preset, reads, n):
    idx, seq, seq_off, o = _ecoli(preset, reads, n)
    got = _batch_cpu(seq, seq_off, idx, o)
    assert got.a.shape[0] > 1000
    _check(got, _per_read(seq, seq_off, idx, o))


# ------------------------------------------------------------------------------------------------
# 2. kernels/mmseed.cu as host C++, driven by the GPU launcher's pass order over NumPy
# ------------------------------------------------------------------------------------------------

HOST_SHIM = r"""
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>
struct dim3h { unsigned x, y, z; };
static thread_local dim3h threadIdx;
static dim3h blockIdx, blockDim, gridDim;
struct ulonglong2 { unsigned long long x, y; };
// __syncthreads for the block kernels, whose threads run as std::threads of one block at a time
struct Bar {
  std::mutex m; std::condition_variable cv; unsigned n = 0, waiting = 0, gen = 0;
  void wait() { std::unique_lock<std::mutex> l(m); unsigned g = gen;
    if (++waiting == n) { waiting = 0; ++gen; cv.notify_all(); } else cv.wait(l, [&] { return g != gen; }); }
};
static Bar g_bar;
static ulonglong2* g_dyn;  // the block's dynamic shared memory
#define SD_HOST 1
static inline ulonglong2* sd_dyn_smem() { return g_dyn; }
#define __device__
#define __global__
#define __forceinline__ inline
#define __noinline__
#define __restrict__
#define __shared__ static
#define __launch_bounds__(x)
#define __syncthreads() g_bar.wait()
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) {
  __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return cmp; }
template <class T> static inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline float __fmul_rn(float a, float b) { volatile float c = a * b; return c; }
#include KERNEL_FILE
// every argument arrives as one 64-bit slot: a pointer, an integer, or a float's bits
template <class T> static T from_slot(uint64_t s) {
  if constexpr (std::is_pointer_v<T>) return reinterpret_cast<T>(s);
  else if constexpr (std::is_same_v<T, float>) { uint32_t u = (uint32_t)s; float f; std::memcpy(&f, &u, 4); return f; }
  else return (T)(int64_t)s;
}
template <class... P, size_t... I> static void call(void (*k)(P...), const uint64_t* s, std::index_sequence<I...>) {
  k(from_slot<P>(s[I])...);
}
template <class... P> static void emulate(long long n, unsigned block, void (*k)(P...), const uint64_t* s, int nargs) {
  if (nargs != (int)sizeof...(P)) throw 1;
  blockDim.x = block;
  gridDim.x = (unsigned)((n + block - 1) / block);
  for (long long t = 0; t < n; ++t) {  // one thread at a time, in order
    blockIdx.x = (unsigned)(t / block); threadIdx.x = (unsigned)(t % block);
    call(k, s, std::index_sequence_for<P...>{});
  }
}
// a block kernel (grid-stride over its items): two blocks, one after the other, each as `block` threads
template <class... P> static void emulate_block(long long n, unsigned block, long long smem, void (*k)(P...),
                                                const uint64_t* s, int nargs) {
  if (nargs != (int)sizeof...(P)) throw 1;
  long long blocks = (n + block - 1) / block;
  blockDim.x = block;
  gridDim.x = (unsigned)(blocks < 2 ? blocks : 2);
  std::vector<ulonglong2> dyn((size_t)(smem / 16 + 1));
  g_dyn = dyn.data();
  g_bar.n = block;
  for (unsigned b = 0; b < gridDim.x; ++b) {
    blockIdx.x = b;
    std::vector<std::thread> th;
    for (unsigned t = 0; t < block; ++t)
      th.emplace_back([=]() { threadIdx.x = t; call(k, s, std::index_sequence_for<P...>{}); });
    for (auto& x : th) x.join();
  }
}
extern "C" int host_launch_smem(const char* name, long long n, unsigned block, long long smem, const uint64_t* s,
                                int nargs) {
  try {
#define K(f) if (!std::strcmp(name, #f)) { emulate(n, block, f, s, nargs); return 0; }
  K(sd_fill_rid) K(sd_qocc_insert) K(sd_qocc_keep) K(sd_compact) K(sd_lookup) K(sd_select) K(sd_count)
  K(sd_emit) K(sd_heap)
  if (!std::strcmp(name, "sd_sort_block")) { emulate_block(n, block, smem, sd_sort_block, s, nargs); return 0; }
  } catch (int) { return -2; }
  return -1;
}
extern "C" int host_launch(const char* name, long long n, unsigned block, const uint64_t* s, int nargs) {
  return host_launch_smem(name, n, block, 0, s, nargs);
}
"""


@pytest.fixture(scope="module")
def host_lib(host_cuda):
    return host_cuda(CU, HOST_SHIM, ("-O1", "-pthread"))


def _slot(x):
    if x is None:
        return 0
    if isinstance(x, np.ndarray):
        assert x.flags.c_contiguous
        return x.ctypes.data
    if isinstance(x, np.float32):
        return int(np.array([x], np.float32).view(np.uint32)[0])
    return int(x) & 0xFFFFFFFFFFFFFFFF


def _host_seed(lib, mz, mz_off, seq_off, o, idx, diag=None, dual=None, sort_by_length=True):
    n = len(seq_off) - 1
    keep = []

    def launch(name, n_threads, args, block, smem=0):
        assert n_threads > 0
        slots = np.array([_slot(x) for x in args], np.uint64)
        keep.append(args)
        rc = lib.host_launch_smem(name.encode(), ctypes.c_longlong(n_threads), ctypes.c_uint(block),
                                  ctypes.c_longlong(smem), slots.ctypes.data_as(ctypes.c_void_p),
                                  ctypes.c_int(len(args)))
        assert rc == 0, (name, rc)

    ref_len, diag, dual = sg._host_opts(n, idx.ref.lengths, diag, dual)
    return sg._seed_device(np, launch, mz, mz_off, np.diff(seq_off), o["mid_occ"], o["max_max_occ"], o["occ_dist"],
                           o["q_occ_frac"], o["flag"], idx.b, idx.bkt_off, idx.keys, idx.key_off, idx.pos, ref_len,
                           diag, dual, sort_by_length)


def _synth_case(synth, preset, over):
    """Index, options, skips, minimizers and the CPU twin's seeds of the synthetic batch for a variant."""
    ref, seq, seq_off, origin = synth
    idx = _index(ref, "synth", preset)
    o = _opts(idx, preset, over)
    diag, dual = _skips(over, ref, origin)
    mz, mz_off = sketch_batch_cpu(seq, seq_off, idx.w, idx.k, idx.is_hpc)
    want = sg.seed_batch_cpu(mz, mz_off, seq_off, **o, b=idx.b, bkt_off=idx.bkt_off, keys=idx.keys,
                             key_off=idx.key_off, pos=idx.pos, ref_len=idx.ref.lengths, diag_rid=diag, dual_skip=dual)
    return idx, seq_off, o, diag, dual, mz, mz_off, want


@pytest.mark.parametrize("preset,over", VARIANTS, ids=VIDS)
def test_host_emulated_kernels(synth, host_lib, preset, over):
    idx, seq_off, o, diag, dual, mz, mz_off, want = _synth_case(synth, preset, over)
    for by_len in (True, False):
        _check(_host_seed(host_lib, mz, mz_off, seq_off, o, idx, diag, dual, by_len), want)


def test_host_emulated_lambda(host_lib):
    ref = mmidx.read_mm_ref(LAMBDA)
    seq, seq_off = _pbsim_reads()
    for preset in ("map-ont", "map-pb", "map-hifi", "sr"):
        idx = _index(ref, "lambda", preset)
        o = _opts(idx, preset, {})
        mz, mz_off = sketch_batch_cpu(seq, seq_off, idx.w, idx.k, idx.is_hpc)
        want = sg.seed_batch_cpu(mz, mz_off, seq_off, **o, b=idx.b, bkt_off=idx.bkt_off, keys=idx.keys,
                                 key_off=idx.key_off, pos=idx.pos, ref_len=idx.ref.lengths)
        _check(_host_seed(host_lib, mz, mz_off, seq_off, o, idx), want)


def test_host_emulated_radix_sort_ties(host_lib):
    """sd_sort_block alone on keys with many ties and all byte patterns (sizes around 64, deep recursion)
    == radix_sort_x."""
    rng = np.random.default_rng(5)
    sizes = [0, 1, 2, 63, 64, 65, 66, 200, 1000, 5000, 30000]
    parts = []
    for i, s in enumerate(sizes):
        kind = i % 3
        if kind == 0:
            top = rng.integers(0, 2, s).astype(np.uint64) << np.uint64(63)
            x = rng.integers(0, 1 << 63, s, dtype=np.uint64) | top
        elif kind == 1:
            x = rng.integers(0, 40, s).astype(np.uint64) << np.uint64(rng.integers(0, 56))
        else:
            x = (rng.integers(0, 3, s).astype(np.uint64) << np.uint64(32)) | rng.integers(0, 300, s).astype(np.uint64)
        parts.append(np.stack([x, np.arange(s, dtype=np.uint64)], axis=1))
    a = np.concatenate(parts).astype(np.uint64)
    off = np.zeros(len(sizes) + 1, np.int64)
    off[1:] = np.cumsum(sizes)
    want = a.copy()
    for r in range(len(sizes)):
        seg = want[off[r]:off[r + 1]].copy()
        mmseed.radix_sort_x(seg)
        want[off[r]:off[r + 1]] = seg
    # longest first as the launcher orders them: every read in shared memory, the large ones in global memory, all
    # in global memory
    order = np.argsort(-np.diff(off), kind="stable").astype(np.int64)
    for cap in (1 << 20, 1000, 0):
        got = a.copy()
        slots = np.array([order.ctypes.data, len(sizes), off.ctypes.data, got.ctypes.data, cap], np.uint64)
        assert host_lib.host_launch_smem(b"sd_sort_block", ctypes.c_longlong(len(sizes) * sg.SB_THREADS),
                                         ctypes.c_uint(sg.SB_THREADS), ctypes.c_longlong(16 * min(cap, 30000)),
                                         slots.ctypes.data_as(ctypes.c_void_p), ctypes.c_int(5)) == 0
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(np.sort(a[off[-2]:, 0]), a[off[-2]:, 0])  # the input was not sorted


# ------------------------------------------------------------------------------------------------
# 3. nvcc
# ------------------------------------------------------------------------------------------------

def test_nvcc_compiles(nvcc_spill_free):
    assert nvcc_spill_free(CU, kernels=("sd_sort_block",)) == 11  # 10 kernels + sd_radix_range (noinline)

# ------------------------------------------------------------------------------------------------
# 4. GPU == CPU (skipped without a GPU)
# ------------------------------------------------------------------------------------------------

needs_gpu = pytest.mark.gpu


@needs_gpu
@pytest.mark.parametrize("preset,over", VARIANTS, ids=VIDS)
def test_gpu_equals_cpu(synth, preset, over):
    idx, seq_off, o, diag, dual, mz, mz_off, want = _synth_case(synth, preset, over)
    for by_len in (True, False):
        got = sg.seed_batch_gpu(mz, mz_off, seq_off, **o, b=idx.b, bkt_off=idx.bkt_off, keys=idx.keys,
                                key_off=idx.key_off, pos=idx.pos, ref_len=idx.ref.lengths, diag_rid=diag,
                                dual_skip=dual, sort_by_length=by_len)
        _check(got, want)


@needs_gpu
@pytest.mark.parametrize("preset", ["map-ont", "map-pb", "map-hifi", "sr"])
def test_gpu_device_resident_pipeline(preset):
    """sketch_batch_gpu's device CSR straight into seed_batch_gpu (index on the device) == CPU twins."""
    import cupy as cp

    from g3align.aligner.map.gpu.sketch import sketch_batch_gpu

    idx, seq, seq_off, o = _lambda_pbsim(preset)
    want = _batch_cpu(seq, seq_off, idx, o)
    mz, mz_off = sketch_batch_gpu(seq, seq_off, idx.w, idx.k, idx.is_hpc, to_host=False)
    b, bkt, keys, koff, pos, ref_len = sg.index_to_device(*idx.arrays(), idx.ref.lengths)
    tm = {}
    got = sg.seed_batch_gpu(mz, mz_off, cp.asarray(seq_off), **o, b=b, bkt_off=bkt, keys=keys, key_off=koff, pos=pos,
                            ref_len=ref_len, to_host=False, timings=tm)
    assert isinstance(got.a, cp.ndarray) and tm["kernels_ms"] > 0
    _check(tuple(cp.asnumpy(x) for x in got), want)


@needs_gpu
def test_gpu_sort_block_shared_memory_near_48k():
    """sd_sort_block with a dynamic shared memory request under 48 KiB but above the kernel's default limit (48 KiB
    less its static shared memory): the limit is raised before the launch. A batch whose longest read had ~2,900
    anchors once failed here with CUDA_ERROR_INVALID_VALUE (map -x map-pb, chr20 pbsim reads)."""
    import cupy as cp

    mod = sg._module()
    f = mod.get_function("sd_sort_block")
    f.max_dynamic_shared_size_bytes = (48 << 10) - f.shared_size_bytes  # back to the default
    n = 2900
    assert (48 << 10) - f.shared_size_bytes < 16 * n < 48 << 10
    rng = np.random.default_rng(7)
    a = np.stack([rng.integers(0, 1 << 40, n, dtype=np.uint64), rng.integers(0, 1 << 40, n, dtype=np.uint64)], 1)
    a_d = cp.asarray(a)
    sg._launch(mod, "sd_sort_block", sg.SB_THREADS, (cp.zeros(1, cp.int64), np.int64(1), cp.asarray([0, n], cp.int64),
                                                     a_d, np.int64(n)), sg.SB_THREADS, 16 * n)
    got = cp.asnumpy(a_d)
    assert (np.diff(got[:, 0].astype(np.float64)) >= 0).all()
    assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, a.tolist()))


@needs_gpu
def test_gpu_empty():
    idx = _index(_synth_ref(), "synth", "map-ont")
    o = _opts(idx, "map-ont", {})
    for seq, seq_off in ((np.zeros(0, np.uint8), np.zeros(1, np.int64)),
                         (np.array([4] * 30 + [0, 1, 2], np.uint8), np.array([0, 0, 30, 33, 33], np.int64))):
        mz, mz_off = sketch_batch_cpu(seq, seq_off, idx.w, idx.k, idx.is_hpc)
        args = dict(**o, b=idx.b, bkt_off=idx.bkt_off, keys=idx.keys, key_off=idx.key_off, pos=idx.pos,
                    ref_len=idx.ref.lengths)
        _check(sg.seed_batch_gpu(mz, mz_off, seq_off, **args), sg.seed_batch_cpu(mz, mz_off, seq_off, **args))


@needs_gpu
@ecoli
@pytest.mark.parametrize("preset,reads,n", [("map-ont", ONT, 200), ("map-pb", PB, 300), ("map-hifi", PB, 300),
                                            ("sr", SR1, 1000)])
def test_gpu_ecoli(preset, reads, n):
    idx, seq, seq_off, o = _ecoli(preset, reads, n)
    mz, mz_off = sketch_batch_cpu(seq, seq_off, idx.w, idx.k, idx.is_hpc)
    args = dict(**o, b=idx.b, bkt_off=idx.bkt_off, keys=idx.keys, key_off=idx.key_off, pos=idx.pos,
                ref_len=idx.ref.lengths)
    _check(sg.seed_batch_gpu(mz, mz_off, seq_off, **args), sg.seed_batch_cpu(mz, mz_off, seq_off, **args))
