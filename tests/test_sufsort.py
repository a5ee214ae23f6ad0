"""index/sufsort.py: the bucket suffix sort (GPU kernels/sufsort.cu and its numba twin) gives the rows divsufsort's
suffix array gives, for any chunking, and the FM-index and bwa's files built from them are the same bytes."""
import gzip
import os

import numpy as np
import pytest

from g3align.index import bwafmt
from g3align.index import fasta as F
from g3align.index.fm import _build_fm_rows, build_fm, build_text, rows_from_sa, suffix_array
from g3align.index.sufsort import WIN, pack_text, sort_rows

DATA = os.path.join(os.path.dirname(__file__), "..", "data")
KERNELS = os.path.join(os.path.dirname(__file__), "..", "kernels")


def _texts():
    rng = np.random.default_rng(11)
    out = [rng.integers(0, 4, L).astype(np.uint8) for L in (1, 2, 3, 5, 28, 29, 30, 31, 32, 33, 63, 64, 65, 1000)]
    out.append(np.zeros(3000, np.uint8))                                   # one long run
    out.append(np.tile(np.array([0, 1], np.uint8), 2000))                  # period 2
    unit = rng.integers(0, 4, 37).astype(np.uint8)
    out.append(np.concatenate([rng.integers(0, 4, 500), np.tile(unit, 200), rng.integers(0, 4, 500)]).astype(np.uint8))
    dup = rng.integers(0, 4, 5000).astype(np.uint8)                        # exact copies: shared prefixes > 64 windows
    out.append(np.concatenate([dup, rng.integers(0, 4, 10), dup, dup[:4000]]).astype(np.uint8))
    pal = rng.integers(0, 4, 400).astype(np.uint8)                         # a reverse-complement palindrome
    out.append(np.concatenate([pal, 3 - pal[::-1]]).astype(np.uint8))
    return out


def _same_rows(a, b):
    assert (a.primary, a.row_sa1, a.shift) == (b.primary, b.row_sa1, b.shift)
    assert a.codes.dtype == b.codes.dtype and np.array_equal(a.codes, b.codes)
    assert a.samples.dtype == b.samples.dtype and np.array_equal(a.samples, b.samples)


def _same_fm(a, b):
    for k in a._fields:
        x, y = getattr(a, k), getattr(b, k)
        assert np.array_equal(x, y), k
        assert not isinstance(x, np.ndarray) or x.dtype == y.dtype, k


def test_pack_text():
    rng = np.random.default_rng(2)
    for L in (1, 15, 16, 17, 100):
        pac = rng.integers(0, 4, L).astype(np.uint8)
        T = build_text(pac)
        P = pack_text(pac)
        assert P.shape[0] == T.size // 32 + 2 and P[-1] == 0
        bases = (P[:, None] >> (62 - 2 * np.arange(32, dtype=np.uint64))) & 3
        flat = bases.reshape(-1).astype(np.uint8)
        assert np.array_equal(flat[:T.size], T) and not flat[T.size:].any()


@pytest.mark.parametrize("cap", [None, 7, 300])
def test_cpu_twin_equals_divsufsort(cap):
    """The twin's rows equal those of divsufsort's suffix array, in one chunk and in many (cap suffixes a chunk)."""
    for pac in _texts():
        T = build_text(pac)
        SA = suffix_array(T)
        for shift in (0, 3, 5):
            _same_rows(sort_rows(pac, shift, device="cpu", cap=cap), rows_from_sa(T, SA, shift))


def test_long_repeats_need_many_windows():
    """Copies longer than 64 windows of 29 bases (the widest round) still sort right."""
    rng = np.random.default_rng(4)
    dup = rng.integers(0, 4, 64 * WIN * 3).astype(np.uint8)
    pac = np.concatenate([dup, [1], dup, [2], dup]).astype(np.uint8)
    T = build_text(pac)
    _same_rows(sort_rows(pac, 2, device="cpu", cap=2000), rows_from_sa(T, suffix_array(T), 2))


def _n_runs(tmp_path):
    rng = np.random.default_rng(8)
    acgt = np.frombuffer(b"ACGT", np.uint8)
    seq = b"".join([acgt[rng.integers(0, 4, 3000)].tobytes(), b"N" * 1_100_000, acgt[rng.integers(0, 4, 500)].tobytes(),
                    b"N" * 600_000, b"ACGT" * 50])
    fa = tmp_path / "n.fa"
    fa.write_bytes(b">n\n" + seq + b"\n")
    return F.read_fasta(str(fa)).pac


def test_runs_of_n(tmp_path):
    """Runs of N become lrand48() & 3 draws, which repeat every 2**19: runs longer than that are copies of one another
    (repeats of ~10**6 bases, the doubling rounds' case), in several chunks and pieces."""
    pac = _n_runs(tmp_path)
    T = build_text(pac)
    stats = []
    _same_rows(sort_rows(pac, 3, device="cpu", cap=700_000, stats=stats), rows_from_sa(T, suffix_array(T), 3))
    rounds = stats[1][1]
    assert stats[0][1] > 1 and len(rounds) >= 15 and rounds[0][0] > 10**6   # several chunks; the runs' suffixes


