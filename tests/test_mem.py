"""End-to-end tests of `g3align index` + `g3align mem` (single-end).

* golden: the demo reads against bwa mem 0.7.17's own output shipped in data/golden (no bwa needed);
* live: random references with repeats, N runs and IUPAC codes, reads with substitutions, indels,
  chimeras and N bases, aligned by bwa (when on PATH; CI installs it) and by g3align, compared per read;
* determinism: byte-identical output for -K and -t;
* bad input: one-line errors, non-zero exit, no traceback.
"""
import gzip
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from g3align.aligner.io.compare import compare_sam

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "data")
HAVE_BWA = shutil.which("bwa") is not None


def g3(*args, stdin=None, check=True):
    """Run the CLI in a subprocess (exit status and stderr are part of what we test)."""
    p = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", *args], input=stdin,
                       capture_output=True)
    if check and p.returncode != 0:
        raise AssertionError(f"g3align {' '.join(args)} failed:\n{p.stderr.decode()}")
    return p


@pytest.fixture(scope="module")
def lambda_index(tmp_path_factory):
    d = tmp_path_factory.mktemp("lambda")
    prefix = str(d / "lambda")
    g3("index", "-p", prefix, os.path.join(DATA, "lambda.fa.gz"))
    return prefix


def records(sam_bytes):
    return [ln for ln in sam_bytes.decode().split("\n") if ln and not ln.startswith("@")]


def test_golden_single_end(lambda_index, tmp_path):
    out = tmp_path / "se.sam"
    g3("mem", "-o", str(out), lambda_index, os.path.join(DATA, "lambda_R1.fq.gz"))
    gold = tmp_path / "gold.sam"
    gold.write_bytes(gzip.decompress(open(os.path.join(DATA, "golden", "lambda_se.bwa.sam.gz"), "rb").read()))
    res = compare_sam(str(out), str(gold))
    text = out.read_text().split("\n")
    assert text[0].startswith("@HD\tVN:1.5")
    assert any(ln.startswith("@PG\tID:g3align") for ln in text)
    # every record identical to bwa's (the SAM body, field for field)
    ours = [ln for ln in text if ln and not ln.startswith("@")]
    theirs = [ln for ln in gold.read_text().split("\n") if ln and not ln.startswith("@")]
    assert ours == theirs
    # and the comparator (g3align compare) says so: every read common to both, all identical
    assert res["common"] == len(ours) - sum(1 for ln in ours if int(ln.split("\t")[1]) & 0x900) > 0
    assert res["identical"] == res["common"]


def test_determinism_K_and_threads(lambda_index):
    fq = os.path.join(DATA, "lambda_R1.fq.gz")
    outs = [g3("mem", "-K", str(k), "-t", str(t), lambda_index, fq).stdout
            for k, t in ((10_000, 1), (1_000_000, 2), (100_000_000, 2), (10_000, 2))]
    bodies = [records(o) for o in outs]
    assert all(b == bodies[0] for b in bodies[1:])


