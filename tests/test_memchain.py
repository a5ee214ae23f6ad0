"""GPU chaining (kernels/memchain.cu, memstage.chain_gpu) against its CPU twin memstage.chain_range.

1. chain_kernel + chain_compact_kernel compiled as host C++ (CUDA built-ins shimmed, one emulated thread
   at a time) give chain_range + assemble's `pre` fields and job list exactly (seeds from the CPU
   seeding), on test_memstage's random references with repeats, tandem repeats and N runs, SE/PE/noisy
   reads of 0 bp to 3 kb (the long ones need mem_flt_chained_seeds: the kernel leaves them to the CPU
   twin, chain_reads patches them in), default and non-default chaining options (-W, -N, -X, -D, -G, -k),
   and a many-seed stress set (tandem repeats: hundreds of chains per read with equal B-tree keys, B-tree
   splits, introsort's quicksort and combsort branches). Needs g++.
2. nvcc -arch=sm_90 -cubin compiles both kernels without spills (needs nvcc, no GPU).
3. chain_gpu on the GPU == the same (needs CuPy and a GPU; skipped otherwise).
"""
import ctypes
from pathlib import Path

import numpy as np
import pytest
from test_memstage import _gpu, _seeds, data  # noqa: F401  (module fixture; pytest puts tests/ on sys.path)

from g3align.aligner.io.reads import ReadBatch
from g3align.aligner.mem.gpu import stage as ms
from g3align.aligner.mem.options import MemOpt, score_matrix
from g3align.index.fasta import pack_fasta_bytes
from g3align.index.fm import build_fm
from g3align.kernels import loader

CU = Path(loader.__file__).resolve().parent / "memchain.cu"

SHIM = r"""
#include <cstdint>
#include <cmath>
struct dim3h { unsigned x, y, z; };
static dim3h threadIdx, blockIdx, blockDim, gridDim;
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#include KERNEL_FILE
extern "C" void host_chain(i64 n, const i64* seq_off, const i64* s_off, const i64* s_rbeg, const int* s_qbeg,
    const int* s_len, const int* s_rid, const i64* ctg, i64 n_ctg, i64 l_pac, const int* P, float mask_level,
    float drop_ratio, const i64* scr_off, int* scr, i64* sl_rid, i64* sl_r0, i64* sl_r1, i64* sl_n, i64* sl_seed,
    i64* n_ch, i64* n_cs, int* cpu, const signed char* alt, i64 n_alt) {
  blockDim.x = 1; gridDim.x = (unsigned)n; threadIdx.x = 0;
  for (i64 r = 0; r < n; ++r) {
    blockIdx.x = (unsigned)r;
    chain_kernel(seq_off, s_off, s_rbeg, s_qbeg, s_len, s_rid, ctg, n_ctg, l_pac, P, mask_level, drop_ratio, n,
                 scr_off, scr, sl_rid, sl_r0, sl_r1, sl_n, sl_seed, n_ch, n_cs, cpu, nullptr, nullptr, alt, n_alt);
  }
}
extern "C" void host_compact(i64 n, const i64* s_off, const i64* s_rbeg, const int* s_qbeg, const int* s_len,
    const i64* c_off, const i64* g_off, i64 read_base, const i64* sl_rid, const i64* sl_r0, const i64* sl_r1,
    const i64* sl_n, const i64* sl_seed, i64* ch_rid, i64* cs_off, i64* ch_seed, i64* j_read, i64* j_sq,
    i64* j_sr, i64* j_sl, i64* j_r0, i64* j_r1) {
  blockDim.x = 1; gridDim.x = (unsigned)n; threadIdx.x = 0;
  for (i64 r = 0; r < n; ++r) {
    blockIdx.x = (unsigned)r;
    chain_compact_kernel(s_off, s_rbeg, s_qbeg, s_len, c_off, g_off, n, read_base, sl_rid, sl_r0, sl_r1, sl_n,
                         sl_seed, ch_rid, cs_off, ch_seed, j_read, j_sq, j_sr, j_sl, j_r0, j_r1);
  }
}
"""


