"""Traceback stage of `g3align mem` (aligner/mem/gpu/cigar.py, kernels/memcigar.cu).

1. The twin (cigar_jobs_cpu) == samout.region_cigar region by region, on the regions the staged pipeline
   makes (SE, PE and noisy reads of tests/test_memstage.py's data, three scoring variants) plus synthetic
   regions that force the gapped DP, band doubling, rejected regions (strand-crossing, out of range) and
   slot overflow; the SAM stage uses the results (a corrupted NM shows up in the SAM) and the staged
   SAM == the per-read SAM (test_memstage covers every mode; here PE with the stage's counters).
2. kernels/memcigar.cu as host C++ (CUDA built-ins shimmed, one emulated thread at a time) == the twin,
   with the default slots and with tiny ones (overflow everywhere), scratch offsets as the GPU wrapper
   plans them and garbage in the scratch (needs g++).
3. nvcc -arch=sm_90 -cubin compiles the kernel without spills (needs nvcc, no GPU).
4. GPU: cigar_jobs_gpu == cigar_jobs_cpu and MemAligner(device="gpu") SAM == per-read SAM (needs CuPy and a
   GPU; skipped otherwise).
"""
import ctypes
from pathlib import Path

import numpy as np
import pytest
from conftest import cupy_or_none
from test_memstage import VARIANTS, _opt, _per_read_sam, _run, _Sink, make_data

from g3align.aligner.mem.extend import QB, QE, RB, RE, TRUESC
from g3align.aligner.mem.gpu import cigar as mc
from g3align.aligner.mem.pair import regions_range
from g3align.aligner.mem.pipeline import MemAligner
from g3align.aligner.mem.samout import region_cigar
from g3align.kernels import loader

CU = Path(loader.__file__).resolve().parent / "memcigar.cu"


@pytest.fixture(scope="module")
def data():
    return make_data()

_JOBS = {}


def _regions(data, variant, key):
    """(aligner, batch, seq_off, R_cat, reg_off) of batch `key` through the staged CPU stages."""
    ref, batch = data["ref"], data[key]
    al = MemAligner(ref, data["fm"], _opt(variant), staged=True)
    seq_off = al._read_arrays(batch)[4]
    pre = al._pre(batch, seq_off)
    R_cat, cnt = regions_range(al.fm, al.offsets, al.l_pac, al.pac, batch.seq, seq_off, 0, batch.n, al.params,
                               al.mat, pre)
    reg_off = np.zeros(batch.n + 1, np.int64)
    np.cumsum(cnt, out=reg_off[1:])
    return al, batch, seq_off, R_cat, reg_off