def _rand_ref(rng, n_ctg=4):
    """Contigs with interspersed repeats (exact and diverged copies), N runs and IUPAC codes."""
    rep = rng.integers(0, 4, 300)
    seqs = []
    for _ in range(n_ctg):
        s = rng.integers(0, 4, int(rng.integers(3000, 9000)))
        for _ in range(3):  # repeat copies
            p = int(rng.integers(0, len(s) - 300))
            cp = rep.copy()
            if rng.random() < 0.5:
                cp[rng.integers(0, 300, 3)] = rng.integers(0, 4, 3)
            s[p:p + 300] = cp
        p = int(rng.integers(0, len(s) - 600))  # a tandem repeat (equal chain keys in bwa's B-tree)
        unit = rng.integers(0, 4, int(rng.integers(20, 45)))
        s[p:p + 400] = np.tile(unit, 400 // len(unit) + 1)[:400]
        txt = np.frombuffer(b"ACGT", np.uint8)[s].copy()
        p = int(rng.integers(0, len(s) - 200))
        txt[p:p + int(rng.integers(1, 120))] = ord("N")
        txt[int(rng.integers(0, len(s)))] = ord("R")
        seqs.append(txt.tobytes().decode())
    return seqs


def _mutate(rng, s):
    out = []
    for ch in s:
        r = rng.random()
        if r < 0.01:
            out.append("ACGT"[rng.integers(0, 4)])
        elif r < 0.012:
            continue
        elif r < 0.014:
            out.append(ch + "ACGT"[rng.integers(0, 4)])
        else:
            out.append(ch)
    return "".join(out)


def _revcomp(s):
    return s[::-1].translate(str.maketrans("ACGTN", "TGCAN"))


def _rand_reads(rng, seqs, n):
    recs = []
    for i in range(n):
        L = int(rng.choice([0, 15, 30, 70, 100, 150, 151, 250]))
        c = seqs[int(rng.integers(0, len(seqs)))]
        p = int(rng.integers(0, len(c) - 300))
        r = _mutate(rng, c[p:p + L])[:L]
        kind = rng.random()
        if kind < 0.1:  # chimera
            c2 = seqs[int(rng.integers(0, len(seqs)))]
            p2 = int(rng.integers(0, len(c2) - 300))
            r = r[:L // 2] + _revcomp(c2[p2:p2 + L - L // 2])
        elif kind < 0.15:  # random sequence
            r = "".join("ACGT"[x] for x in rng.integers(0, 4, L))
        if rng.random() < 0.5:
            r = _revcomp(r)
        if r and rng.random() < 0.05:
            k = int(rng.integers(0, len(r)))
            r = r[:k] + "N" + r[k + 1:]
        r = r.replace("R", "A")
        recs.append(f"@r{i}\n{r}\n+\n{'I' * len(r)}\n")
    return "".join(recs)


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH (CI installs it)")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_live_against_bwa(tmp_path, seed):
    rng = np.random.default_rng(seed)
    seqs = _rand_ref(rng)
    fa = tmp_path / "ref.fa"
    fa.write_text("".join(f">ctg{i} desc\n{s}\n" for i, s in enumerate(seqs)))
    fq = tmp_path / "reads.fq"
    fq.write_text(_rand_reads(rng, seqs, 600).replace("@r0\n\n+\n\n", "@r0\nA\n+\nI\n"))
    subprocess.run(["bwa", "index", str(fa)], capture_output=True, check=True)
    bwa = subprocess.run(["bwa", "mem", str(fa), str(fq)], capture_output=True, check=True).stdout
    (tmp_path / "bwa.sam").write_bytes(bwa)
    g3("index", str(fa))
    ours = g3("mem", str(fa), str(fq)).stdout
    (tmp_path / "g3.sam").write_bytes(ours)
    a = [ln.split("\t") for ln in records(ours)]
    b = [ln.split("\t") for ln in records(bwa)]
    assert len(a) == len(b)
    diffs = 0
    for x, y in zip(a, b):
        # bwa writes an empty SEQ/QUAL for zero-length reads; we write '*' (valid SAM)
        if y[9] == "":
            y[9] = y[10] = "*"
        if x != y:
            diffs += 1
    assert diffs == 0, f"{diffs} records differ from bwa mem"


def test_every_read_once(lambda_index, tmp_path):
    fq = tmp_path / "odd.fq"
    fq.write_text("@empty\n\n+\n\n@short\nACGTACGT\n+\nIIIIIIII\n@rnd\n" + "ACGT" * 40 + "\n+\n" + "I" * 160 + "\n")
    out = g3("mem", lambda_index, str(fq)).stdout
    recs = [r.split("\t") for r in records(out)]
    prim = [r for r in recs if not int(r[1]) & 0x900]
    assert [r[0] for r in prim] == ["empty", "short", "rnd"]
    assert prim[0][1] == "4" and prim[0][9] == "*" and prim[0][10] == "*"


def test_empty_fastq(lambda_index, tmp_path):
    fq = tmp_path / "empty.fq"
    fq.write_text("")
    p = g3("mem", lambda_index, str(fq))
    assert records(p.stdout) == [] and p.stdout.startswith(b"@HD")


def test_stdin(lambda_index):
    fq = gzip.decompress(open(os.path.join(DATA, "lambda_R1.fq.gz"), "rb").read())[:4000]
    fq = fq[:fq.rfind(b"\n@") + 1]
    p = g3("mem", lambda_index, "-", stdin=fq)
    assert len(records(p.stdout)) == fq.count(b"\n+\n")


@pytest.mark.parametrize("content,needle", [
    ("@r1\nACGT\n+\nIII\n", "r1"),
    ("@r1\nACGT\nIIII\n", "record 1"),
    ("@r1\nAC#T\n+\nIIII\n", "invalid character"),
])
def test_bad_fastq(lambda_index, tmp_path, content, needle):
    fq = tmp_path / "bad.fq"
    fq.write_text(content)
    p = g3("mem", lambda_index, str(fq), check=False)
    err = p.stderr.decode()
    assert p.returncode != 0
    assert "Traceback" not in err
    assert str(fq) in err or "bad.fq" in err
    assert len([ln for ln in err.strip().split("\n") if ln.startswith("[E::")]) == 1


def test_truncated_gzip(lambda_index, tmp_path):
    raw = open(os.path.join(DATA, "lambda_R1.fq.gz"), "rb").read()
    fq = tmp_path / "trunc.fq.gz"
    fq.write_bytes(raw[: len(raw) // 2])
    p = g3("mem", lambda_index, str(fq), check=False)
    assert p.returncode != 0 and "Traceback" not in p.stderr.decode() and "trunc.fq.gz" in p.stderr.decode()


def test_missing_and_corrupt_index(tmp_path):
    fq = os.path.join(DATA, "lambda_R1.fq.gz")
    p = g3("mem", str(tmp_path / "nope"), fq, check=False)
    assert p.returncode != 0 and "Traceback" not in p.stderr.decode() and "nope" in p.stderr.decode()
    prefix = str(tmp_path / "lam")
    g3("index", "-p", prefix, os.path.join(DATA, "lambda.fa.gz"))
    path = prefix + ".g3i"
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(path, "wb").write(bytes(data))
    p = g3("mem", prefix, fq, check=False)
    assert p.returncode != 0 and "Traceback" not in p.stderr.decode()


def test_read_group(lambda_index, tmp_path):
    fq = tmp_path / "one.fq"
    fq.write_text("@r\n" + "ACGT" * 10 + "\n+\n" + "I" * 40 + "\n")
    p = g3("mem", "-R", r"@RG\tID:grp1\tSM:s", lambda_index, str(fq))
    txt = p.stdout.decode()
    assert "@RG\tID:grp1\tSM:s" in txt and "RG:Z:grp1" in txt
    p = g3("mem", "-R", "@RG\tSM:s", lambda_index, str(fq), check=False)
    assert p.returncode != 0 and "Traceback" not in p.stderr.decode()


@pytest.mark.skipif(shutil.which("samtools") is None, reason="samtools not on PATH")
def test_bam_output_quickcheck(lambda_index, tmp_path):
    bam = tmp_path / "out.bam"
    g3("mem", "-o", str(bam), lambda_index, os.path.join(DATA, "lambda_R1.fq.gz"))
    assert subprocess.run(["samtools", "quickcheck", str(bam)]).returncode == 0
    n = subprocess.run(["samtools", "view", "-c", "-F", "0x900", str(bam)], capture_output=True).stdout
    assert int(n) == 2000


@pytest.mark.skipif(shutil.which("PicardCommandLine") is None, reason="picard-tools not installed")
def test_picard_validate(lambda_index, tmp_path):
    # pipelines give a read group (Picard reports MISSING_READ_GROUP as an error otherwise, for bwa too)
    sam = tmp_path / "out.sam"
    g3("mem", "-R", r"@RG\tID:demo\tSM:lambda\tPL:ILLUMINA", "-o", str(sam), lambda_index,
       os.path.join(DATA, "lambda_R1.fq.gz"))
    p = subprocess.run(["PicardCommandLine", "ValidateSamFile", f"I={sam}", "MODE=SUMMARY"],
                       capture_output=True)
    out = p.stdout.decode() + p.stderr.decode()
    assert "No errors found" in out, out[-2000:]


# ------------------------------------------------------------------------------------------ paired-end
def test_golden_paired_end(lambda_index, tmp_path):
    r1, r2 = (os.path.join(DATA, f"lambda_R{i}.fq.gz") for i in (1, 2))
    p = g3("mem", lambda_index, r1, r2)
    gold = gzip.decompress(open(os.path.join(DATA, "golden", "lambda_pe.bwa.sam.gz"), "rb").read())
    assert records(p.stdout) == records(gold)
    assert b"[M::mem_pestat] mean and std.dev:" in p.stderr


def test_paired_determinism_threads(lambda_index):
    r1, r2 = (os.path.join(DATA, f"lambda_R{i}.fq.gz") for i in (1, 2))
    outs = [records(g3("mem", "-K", "200000", "-t", str(t), lambda_index, r1, r2).stdout) for t in (1, 2, 3)]
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("k", ["0", "-1"])
def test_nonpositive_K_is_the_default(lambda_index, k):
    """bwa mem takes -K <= 0 as no -K (the default batch size): the pairs keep their insert-size estimate and
    proper-pair flags, and the output is bwa's golden one (it was one pair per batch, or a ZeroDivisionError)."""
    r1, r2 = (os.path.join(DATA, f"lambda_R{i}.fq.gz") for i in (1, 2))
    p = g3("mem", "-K", k, lambda_index, r1, r2)
    gold = gzip.decompress(open(os.path.join(DATA, "golden", "lambda_pe.bwa.sam.gz"), "rb").read())
    assert records(p.stdout) == records(gold)


def test_interleaved_equals_two_files(lambda_index, tmp_path):
    r1, r2 = (gzip.decompress(open(os.path.join(DATA, f"lambda_R{i}.fq.gz"), "rb").read()).split(b"\n")
              for i in (1, 2))
    inter = b"".join(b"\n".join(r1[k:k + 4]) + b"\n" + b"\n".join(r2[k:k + 4]) + b"\n"
                     for k in range(0, len(r1) - 1, 4))
    a = g3("mem", "-p", lambda_index, "-", stdin=inter).stdout
    b = g3("mem", lambda_index, *(os.path.join(DATA, f"lambda_R{i}.fq.gz") for i in (1, 2))).stdout
    assert records(a) == records(b)


@pytest.mark.parametrize("mode", ["se", "pe"])
def test_error_deep_in_input_through_pipeline_threads(lambda_index, tmp_path, mode):
    """A bad record far into the input (many -K batches, FASTQ blocks parsed on the pool, batches prepared in
    the pipeline's threads) ends the run with one error line naming file and record, a non-zero exit and no
    traceback; the batches before it are written, nothing after it."""
    reads = []
    for i in (1, 2):  # 30 renamed copies of the lambda reads: several 4-MB parsing blocks
        lines = gzip.decompress(open(os.path.join(DATA, f"lambda_R{i}.fq.gz"), "rb").read()).split(b"\n")[:-1]
        out = []
        for c in range(30):
            for k in range(0, len(lines), 4):
                out += [b"@c%d_%s" % (c, lines[k][1:]), *lines[k + 1:k + 4]]
        reads.append(out)
    r1, r2 = reads
    bad = len(r1) // 4 - 300
    f1, f2 = tmp_path / "r1.fq", tmp_path / "r2.fq"
    f1.write_bytes(b"\n".join(r1) + b"\n")
    broken = r2[:]
    broken[4 * bad + 1] = broken[4 * bad + 1][:-1]  # sequence one base shorter than its quality
    f2.write_bytes(b"\n".join(broken) + b"\n")
    assert f2.stat().st_size > 16 << 20
    files = [str(f2)] if mode == "se" else [str(f1), str(f2)]
    p = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", "-K", "20000", lambda_index, *files],
                       capture_output=True, timeout=600)
    err = p.stderr.decode()
    assert p.returncode != 0 and "Traceback" not in err
    line = [ln for ln in err.split("\n") if ln.startswith("[E::")]
    assert len(line) == 1 and "r2.fq" in line[0] and f"record {bad + 1}" in line[0], err[-2000:]
    names = [r.split("\t")[0].encode() for r in records(p.stdout)]
    want = [r2[4 * k][1:].split()[0].split(b"/")[0] for k in range(bad)]
    got = list(dict.fromkeys(names))  # read order, one entry per read
    assert 10000 < len(got) < bad and got == want[:len(got)]  # whole batches before the bad record, in order


@pytest.mark.parametrize("case", ["short_r2", "names"])
def test_bad_pairs(lambda_index, tmp_path, case):
    rec = "@{n}\nACGTACGTACGTACGTACGTACGTACGT\n+\nIIIIIIIIIIIIIIIIIIIIIIIIIIII\n"
    f1, f2 = tmp_path / "r1.fq", tmp_path / "r2.fq"
    if case == "short_r2":
        f1.write_text("".join(rec.format(n=f"p{i}") for i in range(3)))
        f2.write_text("".join(rec.format(n=f"p{i}") for i in range(2)))
        args = [str(f1), str(f2)]
    else:
        f1.write_text("".join(rec.format(n=f"p{i}") for i in range(3)))
        f2.write_text("".join(rec.format(n=f"q{i}") for i in range(3)))
        args = [str(f1), str(f2)]
    p = g3("mem", lambda_index, *args, check=False)
    err = p.stderr.decode()
    assert p.returncode != 0 and "Traceback" not in err
    line = [ln for ln in err.split("\n") if ln.startswith("[E::")]
    assert len(line) == 1 and ("r1.fq" in line[0] or "r2.fq" in line[0])


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH (CI installs it)")
def test_long_reads_against_bwa(tmp_path):
    """Reads far longer than short-read sizes (1-40 kb, with errors and a chimeric join) are aligned
    whole, not truncated, and exactly as bwa does (this also exercises mem_flt_chained_seeds)."""
    rng = np.random.default_rng(3)
    ref = "".join("ACGT"[x] for x in rng.integers(0, 4, 60000))
    fa = tmp_path / "ref.fa"
    fa.write_text(">long\n" + ref + "\n")
    recs = []
    for i, L in enumerate((1000, 5000, 20000, 40000)):
        p = int(rng.integers(0, len(ref) - L))
        r = _mutate(rng, ref[p:p + L])
        if i == 2:
            r = r[:8000] + _revcomp(ref[100:6000])
        recs.append(f"@long{i}\n{r}\n+\n{'I' * len(r)}\n")
    fq = tmp_path / "long.fq"
    fq.write_text("".join(recs))
    subprocess.run(["bwa", "index", str(fa)], capture_output=True, check=True)
    bwa = subprocess.run(["bwa", "mem", str(fa), str(fq)], capture_output=True, check=True).stdout
    g3("index", str(fa))
    ours = g3("mem", str(fa), str(fq)).stdout
    assert records(ours) == records(bwa)


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH (CI installs it)")
@pytest.mark.parametrize("opts", [["-P"], ["-S"], ["-I", "420,40"], ["-U", "9", "-a"], ["-M", "-Y", "-T", "20"]])
def test_paired_options_against_bwa(tmp_path, opts):
    """Pairing options (-P no pairing, -S no mate rescue, -I given insert size, -U, -a, -M, -Y, -T) on
    the demo pairs, against a live bwa with the same options."""
    ref = tmp_path / "lambda.fa"
    ref.write_bytes(gzip.decompress(open(os.path.join(DATA, "lambda.fa.gz"), "rb").read()))
    subprocess.run(["bwa", "index", str(ref)], capture_output=True, check=True)
    g3("index", str(ref))
    r1, r2 = (os.path.join(DATA, f"lambda_R{i}.fq.gz") for i in (1, 2))
    bwa = subprocess.run(["bwa", "mem", *opts, str(ref), r1, r2], capture_output=True, check=True).stdout
    ours = g3("mem", *opts, str(ref), r1, r2).stdout
    assert records(ours) == records(bwa)


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH (CI installs it)")
@pytest.mark.parametrize("opts,reads", [
    (["-x", "pacbio"], "pbsim"), (["-x", "ont2d", "-A", "2", "-k", "16"], "pbsim"),
    (["-x", "pbref", "-O", "2,3"], "pbsim"), (["-x", "intractg"], "pairs"),
    (["-s", "4", "-G", "300", "-N", "1", "-Q", "30", "-1"], "pairs")])
def test_read_types_and_chain_options_against_bwa(tmp_path, opts, reads):
    """bwa mem's -x read types (their settings where the command line gives none, and no -A scaling) and the
    options its usage leaves out (-s -G -N -Q -1), against a live bwa; an unknown read type is a one-line error."""
    ref = tmp_path / "lambda.fa"
    ref.write_bytes(gzip.decompress(open(os.path.join(DATA, "lambda.fa.gz"), "rb").read()))
    subprocess.run(["bwa", "index", str(ref)], capture_output=True, check=True)
    fq = ([os.path.join(DATA, "lambda_pbsim.fq.gz")] if reads == "pbsim"
          else [os.path.join(DATA, f"lambda_R{i}.fq.gz") for i in (1, 2)])
    bwa = subprocess.run(["bwa", "mem", *opts, str(ref), *fq], capture_output=True, check=True).stdout
    out = tmp_path / "out.sam"
    g3("mem", *opts, "-f", str(out), str(ref), *fq)
    assert records(out.read_bytes()) == records(bwa) and len(records(bwa)) > 50
    if reads == "pairs":
        r = g3("mem", "-x", "illumina", str(ref), *fq, check=False)
        assert r.returncode != 0 and "unknown read type 'illumina'" in r.stderr.decode()
        assert "Traceback" not in r.stderr.decode()


@pytest.mark.skipif(shutil.which("PicardCommandLine") is None, reason="picard-tools not installed")
def test_picard_validate_paired(lambda_index, tmp_path):
    sam = tmp_path / "pe.sam"
    g3("mem", "-R", r"@RG\tID:demo\tSM:lambda\tPL:ILLUMINA", "-o", str(sam), lambda_index,
       *(os.path.join(DATA, f"lambda_R{i}.fq.gz") for i in (1, 2)))
    p = subprocess.run(["PicardCommandLine", "ValidateSamFile", f"I={sam}", "MODE=SUMMARY"], capture_output=True)
    assert "No errors found" in p.stdout.decode() + p.stderr.decode()


def test_trace_and_broken_pipe(lambda_index, tmp_path):
    """G3ALIGN_TRACE=FILE writes the start-up steps and stage laps as JSON (scripts/gpu_cli_profile.py);
    a reader that leaves early (`| head`) ends the run quietly, killed by SIGPIPE as bwa is (pipefail: 141)."""
    import json
    tr = tmp_path / "trace.json"
    env = dict(os.environ, G3ALIGN_TRACE=str(tr))
    r1, r2 = os.path.join(DATA, "lambda_R1.fq.gz"), os.path.join(DATA, "lambda_R2.fq.gz")
    p = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", "-t", "2", "--device", "cpu",
                        lambda_index, r1, r2], capture_output=True, env=env)
    assert p.returncode == 0, p.stderr.decode()
    ev = json.loads(tr.read_text())
    stages = {e[0] for e in ev}
    assert {"start-up: interpreter, cli import", "start-up: index load", "regions", "pairing+sam"} <= stages
    assert {"task stage1", "task stage2"} <= stages  # every pool task of the regions and pairing stages
    assert all(0 <= e[2] <= e[3] for e in ev)
    # the per-thread CPU samples beside it: [t, {thread: cpu s}], times rising, the main thread's CPU not falling
    cpu = json.loads((tmp_path / "trace.json.cpu").read_text())
    assert len(cpu) >= 2 and all(a[0] < b[0] for a, b in zip(cpu, cpu[1:]))
    main_cpu = [row["MainThread"] for _, row in cpu]
    assert main_cpu == sorted(main_cpu) and main_cpu[-1] > 0
    from conftest import load_script
    tl = load_script("trace_timeline")
    rows = tl.cpu_rows(cpu, 0.1, cpu[-1][0])
    assert any(r.startswith("MainThread") for r in rows)
    plain = g3("mem", "-t", "2", "--device", "cpu", lambda_index, r1, r2).stdout
    assert records(p.stdout) == records(plain)  # tracing does not change the output
    cmd = f"{sys.executable} -m g3align.aligner.cli mem {lambda_index} {r1} {r2} | head -3"
    q = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True)
    assert q.returncode == 141 and len(q.stdout.splitlines()) == 3  # killed by SIGPIPE, silently, as bwa is
    assert b"rror" not in q.stderr and b"Traceback" not in q.stderr, q.stderr.decode()[-2000:]


