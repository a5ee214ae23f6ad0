"""Tests for aligner/io/reads.py: FASTQ/FASTA parsing, errors, block and -K chunking, paired input."""
import gzip
import io
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from g3align.aligner.io.reads import (
    NT4,
    ReadBatch,
    ReadFormatError,
    bytes_csr,
    deinterleave,
    interleave,
    iter_pieces,
    read_all,
    read_batches,
    read_pair_batch_parts,
    read_pair_batches,
)

DATA = Path(__file__).resolve().parent.parent / "data"


def write(tmp_path, name, text, gz=False):
    p = tmp_path / name
    data = text.encode("latin-1") if isinstance(text, str) else text
    if gz:
        data = gzip.compress(data, mtime=0)
    p.write_bytes(data)
    return str(p)


def codes(s):
    return NT4[np.frombuffer(s.encode(), np.uint8)]


def as_records(b: ReadBatch):
    """(name, comment, codes, qual) per read, for equality checks."""
    out = []
    for i in range(b.n):
        q = b.read_qual(i)
        out.append((b.names[i], b.comments[i], b.read_seq(i).tobytes(),
                    None if q is None else q.tobytes()))
    return out


# --------------------------------------------------------------------------------------------------
# A brute-force reference parser (line by line, kseq semantics for valid input)

def ref_parse(text: bytes):
    lines = text.replace(b"\r\n", b"\n").split(b"\n")
    while lines and lines[0] == b"":
        lines.pop(0)
    recs = []

    def split(h):
        for j, c in enumerate(h):
            if c in b" \t\x0b\x0c\r":
                return h[:j], h[j + 1:]
        return h, b""

    def trim(nm):
        return nm[:-2] if len(nm) > 2 and nm[-2:-1] == b"/" and nm[-1:].isdigit() else nm

    def conv(s):
        return bytes(int(NT4[c]) for c in s)

    if not lines:
        return recs
    if lines[0].startswith(b"@"):
        i = 0
        if len(lines) % 4 == 3 and lines[-2] == b"" and lines[-1].startswith(b"+"):
            lines.append(b"")                     # "@r\n\n+" at the end: a zero-length read
        while i + 3 < len(lines) and lines[i].startswith(b"@"):
            nm, cm = split(lines[i][1:])
            recs.append((trim(nm).decode(), cm.decode(), conv(lines[i + 1]), lines[i + 3]))
            i += 4
        assert all(x == b"" for x in lines[i:])
    else:
        cur = None
        for ln in lines:
            if ln.startswith(b">"):
                if cur:
                    recs.append(cur)
                nm, cm = split(ln[1:])
                cur = (trim(nm).decode(), cm.decode(), b"", None)
            else:
                cur = (cur[0], cur[1], cur[2] + conv(ln), None)
        if cur:
            recs.append(cur)
    return recs


LETTERS = "ACGTacgtNnRYKMSWBDHVrykmswbdhv.-"


def random_fastx(rng: random.Random, n: int, fasta: bool) -> bytes:
    out = []
    nl = "\r\n" if rng.random() < 0.3 else "\n"
    for i in range(n):
        name = f"r{i}" + rng.choice(["", "/1", "/2", "/x", "_a"])
        comment = rng.choice(["", " c", " 1:N:0:ACGT", "\tBC:Z:AC x", "  two"])
        ln = rng.choice([0, 1, 2, 5, 17, 40, 150])
        seq = "".join(rng.choice(LETTERS) if rng.random() < 0.1 else rng.choice("ACGT") for _ in range(ln))
        if fasta:
            w = rng.choice([1, 3, 10, 60, 1000])
            body = nl.join(seq[k:k + w] for k in range(0, ln, w)) if ln else ""
            out.append(f">{name}{comment}{nl}{body}{nl}" if body else f">{name}{comment}{nl}")
        else:
            qual = "".join(chr(rng.randint(33, 74)) for _ in range(ln))
            out.append(f"@{name}{comment}{nl}{seq}{nl}+{nl}{qual}{nl}")
    s = "".join(out)
    if s and rng.random() < 0.3:
        s = s[:-len(nl)]                                 # no newline at the end
    if rng.random() < 0.3:
        s += nl * rng.randint(1, 5)                      # blank lines at the end
    return s.encode()


