"""The pairwise engine's input forms and result transport (aligner/pairwise/pwio.py, kernels/pwio.cu,
aligner/pairwise/engine.py).

Every input form gives the same codes and the same alignments (CPU); bad text is named by sequence and position;
2-bit packing round-trips; on a GPU, each pwio kernel equals its CPU twin, every input form and output="cupy"
give the CPU twin's results byte for byte, and results do not depend on how a batch is split.
"""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from g3align.aligner.pairwise import pwio
from g3align.aligner.pairwise.engine import align_pairs

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("score", "q_end", "t_end", "q_start", "t_start", "cigar", "cigar_off")


def rand_seqs(rng, k, lo, hi, alphabet="ACGT"):
    lens = rng.integers(lo, hi + 1, k)
    return ["".join(rng.choice(list(alphabet), L)) for L in lens]


def same(a, b):
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        x = x.get() if hasattr(x, "get") else x
        y = y.get() if hasattr(y, "get") else y
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=f)


def test_input_forms_give_the_same_codes():
    rng = np.random.default_rng(3)
    seqs = rand_seqs(rng, 50, 0, 40, "ACGTacgtNRY") + ["", ""]
    codes, off = pwio.host_codes(seqs)
    assert off[0] == 0 and off[-1] == codes.size and np.all(np.diff(off) == [len(s) for s in seqs])
    lut = {c: v for v, cs in enumerate(["Aa", "Cc", "Gg", "Tt", "NnRrYy"]) for c in cs}
    assert codes.tolist() == [lut[c] for s in seqs for c in s]
    for form in ([s.encode() for s in seqs], tuple(seqs), (codes, off)):
        c2, o2 = pwio.host_codes(form)
        np.testing.assert_array_equal(c2, codes)
        np.testing.assert_array_equal(o2, off)
    acgt = [s.upper().replace("N", "A").replace("R", "C").replace("Y", "G") for s in seqs]
    c3, o3 = pwio.host_codes(acgt)
    p = pwio.pack2(c3, o3)
    assert p.data.size == (c3.size + 3) // 4 and len(p) == len(seqs)
    c4, o4 = pwio.host_codes(p)
    np.testing.assert_array_equal(c4, c3)
    np.testing.assert_array_equal(o4, o3)
    assert pwio.host_codes([])[1].tolist() == [0]
    with pytest.raises(ValueError, match="A, C, G, T only"):
        pwio.pack2(codes, off)


def test_input_forms_align_the_same():
    rng = np.random.default_rng(4)
    qs, ts = rand_seqs(rng, 60, 0, 90), rand_seqs(rng, 60, 0, 90)
    ref = align_pairs(qs, ts, mode="local", traceback=True, device="cpu")
    q = pwio.host_codes(qs)
    t = pwio.host_codes(ts)
    for qq, tt in ((q, t), (pwio.pack2(*q), pwio.pack2(*t)), ([s.encode() for s in qs], [s.encode() for s in ts])):
        same(align_pairs(qq, tt, mode="local", traceback=True, device="cpu"), ref)


def test_str_list_read_in_place():
    """A list of compact ASCII str is read in place (CPython) and gives the joined-text way's codes; any other
    list (non-ASCII or non-str items, a str subclass, a tuple, an invalid letter) is left to that way."""
    import sys
    rng = np.random.default_rng(9)
    seqs = rand_seqs(rng, 500, 0, 300, "ACGTacgtNRY")
    r = pwio.str_list_codes(seqs)
    if sys.implementation.name != "cpython":
        assert r is None
        return
    text, nseq, _ = pwio._text(tuple(seqs))
    off = pwio._offsets_from_text(text, nseq, np.flatnonzero(text == 10))
    codes = np.empty(int(off[-1]), np.uint8)
    pwio.encode_text(text, off, codes, pwio._LUT)
    np.testing.assert_array_equal(r[0], codes)
    np.testing.assert_array_equal(r[1], off)

    class S(str):
        pass
    for other in (seqs[:3] + ["ACé"], seqs[:3] + ["Ω"], seqs[:3] + [S("AC")], seqs[:3] + [b"AC"], tuple(seqs[:3]),
                  seqs[:3] + ["A-C"], []):
        assert pwio.str_list_codes(other) is None
    buf = np.zeros(10 ** 5, np.uint8)
    c, o = pwio.str_list_codes(["AC", "gt"], alloc=lambda t: buf[:t])
    assert c.base is buf or c.base is buf.base
    assert c.tolist() == [0, 1, 2, 3] and o.tolist() == [0, 2, 4]


