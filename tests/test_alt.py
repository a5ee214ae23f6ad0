"""ALT-aware `mem` (bwa 0.7.17 with PREFIX.alt): the same records as live `bwa mem`, on a reference whose .alt lists
divergent copies of the primary contigs (0-4 % divergence, indels, a novel insertion, an exact copy), single-end and
paired-end, with -j and with -a; the .alt parser as bwa's bns_restore; the pa:f formatting as printf's "%.3f".
The GPU path (chain_kernel leaves reads with ALT seeds to the CPU twin) gives the same records where a GPU is."""
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from g3align.index.store import read_alt

ROOT = Path(__file__).resolve().parents[1]
HAVE_BWA = shutil.which("bwa") is not None
ACGT = np.frombuffer(b"ACGTN", np.uint8)


def fasta_codes(path, start=0, end=None):
    """The first sequence of a (gzipped) FASTA as codes 0-4 (N: 4), cut to [start, end)."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    seq = raw.split(b"\n", 1)[1].split(b">", 1)[0].replace(b"\n", b"").upper()[start:end]
    table = np.full(256, 4, np.uint8)
    table[np.frombuffer(b"ACGT", np.uint8)] = np.arange(4, dtype=np.uint8)
    return table[np.frombuffer(seq, np.uint8)]


def _diverge(rng, s, rate, indel_every=0):
    """s with a fraction `rate` of substitutions and, every ~indel_every bases, a 1-6 bp insertion or deletion."""
    s = s.copy()
    m = (rng.random(s.shape[0]) < rate) & (s < 4)
    s[m] = (s[m] + rng.integers(1, 4, int(m.sum()))) % 4
    if not indel_every:
        return s
    out, p = [], 0
    while p < s.shape[0]:
        step = int(rng.integers(indel_every // 2, indel_every * 3 // 2))
        out.append(s[p:p + step])
        p += step
        k = int(rng.integers(1, 7))
        if rng.random() < 0.5:
            out.append(rng.integers(0, 4, k).astype(np.uint8))
        else:
            p += k
    return np.concatenate(out)


def make_alt_reference(d: Path, seed: int = 7, codes=None):
    """PREFIX.fa and PREFIX.alt in d: two primary contigs cut from `codes` (default: lambda), a primary decoy not in
    the .alt, and ALT contigs copied from the primary ones at several divergences, with indels, a novel insertion
    and an exact copy. Returns (fasta path, contig codes by name)."""
    rng = np.random.default_rng(seed)
    lam = fasta_codes(ROOT / "data/lambda.fa.gz") if codes is None else codes
    cut = len(lam) * 30 // 48
    p1, p2 = lam[:cut], lam[cut:]

    def part(s, a, b):  # s[a/1000 : b/1000 of its length]
        return s[len(s) * a // 1000:len(s) * b // 1000]
    novel = rng.integers(0, 4, 600).astype(np.uint8)
    ctg = {
        "chrP1": p1,
        "chrP2": p2,
        "decoy1": _diverge(rng, part(p1, 667, 800), 0.06),
        "chrP1_alt1": _diverge(rng, part(p1, 167, 500), 0.01, 700),
        "chrP1_alt2": _diverge(rng, part(p1, 400, 667), 0.04, 400),
        "chrP2_alt1": _diverge(rng, part(p2, 108, 540), 0.005),
        "chrP2_alt2": np.concatenate([part(p2, 595, 703), novel, part(p2, 703, 811)]),
        "chrP1_same": part(p1, 833, 933).copy(),  # an exact copy: ties with the primary hit
    }
    fa = d / "altref.fa"
    with open(fa, "wb") as fh:
        for name, s in ctg.items():
            fh.write(b">" + name.encode() + b"\n")
            seq = ACGT[s].tobytes()
            for i in range(0, len(seq), 70):
                fh.write(seq[i:i + 70] + b"\n")
    # header lines, extra columns, CRLF, a name the index lacks; chrP2_alt2 last: bwa reads it (it ends in a tab)
    (d / "altref.fa.alt").write_bytes(
        b"@SQ\tSN:chrP1_alt1\tLN:1\n@PG\tID:x\nchrP1_alt1\t0\tchrP1\t5001\t60\t10000M\n"
        b"chrP1_alt2\r\nnot_in_index\t0\nchrP2_alt1\nchrP1_same\t16\nchrP2_alt2\t")
    return fa, ctg


def _rc(s):
    return np.where(s < 4, 3 - s, 4).astype(np.uint8)[::-1]


def simulate_pairs(ctg, n, seed=11, length=150):
    """n read pairs (FASTQ bytes, R1 and R2) from every contig in proportion to its length, insert 200-500,
    0.5-2 % substitutions and an occasional 1-3 bp indel."""
    rng = np.random.default_rng(seed)
    names = list(ctg)
    lens = np.array([len(ctg[k]) for k in names], float)
    r1, r2 = [], []
    for i in range(n):
        c = ctg[names[int(rng.choice(len(names), p=lens / lens.sum()))]]
        ins = int(rng.integers(200, 500))
        if ins >= len(c):
            ins = len(c) - 1
        p = int(rng.integers(0, len(c) - ins))
        frag = c[p:p + ins]
        if rng.random() < 0.5:
            frag = _rc(frag)
        a, b = frag[:length], _rc(frag)[:length]
        for k, s in enumerate((a, b)):
            s = _diverge(rng, s, float(rng.choice([0.005, 0.01, 0.02])))
            if rng.random() < 0.15:
                q = int(rng.integers(20, len(s) - 20))
                s = np.concatenate([s[:q], rng.integers(0, 4, 2).astype(np.uint8), s[q + 1:]])
            rec = b"@p%d\n%s\n+\n%s\n" % (i, ACGT[s].tobytes(), b"I" * len(s))
            (r1 if k == 0 else r2).append(rec)
    return b"".join(r1), b"".join(r2)


@pytest.fixture(scope="module")
def altref(tmp_path_factory):
    d = tmp_path_factory.mktemp("alt")
    fa, ctg = make_alt_reference(d)
    q1, q2 = simulate_pairs(ctg, 1500)
    (d / "r1.fq").write_bytes(q1)
    (d / "r2.fq").write_bytes(q2)
    return d, fa


def test_read_alt_as_bns_restore(tmp_path):
    names = ["a", "b", "c", "d", "e"]
    p = tmp_path / "x.alt"
    p.write_bytes(b"@a\nb\tx\r\n\nc\r\nzz\n@d\td\te")  # only the first word of a line counts ('@d': skipped)
    assert read_alt(str(p), names).tolist() == [0, 1, 1, 0, 0]
    p.write_bytes(b"d\ne")  # a word that the end of the file ends is never looked at
    assert read_alt(str(p), names).tolist() == [0, 0, 0, 1, 0]
    p.write_bytes(b"e\t")
    assert read_alt(str(p), names).tolist() == [0, 0, 0, 0, 1]
    assert read_alt(str(tmp_path / "none.alt"), names) is None


def test_pa_tag_is_printf_rounding():
    from g3align.aligner.io.textbuf import put_fixed3
    rng = np.random.default_rng(3)
    xs = [a / b for a, b in zip(rng.integers(1, 3000, 4000), rng.integers(1, 3000, 4000))]
    xs += [1.0005, 0.0625, 0.9995, 17 / 16, 1 / 8, 0.0005, 2.5e-4, 0.0, 123.4565, 1e-9, 1 / 3, 2 / 3]
    for x in xs:
        buf, n = put_fixed3(np.zeros(4, np.uint8), 0, float(x))
        assert bytes(buf[:n]).decode() == "%.3f" % x, x


def _g3(args, device="cpu"):
    env = dict(os.environ, G3ALIGN_DETACH="0")
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", "--device", device, *args],
                       capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout, r.stderr.decode()


def _body(sam):
    return [x for x in sam.split(b"\n") if x and not x.startswith(b"@")]


def _sq(sam):
    return [x for x in sam.split(b"\n") if x.startswith(b"@SQ")]


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH")
@pytest.mark.parametrize("mode", ["pe", "se", "pe-j", "pe-a", "se-a"])
def test_alt_mem_equals_bwa(altref, mode):
    d, fa = altref
    prefix = str(d / "altref.fa")
    if not os.path.exists(prefix + ".bwt"):
        subprocess.run(["bwa", "index", prefix], check=True, capture_output=True)
    reads = [str(d / "r1.fq")] + ([str(d / "r2.fq")] if mode.startswith("pe") else [])
    opts = {"j": ["-j"], "a": ["-a"]}.get(mode.split("-")[-1], []) if "-" in mode else []
    want = subprocess.run(["bwa", "mem", *opts, prefix, *reads], capture_output=True, check=True).stdout
    got, err = _g3([*opts, prefix, *reads])
    assert _sq(got) == _sq(want)
    body, wbody = _body(got), _body(want)
    assert len(body) == len(wbody)
    diff = [(a, b) for a, b in zip(body, wbody) if a != b]
    assert not diff, diff[:3]
    if mode == "pe-j":
        assert b"AH:*" not in got and b"pa:f:" not in got
    else:
        assert b"AH:*" in got and "read 5 ALT contigs" in err
        if mode in ("pe", "se"):  # the data exercise what ALT changes
            assert b"pa:f:" in got
            flags = [int(x.split(b"\t")[1]) for x in body]
            alt_supp = [x for x, f in zip(body, flags) if f & 0x800 and b"_alt" in x.split(b"\t")[2]]
            assert alt_supp and any(b"H" not in x.split(b"\t")[5] and b"S" in x.split(b"\t")[5] for x in alt_supp)


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH")
def test_alt_on_g3align_index_and_gpu(altref):
    """g3align's own index with the same .alt gives the same records; so does the GPU path where there is one."""
    d, fa = altref
    own = d / "own"
    shutil.copy(fa, own.with_suffix(".fa"))
    shutil.copy(str(fa) + ".alt", str(own.with_suffix(".fa")) + ".alt")
    prefix = str(own.with_suffix(".fa"))
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "index", prefix], capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    reads = [str(d / "r1.fq"), str(d / "r2.fq")]
    if not os.path.exists(str(fa) + ".bwt"):
        subprocess.run(["bwa", "index", str(fa)], check=True, capture_output=True)
    want = subprocess.run(["bwa", "mem", str(fa), *reads], capture_output=True, check=True).stdout
    got, _ = _g3([prefix, *reads])
    assert _body(got) == _body(want)
    from g3align.aligner.gpu.device import gpu_available
    if gpu_available():
        for rs in (reads, reads[:1]):
            g, _ = _g3([prefix, *rs], device="gpu")
            c, _ = _g3([prefix, *rs], device="cpu")
            assert _body(g) == _body(c)


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH")
def test_alt_two_workers_equal_one_process(altref, tmp_path):
    """The sharded path (--gpus N's worker processes, here on the CPU): the same header (AH:*) and records as one
    process at the same -K, paired-end and single-end."""
    from test_shard import K, body, run_workers
    d, fa = altref
    prefix = str(fa)
    if not os.path.exists(prefix + ".bwt"):
        subprocess.run(["bwa", "index", prefix], check=True, capture_output=True)
    for reads in ([str(d / "r1.fq"), str(d / "r2.fq")], [str(d / "r1.fq")]):
        one, _ = _g3(["-t", "2", "-K", K, prefix, *reads])
        got = run_workers(tmp_path, prefix, reads, [None, None])
        assert b"AH:*" in got and b"pa:f:" in got
        assert body(got) == body(one)