@pytest.mark.parametrize("fasta", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_random_against_reference(tmp_path, fasta, seed):
    rng = random.Random(seed)
    text = random_fastx(rng, rng.choice([1, 2, 7, 40]), fasta)
    expect = ref_parse(text)
    for gz in (False, True):
        p = write(tmp_path, f"r{int(gz)}.fx", text, gz)
        for bs in (1, 2, 3, 7, 64, 1 << 20):
            got = as_records(ReadBatch.concat(list(iter_pieces(p, block_size=bs))))
            assert got == expect, (gz, bs)


def _csr_ok(b: ReadBatch):
    buf, off = bytes_csr(b.names)
    assert b.name_buf is not None
    assert np.array_equal(b.name_off, off) and b.name_buf.tobytes() == buf.tobytes()


@pytest.mark.parametrize("fasta", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_name_csr_follows_the_names(tmp_path, fasta, seed):
    """The parser's name bytes + offsets (what the kernels read) equal the names, through concat, slice,
    interleave and deinterleave; non-UTF-8 bytes round-trip."""
    rng = random.Random(seed)
    text = random_fastx(rng, rng.choice([2, 8, 40]), fasta).replace(b"r", b"r\xe9", 1)
    p = write(tmp_path, "r.fx", text)
    pieces = list(iter_pieces(p, block_size=rng.choice([3, 64, 1 << 20])))
    for b in pieces:
        _csr_ok(b)
    whole = ReadBatch.concat(pieces)
    _csr_ok(whole)
    m = whole.n // 2
    for b in (whole.slice(0, m), whole.slice(m, whole.n), whole.slice(1, 1)):
        _csr_ok(b)
    a, c = whole.slice(0, m), whole.slice(m, 2 * m)
    il = interleave(a, c)
    _csr_ok(il)
    for b in deinterleave(il):
        _csr_ok(b)
    assert ReadBatch.empty().name_csr()[1].tolist() == [0]


# --------------------------------------------------------------------------------------------------
# Basic parsing

def test_fastq_basic(tmp_path):
    p = write(tmp_path, "a.fq", "@r1/1 c1 x\nACGTN\n+\nIIIII\n@r2\tcmt\nacgtRYk.-\n+r2\n#########\n")
    b = read_all(p)
    assert b.names == ["r1", "r2"]
    assert b.comments == ["c1 x", "cmt"]
    assert b.has_qual and b.n == 2 and b.bases == 14
    assert b.seq_off.tolist() == [0, 5, 14]
    assert b.seq.tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 4, 4, 4, 4]
    assert b.qual.tobytes() == b"IIIII#########"
    assert b.seq_str(1) == "ACGTNNNNN"


def test_trim_readno_like_bwa(tmp_path):
    p = write(tmp_path, "a.fa", ">a/1\nA\n>/1\nA\n>ab/2 x\nA\n>ab/x\nA\n>ab/12\nA\n")
    assert read_all(p).names == ["a", "/1", "ab", "ab/x", "ab/12"]
    assert read_all(p, trim_readno=False).names == ["a/1", "/1", "ab/2", "ab/x", "ab/12"]


def test_header_whitespace_like_kseq(tmp_path):
    # name ends at the first whitespace; the comment is everything after that one character
    p = write(tmp_path, "a.fq", "@n1  two spaces\nA\n+\nI\n@n2\t\tt\nA\n+\nI\n@n3 \nA\n+\nI\n@\nA\n+\nI\n")
    b = read_all(p)
    assert b.names == ["n1", "n2", "n3", ""]
    assert b.comments == [" two spaces", "\tt", "", ""]


def test_crlf_same_as_lf(tmp_path):
    fq = "@r1 c\nACGT\n+\nIIII\n@r2\nNN\n+\n##\n"
    fa = ">r1 c\nACGT\nAC\n>r2\nNN\n"
    for t in (fq, fa):
        a = read_all(write(tmp_path, "lf", t))
        b = read_all(write(tmp_path, "crlf", t.replace("\n", "\r\n")))
        assert as_records(a) == as_records(b)
        assert b.comments[0] == "c"


def test_iupac_dot_dash_all_cases(tmp_path):
    amb = "RYKMSWBDHVNrykmswbdhvn.-"
    p = write(tmp_path, "a.fa", f">x\nACGTacgt{amb}\n")
    b = read_all(p)
    assert b.seq.tolist() == [0, 1, 2, 3, 0, 1, 2, 3] + [4] * len(amb)
    assert not b.has_qual and b.qual.size == 0


def test_multiline_fasta_and_blank_lines(tmp_path):
    p = write(tmp_path, "a.fa", "\n\n>s1 hello world\nAC\n\nGT\nA\n>s2\n>s3\nTT\n\n\n")
    b = read_all(p)
    assert b.names == ["s1", "s2", "s3"]
    assert b.comments == ["hello world", "", ""]
    assert b.lengths.tolist() == [5, 0, 2]


def test_zero_length_reads(tmp_path):
    # zero-length reads, also as the last record followed by blank lines
    p = write(tmp_path, "a.fq", "@a\n\n+\n\n@b\nAC\n+\nII\n@c\n\n+\n\n\n\n\n")
    b = read_all(p)
    assert b.names == ["a", "b", "c"]
    assert b.lengths.tolist() == [0, 2, 0]
    for bs in range(1, 40):
        assert as_records(ReadBatch.concat(list(iter_pieces(p, block_size=bs)))) == as_records(b)


def test_no_final_newline(tmp_path):
    assert read_all(write(tmp_path, "a.fq", "@a\nAC\n+\nII")).qual.tobytes() == b"II"
    assert read_all(write(tmp_path, "a.fa", ">a\nAC")).lengths.tolist() == [2]


@pytest.mark.parametrize("text", ["", "\n", "\n\n\r\n"])
@pytest.mark.parametrize("gz", [False, True])
def test_empty_file_gives_no_batches(tmp_path, text, gz):
    p = write(tmp_path, "e.fq", text, gz)
    assert list(read_batches(p)) == []
    assert list(read_pair_batches(p, p)) == []
    assert read_all(p).n == 0


def test_gzip_and_bgzip_detected_by_magic(tmp_path):
    text = "@r1\nACGT\n+\nIIII\n@r2\nGG\n+\nII\n"
    plain = read_all(write(tmp_path, "x.gz", text))              # plain text named .gz
    gz = read_all(write(tmp_path, "x.fq", text, gz=True))        # gzip named .fq
    # bgzip-like: several gzip members
    p = tmp_path / "m.fq"
    p.write_bytes(gzip.compress(text[:9].encode()) + gzip.compress(text[9:].encode()))
    multi = read_all(str(p))
    assert as_records(plain) == as_records(gz) == as_records(multi)


def test_stdin(tmp_path, monkeypatch):
    data = gzip.compress(b"@r1\nACGT\n+\nIIII\n")

    class FakeStdin:
        buffer = io.BufferedReader(io.BytesIO(data))
    monkeypatch.setattr(sys, "stdin", FakeStdin())
    b = read_all("-")
    assert b.names == ["r1"] and b.seq.tolist() == [0, 1, 2, 3]


# --------------------------------------------------------------------------------------------------
# Errors: one line, naming the file and the record

def err(tmp_path, text, gz=False, name="bad.fq", **kw):
    p = write(tmp_path, name, text, gz)
    with pytest.raises(ReadFormatError) as e:
        read_all(p, **kw)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(p + ": ")
    return msg


GOOD = "@r1\nACGT\n+\nIIII\n"


def test_error_length_mismatch(tmp_path):
    msg = err(tmp_path, GOOD + "@r2\nACGT\n+\nIII\n")
    assert "record 2 (line 8)" in msg and "lengths differ (4 vs 3)" in msg


def test_error_missing_plus(tmp_path):
    msg = err(tmp_path, GOOD + GOOD + "@r3\nACGT\nIIII\n@r4\nA\n+\nI\n")
    assert "record 3 (line 11)" in msg and "'+'" in msg


def test_error_bad_header(tmp_path):
    msg = err(tmp_path, "r1\nACGT\n+\nIIII\n")
    assert "record 1 (line 1)" in msg and "'@'" in msg and "'>'" in msg
    msg = err(tmp_path, GOOD + ">r2\nACGT\n+\nIIII\n")
    assert "record 2 (line 5)" in msg and "found '>'" in msg
    msg = err(tmp_path, GOOD + "\n" + GOOD)                       # blank line between records
    assert "record 2 (line 5)" in msg and "empty line" in msg


@pytest.mark.parametrize("bad", ["1", "*", " ", "X", "U", "\t", "\x01", "\xe9", "@", "+"])
def test_error_invalid_character(tmp_path, bad):
    msg = err(tmp_path, GOOD + GOOD + f"@r3\nAC{bad}T\n+\nIIII\n")
    assert "record 3 (line 10)" in msg and "invalid character" in msg and "position 3" in msg
    msg = err(tmp_path, f">a\nACGT\n>b\nAAAA\nAC{bad}T\n", name="bad.fa")
    assert "record 2 (line 5)" in msg and "invalid character" in msg and "position 7" in msg


def test_error_invalid_character_reported_first(tmp_path):
    # the earliest problem in file order is the one reported
    msg = err(tmp_path, "@r1\nAXGT\n+\nIIII\n@r2\nACGT\n+\nII\n")
    assert "record 1" in msg and "invalid character 'X'" in msg


@pytest.mark.parametrize("tail,what", [("@r2\n", "header"), ("@r2\nACGT\n", "sequence"),
                                       ("@r2\nACGT\n+\n", "'+'"), ("@r2\nACGT\n+", "'+'")])
def test_error_truncated_file(tmp_path, tail, what):
    msg = err(tmp_path, GOOD + tail)
    assert "record 2 (line 5)" in msg and "truncated" in msg and what in msg


def test_error_truncated_quality_at_end(tmp_path):
    msg = err(tmp_path, GOOD + "@r2\nACGT\n+\nII")
    assert "record 2" in msg and "lengths differ (4 vs 2)" in msg


def test_error_truncated_gzip(tmp_path):
    text = "".join(f"@r{i}\n{'ACGT' * 30}\n+\n{'I' * 120}\n" for i in range(2000)).encode()
    data = gzip.compress(text)
    p = tmp_path / "t.fq.gz"
    p.write_bytes(data[:len(data) // 2])
    with pytest.raises(ReadFormatError) as e:
        for _ in read_batches(str(p), block_size=4096):
            pass
    msg = str(e.value)
    assert msg.startswith(str(p)) and "gzip" in msg and "after record" in msg and "\n" not in msg


def test_error_corrupt_gzip(tmp_path):
    text = "".join(f"@r{i}\n{'ACGT' * 30}\n+\n{'I' * 120}\n" for i in range(2000)).encode()
    data = bytearray(gzip.compress(text))
    for k in range(200, 400):
        data[k] ^= 0x5A
    p = tmp_path / "c.fq.gz"
    p.write_bytes(bytes(data))
    with pytest.raises(ReadFormatError) as e:
        read_all(str(p))
    assert "gzip" in str(e.value) and "\n" not in str(e.value)


def test_error_line_numbers_after_blocks(tmp_path):
    # the line number stays right when the error lies many blocks into the file
    text = GOOD * 1000 + "@r\nACGT\n+\nIII\n"
    for bs in (1, 5, 100, 1 << 20):
        p = write(tmp_path, "l.fq", text)
        with pytest.raises(ReadFormatError, match=r"record 1001 \(line 4004\)"):
            list(iter_pieces(p, block_size=bs))
    fa = ">a\nAC\nGT\n" * 500 + ">b\nAC\nGX\n"
    for bs in (1, 7, 1 << 20):
        p = write(tmp_path, "l.fa", fa)
        with pytest.raises(ReadFormatError, match=r"record 501 \(line 1503\)"):
            list(iter_pieces(p, block_size=bs))


def test_parallel_blocks_keep_order_and_raise_in_turn(tmp_path):
    # FASTQ blocks are parsed on a thread pool: pieces still come in file order with the right first_id,
    # and a bad block raises only after every block before it was yielded
    text = "".join(f"@r{i}\n{'ACGT'[i % 4] * (1 + i % 37)}\n+\n{'I' * (1 + i % 37)}\n" for i in range(3000))
    p = write(tmp_path, "o.fq", text + "@bad\nACGT\n+\nIII\n" + GOOD * 50)
    got = []
    with pytest.raises(ReadFormatError, match=r"record 3001 \(line 12004\)"):
        for b in iter_pieces(p, block_size=997):
            assert b.first_id == sum(x.n for x in got)
            got.append(b)
    recs = as_records(ReadBatch.concat(got))  # every block before the bad record's block, in order
    assert len(recs) > 2900 and [r[0] for r in recs] == [f"r{i}" for i in range(len(recs))]


# --------------------------------------------------------------------------------------------------
# Chunking

def bwa_batches(lengths, chunk_size, paired=False):
    """bwa's bseq_read loop: sizes of successive batches (in reads)."""
    out = []
    i, n_total = 0, len(lengths)
    step = 2 if paired else 1
    while i < n_total:
        size = n = 0
        while i + n < n_total:
            size += sum(lengths[i + n:i + n + step])
            n += step
            if size >= chunk_size and n % 2 == 0:
                break
        out.append(n)
        i += n
    return out


@pytest.mark.parametrize("gz", [False, True])
def test_chunk_sizes_same_records(tmp_path, gz):
    rng = random.Random(5)
    lens = [rng.choice([0, 1, 3, 10, 50]) for _ in range(101)]
    text = "".join(f"@r{i}\n{'ACGT' * 13 * 0}{'A' * n}\n+\n{'I' * n}\n" for i, n in enumerate(lens))
    p = write(tmp_path, "c.fq", text, gz)
    whole = read_all(p)
    for k in [1, 2, 3, 7, 49, 50, 51, 100, 500, sum(lens) - 1, sum(lens), sum(lens) + 1, 10 ** 9]:
        for bs in (1, 13, 200, 1 << 20):
            batches = list(read_batches(p, chunk_size=k, block_size=bs))
            assert [b.n for b in batches] == bwa_batches(lens, k), (k, bs)
            assert as_records(ReadBatch.concat(batches)) == as_records(whole)
            assert [b.first_id for b in batches] == np.cumsum([0] + [b.n for b in batches])[:-1].tolist()


def test_pair_batch_parts_concatenate_to_the_batches(tmp_path):
    # read_pair_batch_parts: each -K batch arrives as parts of an even number of reads (the last one
    # flagged end_of_batch) that concatenate to exactly read_pair_batches' batch, for any part size
    rng = random.Random(11)
    n = 301
    l1 = [rng.choice([0, 5, 20, 150]) for _ in range(n)]
    l2 = [rng.choice([0, 7, 30, 150]) for _ in range(n)]
    p1 = write(tmp_path, "r1.fq", "".join(f"@p{i}/1\n{'C' * x}\n+\n{'1' * x}\n" for i, x in enumerate(l1)))
    p2 = write(tmp_path, "r2.fq", "".join(f"@p{i}/2\n{'G' * x}\n+\n{'2' * x}\n" for i, x in enumerate(l2)))
    n_checked = 0
    for k in (1, 150, 1000, 5000, 10 ** 6):
        for part in (1, 300, 2000, 10 ** 7):
            for bs in (50, 4096, 1 << 20):
                want = list(read_pair_batches(p1, p2, chunk_size=k, block_size=bs))
                got, cur = [], []
                for b, end in read_pair_batch_parts(p1, p2, chunk_size=k, part_bases=part, block_size=bs):
                    assert b.n % 2 == 0
                    cur.append(b)
                    if end:
                        got.append(ReadBatch.concat(cur))
                        cur = []
                assert not cur
                assert [b.n for b in got] == [b.n for b in want], (k, part, bs)
                for g, w in zip(got, want):
                    assert g.first_id == w.first_id and as_records(g) == as_records(w)
                n_checked += len(want)
    assert n_checked > 100


def test_pairs_lockstep_and_interleave(tmp_path):
    rng = random.Random(7)
    n = 37
    l1 = [rng.choice([0, 5, 20]) for _ in range(n)]
    l2 = [rng.choice([0, 7, 30]) for _ in range(n)]
    p1 = write(tmp_path, "r1.fq", "".join(f"@p{i}/1\n{'C' * x}\n+\n{'1' * x}\n" for i, x in enumerate(l1)))
    p2 = write(tmp_path, "r2.fq", "".join(f"@p{i}/2\n{'G' * x}\n+\n{'2' * x}\n" for i, x in enumerate(l2)),
               gz=True)
    inter = [x for ab in zip(l1, l2) for x in ab]
    for k in (1, 10, 40, 100, 10 ** 6):
        for bs in (3, 50, 1 << 20):
            batches = list(read_pair_batches(p1, p2, chunk_size=k, block_size=bs))
            assert [b.n for b in batches] == bwa_batches(inter, k, paired=True)
            allr = ReadBatch.concat(batches)
            assert allr.names == [f"p{i}" for i in range(n) for _ in (1, 2)]
            assert allr.lengths.tolist() == inter
            assert [b.first_id for b in batches] == np.cumsum([0] + [b.n for b in batches])[:-1].tolist()
            m1, m2 = deinterleave(allr)
            assert m1.lengths.tolist() == l1 and m2.lengths.tolist() == l2
            assert set(m1.qual.tobytes()) <= {ord("1")} and set(m2.seq.tolist()) <= {2}
            again = interleave(m1, m2)
            assert as_records(again) == as_records(allr)


def test_pairs_unequal_counts_error(tmp_path):
    """One mate file ending early is an error naming both files and the record (bwa only warns and
    drops the extra reads; the issue asks for a clear error: nothing is silently dropped)."""
    p1 = write(tmp_path, "r1.fq", GOOD * 3)
    p2 = write(tmp_path, "r2.fq", GOOD * 2)
    with pytest.raises(ReadFormatError, match="r2.fq: ends after record 2 .*r1.fq has more"):
        list(read_pair_batches(p1, p2))
    with pytest.raises(ReadFormatError, match="r2.fq: ends after record 2 .*r1.fq has more .*1st file"):
        list(read_pair_batches(p2, p1))


# --------------------------------------------------------------------------------------------------
# The demo data: reads as in the golden bwa output, batches as bwa cuts them

def test_demo_reads_match_golden():
    b = read_all(str(DATA / "lambda_R1.fq.gz"))
    assert b.n == 2000 and b.bases == 300000
    comp = str.maketrans("ACGTN", "TGCAN")
    with gzip.open(DATA / "golden" / "lambda_se.bwa.sam.gz", "rt") as f:
        recs = [ln.split("\t") for ln in f if not ln.startswith("@")]
    prim = [r for r in recs if not int(r[1]) & 0x900]
    assert [r[0] for r in prim] == b.names
    for i, r in enumerate(prim):
        s = b.seq_str(i)
        assert r[9] == (s.translate(comp)[::-1] if int(r[1]) & 0x10 else s)


@pytest.mark.skipif(shutil.which("bwa") is None, reason="bwa not installed")
@pytest.mark.parametrize("k", [1, 300, 1001, 45000])
def test_batches_match_bwa_log(tmp_path, k):
    ref = tmp_path / "ref.fa"
    ref.write_bytes(gzip.decompress((DATA / "lambda.fa.gz").read_bytes()))
    subprocess.run(["bwa", "index", str(ref)], check=True, capture_output=True)
    r1, r2 = str(DATA / "lambda_R1.fq.gz"), str(DATA / "lambda_R2.fq.gz")
    for args, ours in (([r1], read_batches(r1, k)), ([r1, r2], read_pair_batches(r1, r2, k))):
        log = subprocess.run(["bwa", "mem", "-t1", "-K", str(k), str(ref)] + args, check=True,
                             capture_output=True, text=True).stderr
        theirs = [ln.split("read ")[1].split(" sequences")[0] + " " + ln.split("(")[1].split(" bp")[0]
                  for ln in log.splitlines() if "[M::process] read" in ln]
        assert [f"{b.n} {b.bases}" for b in ours] == theirs


def test_prefetch_now_starts_at_once_and_keeps_order():
    """prefetch_now's thread produces before the first next() (g3align mem parses beside the index load);
    prefetch() hands it back unchanged; items keep their order; close() stops the producer."""
    import threading
    import time

    from g3align.aligner.io.reads import Prefetched, prefetch, prefetch_now
    started = threading.Event()

    def items():
        started.set()
        yield from range(50)

    it = prefetch_now(items(), depth=4)
    assert started.wait(5.0)  # no consumer yet
    assert prefetch(it) is it and isinstance(it, Prefetched)
    assert list(it) == list(range(50))

    def endless():
        k = 0
        while True:
            yield k
            k += 1

    it = prefetch_now(endless(), depth=2)
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    it.close()
    time.sleep(0.3)
    assert not [t for t in threading.enumerate() if t.name == "g3align-reader" and t.is_alive()]


def test_prefetch_now_raises_where_the_error_happened():
    from g3align.aligner.io.reads import ReadFormatError, prefetch_now

    def items():
        yield 1
        yield 2
        raise ReadFormatError("bad record 3")

    it = prefetch_now(items(), depth=8)
    assert next(it) == 1 and next(it) == 2
    with pytest.raises(ReadFormatError, match="record 3"):
        next(it)


def test_names_and_comments_made_on_first_use_only(tmp_path):
    """The parser keeps names and comments as bytes + offsets (mem never makes strings of them); `names` and
    `comments` make them on first use, equal to the header's words, through slice, concat (also with a batch
    that holds only strings), interleave and deinterleave."""
    from g3align.aligner.io.reads import ReadBatch, deinterleave, interleave, iter_pieces
    recs = [(f"r{i}/1", f"c {i}\tx" if i % 3 else "") for i in range(50)]
    p = tmp_path / "a.fq"
    p.write_text("".join(f"@{n}{' ' + c if c else ''}\nACGT\n+\nIIII\n" for n, c in recs))
    b = next(iter_pieces(str(p)))
    assert b._names is None and b._comments is None and b.n == 50
    names = [n[:-2] for n, _ in recs]
    comments = [c for _, c in recs]
    assert b.names == names and b.comments == comments
    c = next(iter_pieces(str(p)))
    s = c.slice(10, 30)
    assert s._names is None and s.names == names[10:30] and s.comments == comments[10:30]
    strings_only = ReadBatch(["x", "y"], ["", "k"], np.zeros(2, np.uint8), np.arange(3), np.zeros(2, np.uint8), True)
    cat = ReadBatch.concat([s, strings_only, c.slice(0, 5)])
    assert cat.names == names[10:30] + ["x", "y"] + names[:5]
    assert cat.comments == comments[10:30] + ["", "k"] + comments[:5]
    i = interleave(c.slice(0, 20), c.slice(20, 40))
    assert i._names is None and i.names[0::2] == names[:20] and i.names[1::2] == names[20:40]
    d1, d2 = deinterleave(i)
    assert d1.names == names[:20] and d2.comments == comments[20:40]
    assert d1.same_names(c.slice(0, 20)) and not d1.same_names(d2)


@pytest.mark.parametrize("trim", [True, False])
@pytest.mark.parametrize("keep_raw", [True, False])
def test_parse_kernel_equals_numpy_path(tmp_path, monkeypatch, trim, keep_raw):
    """reads._fastq_block (a block in one nogil call) == the numpy steps, field for field: CRLF lines, names
    with and without /1 /2 (trimmed or not), comments with spaces and tabs, empty reads, IUPAC and '.' bases."""
    rng = random.Random(5)
    recs = []
    for i in range(3000):
        n = rng.choice([0, 1, 5, 150, 151])
        seq = "".join(rng.choice("ACGTNacgtn.RYKM") for _ in range(n))
        name = rng.choice([f"r{i}", f"r{i}/1", f"r{i}/2", f"x/{i}", "a/"])
        com = rng.choice(["", " c", "\tBC:Z:AC\tXY:i:1", " two words "])
        eol = rng.choice(["\n", "\r\n"])
        recs.append(f"@{name}{com}{eol}{seq}{eol}+{rng.choice(['', name])}{eol}{'I' * n}{eol}")
    p = tmp_path / "a.fq"
    p.write_text("".join(recs))
    _same_both_ways(monkeypatch, p, 1 << 16, trim, keep_raw)


def _python_path(monkeypatch):
    """The block kernels made to reject every block, as they do a block with an error: each block is then parsed
    by the Python (numpy) steps, which find and report errors."""
    from g3align.aligner.io import reads
    monkeypatch.setattr(reads, "_fastq_block", lambda *a: (False,) + (None,) * 8)
    monkeypatch.setattr(reads, "_fasta_block", lambda *a: (False,) + (None,) * 8)


def _same_both_ways(monkeypatch, path, block, trim, keep_raw, raw_kept_alike=True):
    """The pieces of `path` parsed by the block kernels and by the Python path are equal field for field (several
    blocks' worth). raw_kept_alike False: the raw letters are compared only when asked for (the FASTA Python path
    keeps them anyway)."""
    from g3align.aligner.io import reads
    got = {}
    for kernel in (True, False):
        with monkeypatch.context() as m:
            if not kernel:
                _python_path(m)
            got[kernel] = list(reads.iter_pieces(str(path), block_size=block, trim_readno=trim, keep_raw=keep_raw))
    assert len(got[True]) == len(got[False]) > 3
    for a, b in zip(got[True], got[False]):
        assert a.n == b.n and a.first_id == b.first_id
        for f in ("seq", "seq_off", "qual"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        if raw_kept_alike:
            assert (a.raw is None) == (b.raw is None) and (a.raw is None or np.array_equal(a.raw, b.raw))
        elif keep_raw:
            assert np.array_equal(a.raw, b.raw)
        assert a.names == b.names and a.comments == b.comments
        for x, y in zip(a.name_csr() + a.comment_csr(), b.name_csr() + b.comment_csr()):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("trim,keep_raw", [(True, True), (False, False)])
def test_fasta_kernel_equals_python_path(tmp_path, monkeypatch, trim, keep_raw):
    """reads._fasta_block (a block in one nogil call, on the parse pool) == the Python path, field for field:
    multi-line and empty sequences, blank lines, CRLF, names with /1 and comments; an invalid base in a later
    block is reported with its record and line either way."""
    from g3align.aligner.io import reads
    rng = random.Random(6)
    recs = []
    for i in range(3000):
        n = rng.choice([0, 1, 5, 150, 151, 700])
        seq = "".join(rng.choice("ACGTNacgtn.RYKM-") for _ in range(n))
        name = rng.choice([f"r{i}", f"r{i}/1", f"x/{i}", "a/", ""])
        com = rng.choice(["", " c", "\tBC:Z:AC\tXY:i:1", " two words "])
        eol = rng.choice(["\n", "\r\n"])
        body = eol.join(seq[k:k + 60] for k in range(0, n, 60)) if rng.random() < 0.5 else seq
        blank = rng.choice(["", eol])
        recs.append(f">{name}{com}{eol}{body}{eol}{blank}")
    p = tmp_path / "a.fa"
    p.write_text("".join(recs))
    _same_both_ways(monkeypatch, p, 1 << 15, trim, keep_raw, raw_kept_alike=False)
    text = "".join(recs)
    k = text.index(">", len(text) * 3 // 4)                  # a record in a later block: an invalid base
    k = text.index("\n", k) + 1
    bad = text[:k] + "AC*" + text[k:]
    rec = text[:k].count("\n>") + 1
    line = text[:k].count("\n") + 1
    p.write_text(bad)
    for kernel in (True, False):
        with monkeypatch.context() as m:
            if not kernel:
                _python_path(m)
            with pytest.raises(reads.ReadFormatError, match=rf"record {rec} \(line {line}\): invalid character '\*'"):
                list(reads.iter_pieces(str(p), block_size=1 << 15))


@pytest.mark.parametrize("split", [1, 2, 4])
def test_interleave_split_copies_equal(tmp_path, monkeypatch, split):
    """interleave copies bases and qualities in INTERLEAVE_SPLIT pair ranges on threads at once: the same
    batch (mates of unequal lengths, names and comments) whatever the split."""
    from g3align.aligner.io import reads
    rng = random.Random(3)
    paths = []
    for mate in (1, 2):
        p = tmp_path / f"m{mate}.fq"
        p.write_text("".join(f"@q{i}/{mate} c{i % 5}\n{'ACGTN'[i % 5] * (20 + (i * mate) % 90)}\n+\n"
                             f"{chr(33 + rng.randrange(40)) * (20 + (i * mate) % 90)}\n" for i in range(20000)))
        paths.append(str(p))
    b1, b2 = (next(reads.iter_pieces(p, block_size=1 << 26)) for p in paths)
    monkeypatch.setattr(reads, "INTERLEAVE_SPLIT", 1)
    want = reads.interleave(b1, b2)
    monkeypatch.setattr(reads, "INTERLEAVE_SPLIT", split)
    got = reads.interleave(b1, b2)
    for f in ("seq", "seq_off", "qual", "name_buf", "name_off", "com_buf", "com_off"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
    assert got.names[:4] == ["q0", "q0", "q1", "q1"] and got.comments[2] == "c1"
    assert want.seq_off[-1] == sum(20 + (i * m) % 90 for i in range(20000) for m in (1, 2))