@pytest.mark.parametrize("intv", [1, 8, 32, 64])
def test_fm_from_rows_equals_build_fm(tmp_path, intv):
    """The FM-index built from the bucket sort's rows (the GPU path's assembly, here with the twin) equals build_fm's,
    and so do bwa's files written from the rows."""
    lam = tmp_path / "lambda.fa"
    with gzip.open(os.path.join(DATA, "lambda.fa.gz"), "rb") as fi:
        lam.write_bytes(fi.read())
    ref = F.read_fasta(str(lam))
    got = {}
    fm1 = build_fm(ref.pac, sa_intv=intv)
    bwafmt.write_bwa_index(str(tmp_path / "a"), ref)
    fm2 = _build_fm_rows(ref.pac, intv.bit_length() - 1, None, None,
                         lambda rows: got.setdefault("rows", rows), "cpu", cap=20000)
    _same_fm(fm1, fm2)
    bwafmt.write_bwa_rows(str(tmp_path / "b"), ref, got["rows"])
    for x in bwafmt.BWA_FILES:
        assert (tmp_path / f"a.{x}").read_bytes() == (tmp_path / f"b.{x}").read_bytes(), x
    for wide in (False, True, 8):
        _same_fm(build_fm(ref.pac[:5000], sa_intv=intv, wide=wide),
                 _build_fm_rows(ref.pac[:5000], intv.bit_length() - 1, None, wide, None, "cpu", cap=999))


def test_bwt_words_layout():
    """bwa's .bwt body: count entries every 128 bases and 16 bases a word, for lengths around the block edges."""
    rng = np.random.default_rng(9)
    for L in (1, 8, 63, 64, 65, 127, 128, 129, 500):
        pac = rng.integers(0, 4, L).astype(np.uint8)
        T = build_text(pac)
        SA = suffix_array(T).astype(np.int64)
        n = T.size
        rows = rows_from_sa(T, SA, 5)
        l2, words = bwafmt.bwt_words(rows.codes, rows.primary)
        B = np.delete(np.concatenate([[T[n - 1]], T[SA - 1]]), rows.primary)   # the BWT without its '$'
        unpacked = np.empty(n + 1, np.uint8)
        bwafmt._unpack_bwt(words, np.int64(n), np.int64(rows.primary), unpacked)
        assert np.array_equal(np.delete(unpacked, rows.primary), B)
        assert np.array_equal(l2[1:], np.cumsum(np.bincount(B, minlength=4)))
        assert np.array_equal(words[-8:].view("<u8"), np.bincount(B, minlength=4))


def test_kernels_compile(nvcc_spill_free):
    nvcc_spill_free(os.path.join(KERNELS, "sufsort.cu"), kernels=("sx_hist", "sx_gather", "sx_keys", "sx_codes"))


@pytest.mark.gpu
@pytest.mark.parametrize("cap", [None, 300])
def test_gpu_equals_cpu_twin(cap, tmp_path):
    for pac in _texts():
        for shift in (0, 3):
            _same_rows(sort_rows(pac, shift, device="gpu", cap=cap), sort_rows(pac, shift, device="cpu", cap=cap))
    pac = _n_runs(tmp_path)
    for host in (False, True):           # the doubling's groups on the GPU, or on the host (a GPU short of memory)
        _same_rows(sort_rows(pac, 3, device="gpu", cap=cap and 700_000, tail_on_host=host),
                   sort_rows(pac, 3, device="cpu"))


@pytest.mark.gpu
def test_gpu_build_fm_equals_cpu(tmp_path):
    """build_fm on the GPU equals the CPU's (divsufsort) on lambda and on 2 Mbp of random text with repeats."""
    lam = tmp_path / "lambda.fa"
    with gzip.open(os.path.join(DATA, "lambda.fa.gz"), "rb") as fi:
        lam.write_bytes(fi.read())
    rng = np.random.default_rng(3)
    part = rng.integers(0, 4, 300_000).astype(np.uint8)
    big = np.concatenate([rng.integers(0, 4, 1_000_000), part, np.tile(part[:50], 400), part]).astype(np.uint8)
    for pac in (F.read_fasta(str(lam)).pac, big):
        for intv in (8, 32):
            _same_fm(build_fm(pac, sa_intv=intv), build_fm(pac, sa_intv=intv, device="gpu"))


def test_memory_check(tmp_path, monkeypatch):
    """A reference too large for this machine's memory is a one-line error before the build, naming what it needs."""
    import subprocess
    import sys

    from g3align.index import build
    assert build.memory_needed(3_100_000_000, "cpu") > 60e9 > build.memory_needed(3_100_000_000, "gpu") > 20e9
    monkeypatch.setattr(build, "_mem_total", lambda: 10**5)
    with pytest.raises(ValueError, match=r"indexing 48502 bp on the CPU needs at least 0\.6 MB of memory, this machine "
                                         r"has 0\.1 MB; on a GPU \(--device gpu\) it needs 0\.4 MB"):
        build.build_index(os.path.join(DATA, "lambda.fa.gz"), str(tmp_path / "x"))
    assert not (tmp_path / "x.g3i").exists()
    # through the CLI (a machine with 100 kB of memory stands in for a genome too large): one line, exit 1
    code = ("import sys; from g3align.index import build; build._mem_total = lambda: 10**5; "
            "from g3align.aligner.cli import main; "
            "sys.argv = ['g3align', 'index', '-p', sys.argv[1], sys.argv[2]]; main()")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "y"), os.path.join(DATA, "lambda.fa.gz")],
                       capture_output=True, text=True)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert last.startswith("[E::g3align] indexing 48502 bp on the CPU needs at least"), r.stderr