# ------------------------------------------------------------------------------------------ GPU start-up
@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["se", "pe"])
def test_gpu_mem_does_not_import_cupyx(lambda_index, tmp_path, mode):
    """mem's twin of test_map.py's test_gpu_map_does_not_import_cupyx: CuPy imports cupyx.scipy.special at the
    first NumPy-ufunc override, i.e. the first operator between a CuPy array and a Python number (`a > 0`,
    `a + 1`): a few tenths of a second on the GPU box. `mem --device gpu` (seeding, chaining,
    extension, traceback, mate rescue) uses CuPy functions instead."""
    reads = [os.path.join(DATA, "lambda_R1.fq.gz")] + ([os.path.join(DATA, "lambda_R2.fq.gz")] if mode == "pe" else [])
    out = tmp_path / "o.sam"
    from conftest import run_spying_cupyx
    r = run_spying_cupyx("from g3align.aligner.cli import main\n"
                         f"main(['mem', '-t', '2', '--device', 'gpu', '-o', {str(out)!r}, {lambda_index!r}, "
                         f"{', '.join(repr(x) for x in reads)}], standalone_mode=False)")
    assert r.returncode == 0, r.stderr
    assert "cupyx.scipy imported: False" in r.stdout, r.stdout
    assert records(out.read_bytes()), r.stderr


