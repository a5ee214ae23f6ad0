"""Staged `g3align mem` (aligner/mem/gpu/stage.py, kernels/memext.cu) against the per-read path.

1. MemAligner(staged=True) (CPU twins of every stage) == MemAligner(staged=False), full SAM bytes, SE and
   PE, -t 1 and -t 2, default and non-default scoring, on random references with repeats and N runs and
   reads of edge lengths (0, 1, 18..33, 100-301 and 1-3 kb, so flt_chained_seeds is active) with
   substitutions, indels, N bases, chimeras and random reads; plus long noisy reads (5-15 % errors), on
   which flt_chained_seeds empties chains (test_chain_range_empty_chains: chain_range must not compute
   their window, which would read out of bounds), and bwa's golden lambda output.
2. kernels/memext.cu compiled as host C++ (CUDA built-ins shimmed, one emulated thread at a time) on the
   jobs the staged pipeline produces == memstage.ext_jobs_cpu byte for byte (launch geometry as
   ext_jobs_gpu sizes it, a small grid so the grid-stride loop runs, a permuted job order, garbage in the
   scratch), and rep_len_kernel == memstage.rep_len_csr (needs g++).
3. nvcc -arch=sm_90 -cubin compiles the file's kernels without spills (needs nvcc, no GPU).
4. GPU == CPU (needs CuPy and a GPU; skipped otherwise): ext_jobs_gpu, rep_len_gpu and
   MemAligner(device="gpu") SAM == MemAligner(staged=False) SAM.
"""
import ctypes
import gzip
import shutil
import subprocess
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import cupy_or_none

from g3align.aligner.gpu import pinned
from g3align.aligner.io.reads import ReadBatch, read_batches, read_pair_batches
from g3align.aligner.mem.bns import get_seq
from g3align.aligner.mem.chain import chain_seeds, rep_len
from g3align.aligner.mem.extend import X_QB, X_QE, X_RB, X_RE, X_W, XF, chain_window, flt_chained_seeds
from g3align.aligner.mem.gpu import smem as sg
from g3align.aligner.mem.gpu import stage as ms
from g3align.aligner.mem.ksw import ksw_align2
from g3align.aligner.mem.options import MemOpt, score_matrix
from g3align.aligner.mem.pair import _rc as mate_rc
from g3align.aligner.mem.pair import pestat, regions_range, rescue_jobs_range
from g3align.aligner.mem.pipeline import MemAligner, user_pestat
from g3align.index.fasta import pack_fasta_bytes, read_fasta
from g3align.index.fm import build_fm
from g3align.kernels import loader

CU = Path(loader.__file__).resolve().parent / "memext.cu"
DATA = Path(__file__).resolve().parent.parent / "data"


# ------------------------------------------------------------------------------------------------
# data: a random reference (repeats, tandem repeat, homopolymer, N runs, IUPAC) and reads
# ------------------------------------------------------------------------------------------------

