"""Pairwise DP engine (aligner/pairwise/engine.py, kernels/pairwise.cu).

CPU twin vs exhaustive enumeration on tiny pairs, vs parasail on random / real-derived pairs
(all modes x linear/affine), every CIGAR re-scored, bad input, GPU == CPU when a GPU is present,
and the kernel source compiling with nvcc when nvcc is on PATH.
"""
import gzip
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from g3align.aligner.pairwise.engine import align_pairs, encode_seqs, rescore_cigar

ROOT = Path(__file__).resolve().parents[1]
GAPS = [(6, 1), (0, 2), (3, 2)]             # (gap_open, gap_extend): affine, linear, affine
MODES = ["global", "semiglobal", "local"]


def rand_pairs(rng, k, lo, hi, alphabet="ACGT", pn=0.02, related=0.5):
    qs, ts = [], []
    for _ in range(k):
        m, n = rng.integers(lo, hi + 1, 2)
        q = rng.choice(list(alphabet), m)
        if rng.random() < related and m:
            t = list(q[rng.integers(0, max(1, m // 4)):])      # mutated copy: indels, substitutions
            t = [c if rng.random() > 0.1 else rng.choice(list(alphabet)) for c in t]
            for _ in range(rng.integers(0, 4)):
                p = rng.integers(0, len(t) + 1)
                if rng.random() < 0.5:
                    t[p:p] = list(rng.choice(list(alphabet), rng.integers(1, 6)))
                else:
                    del t[p:p + rng.integers(1, 6)]
            t = np.array(t[:n] if len(t) > n else t, dtype="<U1")
        else:
            t = rng.choice(list(alphabet), n)
        q = np.where(rng.random(len(q)) < pn, "N", q)
        t = np.where(rng.random(len(t)) < pn, "N", t)
        qs.append("".join(q))
        ts.append("".join(t))
    return qs, ts


# ---- exhaustive enumeration (tiny pairs) ------------------------------------------------------

def sub(a, b, match, mismatch):
    if a == "N" or b == "N":
        return -1
    return match if a == b else -mismatch


def global_all(q, t, match, mismatch, go, ge):
    """Best global score by enumerating every op string (gap runs pay go + L*ge)."""
    best = None

    def rec(i, j, prev, s):
        nonlocal best
        if i == len(q) and j == len(t):
            best = s if best is None else max(best, s)
            return
        if i < len(q) and j < len(t):
            rec(i + 1, j + 1, "M", s + sub(q[i], t[j], match, mismatch))
        if i < len(q):
            rec(i + 1, j, "I", s - ge - (go if prev != "I" else 0))
        if j < len(t):
            rec(i, j + 1, "D", s - ge - (go if prev != "D" else 0))
    rec(0, 0, "", 0)
    return best


def brute(q, t, mode, match, mismatch, go, ge):
    if mode == "global":
        return global_all(q, t, match, mismatch, go, ge)
    subs_t = [t[x:y] for x in range(len(t) + 1) for y in range(x, len(t) + 1)]
    if mode == "semiglobal":
        return max(global_all(q, tt, match, mismatch, go, ge) for tt in subs_t)
    subs_q = [q[x:y] for x in range(len(q) + 1) for y in range(x, len(q) + 1)]
    return max(0, max(global_all(qq, tt, match, mismatch, go, ge) for qq in subs_q for tt in subs_t))


@pytest.mark.parametrize("mode", MODES)
def test_cpu_vs_exhaustive(mode):
    rng = np.random.default_rng(1)
    qs, ts = rand_pairs(rng, 40, 0, 4, alphabet="ACGTN", pn=0.0, related=0.3)
    qs += ["", "A", "", "ACGT", "NN"]
    ts += ["", "", "A", "", "NN"]
    for go, ge in GAPS + [(1, 5)]:
        r = align_pairs(qs, ts, mode=mode, gap_open=go, gap_extend=ge, mismatch=3, traceback=True,
                        device="cpu")
        for k, (q, t) in enumerate(zip(qs, ts)):
            assert r.score[k] == brute(q, t, mode, 1, 3, go, ge), (mode, go, ge, q, t)
        check_cigars(qs, ts, r, 1, 3, go, ge, mode)


def check_cigars(qs, ts, r, match, mismatch, go, ge, mode):
    qc, qoff = encode_seqs(qs)
    tc, toff = encode_seqs(ts)
    for k in range(len(qs)):
        q = qc[qoff[k]:qoff[k + 1]]
        t = tc[toff[k]:toff[k + 1]]
        cig = r.cigar[r.cigar_off[k]:r.cigar_off[k + 1]]
        ops = cig & 15
        lens = cig >> 4
        assert np.all(ops[1:] != ops[:-1]), "adjacent runs of one op"
        qlen = int(lens[(ops == 0) | (ops == 1)].sum())
        tlen = int(lens[(ops == 0) | (ops == 2)].sum())
        assert r.q_start[k] + qlen == r.q_end[k] and r.t_start[k] + tlen == r.t_end[k]
        if mode == "global":
            assert (r.q_start[k], r.t_start[k], r.q_end[k], r.t_end[k]) == (0, 0, len(q), len(t))
        if mode == "semiglobal":
            assert r.q_start[k] == 0 and r.q_end[k] == len(q)
        s = rescore_cigar(q, t, cig, r.q_start[k], r.t_start[k], match, mismatch, go, ge)
        assert s == r.score[k], (k, r.cigar_string(k))


# ---- parasail ---------------------------------------------------------------------------------

def parasail_scores(qs, ts, mode, match, mismatch, go, ge):
    parasail = pytest.importorskip("parasail")
    mat = parasail.matrix_create("ACGTN", match, -mismatch)
    for i in range(5):
        mat[4, i] = -1
        mat[i, 4] = -1
    fn = {"global": parasail.nw, "semiglobal": parasail.sg_dx, "local": parasail.sw}[mode]
    # parasail charges open + (L-1)*extend; ours go + L*ge
    return np.array([fn(q, t, go + ge, ge, mat).score for q, t in zip(qs, ts)])


def real_pairs(rng, k, lo, hi):
    """Pairs cut from the lambda genome: a read-like query and a window around its origin."""
    with gzip.open(ROOT / "data" / "lambda.fa.gz", "rt") as fh:
        g = "".join(x.strip() for x in fh if not x.startswith(">")).upper()
    qs, ts = [], []
    for _ in range(k):
        m = int(rng.integers(lo, hi + 1))
        a = int(rng.integers(0, len(g) - 2 * m - 50))
        q = list(g[a + 20:a + 20 + m])
        for p in rng.integers(0, max(1, m), max(1, m // 30)):
            q[p] = "ACGTN"[rng.integers(0, 5)]
        qs.append("".join(q))
        ts.append(g[a:a + m + int(rng.integers(0, 40))])
    return qs, ts


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("gap", GAPS[:2])
def test_cpu_vs_parasail(mode, gap):
    rng = np.random.default_rng(7)
    qs, ts = rand_pairs(rng, 60, 1, 120)
    q2, t2 = real_pairs(rng, 15, 50, 300)
    qs += q2 + ["A" * 50, "ACGT" * 10, "NNNNN"]      # homopolymer, identical, all-N
    ts += t2 + ["A" * 70, "ACGT" * 10, "ACGTA"]
    go, ge = gap
    r = align_pairs(qs, ts, mode=mode, gap_open=go, gap_extend=ge, traceback=True, device="cpu")
    np.testing.assert_array_equal(r.score, parasail_scores(qs, ts, mode, 1, 4, go, ge))
    check_cigars(qs, ts, r, 1, 4, go, ge, mode)
    r2 = align_pairs(qs, ts, mode=mode, gap_open=go, gap_extend=ge, traceback=False, device="cpu")
    for f in ("score", "q_end", "t_end"):
        np.testing.assert_array_equal(getattr(r, f), getattr(r2, f))


def test_band_cpu():
    rng = np.random.default_rng(3)
    qs, ts = rand_pairs(rng, 30, 20, 40, related=1.0)
    ts = [t[:len(q)] + "A" * max(0, len(q) - len(t)) for q, t in zip(qs, ts)]
    full = align_pairs(qs, ts, mode="global", traceback=True, device="cpu")
    wide = align_pairs(qs, ts, mode="global", traceback=True, band=100, device="cpu")
    np.testing.assert_array_equal(full.score, wide.score)
    narrow = align_pairs(qs, ts, mode="global", traceback=True, band=2, device="cpu")
    assert np.all(narrow.score <= full.score)
    check_cigars(qs, ts, narrow, 1, 4, 6, 1, "global")
    for k in range(len(qs)):          # the path stays in the band
        i, j = 0, 0
        for x in narrow.cigar[narrow.cigar_off[k]:narrow.cigar_off[k + 1]]:
            ln, op = int(x) >> 4, int(x) & 15
            for _ in range(ln):
                i += op != 2
                j += op != 1
                assert abs(i - j) <= 2
    with pytest.raises(ValueError):
        align_pairs(["A" * 10], ["A" * 20], mode="global", band=3, device="cpu")


# ---- bad input ----------------------------------------------------------------------------------

def test_bad_input():
    with pytest.raises(ValueError, match="equal length"):
        align_pairs(["ACGT", "A"], ["ACGT"], device="cpu")
    with pytest.raises(ValueError, match="invalid character"):
        align_pairs(["ACGT"], ["AC-T"], device="cpu")
    with pytest.raises(ValueError, match="invalid character"):
        align_pairs(["AC1T"], ["ACGT"], device="cpu")
    with pytest.raises(ValueError, match="mode"):
        align_pairs(["A"], ["A"], mode="glocal", device="cpu")
    with pytest.raises(ValueError):
        align_pairs(["A"], ["A"], gap_extend=0, device="cpu")
    with pytest.raises(ValueError, match="32-bit"):        # would overflow: refused, never wraps
        align_pairs(["A" * 20000], ["C" * 20000], mismatch=10000, device="cpu")
    r = align_pairs([], [], device="cpu")
    assert len(r) == 0
    # IUPAC codes and lower case are accepted; they score as N / as upper case
    a = align_pairs(["acgtRYN"], ["ACGTNNN"], mode="global", device="cpu")
    assert a.score[0] == 4 - 3
    # 16-bit would overflow here (|score| > 32767): the 32-bit path gives the exact value
    big = align_pairs(["A" * 40000], ["A" * 40000], mode="local", device="cpu")
    assert big.score[0] == 40000


# ---- GPU == CPU -----------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_gpu_equals_cpu(mode):
    rng = np.random.default_rng(11)
    qs, ts = rand_pairs(rng, 200, 0, 700)
    for go, ge in GAPS[:2]:
        for tb in (False, True):
            c = align_pairs(qs, ts, mode=mode, gap_open=go, gap_extend=ge, traceback=tb, device="cpu")
            g = align_pairs(qs, ts, mode=mode, gap_open=go, gap_extend=ge, traceback=tb, device="gpu")
            for f in ("score", "q_end", "t_end", "q_start", "t_start", "cigar", "cigar_off"):
                np.testing.assert_array_equal(getattr(c, f), getattr(g, f), err_msg=f)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("flags", [[], ["-DLANES=1", "-DR=16", "-DMODE=0"],
                                   ["-DLANES=8", "-DMODE=1", "-DTRACE=1", "-DBAND=5"],
                                   ["-DLANES=32", "-DR=5", "-DMODE=2", "-DTRACE=1"],
                                   ["-DMODE=0"], ["-DMODE=1", "-DBAND=50"]])   # pw_chain_batch: LANES 32, R 8
def test_nvcc_compiles(tmp_path, flags):
    out = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", *flags,
                          str(ROOT / "kernels" / "pairwise.cu"), "-o", str(tmp_path / "x.cubin")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "spill stores" in out.stderr and " 0 bytes spill stores" in out.stderr


def test_loader_defines():
    from g3align.kernels.loader import define_lines, kernel_source
    want = "#define LANES 32\n#define R 8\n#define TRACE 1\n"
    assert define_lines({"R": 8, "LANES": 32, "TRACE": True}) == want
    assert "pw_batch" in kernel_source("pairwise")


def test_align_cli(tmp_path):
    from click.testing import CliRunner

    from g3align.aligner.cli.align import align_cmd
    (tmp_path / "q.fa").write_text(">q1\nACGTACGT\n>q2\nACGGT\n>q3\n\n")
    (tmp_path / "t.fa").write_text(">t1\nACGACGT\n>t2\nTTAC\nGTT\n>t3\nAC\n")
    res = CliRunner().invoke(align_cmd, ["--mode", "global", "--traceback", "--device", "cpu",
                                         str(tmp_path / "q.fa"), str(tmp_path / "t.fa")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.strip().split("\n")  # stdout alone: a first run's compile note goes to stderr
    assert lines[0].startswith("#qname")
    f = lines[1].split("\t")
    assert f[0] == "q1" and f[4] == "t1" and f[8] == "0" and f[9] == "3M1I4M"
    assert lines[2].split("\t")[9] == "2D5M"
    res = CliRunner().invoke(align_cmd, [str(tmp_path / "q.fa"), str(tmp_path / "q.fa"), "--device", "cpu"])
    assert res.exit_code == 0
    (tmp_path / "bad.fa").write_text(">x\nACGT\n")
    res = CliRunner().invoke(align_cmd, [str(tmp_path / "q.fa"), str(tmp_path / "bad.fa"), "--device", "cpu"])
    assert res.exit_code != 0 and "equal" in res.output
    res = CliRunner().invoke(align_cmd, [str(tmp_path / "none.fa"), str(tmp_path / "q.fa"), "--device", "cpu"])
    assert res.exit_code == 1 and "none.fa: No such file or directory" in res.output  # an error line, no traceback
    assert res.exception is None or isinstance(res.exception, SystemExit)


# ---- 16-bit packed path: selection and pairing (CPU), exactness and width switch (GPU) ---------

def test_fits16_bound():
    from g3align.aligner.pairwise.engine import fits16
    m = np.array([150, 1000, 1200, 1200, 14000, 20000])
    n = np.array([150, 1000, 1200, 1200, 14000, 20000])
    ok = fits16(m, n, (1, 32), 1, 4, 6, 1)
    assert list(ok) == [True, True, True, True, True, False]       # 20 kb: gap bound > 29000
    assert list(fits16(m[:4], n[:4], (1, 32), 25, 4, 6, 1)) == [True, True, True, True]   # 30000
    assert list(fits16(m[:4], n[:4], (1, 32), 30, 4, 6, 1)) == [True, True, False, False]  # 30000, 36000
    assert not fits16(m[:1], n[:1], (1, 32), 200, 4, 6, 1).any()    # byte profile: match <= 127
    assert not fits16(m[:1], n[:1], (1, 32), 1, 4, 3000, 1).any()   # sentinel would wrap


def test_pair_up():
    from g3align.aligner.pairwise.engine import pair_up
    m = np.array([5, 5, 5, 7, 9, 9, 4])
    plist = np.array([6, 0, 1, 2, 3, 4, 5])            # sorted by m: 4, 5, 5, 5, 7, 9, 9
    o = pair_up(plist, m).reshape(-1, 2)
    assert o.tolist() == [[6, -1], [0, 1], [2, -1], [3, -1], [4, 5]]
    assert pair_up(np.zeros(0, np.int64), m).size == 0


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_gpu16_equals_cpu_and_switches_width(mode):
    rng = np.random.default_rng(5)
    qs, ts = rand_pairs(rng, 300, 1, 900)
    for go, ge, mt, mm in ((6, 1, 1, 4), (0, 2, 1, 4), (5, 2, 2, 3)):
        c = align_pairs(qs, ts, mode=mode, match=mt, mismatch=mm, gap_open=go, gap_extend=ge, device="cpu")
        for cfg in (None, (1, 8), (4, 16), (32, 8)):
            tim = {}
            g = align_pairs(qs, ts, mode=mode, match=mt, mismatch=mm, gap_open=go, gap_extend=ge, device="gpu",
                            timings=tim, config16=cfg)
            assert tim["pairs16"] > 0
            for f in ("score", "q_end", "t_end", "q_start", "t_start"):
                np.testing.assert_array_equal(getattr(c, f), getattr(g, f), err_msg=f"{f} {cfg}")
    # identical 1200 bp pairs: match 30 -> 36000 does not fit int16 -> 32-bit kernel, exact score
    qq = ["ACGT" * 300] * 3
    for mt, n16 in ((30, 0), (25, 3)):
        tim = {}
        g = align_pairs(qq, qq, mode=mode, match=mt, device="gpu", timings=tim)
        assert tim["pairs16"] == n16 and list(g.score) == [mt * 1200] * 3


def test_parasail_sweep_small(tmp_path):
    pytest.importorskip("parasail")
    from conftest import load_script
    sweep = load_script("pairwise_parasail_sweep")
    rc = sweep.main(["--pairs", "250", "--max-len", "160", "--tiny", "12", "--procs", "1", "--device", "cpu",
                     "--out", str(tmp_path)])
    assert rc == 0, (tmp_path / "parasail_sweep.md").read_text()


# ---- gridded / linear-space traceback ------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_cpu_grid_traceback_equals_full(mode):
    """The gridded walk (checkpoint rows / columns + block recomputation) gives the full-matrix CIGARs."""
    rng = np.random.default_rng(13)
    qs, ts = rand_pairs(rng, 40, 0, 70)
    qs.append("ACGT" * 300 + "TTTT" + "ACGA" * 200)                  # a longer pair, many blocks
    ts.append("ACGT" * 280 + "GG" + "ACGA" * 230)
    f = ("score", "q_end", "t_end", "q_start", "t_start", "cigar", "cigar_off")
    for go, ge in GAPS[:2]:
        full = align_pairs(qs, ts, mode=mode, gap_open=go, gap_extend=ge, traceback=True, device="cpu")
        for grid in ((1, 1), (4, 3), (16, 64)):
            g = align_pairs(qs, ts, mode=mode, gap_open=go, gap_extend=ge, traceback=True, device="cpu", grid=grid)
            for x in f:
                np.testing.assert_array_equal(getattr(full, x), getattr(g, x), err_msg=f"{x} {grid}")


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_gpu_grid_traceback_equals_cpu(mode):
    import cupy as cp

    from g3align.aligner.pairwise import engine as pw
    rng = np.random.default_rng(17)
    qs, ts = rand_pairs(rng, 200, 0, 900)
    f = ("score", "q_end", "t_end", "q_start", "t_start", "cigar", "cigar_off")
    for go, ge in GAPS[:2]:
        c = align_pairs(qs, ts, mode=mode, gap_open=go, gap_extend=ge, traceback=True, device="cpu")
        for grid, cfg in ((None, None), ((64, 16), None), ((256, 100), (4, 8))):
            g = align_pairs(qs, ts, mode=mode, gap_open=go, gap_extend=ge, traceback=True, device="gpu",
                            grid=grid, config=cfg)
            for x in f:
                np.testing.assert_array_equal(getattr(c, x), getattr(g, x), err_msg=f"{x} {grid} {cfg}")
    # the linear-space path of one long pair (chained forward + block walk), small grids
    (q,), (t,) = rand_pairs(rng, 1, 2500, 3000, related=1.0)
    c = align_pairs([q], [t], mode=mode, traceback=True, device="cpu")
    qc, _ = encode_seqs([q])
    tc, _ = encode_seqs([t])
    for grid in ((256, 64), (512, 1000)):
        s, i, j, qs_, ts_, cg = pw._chain_one_tb(cp, cp.asarray(qc), 0, qc.size, cp.asarray(tc), 0, tc.size,
                                                pw.MODES[mode], 1, 4, 6, 1, -1, grid=grid)
        assert (s, i, j, qs_, ts_) == (c.score[0], c.q_end[0], c.t_end[0], c.q_start[0], c.t_start[0])
        np.testing.assert_array_equal(cg, c.cigar)


# ---- 16-bit traceback of short pairs in shared memory (pw_tb16) ---------------------------------

def test_fits_tb16():
    from g3align.aligner.pairwise.engine import fits_tb16, tb16_rows
    m = np.array([1, 32, 33, 150, 256, 257, 150, 150, 256])
    n = np.array([1, 40, 10, 150, 192, 100, 307, 308, 193])       # TB16_SMEM = 48 KB
    assert tb16_rows(m).tolist() == [1, 1, 2, 5, 8, 9, 5, 5, 8]
    assert fits_tb16(m, n, 1, 4, 6, 1).tolist() == [True, True, True, True, True, False, True, False, False]
    assert not fits_tb16(m[:1], n[:1], 200, 4, 6, 1).any()          # byte profile
    assert not fits_tb16(m[3:4], n[3:4], 1, 4, 30, 50).any()        # gap bound beyond TB16_LIM
    assert not fits_tb16(m[3:4], n[3:4], 101, 4, 6, 1).any()        # 101 * 150 > TB16_LIM
    assert fits_tb16(m[3:4], n[3:4], 27, 4, 6, 1, 0).all()          # 27 * 150 < TB16_KEY_LIM
    assert fits_tb16(m[3:4], n[3:4], 27, 4, 6, 1, 2).all()
    assert fits_tb16(m[3:4], n[3:4], 28, 4, 6, 1, 0).all()          # global: no key
    assert not fits_tb16(m[3:4], n[3:4], 28, 4, 6, 1, 2).any()      # local: 28 * 150 >= 4096


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_gpu_tb16_equals_cpu(mode):
    rng = np.random.default_rng(23)
    qs, ts = rand_pairs(rng, 300, 1, 300)
    qs += ["ACGT" * 30, "A" * 150, "ACGTN" * 20, "T"]
    ts += ["ACGT" * 30, "A" * 140, "CCGTN" * 21, "TTTTTTTT"]
    f = ("score", "q_end", "t_end", "q_start", "t_start", "cigar", "cigar_off")
    from g3align.aligner.pairwise.engine import fits_tb16
    m = np.array([len(x) for x in qs])
    n = np.array([len(x) for x in ts])
    from g3align.aligner.pairwise.engine import MODES as MD
    for go, ge, mt, mm in ((6, 1, 1, 4), (0, 2, 1, 4), (5, 2, 2, 3), (11, 1, 3, 7), (9, 2, 20, 30)):
        want = int((fits_tb16(m, n, mt, mm, go, ge, MD[mode]) & (m > 0) & (n > 0)).sum())
        assert want > 50
        c = align_pairs(qs, ts, mode=mode, match=mt, mismatch=mm, gap_open=go, gap_extend=ge, traceback=True,
                        device="cpu")
        for width in ("auto", 32):
            tim = {}
            g = align_pairs(qs, ts, mode=mode, match=mt, mismatch=mm, gap_open=go, gap_extend=ge, traceback=True,
                            device="gpu", width=width, timings=tim)
            assert tim["pairs16"] == (want if width == "auto" else 0)
            for x in f:
                np.testing.assert_array_equal(getattr(c, x), getattr(g, x), err_msg=f"{x} {go}/{ge} {width}")


# ---- regime 2: long pairs over the whole GPU (pw_chain_batch) -----------------------------------

@pytest.mark.parametrize("group", [1, 2, 3, 7, 50])
def test_chain_items(group):
    from g3align.aligner.pairwise.engine import chain_items
    ns = np.array([3, 1, 5, 5, 2, 8, 1, 4])
    it = chain_items(ns, group).astype(np.int64)
    K = int(ns.sum())
    assert it.shape == (K, 4)
    assert sorted(map(tuple, it[:, :2].tolist())) == sorted((a, s) for a in range(ns.size) for s in range(ns[a]))
    k = np.arange(K)
    a, s, prev, nxt = it.T
    has_p, has_n = s > 0, s + 1 < ns[a]
    assert (prev[~has_p] == -1).all() and (nxt[~has_n] == -1).all()
    assert (a[prev[has_p]] == a[has_p]).all() and (s[prev[has_p]] == s[has_p] - 1).all()
    assert (prev[has_p] < k[has_p]).all() and (nxt[prev[has_p]] == k[has_p]).all()
    assert (nxt[has_n] > k[has_n]).all() and (nxt[has_n] - k[has_n] <= group).all()   # kernel: group <= W
    if group == 1:      # pair-major, pairs by strip count descending (stable)
        order = np.argsort(-ns, kind="stable")
        assert a.tolist() == np.repeat(order, ns[order]).tolist()
        assert (prev[has_p] == k[has_p] - 1).all()
    assert chain_items(np.zeros(0, np.int64), group).shape == (0, 4)


@pytest.mark.parametrize("W,group", [(1, 1), (2, 1), (3, 2), (4, 4), (5, 3), (16, 1), (16, 5)])
def test_chain_batch_ring_protocol(W, group):
    """Model of pw_chain_batch's ring at column granularity under random warp interleavings: item k
    writes its row into slot k % W; a strip computes column j once its predecessor has published j
    (reading it) and then publishes j itself; before its first column an item that writes a row waits
    for the reader r of the row in its slot (next of the warp's last item that wrote one) to finish
    when r belongs to another pair.  No boundary row may be overwritten before its reader has read it,
    and every run must finish (no deadlock)."""
    from g3align.aligner.pairwise.engine import chain_items
    rng = np.random.default_rng(W * 100 + group)
    ns = np.array([4, 1, 3, 6, 2, 5])
    it = chain_items(ns, group)
    K, ncol = it.shape[0], 5
    a, s, prev, nxt = (it[:, c].tolist() for c in range(4))
    for _ in range(20):
        ring = {}                                 # (slot, column) -> (item, column) last written there
        prog = [0] * K                            # columns published; ncol + 1: finished
        cur = list(range(min(W, K)))              # item of each warp (>= K: done)
        col = [0] * W                             # columns of the current item done
        pend = [-1] * W                           # reader of the row in each warp's slot
        while any(x < K for x in cur):
            runnable = []
            for w in range(W):
                k = cur[w] if w < len(cur) else K
                if k >= K:
                    continue
                if col[w] == 0 and s[k] + 1 < ns[a[k]]:
                    r = pend[w]
                    if r >= 0 and r != k and a[r] != a[k] and prog[r] <= ncol:
                        continue
                if prev[k] >= 0 and prog[prev[k]] < col[w] + 1:
                    continue
                runnable.append(w)
            assert runnable, "deadlock"
            w = runnable[rng.integers(len(runnable))]
            k, j = cur[w], col[w] + 1
            if prev[k] >= 0:
                assert ring[(prev[k] % W, j)] == (prev[k], j), "boundary row overwritten before it was read"
            if s[k] + 1 < ns[a[k]]:
                ring[(k % W, j)] = (k, j)
                pend[w] = nxt[k]
            prog[k] = j
            col[w] = j
            if j == ncol:
                prog[k] = ncol + 1
                cur[w] += W
                col[w] = 0


def test_chain_batch_pairs():
    from g3align.aligner.pairwise import engine as pw
    nsm = 4
    m = np.array([100, 9000, 20000, 70000, 8191, 30000])
    n = np.array([100, 9000, 20000, 70000, 8191, 30000])
    work = np.arange(6)
    args = (1, 4, 6, 1, -1)
    # 16-bit 9000 (8 lanes) + 32-bit 20000 and 30000 (16 each): far below LONG_FILL16 / LONG_FILL32 warps per SM
    assert pw.chain_batch_pairs(m, n, work, nsm, *args).tolist() == [1, 2, 3, 5]
    assert pw.chain_batch_pairs(m, n, work, nsm, *args, chain=True).tolist() == [1, 2, 3, 5]
    assert pw.chain_batch_pairs(m, n, work, nsm, *args, chain=False).size == 0
    assert pw.chain_batch_pairs(m, n, work[:2], nsm, *args).tolist() == [1]
    # many long pairs fill the GPU in the batch kernels: only the huge ones go to pw_chain_batch
    k = -int(-pw.LONG_FILL32 * nsm * 32 // 16)                 # 32-bit pairs (16 lanes each) filling LONG_FILL32
    mm = np.r_[np.full(k, 20000), 70000]
    assert pw.chain_batch_pairs(mm, mm, np.arange(k + 1), nsm, *args).tolist() == [k]
    assert pw.chain_batch_pairs(mm, mm, np.arange(k), nsm, *args).size == 0
    assert pw.chain_batch_pairs(mm, mm, np.arange(k - 1), nsm, *args).size == k - 1
    # 16-bit pairs (8 lanes each) fill at LONG_FILL16; with width=32 or a band they count as 32-bit pairs
    k16 = -int(-pw.LONG_FILL16 * nsm * 32 // 8)
    m16 = np.full(k16 - 1, 9000)
    assert pw.chain_batch_pairs(m16, m16, np.arange(k16 - 1), nsm, *args).size == k16 - 1
    m16 = np.full(k16, 9000)
    assert pw.chain_batch_pairs(m16, m16, np.arange(k16), nsm, *args).size == 0
    m16 = np.full(k - 1, 9000)
    assert pw.chain_batch_pairs(m16, m16, np.arange(k - 1), nsm, *args, width=32).size == k - 1
    m16 = np.full(k, 9000)
    assert pw.chain_batch_pairs(m16, m16, np.arange(k), nsm, *args, width=32).size == 0
    assert pw.chain_batch_pairs(m16, m16, np.arange(k), nsm, 1, 4, 6, 1, 50).size == 0


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_gpu_chain_batch_equals_cpu(mode):
    import cupy as cp

    from g3align.aligner.pairwise import engine as pw
    rng = np.random.default_rng(29)
    qs, ts = [], []
    for m, n in ((5000, 5300), (7000, 6500), (9000, 12000), (12000, 11000)):
        (q,), (t,) = rand_pairs(rng, 1, m, m, related=1.0)
        t = (t * (n // max(len(t), 1) + 2))[:n]
        qs.append(q)
        ts.append(t)
    qs.append("".join(rng.choice(list("ACGT"), 6000)))       # unrelated: many tied local candidates
    ts.append("".join(rng.choice(list("ACGT"), 6100)))
    qc, qo = encode_seqs(qs)
    tc, to = encode_seqs(ts)
    qd, td = cp.asarray(qc), cp.asarray(tc)
    for band in ((-1, 3100) if mode == "global" else (-1,)):
        c = align_pairs(qs, ts, mode=mode, band=None if band < 0 else band, device="cpu")
        for kw in ({}, dict(group=1), dict(max_warps=4, group=4), dict(max_warps=8, group=3), dict(max_warps=3)):
            s, i, j = pw._chain_batch(cp, qd, qo, td, to, np.arange(len(qs)), pw.MODES[mode], 1, 4, 6, 1, band, **kw)
            for x, y, f in ((s, c.score, "score"), (i, c.q_end, "q_end"), (j, c.t_end, "t_end")):
                np.testing.assert_array_equal(x, y, err_msg=f"{f} band={band} {kw}")
    tim = {}
    g = align_pairs(qs, ts, mode=mode, device="gpu", chain_batch=True, timings=tim)
    assert tim["pairs_chain_batch"] == sum(len(x) >= pw.LONG_MIN_M for x in qs)
    c = align_pairs(qs, ts, mode=mode, device="cpu")
    for f in ("score", "q_end", "t_end", "q_start", "t_start"):
        np.testing.assert_array_equal(getattr(c, f), getattr(g, f), err_msg=f)