def test_cpu_rows_columns():
    """trace_timeline.cpu_rows: cores per thread group per column from cumulative per-thread CPU samples; sample
    times on column boundaries (0.3 / 0.1 is 2.9999999999999996 in floats) end (this once looped forever)."""
    from conftest import load_script
    tl = load_script("trace_timeline")
    step = 0.1
    samples = [(k * step, {"MainThread": 0.1 * k, "ThreadPoolExecutor-0_0": 0.05 * k,
                           "ThreadPoolExecutor-0_1": 0.05 * k, "tid-7": 0.0}) for k in range(8)]
    rows = tl.cpu_rows(samples, step, samples[-1][0])
    by = {r.split("  ")[0].strip(): r for r in rows}
    assert set(by) == {"MainThread", "ThreadPoolExecutor"}  # the pool's threads as one group; idle threads left out
    assert "0.70 s" in by["MainThread"] and "0.70 s" in by["ThreadPoolExecutor"]
    assert by["ThreadPoolExecutor"].split("|")[1].startswith("1111111")  # one core's worth per column
    assert tl.group("g3align-prepare_2") == "g3align-prepare" and tl.group("tid-9").startswith("other")


def test_device_arg():
    """map's --device read from its raw arguments before they are parsed (the CUDA driver's early start)."""
    from g3align.aligner.cli.startup import device_arg as _device_arg
    assert _device_arg(["-ax", "map-pb", "r.fa", "q.fq"]) == "auto"
    assert _device_arg(["--device", "cpu", "r.fa"]) == "cpu"
    assert _device_arg(["--device=gpu", "r.fa"]) == "gpu"