def test_bad_text_is_named():
    with pytest.raises(ValueError, match=r"query 2: invalid character '-' at position 3"):
        pwio.host_codes(["ACGT", "", "ACG-T"], "query")
    with pytest.raises(ValueError, match=r"target 1: invalid character '\\n' at position 2"):
        pwio.host_codes(["ACGT", "AC\nGT"], "target")
    with pytest.raises(ValueError, match=r"query 0: invalid character 'é' at position 1"):
        pwio.host_codes(["Aé"], "query")
    with pytest.raises(ValueError, match=r"query 1: invalid character 'Ω' at position 0"):
        pwio.host_codes(["A", "ΩA"], "query")
    with pytest.raises(ValueError, match=r"query 1: a int, not a sequence"):
        pwio.host_codes(["A", 5], "query")
    c, o = pwio.host_codes(["AC", b"GT"])                # str and bytes mixed: the per-sequence path
    assert c.tolist() == [0, 1, 2, 3] and o.tolist() == [0, 2, 4]
    with pytest.raises(ValueError, match="codes must be 0..4"):
        pwio.host_codes((np.array([0, 5], np.uint8), np.array([0, 2])))
    with pytest.raises(ValueError, match="offsets"):
        pwio.host_codes((np.array([0, 1], np.uint8), np.array([0, 3])))


def test_encode_text_twin():
    text = np.frombuffer(b"ACg\n\nnT\nX", np.uint8)
    off = np.array([0, 3, 3, 5, 6])
    codes = np.zeros(6, np.uint8)
    bad = pwio.encode_text(text, off, codes, pwio._LUT)
    assert bad == 8 and codes[:5].tolist() == [0, 1, 2, 4, 3] and codes[5] == 255


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_pwio_kernels_compile(tmp_path):
    out = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", str(ROOT / "kernels" / "pwio.cu"),
                          "-o", str(tmp_path / "x.cubin")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert " 0 bytes spill stores" in out.stderr


@pytest.mark.gpu
def test_gpu_input_forms_equal_cpu():
    import cupy as cp
    rng = np.random.default_rng(5)
    qs, ts = rand_seqs(rng, 3000, 0, 400, "ACGTacgtN"), rand_seqs(rng, 3000, 0, 400, "ACGTN")
    qc, qo = pwio.host_codes(qs)
    tc, to = pwio.host_codes(ts)
    dq, dqo = pwio.device_codes(qs)
    np.testing.assert_array_equal(dq.get(), qc)
    np.testing.assert_array_equal(dqo, qo)
    a = np.where(qc == 4, 0, qc).astype(np.uint8)
    p = pwio.pack2(a, qo)
    np.testing.assert_array_equal(pwio.device_codes(p)[0].get(), a)
    pd = pwio.Packed2(cp.asarray(p.data), p.off)
    np.testing.assert_array_equal(pwio.device_codes(pd)[0].get(), a)
    for tb in (False, True):
        for mode in ("local", "global", "semiglobal"):
            ref = align_pairs(qs, ts, mode=mode, traceback=tb, device="cpu")
            same(align_pairs(qs, ts, mode=mode, traceback=tb, device="gpu"), ref)
            same(align_pairs((qc, qo), (tc, to), mode=mode, traceback=tb, device="gpu"), ref)
            same(align_pairs((cp.asarray(qc), qo), (cp.asarray(tc), cp.asarray(to)), mode=mode, traceback=tb,
                             device="gpu", output="cupy"), ref)
            half = len(qs) // 2                        # split in two calls: the same results
            r1 = align_pairs(qs[:half], ts[:half], mode=mode, traceback=tb, device="gpu")
            r2 = align_pairs(qs[half:], ts[half:], mode=mode, traceback=tb, device="gpu")
            np.testing.assert_array_equal(np.r_[r1.score, r2.score], ref.score)
            np.testing.assert_array_equal(np.r_[r1.cigar, r2.cigar], ref.cigar)
    with pytest.raises(ValueError, match=r"query 1: invalid character '-' at position 2"):
        align_pairs(["AC", "AC-"], ["A", "A"], device="gpu")
    with pytest.raises(ValueError, match=r"target 0: invalid character '\\n' at position 1"):
        align_pairs(["AC", "AC"], ["A\nC", "A"], device="gpu")


