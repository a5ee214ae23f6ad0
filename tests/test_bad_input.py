"""The bad-input corpus: every subcommand, every way a user's input or environment can be wrong.

Each case runs the `g3align` command line in a fresh process and asserts the one rule: a non-zero exit, exactly
one `[E::g3align]` line on stderr naming what is wrong (the file, and the record where there is one), and no
Python traceback. The streams and signals cases (closed stdout/stdin, a reader that leaves, a full disk,
Ctrl-C, SIGTERM) follow bwa's conventions, as their tests say."""
import gzip
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
G3 = [sys.executable, "-m", "g3align.aligner.cli"]


def _fq(n, name="r", seq="ACGTTGCAAGGCTTAACCGGTTAAGCT" * 4):
    return "".join(f"@{name}{i}\n{seq}\n+\n{'I' * len(seq)}\n" for i in range(n))


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    """A folder with the lambda index and the bad files, by name."""
    d = tmp_path_factory.mktemp("bad")
    env = dict(os.environ, G3ALIGN_DETACH="0")
    subprocess.run([*G3, "index", "-p", str(d / "lam"), str(DATA / "lambda.fa.gz")], check=True, env=env,
                   capture_output=True)
    r1 = gzip.decompress((DATA / "lambda_R1.fq.gz").read_bytes())
    r2 = gzip.decompress((DATA / "lambda_R2.fq.gz").read_bytes())
    (d / "r1.fq").write_bytes(r1)
    (d / "r2.fq").write_bytes(r2)
    lines = r1.split(b"\n")
    (d / "few.fq").write_bytes(b"\n".join(lines[:200]) + b"\n")  # 50 records
    (d / "few2.fq").write_bytes(b"\n".join(r2.split(b"\n")[:196]) + b"\n")  # 49: one mate missing
    w = {
        "noat.fq": "r0\nACGT\n+\nIIII\n",
        "lenmis.fq": _fq(3) + "@bad\nACGTACGT\n+\nIII\n",
        "noplus.fq": _fq(2) + "@bad\nACGT\nIIII\nIIII\n",
        "badchar.fq": _fq(4) + "@bad\nACG1T\n+\nIIIII\n",
        "truncrec.fq": _fq(5) + "@bad\nACGT\n",
        "fasta_noseq.fa": ">only\n",
        "ref_empty.fa": "",
        "ref_noheader.fa": "ACGTACGTACGT\n",
        "ref_badchar.fa": ">c1\nACGT@@ACGT\n",
        "q3.fa": ">q1\nACGTACGT\n>q2\nACGTTT\n>q3\nAAAA\n",
        "t2.fa": ">t1\nACGTACGT\n>t2\nACGTTT\n",
        "empty.fq": "",
    }
    for k, v in w.items():
        (d / k).write_text(v)
    gzr1 = gzip.compress(b"\n".join(lines[:400]) + b"\n")
    (d / "trunc.fq.gz").write_bytes(gzr1[: len(gzr1) * 2 // 3])
    bad = bytearray(gzr1)
    bad[len(bad) // 2: len(bad) // 2 + 40] = b"\x00" * 40
    (d / "corrupt.fq.gz").write_bytes(bytes(bad))
    # random bytes, fixed, starting with a NUL: random ones that begin with '>' or '@' are a FASTA or FASTQ record (of
    # N bases) to bwa and minimap2 as to g3align, 1 run in ~100 at 3,000 bytes
    (d / "binary.fq").write_bytes(b"\0" + random.Random(7).randbytes(2999))
    (d / "adir").mkdir()
    gzref = (DATA / "lambda.fa.gz").read_bytes()
    (d / "trunc_ref.fa.gz").write_bytes(gzip.compress(gzip.decompress(gzref))[:5000])
    deflate = bytearray(gzip.compress(gzip.decompress(gzref)))
    deflate[10] = 0x07  # the first deflate block of a reserved type: zlib.error, not an OSError
    (d / "corrupt_ref.fa.gz").write_bytes(bytes(deflate))
    idx = (d / "lam.g3i").read_bytes()
    (d / "cut.g3i").write_bytes(idx[: len(idx) // 2])
    flip = bytearray(idx)
    flip[len(flip) // 2] ^= 0xFF
    (d / "flip.g3i").write_bytes(bytes(flip))
    (d / "junk.g3i").write_bytes(os.urandom(5000))
    for suf in (".amb", ".ann", ".bwt", ".pac", ".sa"):  # what `bwa index` leaves (not its contents)
        (d / f"bwaidx{suf}").write_bytes(os.urandom(64))
    ro = d / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    return d


# (id, argv after g3align, the word the error line must hold); {d} is the folder
CASES = [
    # FASTQ / reads
    ("mem-missing-reads", "mem {d}/lam {d}/nope.fq", "nope.fq"),
    ("mem-missing-mate", "mem {d}/lam {d}/r1.fq {d}/nope2.fq", "nope2.fq"),
    ("mem-reads-dir", "mem {d}/lam {d}/adir", "adir"),
    ("mem-no-at", "mem {d}/lam {d}/noat.fq", "noat.fq"),
    ("mem-len-mismatch", "mem {d}/lam {d}/lenmis.fq", "record 4"),
    ("mem-no-plus", "mem {d}/lam {d}/noplus.fq", "noplus.fq"),
    ("mem-bad-char", "mem {d}/lam {d}/badchar.fq", "record 5"),
    ("mem-trunc-record", "mem {d}/lam {d}/truncrec.fq", "truncrec.fq"),
    ("mem-trunc-gzip", "mem {d}/lam {d}/trunc.fq.gz", "trunc.fq.gz"),
    ("mem-corrupt-gzip", "mem {d}/lam {d}/corrupt.fq.gz", "corrupt.fq.gz"),
    ("mem-binary", "mem {d}/lam {d}/binary.fq", "binary.fq"),
    ("mem-pe-unequal", "mem {d}/lam {d}/few.fq {d}/few2.fq", "few2.fq"),
    ("mem-p-bad-char", "mem -p {d}/lam {d}/badchar.fq", "record 5"),
    ("mem-pe-bad-mate", "mem {d}/lam {d}/r1.fq {d}/badchar.fq", "badchar.fq"),
    ("map-missing-reads", "map -ax map-ont {lam} {d}/nope.fq", "nope.fq"),
    ("map-no-at", "map -ax map-ont {lam} {d}/noat.fq", "noat.fq"),
    ("map-len-mismatch", "map -ax map-ont {lam} {d}/lenmis.fq", "record 4"),
    ("map-bad-char", "map -ax map-ont {lam} {d}/badchar.fq", "record 5"),
    ("map-trunc-gzip", "map -ax map-pb {lam} {d}/trunc.fq.gz", "trunc.fq.gz"),
    ("map-binary", "map -ax map-pb {lam} {d}/binary.fq", "binary.fq"),
    ("map-reads-dir", "map -ax map-pb {lam} {d}/adir", "adir"),
    ("map-sr-unequal-files", "map -ax sr {lam} {d}/few.fq {d}/few2.fq", "few2.fq"),
    ("map-frag-three-files", "map -ax map-ont --frag=yes {lam} {d}/few.fq {d}/few2.fq {d}/r1.fq", "two"),
    ("map-sr-pair-bad-char", "map -ax sr {lam} {d}/r1.fq {d}/badchar.fq", "badchar.fq"),
    ("mem-V-trunc-gzip", "mem -V {d}/lam {d}/trunc.fq.gz", "trunc.fq.gz"),
    # FASTA / references
    ("index-missing", "index -p {d}/x1 {d}/nope.fa", "nope.fa"),
    ("index-empty", "index -p {d}/x2 {d}/ref_empty.fa", "ref_empty.fa"),
    ("index-no-header", "index -p {d}/x3 {d}/ref_noheader.fa", "ref_noheader.fa"),
    ("index-no-sequence", "index -p {d}/x4 {d}/fasta_noseq.fa", "fasta_noseq.fa"),
    ("index-dir", "index -p {d}/x5 {d}/adir", "adir"),
    ("index-trunc-gzip", "index -p {d}/x6 {d}/trunc_ref.fa.gz", "trunc_ref.fa.gz"),
    ("index-corrupt-gzip", "index -p {d}/x8 {d}/corrupt_ref.fa.gz", "corrupt_ref.fa.gz"),
    ("map-corrupt-gzip-ref", "map -x map-ont {d}/corrupt_ref.fa.gz {d}/few.fq", "corrupt_ref.fa.gz"),
    ("index-binary", "index -p {d}/x7 {d}/binary.fq", "binary.fq"),
    ("index-unwritable-dir", "index -p {d}/ro/x {lam}", "ro/x"),
    ("index-missing-dir", "index -p {d}/nodir/x {lam}", "nodir"),
    ("map-missing-ref", "map -ax map-ont {d}/nope.fa {d}/few.fq", "nope.fa"),
    ("map-empty-ref", "map -ax map-ont {d}/ref_empty.fa {d}/few.fq", "ref_empty.fa"),
    ("map-noheader-ref", "map -ax map-ont {d}/ref_noheader.fa {d}/few.fq", "ref_noheader.fa"),
    ("map-binary-ref", "map -ax map-ont {d}/binary.fq {d}/few.fq", "binary.fq"),
    ("align-missing-query", "align {d}/nope.fa {d}/t2.fa", "nope.fa"),
    ("align-unequal", "align {d}/q3.fa {d}/t2.fa", "equal number"),
    ("align-binary", "align {d}/binary.fq {d}/t2.fa", "binary.fq"),
    # indexes
    ("mem-missing-index", "mem {d}/noidx {d}/few.fq", "noidx"),
    ("mem-fasta-not-indexed", "mem {d}/ref_badchar.fa {d}/few.fq", "ref_badchar.fa"),
    ("mem-truncated-index", "mem {d}/cut {d}/few.fq", "cut.g3i"),
    ("mem-corrupt-index", "mem {d}/flip {d}/few.fq", "flip.g3i"),
    ("mem-junk-index", "mem {d}/junk {d}/few.fq", "junk.g3i"),
    ("mem-bwa-index", "mem {d}/bwaidx {d}/few.fq", "bwaidx"),
    # options
    ("mem-t-text", "mem -t abc {d}/lam {d}/few.fq", "-t"),
    ("mem-unknown-option", "mem --frobnicate {d}/lam {d}/few.fq", "--frobnicate"),
    ("mem-no-args", "mem", "mem"),
    ("mem-I-bad", "mem -I x,y {d}/lam {d}/few.fq", "-I"),
    ("mem-R-no-id", "mem -R @RG\\tSM:x {d}/lam {d}/few.fq", "ID"),
    ("mem-R-no-rg", "mem -R ID:x {d}/lam {d}/few.fq", "@RG"),
    ("mem-H-missing", "mem -H {d}/nohdr.txt {d}/lam {d}/few.fq", "nohdr.txt"),
    ("mem-device-bogus", "mem --device tpu {d}/lam {d}/few.fq", "tpu"),
    ("map-preset-bogus", "map -x map-xyz {lam} {d}/few.fq", "map-xyz"),
    ("map-k-zero", "map -k 0 -ax map-ont {lam} {d}/few.fq", "-k"),
    ("map-w-zero", "map -w 0 -ax map-ont {lam} {d}/few.fq", "-w"),
    ("map-unknown-option", "map --frobnicate -ax map-ont {lam} {d}/few.fq", "frobnicate"),
    ("map-t-text", "map -t abc -ax map-ont {lam} {d}/few.fq", "-t"),
    ("map-device-bogus", "map --device tpu -ax map-ont {lam} {d}/few.fq", "tpu"),
    ("align-mode-bogus", "align --mode sideways {d}/t2.fa {d}/t2.fa", "sideways"),
    ("align-A-text", "align -A x {d}/t2.fa {d}/t2.fa", "-A"),
    ("index-sa-intv", "index --sa-intv 3 -p {d}/x8 {lam}", "power of two"),
    ("index-no-fm-alone", "index --no-fm -p {d}/x9 {lam}", "--no-fm"),
    ("unknown-subcommand", "frobnicate", "frobnicate"),
    ("compare-missing", "compare {d}/nope.sam {d}/nope2.sam", "nope.sam"),
    # full disk
    ("mem-full-disk", "mem -o /dev/full {d}/lam {d}/r1.fq", "space"),
    ("map-full-disk", "map -ax map-pb -o /dev/full {lam} {d}/few.fq", "space"),
    ("align-full-disk", "align -o /dev/full {d}/t2.fa {d}/t2.fa", "space"),
]


def _env():
    return dict(os.environ, G3ALIGN_DETACH="0")


def one_error(r, needle):
    err = r.stderr.decode(errors="replace") if isinstance(r.stderr, bytes) else r.stderr
    assert r.returncode not in (0, None), err
    assert "Traceback" not in err and not re.search(r"^\w*(Error|Exception)\b", err, re.M), err
    lines = [ln for ln in err.splitlines() if ln.startswith("[E::")]
    assert len(lines) == 1, err
    assert needle.lower() in lines[0].lower(), (needle, lines[0])
    return lines[0]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input(d, case):
    _, argv, needle = case
    if "ro/" in argv and os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder")
    args = [a.replace("{d}", str(d)).replace("{lam}", str(DATA / "lambda.fa.gz")) for a in argv.split()]
    r = subprocess.run([*G3, *args], capture_output=True, env=_env(), cwd=d, timeout=300)
    one_error(r, needle)
    if argv.startswith("index"):  # nothing half-written left behind
        prefix = args[args.index("-p") + 1]
        assert not list(Path(prefix).parent.glob(Path(prefix).name + ".*")) if Path(prefix).parent.exists() else True


# ----------------------------------------------------------------------------------------- closed streams
@pytest.mark.parametrize("cmd", ["mem {d}/lam {d}/few.fq", "map -ax map-ont {lam} {d}/few.fq",
                                 "align {d}/t2.fa {d}/t2.fa"])
def test_closed_stdout(d, cmd):
    c = cmd.replace("{d}", str(d)).replace("{lam}", str(DATA / "lambda.fa.gz"))
    r = subprocess.run(["bash", "-c", f"{sys.executable} -m g3align.aligner.cli {c} >&-"], capture_output=True,
                       env=_env())
    one_error(r, "standard output")


@pytest.mark.parametrize("cmd", ["mem {d}/lam -", "map -ax map-ont {lam} -"])
def test_closed_stdin(d, cmd):
    c = cmd.replace("{d}", str(d)).replace("{lam}", str(DATA / "lambda.fa.gz"))
    r = subprocess.run(["bash", "-c", f"{sys.executable} -m g3align.aligner.cli {c} <&-"], capture_output=True,
                       env=_env())
    one_error(r, "standard input")


@pytest.mark.parametrize("cmd", ["mem {d}/lam {d}/r1.fq", "mem {d}/lam {d}/r1.fq {d}/r2.fq",
                                 "map -ax map-pb {lam} {lr}"])
def test_broken_pipe_is_quiet_like_bwa(d, cmd):
    """A reader that leaves (`| head`): the run ends at once, silently, killed by SIGPIPE as bwa is (pipefail
    sees 141)."""
    c = cmd.replace("{d}", str(d)).replace("{lam}", str(DATA / "lambda.fa.gz"))
    c = c.replace("{lr}", str(DATA / "lambda_pbsim.fq.gz"))
    r = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} -m g3align.aligner.cli {c} | head -2"],
                       capture_output=True, env=_env())
    assert r.returncode == 128 + signal.SIGPIPE, r.stderr
    assert len(r.stdout.splitlines()) == 2 and r.stderr.strip() == b"" or b"[E::" not in r.stderr, r.stderr


# ----------------------------------------------------------------------------------------------- signals
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("cmd", ["mem", "map"])
def test_signal_stops_within_a_second(d, tmp_path, sig, cmd):
    """Ctrl-C or SIGTERM mid-run: the process is gone within 1 s, killed by that signal (as bwa), no traceback,
    and the output ends at a whole record."""
    reads = d / "many.fq"
    if not reads.exists():
        reads.write_bytes((d / "r1.fq").read_bytes() * 100)
    out = tmp_path / "out.sam"
    args = (["mem", "-t", "2", "-K", "200000", str(d / "lam"), str(reads)] if cmd == "mem"
            else ["map", "-t", "2", "-K", "200k", "-ax", "sr", str(DATA / "lambda.fa.gz"), str(reads)])
    p = subprocess.Popen([*G3, *args, "-o", str(out)], stderr=subprocess.PIPE, env=_env())
    t_end = time.time() + 120
    while time.time() < t_end and (not out.exists() or out.stat().st_size < 200_000) and p.poll() is None:
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before it could be interrupted"
    t = time.perf_counter()
    p.send_signal(sig)
    try:
        p.wait(5)
    finally:
        p.kill()
    took = time.perf_counter() - t
    err = p.stderr.read().decode()
    assert p.returncode == -sig, (p.returncode, err)
    assert took < 1.0, took
    assert "Traceback" not in err, err
    text = out.read_bytes()
    assert text.endswith(b"\n")
    last = text.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    assert last.startswith(b"@") or last.count(b"\t") >= 10, last[-200:]


def test_corpus_size():
    assert len(CASES) + 3 + 2 + 3 + 4 >= 60


def test_truncated_gzip_counts_the_records_before_the_cut(d):
    """The error names the last whole record read before the cut, not record 0."""
    r = subprocess.run([*G3, "mem", str(d / "lam"), str(d / "trunc.fq.gz")], capture_output=True, env=_env())
    line = one_error(r, "trunc.fq.gz")
    assert "after record 0 " not in line + " ", line


# ----------------------------------------------------------------------------------------------- progress
@pytest.mark.parametrize("cmd", ["mem {d}/lam {d}/r1.fq {d}/r2.fq", "map -ax map-pb {lam} {lr}"])
def test_progress_line_only_on_a_terminal(d, tmp_path, cmd):
    """On a terminal (a pseudo-terminal of 100 x 30) stderr carries a tqdm line of the reads written, `[M::mem]:
    ... reads/s`; with -v 1 none; captured, none."""
    import fcntl
    import pty
    import struct
    import termios
    c = cmd.replace("{d}", str(d)).replace("{lam}", str(DATA / "lambda.fa.gz"))
    c = c.replace("{lr}", str(DATA / "lambda_pbsim.fq.gz")).split()
    def argv(v):
        return [*G3, c[0], "-v", v, "-o", str(tmp_path / "o.sam"), *c[1:]]

    for v, want in (("3", True), ("1", False)):
        args = argv(v)
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        p = subprocess.Popen(args, stderr=slave, stdout=subprocess.DEVNULL, env=_env())
        os.close(slave)
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        assert p.wait() == 0, out.decode(errors="replace")
        os.close(master)
        assert (f"[M::{c[0]}]:".encode() in out and b"reads/s" in out) == want, out.decode(errors="replace")
    r = subprocess.run(argv("3"), capture_output=True, env=_env())
    assert r.returncode == 0 and b"\r" not in r.stderr and b"reads/s" not in r.stderr