def test_detached_worker(lambda_index, tmp_path):
    """G3ALIGN_DETACH=1 (the default on a GPU machine): the run is a forked worker whose parent returns once the
    output is closed (cli/startup.py detach). Same SAM, with the trace's CPU line; an error still gives the worker's
    one-line message and exit status; a reader that leaves early ends it quietly; SIGTERM reaches the worker."""
    import signal
    import time
    r1, r2 = os.path.join(DATA, "lambda_R1.fq.gz"), os.path.join(DATA, "lambda_R2.fq.gz")
    plain = g3("mem", "-t", "2", "--device", "cpu", lambda_index, r1, r2).stdout
    on = dict(os.environ, G3ALIGN_DETACH="1", G3ALIGN_TRACE=str(tmp_path / "tr.json"))
    cmd = [sys.executable, "-m", "g3align.aligner.cli", "mem", "-t", "2", lambda_index, r1, r2]
    p = subprocess.run(cmd, capture_output=True, env=on)
    assert p.returncode == 0, p.stderr.decode()
    assert records(p.stdout) == records(plain)
    assert b"[trace] leaving at " in p.stderr and b"; cpu " in p.stderr
    q = subprocess.run(cmd[:-2] + [str(tmp_path / "none.fq")], capture_output=True, env=on)
    assert q.returncode == 1 and b"fail to open file" in q.stderr and b"Traceback" not in q.stderr
    q = subprocess.run(["bash", "-o", "pipefail", "-c", " ".join(cmd) + " | head -3"], capture_output=True, env=on)
    assert q.returncode == 141 and len(q.stdout.splitlines()) == 3 and q.stderr.count(b"[E::") == 0  # as bwa
    slow = subprocess.Popen(cmd[:4] + [lambda_index, "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=on)
    time.sleep(3)  # the worker waits on stdin; the parent passes SIGTERM on and dies of it too
    slow.send_signal(signal.SIGTERM)
    assert slow.wait(timeout=30) == -signal.SIGTERM
    slow.stdin.close()
    assert b"Traceback" not in slow.stderr.read()
    off = dict(os.environ, G3ALIGN_DETACH="0")
    assert records(subprocess.run(cmd, capture_output=True, env=off).stdout) == records(plain)

def test_tune_reads_and_pipeline_constants(lambda_index):
    """G3ALIGN_TUNE for mem: the reader's constants (reads.PART_BASES, set before the reader starts) and the
    pipeline's (after its import) give the same SAM; an unknown name is a one-line error."""
    r1, r2 = os.path.join(DATA, "lambda_R1.fq.gz"), os.path.join(DATA, "lambda_R2.fq.gz")
    plain = g3("mem", "-t", "2", "--device", "cpu", lambda_index, r1, r2).stdout
    env = dict(os.environ, G3ALIGN_TUNE="PART_BASES=30000,PE_AHEAD=2")
    p = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", "-t", "2", "--device", "cpu",
                        lambda_index, r1, r2], capture_output=True, env=env)
    assert p.returncode == 0, p.stderr.decode()
    assert records(p.stdout) == records(plain)
    env["G3ALIGN_TUNE"] = "NO_SUCH=1"
    q = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", lambda_index, r1], capture_output=True,
                       env=env)
    assert q.returncode != 0 and b"no constant 'NO_SUCH'" in q.stderr and b"Traceback" not in q.stderr