def _synthetic(keys, j_read, seq_off, l_pac, rng):
    """Extra jobs on the same reads: the true score lowered (a wider band, band doubling), the reference
    interval stretched or shrunk (unequal lengths: the DP), moved across the strand boundary or out of
    range (gen_cigar2 rejects them), a zero band, a one-base query."""
    k = keys.copy()
    m = k.shape[0]
    out = [k.copy()]
    a = k.copy()
    a[:, 4] -= rng.integers(5, 60, m)
    out.append(a)
    b = k.copy()
    b[:, 3] += rng.integers(-6, 7, m)
    b[:, 4] -= rng.integers(0, 30, m)
    out.append(b)
    c = k.copy()
    c[:, 5] = 0
    c[:, 4] -= 40
    out.append(c)
    d = k.copy()[: max(1, m // 8)]
    span = d[:, 3] - d[:, 2]
    d[:, 2] = l_pac - span // 2
    d[:, 3] = d[:, 2] + span
    out.append(d)
    e = k.copy()[: max(1, m // 8)]
    e[:, 2] = -3
    e[:, 3] = e[:, 2] + (e[:, 1] - e[:, 0])
    out.append(e)
    f = k.copy()[: max(1, m // 8)]
    f[:, 1] = f[:, 0] + 1
    f[:, 3] = f[:, 2] + 1
    out.append(f)
    reads = [j_read] * 4 + [j_read[: max(1, m // 8)]] * 3
    K = np.ascontiguousarray(np.concatenate(out))
    K[:, 3] = np.maximum(K[:, 3], K[:, 2])
    return K, np.ascontiguousarray(np.concatenate(reads))


def _jobs(data, variant):
    """(aligner, batch seq, seq_off, keys, j_read) of the SE, PE and noisy batches' regions and synthetic
    regions, as one job list over the concatenated reads."""
    if variant not in _JOBS:
        rng = np.random.default_rng(5)
        seqs, offs, keys, reads = [], [], [], []
        base, nread = 0, 0
        for key in ("se", "pe", "noisy"):
            al, batch, seq_off, R_cat, reg_off = _regions(data, variant, key)
            k, jr = mc.cigar_keys(R_cat, reg_off)
            k, jr = _synthetic(k, jr, seq_off, al.l_pac, rng)
            seqs.append(batch.seq)
            offs.append(seq_off[:-1] + base)
            keys.append(k)
            reads.append(jr + nread)
            base += int(seq_off[-1])
            nread += batch.n
        seq_off = np.concatenate(offs + [np.array([base], np.int64)])
        _JOBS[variant] = (al, np.concatenate(seqs), seq_off, np.concatenate(keys), np.concatenate(reads))
    return _JOBS[variant]


# ------------------------------------------------------------------------------------------------
# 1. the twin and its use
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", VARIANTS)
def test_twin_equals_region_cigar(data, variant):
    al, seq, seq_off, keys, j_read = _jobs(data, variant)
    keys_, res, coff, cig, moff, md = mc.cigar_jobs_cpu(al.params, al.mat, al.l_pac, al.pac, seq, seq_off, keys,
                                                         j_read, parts=3)
    assert keys_ is keys and res.shape == (keys.shape[0], 4)
    plan = mc.cigar_plan(al.params, al.mat, keys)
    n_gapped = n_rejected = n_skipped = 0
    for j in range(keys.shape[0]):
        q = seq[seq_off[j_read[j]]:seq_off[j_read[j] + 1]]
        sc, c, nm, m = region_cigar(al.params, al.mat, al.l_pac, al.pac, q, *keys[j])
        if res[j, 2] < 0:
            n_skipped += 1
            assert tuple(res[j]) == (0, 0, -1, 0) and coff[j + 1] == coff[j] and moff[j + 1] == moff[j]
            assert len(c) > mc.CAP_CIG or len(m) > mc.CAP_MD or plan[j] < 0
            continue
        assert (res[j, 0], res[j, 1], res[j, 2], res[j, 3]) == (sc, nm, len(c), len(m))
        np.testing.assert_array_equal(cig[coff[j]:coff[j + 1]], c)
        np.testing.assert_array_equal(md[moff[j]:moff[j + 1]], m)
        n_gapped += len(c) > 1
        n_rejected += nm < 0
    assert n_gapped > 50 and n_rejected > 10  # the data reaches the DP and gen_cigar2's rejections


def test_plan_marks_every_dp_job(data):
    """A job planned without scratch never reaches the DP: the host kernel (below) would leave it to the
    SAM stage; here the plan's 0 rows are exactly the equal-length, zero-band regions."""
    al, seq, seq_off, keys, j_read = _jobs(data, "default")
    plan = mc.cigar_plan(al.params, al.mat, keys)
    assert (plan > 0).sum() > 100 and (plan == 0).sum() > 100 and (plan >= -1).all()
    lq, tl = keys[:, 1] - keys[:, 0], keys[:, 3] - keys[:, 2]
    assert ((lq == tl) | (lq <= 0) | (tl <= 0))[plan == 0].all()


def test_sam_stage_uses_the_results(data):
    """The staged PE SAM equals the per-read SAM; with every precomputed NM shifted by 1000, the NM tags
    change (the SAM stage read them rather than aligning again)."""
    want = _per_read_sam(data, "default", "pe")
    al = MemAligner(data["ref"], data["fm"], _opt("default"), staged=True)
    assert _run(al, data, "pe") == want
    assert al.stage_times["traceback_jobs"] > 0
    orig = al.region_cigars

    def shifted(*a):
        cg = orig(*a)
        res = cg[1].copy()
        res[:, 1] = np.where(res[:, 2] >= 0, res[:, 1] + 1000, res[:, 1])
        return (cg[0], res) + tuple(cg[2:])
    al.region_cigars = shifted
    got = _run(al, data, "pe")
    assert got != want and b"NM:i:100" in got


# ------------------------------------------------------------------------------------------------
# 2. the kernel as host C++
# ------------------------------------------------------------------------------------------------

HOST_SHIM = r"""
#include <cstdint>
struct dim3h { unsigned x, y, z; };
static dim3h threadIdx, blockIdx, blockDim, gridDim;
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __constant__ static
#include KERNEL_FILE
extern "C" void host_cigar(long long n_thr, unsigned block, const uint8_t* seq, const i64* seq_off,
    const uint8_t* pac, i64 l_pac, const int* P, const int8_t* mat, i64 n_job, const i64* J, uint8_t* ws, int* res,
    uint32_t* cig, uint8_t* md) {
  blockDim.x = block; gridDim.x = (unsigned)(n_thr / block);
  for (long long t = 0; t < n_thr; ++t) {
    blockIdx.x = (unsigned)(t / block); threadIdx.x = (unsigned)(t % block);
    mem_cigar_kernel(seq, seq_off, pac, l_pac, P, (const i8*)mat, n_job, J, ws, res, cig, md);
  }
}
extern "C" void host_compact(long long n_thr, unsigned block, i64 n_job, const int* res, const uint32_t* cig_g,
    const uint8_t* md_g, const i64* coff, const i64* moff, uint32_t* cig, uint8_t* md) {
  blockDim.x = block; gridDim.x = (unsigned)(n_thr / block);
  for (long long t = 0; t < n_thr; ++t) {
    blockIdx.x = (unsigned)(t / block); threadIdx.x = (unsigned)(t % block);
    cigar_compact(n_job, res, cig_g, md_g, coff, moff, cig, md);
  }
}
"""


@pytest.fixture(scope="module")
def host_libs(host_cuda):
    return {"default": host_cuda(CU, HOST_SHIM), "tiny": host_cuda(CU, HOST_SHIM, ("-O2", "-DCAP_CIG=2", "-DCAP_MD=6"))}


def _p(a):
    assert a.flags.c_contiguous
    return ctypes.c_void_p(a.ctypes.data)


def _host_run(lib, al, seq, seq_off, keys, j_read, cap_c, cap_m, rng, ws_bytes=256 << 20):
    """The kernels over all jobs with cigar_jobs_gpu's job table and launches (a small grid: the grid-stride
    loop runs), then the compaction kernel, as the wrapper does."""
    n = keys.shape[0]
    plan = mc.cigar_plan(al.params, al.mat, keys)
    J, bounds, extent = mc.job_table(plan, keys, j_read, ws_bytes)
    chunks = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    assert len(chunks) == 1 or ws_bytes < 1 << 20
    ws = rng.integers(0, 256, extent + 8).astype(np.uint8)  # garbage: the kernel initialises its rows
    res = np.full((n, 4), 77, np.int32)
    cig = rng.integers(0, 1 << 20, (n, cap_c)).astype(np.uint32)
    md = rng.integers(0, 256, (n, cap_m)).astype(np.uint8)
    P = mc.cigar_params(al.params)
    m8 = np.ascontiguousarray(al.mat.astype(np.int8))
    for a, b in chunks:
        lib.host_cigar(ctypes.c_longlong(256), ctypes.c_uint(64), _p(seq), _p(seq_off), _p(al.pac),
                       ctypes.c_longlong(al.l_pac), _p(P), _p(m8), ctypes.c_longlong(b - a), _p(J[a:b]), _p(ws),
                       _p(res[a:b]), _p(cig[a:b]), _p(md[a:b]))
    coff = np.zeros(n + 1, np.int64)
    np.cumsum(np.maximum(res[:, 2], 0), out=coff[1:])
    moff = np.zeros(n + 1, np.int64)
    np.cumsum(np.where(res[:, 2] >= 0, res[:, 3], 0), out=moff[1:])
    c = np.full(int(coff[-1]), 5, np.uint32)
    m = np.full(int(moff[-1]), 5, np.uint8)
    lib.host_compact(ctypes.c_longlong(128), ctypes.c_uint(64), ctypes.c_longlong(n), _p(res), _p(cig), _p(md),
                     _p(coff), _p(moff), _p(c), _p(m))
    return res, coff, c, moff, m


def _twin(al, seq, seq_off, keys, j_read, cap_c, cap_m):
    n = keys.shape[0]
    plan = mc.cigar_plan(al.params, al.mat, keys)
    res = np.zeros((n, 4), np.int32)
    cig = np.zeros((n, cap_c), np.uint32)
    md = np.zeros((n, cap_m), np.uint8)
    mc.cigar_jobs_range(al.params, al.mat, al.l_pac, al.pac, seq, seq_off, keys, j_read, plan, 0, n, res, cig, md)
    return (res,) + mc._compact(res, cig, md)


@pytest.mark.parametrize("caps", ["default", "tiny", "chunks"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_host_emulated_kernel(data, host_libs, variant, caps):
    al, seq, seq_off, keys, j_read = _jobs(data, variant)
    cap_c, cap_m = (2, 6) if caps == "tiny" else (mc.CAP_CIG, mc.CAP_MD)
    rng = np.random.default_rng(3)
    got = _host_run(host_libs["tiny" if caps == "tiny" else "default"], al, seq, seq_off, keys, j_read, cap_c, cap_m,
                    rng, 1 << 16 if caps == "chunks" else 256 << 20)
    want = _twin(al, seq, seq_off, keys, j_read, cap_c, cap_m)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    if caps != "tiny":
        np.testing.assert_array_equal(want[0], mc.cigar_jobs_cpu(al.params, al.mat, al.l_pac, al.pac, seq, seq_off,
                                                                 keys, j_read)[1])
    else:
        assert (want[0][:, 2] < 0).sum() > keys.shape[0] // 4 and (want[0][:, 2] >= 0).sum() > 100


# ------------------------------------------------------------------------------------------------
# 3. nvcc
# ------------------------------------------------------------------------------------------------

def test_nvcc_compiles(nvcc_spill_free):
    nvcc_spill_free(CU, ("mem_cigar_kernel",))


# ------------------------------------------------------------------------------------------------
# 4. GPU
# ------------------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_equals_twin(data, variant):
    cp = cupy_or_none()
    al, seq, seq_off, keys, j_read = _jobs(data, variant)
    want = mc.cigar_jobs_cpu(al.params, al.mat, al.l_pac, al.pac, seq, seq_off, keys, j_read)
    for ws_bytes in (256 << 20, 1 << 16):  # one chunk; many chunks
        got = mc.cigar_jobs_gpu(al.params, al.mat, cp.asarray(al.pac), al.l_pac, cp.asarray(seq), cp.asarray(seq_off),
                                keys, j_read, ws_bytes=ws_bytes)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@pytest.mark.gpu
def test_gpu_sam_equals_per_read(data):
    want = _per_read_sam(data, "default", "pe")
    al = MemAligner(data["ref"], data["fm"], _opt("default"), device="gpu")
    assert _run(al, data, "pe") == want
    assert al.stage_times["traceback_jobs"] > 0


def test_fields_are_the_key():
    assert mc.CG_FIELDS[:5] == (QB, QE, RB, RE, TRUESC)


def test_run_mem_se_staged(data):
    """run_mem_se on the staged path (regions + traceback of batch k+1 beside the SAM of batch k) over three
    batches == the per-read SAM of the whole batch."""
    from g3align.aligner.mem import pipeline

    want = _per_read_sam(data, "default", "se")
    b = data["se"]
    cuts = [0, b.n // 3, 2 * b.n // 3, b.n]
    sink = _Sink()
    al = MemAligner(data["ref"], data["fm"], _opt("default", 2), staged=True)
    pipeline.run_mem_se(al, iter([b.slice(x, y) for x, y in zip(cuts[:-1], cuts[1:])]), sink, verbose=0)
    assert b"".join(bytes(x) for x in sink.parts) == want
    assert al.stage_times["traceback_jobs"] > 0


@pytest.mark.parametrize("shape,dtype,chunk", [((0,), np.uint8, 1 << 16), ((1000,), np.uint8, 1 << 16),
                                                ((300_001, 3), np.uint32, 1 << 16), ((5_000_000,), np.int64, 1 << 20),
                                                ((2_000_003,), np.uint8, 16 << 20)])
@pytest.mark.gpu
def test_gpu_upload_large(shape, dtype, chunk):
    """memstage.upload_large (the index at start-up): the same bytes on the device, for sizes below, at and
    across the pinned pieces."""
    cp = cupy_or_none()
    from g3align.aligner.mem.gpu.stage import upload_large

    a = np.random.default_rng(1).integers(0, 1 << 31, shape).astype(dtype)
    d = upload_large(a, chunk)
    assert d.shape == a.shape and d.dtype == a.dtype
    np.testing.assert_array_equal(cp.asnumpy(d), a)