@pytest.mark.gpu
def test_gpu_gather_and_unpack_equal_twins():
    import cupy as cp

    from g3align.kernels.loader import get_module
    rng = np.random.default_rng(6)
    cnt = rng.integers(0, 9, 5000).astype(np.int32)
    src_off = np.cumsum(rng.integers(8, 12, 5000)).astype(np.int64)
    src = rng.integers(0, 1 << 30, int(src_off[-1]) + 20).astype(np.uint32)
    dst_off = pwio.csr(cnt)[:-1]
    want = np.zeros(int(cnt.sum()) + 1, np.uint32)
    pwio.gather_runs(src, src_off, cnt, dst_off, want)
    got = cp.zeros(want.size, cp.uint32)
    get_module("pwio").get_function("pw_gather_runs")(
        (20,), (256,), (cp.asarray(src), cp.asarray(src_off), cp.asarray(cnt), np.int32(1), cp.asarray(dst_off),
                        got, np.int32(cnt.size)))
    np.testing.assert_array_equal(got.get(), want)
    packed = rng.integers(0, 256, 1001).astype(np.uint8)
    for shift in (0, 1, 3, 6):
        n = 4 * 1001 - shift - 5
        w = np.zeros(n, np.uint8)
        pwio.unpack2(packed, shift, n, w)
        g = cp.zeros(n, cp.uint8)
        get_module("pwio").get_function("pw_unpack2")((4,), (256,), (cp.asarray(packed), np.int64(shift),
                                                                       np.int64(n), g))
        np.testing.assert_array_equal(g.get(), w)


def test_align_cli_streams_in_chunks(tmp_path, monkeypatch):
    """The TSV does not depend on the chunk size; FASTQ targets read like FASTA ones; uneven files are one error
    line naming both."""
    from click.testing import CliRunner

    from g3align.aligner.cli import align as align_cli
    rng = np.random.default_rng(8)
    qs, ts = rand_seqs(rng, 41, 0, 60, "ACGTN"), rand_seqs(rng, 41, 0, 60)
    (tmp_path / "q.fa").write_text("".join(f">q{k} x\n{s}\n" for k, s in enumerate(qs)))
    (tmp_path / "t.fq").write_text("".join(f"@t{k}\n{s}\n+\n{'I' * len(s)}\n" for k, s in enumerate(ts)))
    (tmp_path / "t.fa").write_text("".join(f">t{k}\n{s}\n" for k, s in enumerate(ts[:-1])))
    args = ["--mode", "semiglobal", "--traceback", "--device", "cpu", str(tmp_path / "q.fa"), str(tmp_path / "t.fq")]
    whole = CliRunner().invoke(align_cli.align_cmd, args)
    assert whole.exit_code == 0, whole.output
    lines = whole.stdout.splitlines()
    assert len(lines) == 42 and lines[1].startswith("q0\t") and lines[1].split("\t")[4] == "t0"
    r = align_pairs(qs, ts, mode="semiglobal", traceback=True, device="cpu")
    assert [int(x.split("\t")[8]) for x in lines[1:]] == r.score.tolist()
    assert [x.split("\t")[9] for x in lines[1:]] == [r.cigar_string(k) or "*" for k in range(len(qs))]
    monkeypatch.setattr(align_cli, "CHUNK_PAIRS", 5)
    assert CliRunner().invoke(align_cli.align_cmd, args).stdout == whole.stdout
    bad = CliRunner().invoke(align_cli.align_cmd, ["--device", "cpu", str(tmp_path / "q.fa"), str(tmp_path / "t.fa")])
    assert bad.exit_code == 1 and "t.fa: ends after record 40 while" in bad.output and "q.fa has more" in bad.output


@pytest.mark.gpu
def test_gpu_slabs_equal_cpu(monkeypatch):
    """Host code arrays big enough for slabs (made small here) go through the overlapped slab uploads: the CPU
    twin's results byte for byte, empty sequences included."""
    from g3align.aligner.pairwise import engine as pw
    monkeypatch.setattr(pw, "SLAB_BYTES", 1 << 12)
    rng = np.random.default_rng(10)
    q = pwio.host_codes(rand_seqs(rng, 2000, 0, 300, "ACGTN"))
    t = pwio.host_codes(rand_seqs(rng, 2000, 0, 300))
    for tb in (False, True):
        ref = align_pairs(q, t, mode="local", traceback=tb, device="cpu")
        tim = {}
        same(align_pairs(q, t, mode="local", traceback=tb, device="gpu", timings=tim), ref)
        assert "upload_wait_s" in tim                 # (the slab path ran)