@pytest.fixture(scope="module")
def lib(host_cuda):
    return host_cuda(CU, SHIM)

def _p(a):
    assert a.flags.c_contiguous
    return ctypes.c_void_p(a.ctypes.data)


def _opts():
    out = {"default": MemOpt()}
    o = MemOpt()
    o.min_chain_weight, o.max_chain_extend, o.mask_level, o.drop_ratio = 25, 2, 0.3, 0.7
    out["W25-N2-X.3-D.7"] = o
    o = MemOpt()
    o.min_seed_len, o.max_chain_gap, o.w = 15, 200, 10
    out["k15-G200-w10"] = o
    o = MemOpt()
    o.a, o.b, o.o_del, o.o_ins, o.e_del, o.e_ins, o.max_occ = 2, 5, 7, 5, 2, 3, 50
    out["scoring-c50"] = o
    out["alt-ctg1"] = MemOpt()  # contig 1 listed in PREFIX.alt (see _np)
    return out


OPTS = _opts()


def _np(opt, ref):
    """opt's MemParams on ref; with OPTS["alt-ctg1"], contig 1 (which shares repeats with the others) is ALT."""
    alt = None
    if opt is OPTS["alt-ctg1"]:
        alt = np.zeros(len(ref.names), np.uint8)
        alt[1] = 1
    return opt.to_numba(alt)


def _twin(ref, batch, opt, seeds, seq_off):
    """chain_range + assemble (what the CPU-twin staged path computes)."""
    p, mat = _np(opt, ref), score_matrix(opt.a, opt.b)
    s_rbeg, s_qbeg, s_len, s_rid, s_off = seeds
    parts = [ms.chain_range(np.ascontiguousarray(ref.offsets, np.int64), int(ref.l_pac), ref.pac, batch.seq,
                            seq_off, 0, batch.n, p, mat, s_off, s_rbeg, s_qbeg, s_len, s_rid)]
    pre, jobs = ms.assemble(batch.n, s_off, s_rbeg, s_qbeg, s_len, parts, np.zeros(batch.n, np.int64))
    return (pre[4], pre[5], pre[6], pre[7], pre[8]), jobs


def _host(lib, ref, batch, opt, seeds, seq_off, read_base=0):
    """chain_gpu's steps with the host-compiled kernels."""
    p, mat = _np(opt, ref), score_matrix(opt.a, opt.b)
    s_rbeg, s_qbeg, s_len, s_rid, s_off = seeds
    n = batch.n
    tot = int(s_off[-1])
    scr_off = np.zeros(n + 1, np.int64)
    np.cumsum(ms.chain_scratch_words(np.diff(s_off)), out=scr_off[1:])
    scr = np.full(int(scr_off[-1]), -7, np.int32)  # garbage: the kernel must not read what it did not write
    sl = [np.full(tot, -9, np.int64) for _ in range(5)]
    n_ch, n_cs = np.full(n, -5, np.int64), np.full(n, -5, np.int64)
    cpu = np.full(n, 9, np.int32)
    ctg = np.ascontiguousarray(ref.offsets, np.int64)
    i64 = ctypes.c_int64
    lib.host_chain(i64(n), _p(seq_off), _p(s_off), _p(s_rbeg), _p(s_qbeg), _p(s_len), _p(s_rid), _p(ctg),
                   i64(len(ctg) - 1), i64(int(ref.l_pac)), _p(ms.chain_params(p)), ctypes.c_float(p.mask_level),
                   ctypes.c_float(p.drop_ratio), _p(scr_off), _p(scr), *map(_p, sl), _p(n_ch), _p(n_cs), _p(cpu),
                   _p(p.alt if p.alt.shape[0] else np.zeros(1, np.int8)), i64(p.alt.shape[0]))
    s_score = s_len.copy()
    idx = np.nonzero(cpu)[0].astype(np.int64)
    ms.chain_reads(idx, ctg, np.int64(ref.l_pac), ref.pac, batch.seq, seq_off, p, mat, s_off, s_rbeg, s_qbeg,
                   s_len, s_rid, s_score, *sl, n_ch, n_cs)
    c_off, g_off = np.zeros(n + 1, np.int64), np.zeros(n + 1, np.int64)
    np.cumsum(n_ch, out=c_off[1:])
    np.cumsum(n_cs, out=g_off[1:])
    nc, ng = int(c_off[-1]), int(g_off[-1])
    ch_rid, cs_off, ch_seed = np.full(nc, -3, np.int64), np.full(nc + 1, -3, np.int64), np.full(ng, -3, np.int64)
    jobs = tuple(np.full(ng, -3, np.int64) for _ in range(6))
    lib.host_compact(i64(n), _p(s_off), _p(s_rbeg), _p(s_qbeg), _p(s_len), _p(c_off), _p(g_off), i64(read_base),
                     *map(_p, sl), _p(ch_rid), _p(cs_off), _p(ch_seed), *map(_p, jobs))
    cs_off[nc] = ng
    return (s_score, c_off, ch_rid, cs_off, ch_seed), jobs, cpu


