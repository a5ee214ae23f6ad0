"""Batch minimizer sketch: aligner/map/gpu/sketch.py and kernels/mmsketch.cu.

1. The CPU batch twin equals per-read ``collect_minimizers`` (one segment), slot overflow included.
2. nvcc -arch=sm_90 -cubin compiles the kernel for the presets' k/w/hpc (needs nvcc, no GPU).
3. GPU == CPU, byte for byte, on random reads and on data/lambda_pbsim.fq.gz (needs CuPy and a GPU;
   skipped otherwise).
"""
import gzip
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from g3align.aligner.map.gpu import sketch as mg
from g3align.aligner.map.seed import collect_minimizers
from g3align.index.mmidx import parse_mm_seqs

ROOT = Path(__file__).resolve().parent.parent
CU = ROOT / "kernels" / "mmsketch.cu"
PBSIM = ROOT / "data" / "lambda_pbsim.fq.gz"

# (w, k, is_hpc): map-ont, map-pb, map-hifi, sr, plus even k (symmetric k-mers) and w = 1
PARAMS = [(10, 15, False), (10, 19, True), (19, 19, False), (11, 21, False), (5, 16, False), (3, 4, True),
          (1, 12, False)]


def _reads(seed, n=160, max_len=20000):
    """Random reads: edge lengths, N runs, homopolymers (long ones > 255 for the HPC span cap),
    tandem repeats (equal hashes in a window), palindromes (ACGT...)."""
    rng = np.random.default_rng(seed)
    edge = [0, 1, 2, 3, 4, 9, 10, 14, 15, 16, 18, 19, 20, 24, 25, 28, 29, 30, 37, 38, 39, 40, 41]
    seqs = []
    for i in range(n):
        short, long_ = int(rng.integers(0, 300)), int(rng.integers(0, max_len + 1))
        L = edge[i] if i < len(edge) else (short if rng.random() < 0.5 else long_)
        s = rng.integers(0, 4, L).astype(np.uint8)
        for _ in range(int(rng.integers(0, 1 + L // 500))):
            kind = int(rng.integers(0, 5))
            p = int(rng.integers(0, L)) if L else 0
            ln = int(rng.integers(1, 400))
            if kind == 0:
                s[p:p + ln] = 4  # N run
            elif kind == 1:
                s[p:p + ln] = rng.integers(0, 4)  # homopolymer
            elif kind == 2:
                per = int(rng.integers(1, 7))
                unit = rng.integers(0, 4, per).astype(np.uint8)
                seg = np.resize(unit, len(s[p:p + ln]))
                s[p:p + ln] = seg  # tandem repeat
            elif kind == 3:
                seg = np.resize(np.array([0, 1, 2, 3], np.uint8), len(s[p:p + ln]))
                s[p:p + ln] = seg  # ACGT: every even k-mer inside is its own reverse complement
            else:
                s[p:p + ln] = np.where(rng.random(len(s[p:p + ln])) < 0.5, 4, s[p:p + ln])  # scattered N
        seqs.append(s)
    off = np.zeros(n + 1, np.int64)
    off[1:] = np.cumsum([len(s) for s in seqs])
    return (np.concatenate(seqs) if n else np.empty(0, np.uint8)).astype(np.uint8), off


def _per_read(seq, seq_off, w, k, hpc):
    parts = []
    off = [0]
    for r in range(len(seq_off) - 1):
        s = seq[seq_off[r]:seq_off[r + 1]]
        m = collect_minimizers(s, np.array([0, len(s)], np.int64), w, k, hpc)
        parts.append(m)
        off.append(off[-1] + m.shape[0])
    mz = np.concatenate(parts) if parts else np.empty((0, 2), np.uint64)
    return mz.astype(np.uint64).reshape(-1, 2), np.asarray(off, np.int64)


@pytest.fixture(scope="module")
def reads():
    return _reads(11)


@pytest.fixture(scope="module")
def pbsim():
    with gzip.open(PBSIM, "rb") as fh:
        _, _, off, codes = parse_mm_seqs(fh.read(), str(PBSIM))
    return codes, off


def _check(got, want):
    for x, y in zip(got, want):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("w,k,hpc", PARAMS)
@pytest.mark.parametrize("cap", [None, 3])
def test_cpu_batch_equals_per_read(reads, w, k, hpc, cap):
    seq, seq_off = reads
    _check(mg.sketch_batch_cpu(seq, seq_off, w, k, hpc, cap=cap), _per_read(seq, seq_off, w, k, hpc))


def test_cpu_batch_pbsim(pbsim):
    seq, seq_off = pbsim
    for w, k, hpc in PARAMS[:4]:
        _check(mg.sketch_batch_cpu(seq, seq_off, w, k, hpc), _per_read(seq, seq_off, w, k, hpc))


def test_cpu_empty_batch():
    mz, off = mg.sketch_batch_cpu(np.empty(0, np.uint8), np.zeros(1, np.int64), 10, 15, False)
    assert mz.shape == (0, 2) and mz.dtype == np.uint64 and off.tolist() == [0]


def test_bad_params():
    with pytest.raises(ValueError):
        mg.sketch_batch_cpu(np.zeros(4, np.uint8), np.array([0, 4]), 10, 29, False)


def test_nvcc_compiles(tmp_path):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    for w, k, hpc in PARAMS[:4]:
        r = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", f"-DMM_K={k}", f"-DMM_W={w}",
                            f"-DMM_HPC={int(hpc)}", str(CU), "-o", str(tmp_path / "mmsketch.cubin")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "spill stores" in r.stderr


# ------------------------------------------------------------------------------------------------
# GPU == CPU (skipped without a GPU)
# ------------------------------------------------------------------------------------------------

needs_gpu = pytest.mark.gpu


@needs_gpu
@pytest.mark.parametrize("w,k,hpc", PARAMS)
@pytest.mark.parametrize("cap,sort", [(None, True), (3, True), (None, False)])
def test_gpu_equals_cpu(reads, w, k, hpc, cap, sort):
    seq, seq_off = reads
    want = mg.sketch_batch_cpu(seq, seq_off, w, k, hpc)
    _check(mg.sketch_batch_gpu(seq, seq_off, w, k, hpc, cap=cap, sort_by_length=sort), want)


@needs_gpu
def test_gpu_more_random_reads():
    for seed in (1, 2, 3):
        seq, seq_off = _reads(100 + seed, n=400)
        for w, k, hpc in PARAMS[:4]:
            _check(mg.sketch_batch_gpu(seq, seq_off, w, k, hpc), mg.sketch_batch_cpu(seq, seq_off, w, k, hpc))


@needs_gpu
def test_gpu_pbsim(pbsim):
    seq, seq_off = pbsim
    for w, k, hpc in PARAMS[:4]:
        want = mg.sketch_batch_cpu(seq, seq_off, w, k, hpc)
        assert want[0].shape[0] > 0
        _check(mg.sketch_batch_gpu(seq, seq_off, w, k, hpc), want)


@needs_gpu
def test_gpu_device_arrays_and_empty():
    import cupy as cp

    seq, seq_off = _reads(5, n=50)
    want = mg.sketch_batch_cpu(seq, seq_off, 10, 15, False)
    # unaligned device slice (copied into an aligned, padded buffer)
    big = cp.zeros(seq.size + 3, cp.uint8)
    big[3:] = cp.asarray(seq)
    mz, off = mg.sketch_batch_gpu(big[3:], cp.asarray(seq_off), 10, 15, False, to_host=False)
    _check((cp.asnumpy(mz), cp.asnumpy(off)), want)
    mz, off = mg.sketch_batch_gpu(np.empty(0, np.uint8), np.zeros(1, np.int64), 10, 15, False)
    assert mz.shape == (0, 2) and off.tolist() == [0]
    mz, off = mg.sketch_batch_gpu(np.zeros(5, np.uint8), np.array([0, 0, 5, 5], np.int64), 10, 15, False)
    _check((mz, off), mg.sketch_batch_cpu(np.zeros(5, np.uint8), np.array([0, 0, 5, 5], np.int64), 10, 15, False))