@pytest.mark.parametrize("mode", ["se", "pe"])
def test_copy_comment(lambda_index, tmp_path, mode):
    """-C appends each read's FASTQ comment to its records (bwa's -C; the comments travel as bytes + offsets
    through the reader's pieces, pair interleaving and -K batch parts), for any -t and -K."""
    files, index = [], {}
    for i in (1, 2)[:1 if mode == "se" else 2]:
        lines = gzip.decompress(open(os.path.join(DATA, f"lambda_R{i}.fq.gz"), "rb").read()).split(b"\n")
        for k in range(0, len(lines) - 1, 4):
            name = lines[k].split()[0]
            index[name[1:].decode().rsplit("/", 1)[0]] = k // 4
            lines[k] = name + b" BC:Z:ACGT\tXC:i:%d" % (k // 4)
        files.append(tmp_path / f"c{i}.fq")
        files[-1].write_bytes(b"\n".join(lines))
    runs = [records(g3("mem", "-C", "-K", K, "-t", t, lambda_index, *map(str, files)).stdout)
            for K, t in (("10000000", "1"), ("100000", "3"))]
    plain = records(g3("mem", lambda_index, *map(str, files)).stdout)
    assert runs[0] == runs[1] and len(plain) == len(runs[0]) > 100
    for got, want in zip(runs[0], plain):
        assert got == want + f"\tBC:Z:ACGT\tXC:i:{index[want.split(chr(9))[0]]}"


def test_missing_index_one_line_error(tmp_path):
    p = g3("mem", str(tmp_path / "none"), os.path.join(DATA, "lambda_R1.fq.gz"), check=False)
    err = p.stderr.decode()
    assert p.returncode != 0 and "Traceback" not in err
    assert "index file not found" in err and err.strip().count("\n") <= 1


def _smart_input(rng):
    """The demo pairs interleaved, with single reads among them as after filtering: a mate dropped (either one), a
    mate renamed, so bwa's smart pairing has runs of singles, shifted pairs and pairs cut by a -K batch."""
    r1, r2 = (gzip.decompress(open(os.path.join(DATA, f"lambda_R{i}.fq.gz"), "rb").read()).split(b"\n")
              for i in (1, 2))
    recs = []
    for k in range(0, len(r1) - 1, 4):
        a, b = b"\n".join(r1[k:k + 4]) + b"\n", b"\n".join(r2[k:k + 4]) + b"\n"
        x = rng.random()
        if x < 0.1:
            recs.append(a)
        elif x < 0.2:
            recs.append(b)
        elif x < 0.25:
            recs += [a, b.replace(b"/2\n", b"x/2\n", 1)]
        else:
            recs += [a, b]
    return b"".join(recs)


def _commented_ref(path):
    """The lambda genome as five contigs whose headers carry the comments bwa's -V must print: a tab, none,
    "(null)", two spaces and trailing blanks before a CRLF, a lone space."""
    seq = b"".join(gzip.decompress(open(os.path.join(DATA, "lambda.fa.gz"), "rb").read()).split(b"\n")[1:])
    k = len(seq) // 5
    hdrs = [b">c1 lambda part one\tA tab\n", b">c2\n", b">c3 (null)\n", b">c4  two spaces  \r\n", b">c5 \n"]
    path.write_bytes(b"".join(h + seq[i * k:(i + 1) * k] + b"\n" for i, h in enumerate(hdrs)))


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH (CI installs it)")
@pytest.mark.parametrize("k", ["100000", "30011"])
def test_smart_pairing_and_xr_against_bwa(tmp_path, k):
    """-p with single reads among the pairs (bwa's smart pairing: singles aligned single-end, the rest paired, the
    records in input order; -K cuts some pairs) and -V (XR:Z: of each reference's FASTA comment), byte for byte
    bwa's records; the same reads given whole pairs only are bwa's -p output too."""
    ref = tmp_path / "ref.fa"
    _commented_ref(ref)
    fq = tmp_path / "mixed.fq"
    fq.write_bytes(_smart_input(np.random.default_rng(5)))
    subprocess.run(["bwa", "index", str(ref)], capture_output=True, check=True)
    g3("index", str(ref))
    bwa = subprocess.run(["bwa", "mem", "-p", "-V", "-K", k, str(ref), str(fq)], capture_output=True,
                         check=True).stdout
    p = g3("mem", "-p", "-V", "-K", k, str(ref), str(fq))
    assert records(p.stdout) == records(bwa)
    assert b"single-end sequences;" in p.stderr
    xr = {ln.split("\tXR:Z:")[1] for ln in records(p.stdout) if "\tXR:Z:" in ln}
    assert xr == {"lambda part one A tab", " two spaces  "}


def test_numba_imported_without_scipy_and_coverage():
    """cli/startup.py's import_numba: numba comes in without importing scipy or coverage (unused start-up cost), the
    blocking entries leave sys.modules again (no None entry stays to stop a later import of either), and the CPU
    target is set up as usual. scipy is no dependency of g3align, so the test imports neither."""
    code = ("import sys\n"
            "from g3align.aligner.cli import startup\n"
            "startup.numba_start()\n"
            "assert 'numba' in sys.modules and 'numba.np.arraymath' in sys.modules\n"
            "assert 'scipy' not in sys.modules and 'coverage' not in sys.modules, "
            "[m for m in ('scipy', 'coverage') if m in sys.modules]\n"
            "import numba\n"
            "print(numba.njit(lambda x: x + 1)(1))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "2"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_pair_salt_is_bwa_int_arithmetic(tmp_path):
    """mem_pair's tie-break hash mixes in `id<<8` computed on bwa's `int id`: past pair 2^23 (read 2^24 of a run) it
    wraps within 32 bits and is sign-extended. Our pair_salt against the same C expression compiled here (a 10M-pair
    run differed from bwa from read 16,777,216 on before this was matched)."""
    from g3align.aligner.mem.pair import pair_salt
    ids = [0, 1, 255, (1 << 23) - 1, 1 << 23, (1 << 23) + 5, (1 << 24) - 1, 1 << 24, 12_345_678, (1 << 31) - 1,
           1 << 31, (1 << 32) + 7, 3_000_000_000]
    src = tmp_path / "salt.c"
    src.write_text("#include <stdio.h>\n#include <stdint.h>\n#include <stdlib.h>\n"
                   "int main(int c, char **v) { for (int i = 1; i < c; ++i) { uint64_t u = strtoull(v[i], 0, 10);"
                   " int id = (int)u; uint64_t y = 0; printf(\"%llu\\n\", (unsigned long long)(y ^ id<<8)); }"
                   " return 0; }\n")
    exe = tmp_path / "salt"
    subprocess.run(["cc", "-O2", "-fwrapv", "-o", str(exe), str(src)], check=True)
    want = [int(x) for x in subprocess.run([str(exe), *map(str, ids)], capture_output=True, check=True).stdout.split()]
    got = [int(pair_salt(i)) & (2**64 - 1) for i in ids]
    assert got == want