def _check(got, want):
    (gh, gj), (wh, wj) = got, want
    for name, a, b in zip(("s_score", "c_off", "ch_rid", "cs_off", "ch_seed"), gh, wh):
        np.testing.assert_array_equal(a, b, err_msg=name)
        assert a.dtype == b.dtype or name != "s_score", name
    for name, a, b in zip(("j_read", "j_sq", "j_sr", "j_sl", "j_r0", "j_r1"), gj, wj):
        np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("key", ["main", "noisy", "short"])
@pytest.mark.parametrize("name", list(OPTS))
def test_host_chain_kernel(data, lib, key, name):  # noqa: F811
    ref, batch, opt = data["ref"], data[key], OPTS[name]
    p = _np(opt, ref)
    seq_off, _, seeds = _seeds(data, batch, p)
    want = _twin(ref, batch, opt, seeds, seq_off)
    h, j, cpu = _host(lib, ref, batch, opt, seeds, seq_off)
    _check((h, j), want)
    L = np.diff(seq_off)
    on_alt = np.array([bool((seeds[3][a:b] == 1).any()) for a, b in zip(seeds[4][:-1], seeds[4][1:])])
    if name == "alt-ctg1":  # reads with a seed on the ALT contig are chained by the CPU twin
        assert (cpu[on_alt] == 1).all() and (on_alt.any() or key == "short")
        if key == "main":  # and the ALT rule of mem_chain_flt keeps chains that the default drops
            plain = _twin(ref, batch, OPTS["default"], seeds, seq_off)
            assert not np.array_equal(want[0][1], plain[0][1])
    elif key == "main":  # both kinds of reads were in it
        assert cpu.any() and (cpu[L >= 1000] == 1).all() and (cpu[(L >= p.min_seed_len) & (L <= 301)] == 0).all()
        assert len(want[0][2]) > 300