def _ref_codes(rng, lens=(7000, 9000, 6000)):
    """Contig codes 0..4 (4 = N) with interspersed exact and diverged repeats."""
    units = [rng.integers(0, 4, ln) for ln in (37, 60, 151, 300)]
    ctgs = []
    for n in lens:
        s = rng.integers(0, 4, n).astype(np.uint8)
        for unit in units:
            for _ in range(int(rng.integers(1, 4))):
                ln = len(unit)
                p = int(rng.integers(0, n - ln))
                c = unit.copy()
                if rng.random() < 0.4:
                    c[rng.integers(0, ln, 3)] = rng.integers(0, 4, 3)
                s[p:p + ln] = c
        p = int(rng.integers(0, n - 500))  # tandem repeat
        unit = rng.integers(0, 4, int(rng.integers(20, 45)))
        s[p:p + 400] = np.tile(unit, 400 // len(unit) + 1)[:400]
        p = int(rng.integers(0, n - 100))
        s[p:p + 50] = 0  # homopolymer run
        p = int(rng.integers(0, n - 200))
        s[p:p + int(rng.integers(1, 120))] = 4  # N run
        ctgs.append(s)
    return ctgs


def _fasta(ctgs, rng):
    out = []
    for i, s in enumerate(ctgs):
        txt = np.frombuffer(b"ACGTN", np.uint8)[s].copy()
        txt[int(rng.integers(0, len(s)))] = ord("R")  # an IUPAC code (-> N, then a random base in pac)
        out.append(f">ctg{i} some description\n" + txt.tobytes().decode() + "\n")
    return "".join(out).encode()


def _rc(s):
    return np.where(s < 4, 3 - s, 4).astype(np.uint8)[::-1]


def _mutate(rng, q, sub=0.01, indel=0.004):
    """Substitutions, short (and some longer) insertions and deletions, N bases."""
    out = []
    i = 0
    L = len(q)
    while i < L:
        r = rng.random()
        if r < sub:
            out.append(int(rng.integers(0, 4)))
            i += 1
        elif r < sub + indel / 2:  # deletion
            i += int(rng.integers(1, 4)) if rng.random() < 0.8 else int(rng.integers(5, 25))
        elif r < sub + indel:  # insertion
            k = int(rng.integers(1, 4)) if rng.random() < 0.8 else int(rng.integers(5, 25))
            out.extend(int(x) for x in rng.integers(0, 4, k))
        else:
            out.append(int(q[i]))
            i += 1
    out = np.array(out[:L], np.uint8) if out else np.zeros(0, np.uint8)
    if len(out) and rng.random() < 0.15:
        out[rng.integers(0, len(out))] = 4
    return out


SE_LENS = [0, 1] + list(range(18, 34)) + [100, 150, 151, 250, 301, 1000, 1500, 2200, 3000]


def _se_reads(rng, T, n):
    seqs = []
    for i in range(n):
        L = SE_LENS[i % len(SE_LENS)] if i < 2 * len(SE_LENS) else int(rng.choice([100, 150, 151, 250, 301]))
        p = int(rng.integers(0, len(T) - L - 30))
        kind = rng.random()
        if kind < 0.08 and L > 40:  # chimera
            p2 = int(rng.integers(0, len(T) - L))
            q = np.concatenate([T[p:p + L // 2], T[p2:p2 + L - L // 2]])
        elif kind < 0.12:  # random read
            q = rng.integers(0, 4, L).astype(np.uint8)
        else:
            q = T[p:p + L + 20]
        q = _mutate(rng, q)[:L] if rng.random() < 0.9 else q[:L].copy()
        seqs.append(q)
    return seqs


def _pe_reads(rng, T, n_pairs):
    seqs = []
    for j in range(n_pairs):
        L1, L2 = (int(rng.choice([100, 150, 150, 151, 250])) for _ in range(2))
        if j % 17 == 3:
            L1 = int(rng.choice([0, 1, 20, 33]))
        if j % 23 == 5:
            L2 = 1200
        frag = max(L1, L2) + int(np.clip(rng.normal(350, 35), 0, 700))
        p = int(rng.integers(0, len(T) - frag - 30))
        f = T[p:p + frag + 30]
        r1 = _mutate(rng, f)[:L1]
        r2 = _mutate(rng, _rc(f[:frag]))[:L2]
        if rng.random() < 0.05:
            r2 = rng.integers(0, 4, L2).astype(np.uint8)
        if rng.random() < 0.5:
            r1, r2 = r2, r1
        seqs += [r1, r2]
    return seqs


def _batch(rng, seqs, names, first_id=0):
    off = np.zeros(len(seqs) + 1, np.int64)
    np.cumsum([len(s) for s in seqs], out=off[1:])
    seq = np.concatenate(seqs).astype(np.uint8) if seqs else np.zeros(0, np.uint8)
    qual = rng.choice(np.frombuffer(b"#5?I", np.uint8), int(off[-1])).astype(np.uint8)
    return ReadBatch(list(names), [""] * len(seqs), seq, off, qual, True, first_id)


def _noisy_reads(rng, T, n):
    """Long reads with ONT-like error rates: flt_chained_seeds empties some chains (every seed of the
    chain scores below min_HSP), which bwa's mem_chain2aln skips (c->n == 0)."""
    seqs = []
    for i in range(n):
        if i % 4 == 3:
            L, sub, indel = 150, 0.01, 0.004
        else:
            L, sub, indel = int(rng.integers(1000, 3000)), (0.05, 0.1, 0.15)[i % 3], 0.02
        p = int(rng.integers(0, len(T) - L - 80))
        seqs.append(_mutate(rng, T[p:p + L + 60], sub, indel)[:L])
    return seqs


@pytest.fixture(scope="module")
def data():
    return make_data()


def make_data():
    """The module's data (also used by tests/test_memcigar.py)."""
    rng = np.random.default_rng(11)
    ctgs = _ref_codes(rng)
    ref = pack_fasta_bytes(_fasta(ctgs, rng))
    fm = build_fm(ref.pac, sa_intv=8)
    codes = np.concatenate(ctgs)
    T = np.concatenate([codes, _rc(codes)])  # reads keep the reference's N as N
    se = _se_reads(rng, T, 260)
    pe = _pe_reads(rng, T, 130)
    short = [s[:18] for s in se[:8]] + [np.zeros(0, np.uint8), se[1][:1]]  # no read reaches a seed
    noisy = _noisy_reads(rng, T, 16)
    d = {"ref": ref, "fm": fm,
         "se": _batch(rng, se, [f"r{i}" for i in range(len(se))]),
         "pe": _batch(rng, pe, [f"p{i // 2}" for i in range(len(pe))]),
         "short": _batch(rng, short, [f"s{i}" for i in range(len(short))]),
         "noisy": _batch(rng, noisy, [f"n{i // 2}" for i in range(len(noisy))])}
    d["main"] = _concat(d["se"], d["pe"])
    return d


def _concat(a, b):
    """SE reads then PE reads as one batch (for the job-level tests)."""
    return ReadBatch(a.names + b.names, a.comments + b.comments, np.concatenate([a.seq, b.seq]),
                     np.concatenate([a.seq_off, a.seq_off[-1] + b.seq_off[1:]]), np.concatenate([a.qual, b.qual]),
                     True)


def _opt(variant, n_threads=1):
    o = MemOpt()
    o.n_threads = n_threads
    if variant == "scoring":
        o.a, o.b, o.o_del, o.o_ins, o.e_del, o.e_ins = 2, 5, 7, 7, 2, 2
        o.w, o.zdrop, o.pen_clip5, o.pen_clip3, o.T = 20, 40, 0, 0, 30
    elif variant == "narrow":  # band doubling, no z-drop, clipping never pays, -k 15
        o.w, o.zdrop, o.pen_clip5, o.pen_clip3, o.min_seed_len = 5, 0, 1000, 1000, 15
    return o


VARIANTS = ["default", "scoring", "narrow"]
MODE_BATCH = {"se": "se", "pe": "pe", "pe_given_insert": "pe", "short_se": "short", "short_pe": "short",
              "noisy_se": "noisy", "noisy_pe": "noisy"}

_SAM_CACHE = {}


def _per_read_sam(data, variant, mode):
    """The per-read path's SAM (the reference output), once per (variant, mode)."""
    key = (variant, mode)
    if key not in _SAM_CACHE:
        al = MemAligner(data["ref"], data["fm"], _opt(variant), staged=False)
        _SAM_CACHE[key] = _run(al, data, mode)
    return _SAM_CACHE[key]


def _run(al, data, mode):
    b = data[MODE_BATCH[mode]]
    if mode == "pe_given_insert":
        return al.align_batch_pe(b, pes=user_pestat("350,35"))
    return al.align_batch_se(b) if mode.endswith("se") else al.align_batch_pe(b)


# ------------------------------------------------------------------------------------------------
# chains that flt_chained_seeds empties (see test_chain_range_empty_chains)
# ------------------------------------------------------------------------------------------------

def _seeds(data, batch, p):
    fm, offsets = data["fm"], np.ascontiguousarray(data["ref"].offsets, np.int64)
    seq_off = np.ascontiguousarray(batch.seq_off - batch.seq_off[0], np.int64)
    mb, me, mk, mss, ioff = sg.collect_intv_batch_cpu(fm, batch.seq, seq_off, p)
    seeds = sg.seed_pos_batch_cpu(fm, offsets, mb, me, mk, mss, ioff, p.max_occ)
    return seq_off, (mb, me, mss, ioff), tuple(np.ascontiguousarray(a) for a in seeds)


_EMPTY = {}


def _n_empty_chains(data, variant, key):
    """Chains of batch `key` left without seeds by flt_chained_seeds (chain.chain_seeds and
    extend.flt_chained_seeds per read, as chain_range calls them)."""
    if (variant, key) not in _EMPTY:
        ref, batch, opt = data["ref"], data[key], _opt(variant)
        p, mat = opt.to_numba(), score_matrix(opt.a, opt.b)
        seq_off, _, (s_rbeg, s_qbeg, s_len, s_rid, s_off) = _seeds(data, batch, p)
        offsets = np.ascontiguousarray(ref.offsets, np.int64)
        n = 0
        for i in range(batch.n):
            L = int(seq_off[i + 1] - seq_off[i])
            if L < p.min_seed_len:
                continue
            a, b = s_off[i], s_off[i + 1]
            sc, c_off, c_seed, _ = chain_seeds(s_rbeg[a:b], s_qbeg[a:b], s_len[a:b], s_rid[a:b], int(ref.l_pac), p)
            c_off, c_seed = flt_chained_seeds(p, mat, offsets, int(ref.l_pac), ref.pac, L,
                                              batch.seq[seq_off[i]:seq_off[i + 1]], s_rbeg[a:b], s_qbeg[a:b],
                                              s_len[a:b], sc, c_off, c_seed)
            n += int((np.diff(c_off) == 0).sum())
        _EMPTY[(variant, key)] = n
    return _EMPTY[(variant, key)]


def _chain_range_py():
    """memstage.chain_range's Python body calling chain_window's Python body (numpy checks bounds
    there; the other callees stay compiled)."""
    f = ms.chain_range.py_func
    g = dict(f.__globals__)
    g["chain_window"] = chain_window.py_func
    return types.FunctionType(f.__code__, g, f.__name__, f.__defaults__, f.__closure__)


def _chain_range_args(data, batch, opt, i0=0, i1=None):
    p, mat = opt.to_numba(), score_matrix(opt.a, opt.b)
    seq_off, _, (s_rbeg, s_qbeg, s_len, s_rid, s_off) = _seeds(data, batch, p)
    ref = data["ref"]
    return (np.ascontiguousarray(ref.offsets, np.int64), int(ref.l_pac), ref.pac, batch.seq, seq_off, i0,
            batch.n if i1 is None else i1, p, mat, s_off, s_rbeg, s_qbeg, s_len, s_rid)


def test_chain_range_empty_chains(data):
    """bwa's mem_chain2aln skips a chain that mem_flt_chained_seeds emptied (c->n == 0), and so does
    extend.chain2aln (nseed == 0); memstage.chain_range must not compute such a chain's window."""
    assert _n_empty_chains(data, "default", "noisy") > 0  # the data holds the case, with default options
    args = _chain_range_args(data, data["noisy"], _opt("default"))
    want = _chain_range_py()(*args)
    got = ms.chain_range(*args)
    s_score, n_ch, ch_rid, ch_r0, ch_r1, ch_n, ch_seed = got
    assert (ch_n == 0).any()
    for k in (0, 1, 2, 5, 6):
        np.testing.assert_array_equal(got[k], want[k])
    full = ch_n > 0  # the window of an empty chain is never used
    np.testing.assert_array_equal(ch_r0[full], want[3][full])
    np.testing.assert_array_equal(ch_r1[full], want[4][full])


# ------------------------------------------------------------------------------------------------
# 1. staged CPU path == per-read path
# ------------------------------------------------------------------------------------------------

def _check_sam(got, want):
    if got != want:
        a, b = got.split(b"\n"), want.split(b"\n")
        bad = [(x, y) for x, y in zip(a, b) if x != y]
        raise AssertionError(f"{len(bad)} SAM lines differ (of {len(b)}, {len(a)} staged); first:\n{bad[:1]}")


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("mode", ["se", "pe"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_staged_equals_per_read(data, variant, mode, n_threads):
    want = _per_read_sam(data, variant, mode)
    al = MemAligner(data["ref"], data["fm"], _opt(variant, n_threads), staged=True)
    got = _run(al, data, mode)
    assert len(want) > 10000 and want.count(b"\n") >= data[MODE_BATCH[mode]].n
    _check_sam(got, want)
    st = al.stage_times
    for k in ("seeding", "chaining", "extension"):
        assert k in st and st[k] > 0.0  # each stage ran and was timed
    assert st["jobs"] > 0


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("mode", ["noisy_se", "noisy_pe"])
def test_staged_equals_per_read_noisy(data, mode, n_threads):
    """Long reads at 5-15 % substitutions and 2 % indels, default options (chains emptied by
    flt_chained_seeds)."""
    want = _per_read_sam(data, "default", mode)
    al = MemAligner(data["ref"], data["fm"], _opt("default", n_threads), staged=True)
    _check_sam(_run(al, data, mode), want)
    assert al.stage_times["jobs"] > 0


@pytest.mark.parametrize("mode", ["pe_given_insert", "short_se", "short_pe"])
def test_staged_edge_batches(data, mode):
    """-I given insert size; a batch where no read reaches min_seed_len (zero extension jobs)."""
    want = _run(MemAligner(data["ref"], data["fm"], _opt("default"), staged=False), data, mode)
    al = MemAligner(data["ref"], data["fm"], _opt("default", 2), staged=True)
    assert _run(al, data, mode) == want
    if mode.startswith("short"):
        assert al.stage_times["jobs"] == 0


def test_stage_times_accumulate(data):
    ref, fm, se_b = data["ref"], data["fm"], data["se"]
    al = MemAligner(ref, fm, _opt("default"), staged=True)
    a = al.align_batch_se(se_b.slice(0, 40))
    j1 = al.stage_times["jobs"]
    b = al.align_batch_se(se_b.slice(40, 80))
    assert al.stage_times["jobs"] > j1 > 0
    # batch boundaries never change the bytes (read ids come from first_id)
    assert a + b == MemAligner(ref, fm, _opt("default"), staged=False).align_batch_se(se_b.slice(0, 80))
    assert al.align_batch_se(se_b.slice(0, 0)) == b""


def _records(sam):
    return [ln for ln in sam.split(b"\n") if ln and not ln.startswith(b"@")]


@pytest.mark.parametrize("mode", ["se", "pe"])
def test_staged_lambda_golden(mode):
    """The staged path on the demo reads == bwa mem 0.7.17's own output (data/golden), one batch as the
    CLI makes it."""
    ref = read_fasta(DATA / "lambda.fa.gz")
    fm = build_fm(ref.pac)
    al = MemAligner(ref, fm, _opt("default", 2), staged=True)
    r1, r2 = (str(DATA / f"lambda_R{i}.fq.gz") for i in (1, 2))
    if mode == "se":
        out = b"".join(al.align_batch_se(b) for b in read_batches(r1))
    else:
        out = b"".join(al.align_batch_pe(b) for b in read_pair_batches(r1, r2))
    gold = gzip.decompress((DATA / "golden" / f"lambda_{mode}.bwa.sam.gz").read_bytes())
    assert _records(out) == _records(gold)
    assert al.stage_times["jobs"] > 0


# ------------------------------------------------------------------------------------------------
# the staged batch state and its jobs (as MemAligner._pre builds them on the CPU)
# ------------------------------------------------------------------------------------------------

def _stage(data, batch, opt, n_ranges=1):
    ref = data["ref"]
    p = opt.to_numba()
    mat = score_matrix(opt.a, opt.b)
    offsets = np.ascontiguousarray(ref.offsets, np.int64)
    seq_off, (mb, me, mss, ioff), (s_rbeg, s_qbeg, s_len, s_rid, s_off) = _seeds(data, batch, p)
    fr = ms.rep_len_csr(mb, me, mss, ioff, p.max_occ)
    n = batch.n
    cuts = np.unique(np.linspace(0, n, n_ranges + 1).astype(np.int64))
    parts = [ms.chain_range(offsets, int(ref.l_pac), ref.pac, batch.seq, seq_off, int(a), int(b), p, mat, s_off,
                            s_rbeg, s_qbeg, s_len, s_rid) for a, b in zip(cuts[:-1], cuts[1:])]
    pre, jobs = ms.assemble(n, s_off, s_rbeg, s_qbeg, s_len, parts, fr)
    return p, mat, batch.seq, seq_off, (mb, me, mss, ioff), pre, jobs


_JOBS = {}


def _jobs(data, variant, key="main"):
    """The staged state of a batch ("main": the SE reads then the PE reads), its jobs and the CPU twin's X:
    (p, mat, seq, seq_off, intervals, pre, jobs, X)."""
    if (variant, key) not in _JOBS:
        p, mat, seq, seq_off, iv, pre, jobs = _stage(data, data[key], _opt(variant))
        X = ms.ext_jobs_cpu(p, mat, int(data["ref"].l_pac), data["ref"].pac, seq, seq_off, jobs)
        _JOBS[(variant, key)] = (p, mat, seq, seq_off, iv, pre, jobs, X)
    return _JOBS[(variant, key)]


JOB_SETS = [("default", "main"), ("scoring", "main"), ("narrow", "main"), ("default", "noisy")]
JOB_IDS = [f"{v}-{k}" for v, k in JOB_SETS]


@pytest.mark.parametrize("variant,key", JOB_SETS, ids=JOB_IDS)
def test_jobs_cover_the_cases(data, variant, key):
    """The job list is consistent with `pre`, holds every kind of extension, and the twin's X does not
    depend on how the jobs are split or on the chain ranges."""
    ref = data["ref"]
    p, mat, seq, seq_off, iv, pre, jobs, X = _jobs(data, variant, key)
    j_read, j_sq, j_sr, j_sl, j_r0, j_r1 = jobs
    n_job = len(j_read)
    cs_off = pre[7]
    assert n_job > 500 and cs_off[-1] == n_job and len(pre[8]) == n_job
    L = np.diff(seq_off)[j_read]
    assert (j_sq == 0).any() and (j_sq > 0).any()  # no left extension / left extension
    assert (j_sq + j_sl == L).any() and (j_sq + j_sl < L).any()  # no right extension / right extension
    assert (L >= 1000).any()  # long reads (flt_chained_seeds) made it
    assert ((j_r0 <= j_sr) & (j_sr + j_sl <= j_r1)).all()
    assert (X[:, X_QB] <= j_sq).all() and (X[:, X_QE] >= j_sq + j_sl).all()
    assert ((X[:, X_RB] >= j_r0) & (X[:, X_RE] <= j_r1)).all()
    if variant == "narrow":
        assert (X[:, X_W] == 2 * p.w).any()  # band doubling
    if variant == "scoring":
        assert (X[:, X_QB] == 0).any() and (X[:, X_QE] == L).any()
    assert (X[:, 7] == 0).all()
    with ThreadPoolExecutor(3) as pool:
        X2 = ms.ext_jobs_cpu(p, mat, int(ref.l_pac), ref.pac, seq, seq_off, jobs, pool.map, 7)
    np.testing.assert_array_equal(X, X2)
    # chain ranges: several ranges assemble to the same state and jobs
    _, _, _, _, _, pre5, jobs5 = _stage(data, data[key], _opt(variant), n_ranges=5)
    for x, y in zip(pre[:9] + [pre[10]], pre5[:9] + [pre5[10]]):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(jobs, jobs5):
        np.testing.assert_array_equal(x, y)


def test_empty_jobs(data):
    ref = data["ref"]
    p, mat, seq, seq_off, iv, pre, jobs, X = _jobs(data, "default")
    e = tuple(a[:0] for a in jobs)
    X0 = ms.ext_jobs_cpu(p, mat, int(ref.l_pac), ref.pac, seq, seq_off, e)
    assert X0.shape == (0, XF) and X0.dtype == np.int64


# ------------------------------------------------------------------------------------------------
# 2. kernels/memext.cu as host C++ (logic check without a GPU)
# ------------------------------------------------------------------------------------------------

HOST_SHIM = r"""
#include <cstdint>
struct dim3h { unsigned x, y, z; };
static dim3h threadIdx, blockIdx, blockDim, gridDim;
struct int2 { int x, y; };
static inline int2 make_int2(int x, int y) { int2 r; r.x = x; r.y = y; return r; }
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
#define __syncthreads() ((void)0)
static unsigned* g3_host_smem;  // mem_ext_kernel_sh's dynamic shared memory: one block's, threads run in turn
#include KERNEL_FILE
// one emulated thread at a time, in order, over a grid of n_thr / block blocks
extern "C" void host_ext(long long n_thr, unsigned block, const uint8_t* seq, const i64* seq_off,
    const uint8_t* pac, i64 l_pac, const int* P, const int8_t* mat, const i64* order, i64 n_job,
    const i64* j_read, const i64* j_sq, const i64* j_sr, const i64* j_sl, const i64* j_r0, const i64* j_r1,
    int* ws, i64* X) {
  blockDim.x = block; gridDim.x = (unsigned)(n_thr / block);
#ifdef __CUDA_ARCH__
  // the device branch loads the shared matrix cooperatively: a first pass with no jobs lets every
  // thread of block 0 store its share before any thread extends
  blockIdx.x = 0;
  for (unsigned x = 0; x < block; ++x) {
    threadIdx.x = x;
    mem_ext_kernel(seq, seq_off, pac, l_pac, P, mat, order, 0, j_read, j_sq, j_sr, j_sl, j_r0, j_r1, (int2*)ws, X);
  }
#endif
  for (long long t = 0; t < n_thr; ++t) {
    blockIdx.x = (unsigned)(t / block); threadIdx.x = (unsigned)(t % block);
    mem_ext_kernel(seq, seq_off, pac, l_pac, P, mat, order, n_job, j_read, j_sq, j_sr, j_sl, j_r0, j_r1,
                   (int2*)ws, X);
  }
}
extern "C" void host_ext_sh(long long n_thr, unsigned block, const uint8_t* seq, const i64* seq_off,
    const uint8_t* pac, i64 l_pac, const int* P, const int8_t* mat, const i64* order, i64 n_job,
    const i64* j_read, const i64* j_sq, const i64* j_sr, const i64* j_sl, const i64* j_r0, const i64* j_r1,
    unsigned* smem, i64* X) {
  blockDim.x = block; gridDim.x = (unsigned)(n_thr / block);
  g3_host_smem = smem;
#ifdef __CUDA_ARCH__
  blockIdx.x = 0;  // as host_ext: a first pass with no jobs fills the shared matrix
  for (unsigned x = 0; x < block; ++x) {
    threadIdx.x = x;
    mem_ext_kernel_sh(seq, seq_off, pac, l_pac, P, mat, order, 0, j_read, j_sq, j_sr, j_sl, j_r0, j_r1, X);
  }
#endif
  for (long long t = 0; t < n_thr; ++t) {
    blockIdx.x = (unsigned)(t / block); threadIdx.x = (unsigned)(t % block);
    mem_ext_kernel_sh(seq, seq_off, pac, l_pac, P, mat, order, n_job, j_read, j_sq, j_sr, j_sl, j_r0, j_r1, X);
  }
}
extern "C" void host_sw(long long n_thr, unsigned block, const uint8_t* seq, const i64* seq_off,
    const uint8_t* pac, i64 l_pac, const int* P, const int8_t* mat, const i64* order, i64 n_job,
    const i64* mate, const i64* wrb, const i64* wre, const i64* wrev, const i64* wx, const i64* bl_off,
    int* ws, int nmax, int* bl, i64* R) {
  blockDim.x = block; gridDim.x = (unsigned)(n_thr / block);
#ifdef __CUDA_ARCH__
  blockIdx.x = 0;  // as host_ext: a first pass with no jobs fills the shared matrix
  for (unsigned x = 0; x < block; ++x) {
    threadIdx.x = x;
    mem_sw_kernel(seq, seq_off, pac, l_pac, P, mat, order, 0, mate, wrb, wre, wrev, wx, bl_off, ws, nmax, bl, R);
  }
#endif
  for (long long t = 0; t < n_thr; ++t) {
    blockIdx.x = (unsigned)(t / block); threadIdx.x = (unsigned)(t % block);
    mem_sw_kernel(seq, seq_off, pac, l_pac, P, mat, order, n_job, mate, wrb, wre, wrev, wx, bl_off, ws, nmax, bl, R);
  }
}
typedef void (*SwWarpFn)(const uint8_t*, const i64*, const uint8_t*, i64, const int*, const int8_t*, const i64*,
    i64, const i64*, const i64*, const i64*, const i64*, const i64*, const i64*, int*, i64*);
// mem_sw_warp<C>: every thread called in order; lane 0 of each warp runs the warp's 32 lanes in lock step
extern "C" void host_sw_warp(int C, long long n_thr, unsigned block, const uint8_t* seq, const i64* seq_off,
    const uint8_t* pac, i64 l_pac, const int* P, const int8_t* mat, const i64* order, i64 n_job,
    const i64* mate, const i64* wrb, const i64* wre, const i64* wrev, const i64* wx, const i64* bl_off,
    int* bl, i64* R) {
  SwWarpFn fns[9] = {0, mem_sw_warp1, mem_sw_warp2, mem_sw_warp3, mem_sw_warp4, mem_sw_warp5, mem_sw_warp6,
                     mem_sw_warp7, mem_sw_warp8};
  blockDim.x = block; gridDim.x = (unsigned)(n_thr / block);
#ifdef __CUDA_ARCH__
  blockIdx.x = 0;
  for (unsigned x = 0; x < block; ++x) {
    threadIdx.x = x;
    fns[C](seq, seq_off, pac, l_pac, P, mat, order, 0, mate, wrb, wre, wrev, wx, bl_off, bl, R);
  }
#endif
  for (long long t = 0; t < n_thr; ++t) {
    blockIdx.x = (unsigned)(t / block); threadIdx.x = (unsigned)(t % block);
    fns[C](seq, seq_off, pac, l_pac, P, mat, order, n_job, mate, wrb, wre, wrev, wx, bl_off, bl, R);
  }
}
extern "C" void host_rep_len(unsigned n_blocks, unsigned block, const i64* mb, const i64* me, const i64* ms,
    const i64* off, i64 n, i64 max_occ, i64* fr) {
  blockDim.x = block; gridDim.x = n_blocks;
  for (long long t = 0; t < (long long)n_blocks * block; ++t) {
    blockIdx.x = (unsigned)(t / block); threadIdx.x = (unsigned)(t % block);
    rep_len_kernel(mb, me, ms, off, n, max_occ, fr);
  }
}
"""


def _build_host(d, name, defines=()):
    src = d / f"{name}.cpp"
    src.write_text(HOST_SHIM.replace("KERNEL_FILE", f'"{CU}"'))
    so = d / f"lib{name}.so"
    r = subprocess.run(["g++", "-O2", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wno-unknown-pragmas",
                        *defines, str(src), "-o", str(so)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return ctypes.CDLL(str(so))


@pytest.fixture(scope="module")
def host_libs(tmp_path_factory):
    """The host build ("host": the file's own #else branch) and one with the device branch's cooperative
    shared-memory load ("device_branch", __CUDA_ARCH__ defined, see HOST_SHIM's first pass)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    d = tmp_path_factory.mktemp("memexthost")
    return {"host": _build_host(d, "memext_host"),
            "device_branch": _build_host(d, "memext_dev", ["-D__CUDA_ARCH__=900"])}


@pytest.fixture(scope="module")
def host_lib(host_libs):
    return host_libs["host"]


def _p(a):
    assert a.flags.c_contiguous
    return ctypes.c_void_p(a.ctypes.data)


def _geometry(n, lmax, block, ws_bytes):
    """ext_jobs_gpu's launch geometry: (threads, int32 scratch length)."""
    t_max = max(block, ws_bytes // (8 * (lmax + 2)) // block * block)
    n_thr = min(t_max, (n + block - 1) // block * block)
    return n_thr, (lmax + 2) * n_thr * 2


def _host_ext(lib, p, mat, ref, seq, seq_off, jobs, order, block, ws_bytes, rng):
    n = len(jobs[0])
    rl = np.diff(seq_off)[jobs[0]]
    n_thr, n_ws = _geometry(n, int(rl.max()), block, ws_bytes)
    ws = rng.integers(-1000, 1000, n_ws).astype(np.int32)  # garbage: the kernel must initialise its column
    X = np.full((n, XF), -7, np.int64)
    jb = [np.ascontiguousarray(a, np.int64) for a in jobs]
    P = ms.ext_params(p)
    m8 = np.ascontiguousarray(mat.astype(np.int8))
    pac = np.ascontiguousarray(ref.pac, np.uint8)
    i64 = ctypes.c_int64
    lib.host_ext(ctypes.c_longlong(n_thr), ctypes.c_uint(block), _p(seq), _p(seq_off), _p(pac), i64(int(ref.l_pac)),
                 _p(P), _p(m8), _p(np.ascontiguousarray(order, np.int64)), i64(n), *map(_p, jb), _p(ws), _p(X))
    return X, n_thr


def _host_ext_sh(lib, p, mat, ref, seq, seq_off, jobs, order, block, n_thr, rng):
    """mem_ext_kernel_sh over n_thr emulated threads, its shared words (one block's) full of garbage."""
    n = len(jobs[0])
    lmax = int(np.diff(seq_off)[jobs[0]].max())
    smem = rng.integers(0, 1 << 32, block * (lmax + 2), dtype=np.uint64).astype(np.uint32)
    X = np.full((n, XF), -7, np.int64)
    jb = [np.ascontiguousarray(a, np.int64) for a in jobs]
    i64 = ctypes.c_int64
    lib.host_ext_sh(ctypes.c_longlong(n_thr), ctypes.c_uint(block), _p(seq), _p(seq_off),
                    _p(np.ascontiguousarray(ref.pac, np.uint8)), i64(int(ref.l_pac)), _p(ms.ext_params(p)),
                    _p(np.ascontiguousarray(mat.astype(np.int8))), _p(np.ascontiguousarray(order, np.int64)), i64(n),
                    *map(_p, jb), _p(smem), _p(X))
    return X


@pytest.mark.parametrize("variant,key", JOB_SETS, ids=JOB_IDS)
def test_host_emulated_ext_kernel_shared(data, host_libs, variant, key):
    """mem_ext_kernel_sh (16-bit H and E in shared memory) == the twin: one job per thread in blocks of 64
    in the launcher's order, and a small grid (grid-stride loop) over a permuted order; the device branch's
    cooperative matrix load too."""
    ref = data["ref"]
    p, mat, seq, seq_off, iv, pre, jobs, want = _jobs(data, variant, key)
    rng = np.random.default_rng(8)
    n = len(jobs[0])
    rl = np.diff(seq_off)[jobs[0]]
    assert ms.ext_shared_geometry(int(rl.max()), int(mat.max()), cap=1 << 30) is not None
    by_len = np.argsort(-rl, kind="stable").astype(np.int64)
    for lib, order, block, n_thr in ((host_libs["host"], by_len, 64, (n + 63) // 64 * 64),
                                     (host_libs["host"], rng.permutation(n).astype(np.int64), 32, 96),
                                     (host_libs["device_branch"], rng.permutation(n).astype(np.int64), 64, 128)):
        got = _host_ext_sh(lib, p, mat, ref, seq, seq_off, jobs, order, block, n_thr, rng)
        bad = np.nonzero((got != want).any(axis=1))[0]
        assert len(bad) == 0, (f"{len(bad)} of {n} jobs differ; first job {bad[0]}: kernel {got[bad[0]]}, "
                               f"twin {want[bad[0]]}, job {[int(a[bad[0]]) for a in jobs]}")


def test_ext_shared_geometry():
    """Shared scratch only where the block's columns fit the cap and every score fits 16 bits."""
    assert ms.ext_shared_geometry(150, 1) == (ms.EXT_SH_BLOCK, ms.EXT_SH_BLOCK * 152 * 4)
    assert ms.ext_shared_geometry(150, 1, block=32, cap=32 * 152 * 4) == (32, 32 * 152 * 4)
    assert ms.ext_shared_geometry(150, 1, block=32, cap=32 * 152 * 4 - 1) is None
    assert ms.ext_shared_geometry(301, 109, cap=1 << 30) is None  # 2 * 301 * 109 >= 65535
    assert ms.ext_shared_geometry(300, 109, cap=1 << 30) is not None


@pytest.mark.parametrize("variant,key", JOB_SETS, ids=JOB_IDS)
def test_host_emulated_ext_kernel(data, host_lib, variant, key):
    ref = data["ref"]
    p, mat, seq, seq_off, iv, pre, jobs, want = _jobs(data, variant, key)
    rng = np.random.default_rng(5)
    n = len(jobs[0])
    rl = np.diff(seq_off)[jobs[0]]
    by_len = np.argsort(-rl, kind="stable").astype(np.int64)  # ext_jobs_gpu's order
    perm = rng.permutation(n).astype(np.int64)
    cases = [(by_len, 128, 256 << 20), (perm, 32, 64 * 8 * (int(rl.max()) + 2))]
    for order, block, ws_bytes in cases:
        got, n_thr = _host_ext(host_lib, p, mat, ref, seq, seq_off, jobs, order, block, ws_bytes, rng)
        if block == 32:
            assert n_thr == 64 < n  # grid-stride loop: many jobs per thread
        else:
            assert n_thr >= n
        bad = np.nonzero((got != want).any(axis=1))[0]
        assert len(bad) == 0, (f"{len(bad)} of {n} jobs differ; first job {bad[0]}: kernel {got[bad[0]]}, "
                               f"twin {want[bad[0]]}, job {[int(a[bad[0]]) for a in jobs]}")
    # a subset of the jobs (one read's worth of scratch per thread, the read order reversed)
    sub = np.nonzero(rl <= 151)[0]
    js = tuple(a[sub] for a in jobs)
    got, _ = _host_ext(host_lib, p, mat, ref, seq, seq_off, js, np.arange(len(sub))[::-1].copy(), 32, 256 << 20, rng)
    np.testing.assert_array_equal(got, want[sub])


def test_host_emulated_ext_kernel_device_branch(data, host_libs):
    """The #ifdef __CUDA_ARCH__ path (shared matrix loaded by threads 0..24 of the block), blocks of 32
    and 128 threads."""
    ref = data["ref"]
    rng = np.random.default_rng(6)
    for variant in ("default", "scoring"):
        p, mat, seq, seq_off, iv, pre, jobs, want = _jobs(data, variant)
        n = len(jobs[0])
        for block in (32, 128):
            got, _ = _host_ext(host_libs["device_branch"], p, mat, ref, seq, seq_off, jobs,
                               rng.permutation(n).astype(np.int64), block, 256 << 20, rng)
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("max_occ", [1, 3, 500])
def test_host_emulated_rep_len_kernel(data, host_lib, max_occ):
    p, mat, seq, seq_off, (mb, me, mss, ioff), pre, jobs, X = _jobs(data, "default")
    want = ms.rep_len_csr(mb, me, mss, ioff, max_occ)
    for r in range(0, len(ioff) - 1, 7):  # the twin is chain.rep_len per read
        a, b = ioff[r], ioff[r + 1]
        assert want[r] == rep_len(mb[a:b], me[a:b], mss[a:b], max_occ)
    if max_occ == 1:
        assert (want > 0).any()
    n = len(ioff) - 1
    for block in (128, 32):
        fr = np.full(n, -3, np.int64)
        host_lib.host_rep_len(ctypes.c_uint((n + block - 1) // block), ctypes.c_uint(block), _p(mb), _p(me), _p(mss),
                              _p(ioff), ctypes.c_int64(n), ctypes.c_int64(max_occ), _p(fr))
        np.testing.assert_array_equal(fr, want)
    np.testing.assert_array_equal(pre[10], ms.rep_len_csr(mb, me, mss, ioff, p.max_occ))


# ------------------------------------------------------------------------------------------------
# 2b. mate rescue: speculative jobs, the twin, and mem_sw_kernel as host C++
# ------------------------------------------------------------------------------------------------

_RESCUE = {}


def _rescue(data, variant, key="pe"):
    """The rescue jobs of a PE batch as MemAligner's staged path makes them (regions, pestat, then
    pair.rescue_jobs_range) and the twin's results: (p, mat, seq, seq_off, sw_off, key, jobs, res)."""
    if (variant, key) not in _RESCUE:
        ref, batch, opt = data["ref"], data[key], _opt(variant)
        al = MemAligner(ref, data["fm"], opt, staged=True)
        names, name_off, comments, com_off, seq_off, qual = al._read_arrays(batch)
        pre = al._pre(batch, seq_off)
        R_cat, cnt = regions_range(al.fm, al.offsets, al.l_pac, al.pac, batch.seq, seq_off, 0, batch.n, al.params,
                                   al.mat, pre)
        reg_off = np.zeros(batch.n + 1, np.int64)
        np.cumsum(cnt, out=reg_off[1:])
        low, high, failed, avg, std = pestat(al.params, al.l_pac, R_cat, reg_off, batch.n // 2, None)
        failed = failed.copy()
        failed[:] = 0  # every orientation: more jobs, both strands of the mate
        n_pairs = batch.n // 2
        parts = [rescue_jobs_range(al.params, al.offsets, al.l_pac, low, high, failed, seq_off, R_cat, reg_off, a, b)
                 for a, b in ((0, n_pairs // 3), (n_pairs // 3, n_pairs))]
        sw_off, keys, jobs = ms.assemble_rescue(n_pairs, parts)
        res = ms.rescue_sw_cpu(al.params, al.mat, int(ref.l_pac), ref.pac, batch.seq, seq_off, jobs)
        _RESCUE[(variant, key)] = (al.params, al.mat, batch.seq, seq_off, sw_off, keys, jobs, res)
    return _RESCUE[(variant, key)]


@pytest.mark.parametrize("variant", ["default", "scoring"])
def test_rescue_jobs_and_twin(data, variant):
    """Jobs cover both strands, byte and 16-bit mode; the twin == ksw_align2 per call; results do not
    depend on the job split."""
    ref = data["ref"]
    p, mat, seq, seq_off, sw_off, keys, jobs, res = _rescue(data, variant)
    mate, wrb, wre, wrev, wx = jobs
    n = len(mate)
    assert n > 50 and sw_off[-1] == n
    assert (wrev == 0).any() and (wrev == 1).any()
    byte = (wx & 0x10000) != 0  # KSW_XBYTE when l_ms * a < 250
    assert byte.any() and (variant == "default" or not byte.all())
    assert (res[:, 0] >= p.min_seed_len).any() and (res[:, 5] >= 0).any()  # rescued hits with a start
    for k in range(0, n, max(1, n // 40)):
        ms_ = seq[seq_off[mate[k]]:seq_off[mate[k] + 1]]
        q = mate_rc(ms_) if wrev[k] else ms_
        rs = np.empty(wre[k] - wrb[k], np.uint8)
        get_seq(int(ref.l_pac), ref.pac, wrb[k], wre[k], rs)
        want = ksw_align2(len(q), q, len(rs), rs, 5, mat, p.o_del, p.e_del, p.o_ins, p.e_ins, wx[k])
        assert tuple(res[k, :7]) == tuple(want)
    with ThreadPoolExecutor(3) as pool:
        res2 = ms.rescue_sw_cpu(p, mat, int(ref.l_pac), ref.pac, seq, seq_off, jobs, pool.map, 5)
    np.testing.assert_array_equal(res, res2)


def _host_sw(lib, p, mat, ref, seq, seq_off, jobs, order, block, n_thr, rng):
    mate, wrb, wre, wrev, wx = (np.ascontiguousarray(a, np.int64) for a in jobs)
    n = len(mate)
    tlen = wre - wrb
    bl_off = np.zeros(n + 1, np.int64)
    np.cumsum(2 * (tlen + 1), out=bl_off[1:])
    bl = rng.integers(-9, 9, int(bl_off[-1])).astype(np.int32)
    nmax = (int(np.diff(seq_off)[mate].max()) + 15) // 16 * 16 + 16
    ws = rng.integers(-1000, 1000, 3 * nmax * n_thr).astype(np.int32)  # garbage scratch
    R = np.full((n, 8), -5, np.int64)
    i64 = ctypes.c_int64
    lib.host_sw(ctypes.c_longlong(n_thr), ctypes.c_uint(block), _p(seq), _p(seq_off),
                _p(np.ascontiguousarray(ref.pac, np.uint8)), i64(int(ref.l_pac)), _p(ms.ext_params(p)),
                _p(np.ascontiguousarray(mat.astype(np.int8))), _p(np.ascontiguousarray(order, np.int64)), i64(n),
                _p(mate), _p(wrb), _p(wre), _p(wrev), _p(wx), _p(bl_off), _p(ws), ctypes.c_int(nmax), _p(bl), _p(R))
    return R


@pytest.mark.parametrize("variant", ["default", "scoring"])
def test_host_emulated_sw_kernel(data, host_libs, variant):
    ref = data["ref"]
    p, mat, seq, seq_off, sw_off, keys, jobs, want = _rescue(data, variant)
    n = len(jobs[0])
    rng = np.random.default_rng(8)
    for lib, order, block, n_thr in ((host_libs["host"], np.arange(n), 128, (n + 127) // 128 * 128),
                                     (host_libs["host"], rng.permutation(n), 32, 64),
                                     (host_libs["device_branch"], rng.permutation(n), 32, 96)):
        got = _host_sw(lib, p, mat, ref, seq, seq_off, jobs, order, block, n_thr, rng)
        bad = np.nonzero((got != want).any(axis=1))[0]
        assert len(bad) == 0, (f"{len(bad)} of {n} differ; job {bad[0]}: kernel {got[bad[0]]} twin {want[bad[0]]}")


def _host_sw_warp(lib, c, p, mat, ref, seq, seq_off, jobs, order, block, n_thr, rng):
    mate, wrb, wre, wrev, wx = (np.ascontiguousarray(a, np.int64) for a in jobs)
    n = len(mate)
    bl_off = np.zeros(n + 1, np.int64)
    np.cumsum(2 * (wre - wrb + 1), out=bl_off[1:])
    bl = rng.integers(-9, 9, int(bl_off[-1])).astype(np.int32)  # garbage row-maximum lists
    R = np.full((n, 8), -5, np.int64)
    R[np.setdiff1d(np.arange(n), order)] = 0
    i64 = ctypes.c_int64
    lib.host_sw_warp(ctypes.c_int(c), ctypes.c_longlong(n_thr), ctypes.c_uint(block), _p(seq), _p(seq_off),
                     _p(np.ascontiguousarray(ref.pac, np.uint8)), i64(int(ref.l_pac)), _p(ms.ext_params(p)),
                     _p(np.ascontiguousarray(mat.astype(np.int8))), _p(np.ascontiguousarray(order, np.int64)),
                     i64(len(order)), _p(mate), _p(wrb), _p(wre), _p(wrev), _p(wx), _p(bl_off), _p(bl), _p(R))
    return R


@pytest.mark.parametrize("variant", ["default", "scoring"])
def test_host_emulated_sw_warp_kernel(data, host_libs, variant):
    """mem_sw_warp<C> (a wavefront over the 32 lanes of a warp, host build in lock step) == the twin, for
    every C that holds the mates (more columns per lane than needed included), grids smaller than the job
    list, and the device branch's shared-matrix load."""
    ref = data["ref"]
    p, mat, seq, seq_off, sw_off, keys, jobs, want = _rescue(data, variant)
    n = len(jobs[0])
    lm = np.diff(seq_off)[jobs[0]]
    ok = np.nonzero(lm <= ms.SW_WARP_MAX)[0]  # the rest run on mem_sw_kernel
    assert len(ok) > 50 and lm[ok].max() > 200 and (lm > ms.SW_WARP_MAX).any()
    assert ((jobs[4][ok] & 0x10000) != 0).any() and ((jobs[4][ok] & 0x10000) == 0).any()  # 8- and 16-bit
    c_min = ((int(lm[ok].max()) + 15) // 16 * 16 + 31) // 32
    rng = np.random.default_rng(9)
    runs = [(host_libs["host"], c_min, ok, 128, (len(ok) * 32 + 127) // 128 * 128),
            (host_libs["host"], 8, rng.permutation(ok), 64, 128),
            (host_libs["device_branch"], min(8, c_min + 1), rng.permutation(ok), 32, 96)]
    want = want.copy()
    want[np.setdiff1d(np.arange(n), ok)] = 0
    for lib, c, order, block, n_thr in runs:
        got = _host_sw_warp(lib, c, p, mat, ref, seq, seq_off, jobs, order, block, n_thr, rng)
        bad = np.nonzero((got != want).any(axis=1))[0]
        assert len(bad) == 0, (f"C={c}: {len(bad)} of {n} differ; job {bad[0]}: kernel {got[bad[0]]} "
                               f"twin {want[bad[0]]}")


def test_rescue_lookup_falls_back(data):
    """matesw computes an alignment missing from the precomputed set: dropping every precomputed
    result (or keeping them) gives the same SAM."""
    ref = data["ref"]
    al = MemAligner(ref, data["fm"], _opt("default"), staged=True)
    want = _per_read_sam(data, "default", "pe")
    orig = al.pe_rescue_align

    def drop(*a, **k):
        return [(np.zeros_like(sw_off), key[:0], res[:0]) for sw_off, key, res in orig(*a, **k)]
    al.pe_rescue_align = drop
    _check_sam(al.align_batch_pe(data["pe"]), want)
    assert al.stage_times["rescue_jobs"] > 0


class _Sink:
    def __init__(self):
        self.parts = []

    def write_sam_bytes(self, b):
        self.parts.append(b)


def _pe_in_parts(al, batch, n_parts, group_bases, monkeypatch):
    """run_mem_pe over one -K batch cut into n_parts parts, mate rescue in groups of group_bases bases."""
    from g3align.aligner.mem import pipeline

    monkeypatch.setattr(pipeline, "RESCUE_GROUP_BASES", group_bases)
    n_pairs = batch.n // 2
    cuts = [2 * (n_pairs * i // n_parts) for i in range(n_parts + 1)]
    parts = [(batch.slice(a, b), i == n_parts - 1) for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))]
    sink = _Sink()
    pipeline.run_mem_pe(al, iter(parts), sink, verbose=0)
    return b"".join(sink.parts)


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_grouped_rescue_in_parts(data, device, monkeypatch):
    """A -K batch in parts, its mate rescue in groups of parts (one launch each: the mates gathered into one
    array): the SAM equals the per-read path's for one group, a group per part and groups in between, and
    the rescue jobs are the same number."""
    if device == "gpu" and _gpu() is None:
        pytest.skip("no CuPy/GPU")
    want = _per_read_sam(data, "default", "pe")
    batch = data["pe"]
    jobs = set()
    for n_parts, group in ((1, 1 << 40), (5, 1), (7, 3 * batch.bases // 7), (7, 1 << 40)):
        al = MemAligner(data["ref"], data["fm"], _opt("default", 2), device=device, staged=True)
        _check_sam(_pe_in_parts(al, batch, n_parts, group, monkeypatch), want)
        jobs.add(al.stage_times["rescue_jobs"])
    assert len(jobs) == 1 and jobs.pop() > 0


# ------------------------------------------------------------------------------------------------
# 3. nvcc
# ------------------------------------------------------------------------------------------------

def test_nvcc_compiles(nvcc_spill_free):
    nvcc_spill_free(CU, ("mem_ext_kernel", "mem_ext_kernel_sh", "rep_len_kernel", "mem_sw_kernel")
                    + tuple(f"mem_sw_warp{c}" for c in range(1, 9)))

# ------------------------------------------------------------------------------------------------
# 4. GPU == CPU (skipped without a GPU)
# ------------------------------------------------------------------------------------------------

def _gpu():
    return cupy_or_none()


needs_gpu = pytest.mark.gpu


@needs_gpu
@pytest.mark.parametrize("variant,key", JOB_SETS, ids=JOB_IDS)
def test_gpu_ext_jobs(data, variant, key, monkeypatch):
    cp = _gpu()
    ref = data["ref"]
    p, mat, seq, seq_off, iv, pre, jobs, want = _jobs(data, variant, key)
    pac_d, seq_d, off_d = cp.asarray(ref.pac), cp.asarray(seq), cp.asarray(seq_off)
    lmax = int(np.diff(seq_off).max())
    rl = np.diff(seq_off)[jobs[0]]
    short, mid = np.nonzero(rl <= 200)[0], np.nonzero(rl <= 1500)[0]
    assert 0 < len(short) < len(mid) < len(rl)
    # the global-memory kernel (the 3-kb reads' scratch does not fit the shared cap), then the shared one: on
    # the short reads' jobs, and with blocks of 32 and a cap above 48 KB on reads up to 1.5 kb
    for sh_block, sh_max, sel in ((64, 96 << 10, None), (64, 96 << 10, short), (32, 200 << 10, mid)):
        monkeypatch.setattr(ms, "EXT_SH_BLOCK", sh_block)
        monkeypatch.setattr(ms, "EXT_SH_MAX", sh_max)
        js = jobs if sel is None else tuple(a[sel] for a in jobs)
        lm = int(rl.max() if sel is None else rl[sel].max())
        assert (ms.ext_shared_geometry(lm, int(mat.max())) is not None) == (sel is not None)
        for block, ws_bytes in ((128, 256 << 20), (32, 64 * 8 * (lmax + 2))):
            got = ms.ext_jobs_gpu(p, mat, pac_d, int(ref.l_pac), seq_d, off_d, js, block=block, ws_bytes=ws_bytes)
            assert isinstance(got, np.ndarray) and got.dtype == np.int64
            np.testing.assert_array_equal(got, want if sel is None else want[sel])
    monkeypatch.setattr(ms, "EXT_SH_BLOCK", 64)
    monkeypatch.setattr(ms, "EXT_SH_MAX", 96 << 10)
    # device-resident jobs, device result
    jd = tuple(cp.asarray(a) for a in jobs)
    got = ms.ext_jobs_gpu(p, mat, pac_d, int(ref.l_pac), seq_d, off_d, jd, to_host=False)
    np.testing.assert_array_equal(cp.asnumpy(got), want)
    e = tuple(a[:0] for a in jobs)
    assert ms.ext_jobs_gpu(p, mat, pac_d, int(ref.l_pac), seq_d, off_d, e).shape == (0, XF)


@needs_gpu
@pytest.mark.parametrize("max_occ", [1, 3, 500])
def test_gpu_rep_len(data, max_occ):
    cp = _gpu()
    p, mat, seq, seq_off, (mb, me, mss, ioff), pre, jobs, X = _jobs(data, "default")
    want = ms.rep_len_csr(mb, me, mss, ioff, max_occ)
    got = ms.rep_len_gpu(*(cp.asarray(a) for a in (mb, me, mss, ioff)), max_occ)
    np.testing.assert_array_equal(cp.asnumpy(got), want)


@needs_gpu
@pytest.mark.parametrize("mode", ["se", "pe", "short_se", "short_pe", "noisy_se", "noisy_pe"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_gpu_sam_equals_per_read(data, variant, mode):
    want = _per_read_sam(data, variant, mode)
    al = MemAligner(data["ref"], data["fm"], _opt(variant, 2), device="gpu")
    _check_sam(_run(al, data, mode), want)
    assert al.stage_times["jobs"] > 0 or mode.startswith("short")


@needs_gpu
@pytest.mark.parametrize("variant", ["default", "scoring"])
def test_gpu_rescue_sw(data, variant):
    cp = _gpu()
    ref = data["ref"]
    p, mat, seq, seq_off, sw_off, keys, jobs, want = _rescue(data, variant)
    pac_d, seq_d, off_d = cp.asarray(ref.pac), cp.asarray(seq), cp.asarray(seq_off)
    assert (np.diff(seq_off)[jobs[0]] > ms.SW_WARP_MAX).any()  # both kernels in one call
    for block, ws_bytes, warp in ((128, 256 << 20, True), (32, 32 * 4 * 3 * 200, True), (128, 256 << 20, False),
                                  (32, 32 * 4 * 3 * 200, False)):
        got = ms.rescue_sw_gpu(p, mat, pac_d, int(ref.l_pac), seq_d, off_d, jobs, block=block, ws_bytes=ws_bytes,
                               warp=warp)
        np.testing.assert_array_equal(got, want)


@needs_gpu
def test_gpu_out_of_memory_runs_in_halves(data, monkeypatch):
    """Out of GPU memory in seeding, extension or rescue, the reads/jobs run in halves (memstage.gpu_halving)
    and the SAM is unchanged: launches above a size first try a 4 TB allocation (a real OutOfMemoryError)."""
    cp = _gpu()

    def oom_above(fn, limit, size_of):
        def wrapped(*a, **k):
            if size_of(a) > limit:
                cp.empty(1 << 42, cp.uint8)
            return fn(*a, **k)
        return wrapped
    monkeypatch.setattr(ms, "_ext_jobs_gpu", oom_above(ms._ext_jobs_gpu, 500, lambda a: len(a[6][0])))
    monkeypatch.setattr(ms, "_rescue_sw_gpu", oom_above(ms._rescue_sw_gpu, 20, lambda a: len(a[6][0])))
    monkeypatch.setattr(sg, "collect_intv_batch_gpu",
                        oom_above(sg.collect_intv_batch_gpu, 40, lambda a: int(a[2].shape[0]) - 1))
    for mode in ("se", "pe", "noisy_pe"):
        al = MemAligner(data["ref"], data["fm"], _opt("default", 2), device="gpu")
        _check_sam(_run(al, data, mode), _per_read_sam(data, "default", mode))
        assert al.stage_times["jobs"] > 500


# ------------------------------------------------------------------------------------------------
# pipeline.ahead: results in order with several workers, errors where they happened
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("workers,depth", [(1, 1), (2, 1), (3, 4)])
def test_ahead_keeps_order_and_raises_in_place(workers, depth):
    import random
    import threading
    import time as _t

    from g3align.aligner.mem.pipeline import ahead

    rng = random.Random(workers)
    delays = [rng.random() * 0.004 for _ in range(40)]
    names = set()

    def fn(i):
        names.add(threading.current_thread().name)
        _t.sleep(delays[i])  # later items often finish first
        if i == 25:
            raise ValueError("item 25")
        return i * i
    got = []
    with pytest.raises(ValueError, match="item 25"):
        for x in ahead(fn, iter(range(40)), depth=depth, name="t-ahead", workers=workers):
            got.append(x)
    assert got == [i * i for i in range(25)]
    assert all(n.startswith("t-ahead") for n in names) and (workers == 1 or len(names) > 1)
    # a consumer that stops early: the workers are shut down, nothing hangs
    it = ahead(lambda i: i, iter(range(1000)), depth=depth, name="t-ahead", workers=workers)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()


def test_priority_pool_runs_waiting_tasks_by_priority():
    """_PriorityPool (the CPU pool of MemAligner): with its one worker busy, waiting tasks start lowest
    priority number first and in submission order among equals; map keeps its results' order; an error is
    raised at its result; shutdown with cancel_futures drops waiting tasks and returns."""
    import threading

    from g3align.aligner.mem.pipeline import PRIO_PAIRING, PRIO_REGIONS, _PriorityPool

    pool = _PriorityPool(1)
    gate = threading.Event()
    ran = []
    pool.submit(gate.wait)  # holds the only worker
    with _PriorityPool.prio(PRIO_PAIRING):
        pairing = pool.map(lambda k: ran.append(("pairing", k)) or k, range(5))
    with _PriorityPool.prio(PRIO_REGIONS):
        regions = pool.map(lambda k: ran.append(("regions", k)) or -k, range(3))
    plain = pool.submit(lambda: ran.append(("default", 0)))  # the default priority, between the two
    gate.set()
    assert list(pairing) == [0, 1, 2, 3, 4] and list(regions) == [0, -1, -2]
    plain.result()
    assert ran == [("regions", k) for k in range(3)] + [("default", 0)] + [("pairing", k) for k in range(5)]

    def boom(k):
        if k == 2:
            raise ValueError("task 2")
        return k
    with pytest.raises(ValueError, match="task 2"):
        list(pool.map(boom, range(4)))
    gate.clear()
    pool.submit(gate.wait)
    waiting = [pool.submit(ran.append, k) for k in range(3)]
    threading.Timer(0.05, gate.set).start()
    pool.shutdown(wait=True, cancel_futures=True)
    assert all(f.cancelled() or f.done() for f in waiting)


def test_pinned_class():
    """Pinned block sizes: enough for the request, at most 1/16 more above 4 KiB, 16 sizes per power of two,
    so that requests of nearby sizes share blocks."""
    rng = np.random.default_rng(1)
    sizes = np.concatenate([np.arange(1, 20000), rng.integers(1, 1 << 34, 20000)])
    got = np.array([pinned.pinned_class(int(n)) for n in sizes])
    assert (got >= sizes).all() and (got[sizes <= 4096] == 4096).all()
    big = sizes > 4096
    assert (got[big] * 16 <= sizes[big] * 17).all()
    octave = [pinned.pinned_class(n) for n in range(1 << 20, 1 << 21, 997)]
    assert set(octave) == {(1 << 20) + k * (1 << 16) for k in range(17)} and octave == sorted(octave)