def _repeat_data(rng):
    """A reference of tandem repeats and their copies, and reads in them: hundreds of seeds per read."""
    units = [rng.integers(0, 4, k).astype(np.uint8) for k in (7, 23, 60)]
    parts = []
    for i in range(40):
        u = units[i % 3]
        parts.append(np.tile(u, 2000 // len(u) + 1)[:int(rng.integers(300, 2000))])
        parts.append(rng.integers(0, 4, int(rng.integers(50, 400))).astype(np.uint8))
    codes = np.concatenate(parts)
    mut = rng.random(codes.shape[0]) < 0.01
    codes[mut] = rng.integers(0, 4, int(mut.sum()))
    fa = b">rep\n" + np.frombuffer(b"ACGT", np.uint8)[codes].tobytes() + b"\n"
    ref = pack_fasta_bytes(fa)
    seqs = []
    for i in range(300):
        L = int(rng.choice([60, 100, 150, 250, 400]))
        pos = int(rng.integers(0, len(codes) - L))
        s = codes[pos:pos + L].copy()
        if i % 2:
            s = np.where(s < 4, 3 - s, 4).astype(np.uint8)[::-1].copy()
        m = rng.random(L) < 0.02
        s[m] = rng.integers(0, 4, int(m.sum()))
        seqs.append(s)
    off = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum([len(s) for s in seqs], out=off[1:])
    seq = np.concatenate(seqs)
    batch = ReadBatch([f"t{i}" for i in range(len(seqs))], [""] * len(seqs), seq, off,
                      np.full(seq.shape[0], 30, np.uint8), True)
    return {"ref": ref, "fm": build_fm(ref.pac, sa_intv=8), "rep": batch}


@pytest.fixture(scope="module")
def rep():
    return _repeat_data(np.random.default_rng(5))


@pytest.mark.parametrize("name", ["default", "k15-G200-w10"])
def test_host_chain_kernel_many_seeds(rep, lib, name):
    ref, batch, opt = rep["ref"], rep["rep"], OPTS[name]
    p = opt.to_numba()
    seq_off, _, seeds = _seeds(rep, batch, p)
    per_read = np.diff(seeds[4])
    assert per_read.max() >= 400  # many seeds (max_occ-sampled intervals) per read
    want = _twin(ref, batch, opt, seeds, seq_off)
    n_chains = np.diff(want[0][1])
    assert n_chains.max() >= 20  # many kept chains per read: B-tree splits, introsort beyond insertion sort
    h, j, _ = _host(lib, ref, batch, opt, seeds, seq_off, read_base=0)
    _check((h, j), want)
    # read_base shifts j_read only
    h2, j2, _ = _host(lib, ref, batch, opt, seeds, seq_off, read_base=1000)
    np.testing.assert_array_equal(j2[0], want[1][0] + 1000)


def test_nvcc_compiles(nvcc_spill_free):
    nvcc_spill_free(CU, ("chain_kernel", "chain_compact_kernel"))

needs_gpu = pytest.mark.gpu


def _chain_gpu(d, batch, opt, read_base=0, host=False):
    cp = _gpu()
    ref = d["ref"]
    p, mat = _np(opt, ref), score_matrix(opt.a, opt.b)
    seq_off, _, seeds = _seeds(d, batch, p)
    sd = tuple(cp.asarray(a) for a in seeds)
    hs = (seeds[4], seeds[0], seeds[1], seeds[2]) if host else None  # s_off, s_rbeg, s_qbeg, s_len
    h, jobs = ms.chain_gpu(p, mat, np.ascontiguousarray(ref.offsets, np.int64), int(ref.l_pac), ref.pac, batch.seq,
                           seq_off, cp.asarray(seq_off), sd, read_base=read_base, host_seeds=hs)
    return (h, tuple(cp.asnumpy(a) for a in jobs)), _twin(ref, batch, opt, seeds, seq_off)


@needs_gpu
@pytest.mark.parametrize("key", ["main", "noisy", "short"])
@pytest.mark.parametrize("name", list(OPTS))
def test_gpu_chain(data, key, name):  # noqa: F811
    got, want = _chain_gpu(data, data[key], OPTS[name])
    _check(got, want)


@needs_gpu
@pytest.mark.parametrize("name", ["default", "k15-G200-w10"])
def test_gpu_chain_many_seeds(rep, name):
    got, want = _chain_gpu(rep, rep["rep"], OPTS[name])
    _check(got, want)


@needs_gpu
@pytest.mark.parametrize("name", ["default", "k15-G200-w10"])
def test_gpu_chain_flt_warp(rep, data, name):  # noqa: F811
    """Reads with more than FLT_WARP_MIN (32) weighty chains are filtered by chain_flt_warp_kernel, the others in
    chain_kernel's thread: the result equals the twin."""
    for d, key in ((rep, "rep"), (data, "main"), (data, "noisy")):
        got, want = _chain_gpu(d, d[key], OPTS[name])
        _check(got, want)


@needs_gpu
@pytest.mark.parametrize("key", ["main", "noisy"])
def test_gpu_chain_cpu_reads_patched(data, key):  # noqa: F811
    """Reads the kernel leaves to the CPU twin (long reads: mem_flt_chained_seeds) are chained there, their slots
    patched into the device arrays, with or without the caller's host copies of the seeds; the result is the
    twin's."""
    for host in (False, True):
        got, want = _chain_gpu(data, data[key], OPTS["default"], host=host)
        _check(got, want)


def _flt_model(cb, ce, wk, mask, drop, max_gap, min2, warp):
    """mem_chain_flt as flt_serial (warp=0) or as chain_flt_warp_kernel's chunks of `warp` kept chains (ballot:
    the first dropping chain of the chunk; only chains up to it record i) -> kept, chains, kfs."""
    nk = len(cb)
    kept, chains, kfs = [0] * nk, [0], [-1]
    kept[0] = 3
    f32 = np.float32

    def test(i, k):
        j_cb, j_ce = cb[chains[k]], ce[chains[k]]
        b_max, e_min = max(j_cb, cb[i]), min(j_ce, ce[i])
        if e_min <= b_max:
            return 0, 0
        min_l = min(ce[i] - cb[i], j_ce - j_cb)
        if not (f32(e_min - b_max) >= f32(min_l) * f32(mask) and min_l < max_gap):
            return 0, 0
        wj = wk[chains[k]]
        return 1, int(f32(wk[i]) < f32(wj) * f32(drop) and wj - wk[i] >= min2)
    for i in range(1, nk):
        large, brk = 0, -1
        if not warp:
            for k in range(len(chains)):
                ov, br = test(i, k)
                if ov:
                    large = 1
                    kfs[k] = i if kfs[k] < 0 else kfs[k]
                if br:
                    brk = k
                    break
        else:
            for k0 in range(0, len(chains), warp):
                got = [test(i, k) for k in range(k0, min(k0 + warp, len(chains)))]
                bad = [k0 + t for t, (_, br) in enumerate(got) if br]
                last = bad[0] if bad else 1 << 30
                for t, (ov, _) in enumerate(got):
                    if ov and k0 + t <= last:
                        large = 1
                        kfs[k0 + t] = i if kfs[k0 + t] < 0 else kfs[k0 + t]
                if bad:
                    brk = last
                    break
        if brk < 0:
            chains.append(i)
            kfs.append(-1)
            kept[i] = 2 if large else 3
    return kept, chains, kfs


def test_flt_warp_model_equals_serial():
    """chain_flt_warp_kernel's chunked comparison (any chunk width) keeps, shadows and drops exactly the chains
    flt_serial does, on chain sets with many equal and overlapping query spans (reads in repeats)."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        nk = int(rng.integers(2, 120))
        cb = rng.integers(0, 40, nk)
        if rng.random() < 0.5:  # repeats: the same span again and again
            cb = rng.choice(cb[:3], nk)
        ce = cb + rng.integers(5, 60, nk)
        wk = np.sort(rng.integers(10, 90, nk))[::-1]
        args = (cb.tolist(), ce.tolist(), wk.tolist(), 0.5, 0.5, 10_000, 38)
        want = _flt_model(*args, warp=0)
        for warp in (1, 3, 32):
            assert _flt_model(*args, warp=warp) == want


def test_slot_positions():
    np.testing.assert_array_equal(ms._slot_positions([10, 3, 50], [2, 0, 3]), [10, 11, 50, 51, 52])
    assert ms._slot_positions([], []).shape == (0,)


def test_loader_inlines_headers():
    """NVRTC gets one string: kernels/loader.py inlines `#include "x.cuh"` (here bns.cuh's pos2rid, shared with
    smem.cu); nvcc and the host builds above resolve the same line next to the file."""
    for name in ("memchain", "smem"):
        src = loader.kernel_source(name)
        assert '#include "' not in src and src.count("i64 pos2rid(") == 1
