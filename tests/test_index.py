"""Tests of the reference packing, the FM-index and the index file (g3align.index)."""

import gzip
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

from g3align.index import fasta as F
from g3align.index.build import build_index
from g3align.index.bwafmt import write_pac
from g3align.index.fm import (
    build_fm,
    build_text,
    fm_bwt,
    fm_count,
    fm_lf,
    fm_locate,
    fm_occ1,
    fm_occ2,
    fm_occ4,
    fm_sa,
    fm_step1,
    fm_step2,
)
from g3align.index.store import IndexFormatError, index_path, load_index, read_index_meta, save_index

HAVE_BWA = shutil.which("bwa") is not None

# glibc: srand48(11); then lrand48() x 12  (computed with a 5-line C program)
LRAND48_SEED11 = [1609868485, 1074594562, 470884846, 2128573038, 960673312, 346697164,
                  303961605, 444770020, 1109020034, 1241372325, 865094427, 1652518985]
# glibc: srand48(0); lrand48() x 2
LRAND48_SEED0 = [366850414, 1610402240]


# ------------------------------------------------------------------------------------------------
# lrand48 / FASTA
# ------------------------------------------------------------------------------------------------


def test_lrand48_matches_glibc():
    assert F.lrand48_seq(11, 12).tolist() == LRAND48_SEED11
    assert F.lrand48_seq(0, 2).tolist() == LRAND48_SEED0


def _write(path, text, mode="plain"):
    data = text.encode() if isinstance(text, str) else text
    if mode == "gzip":
        with gzip.open(path, "wb") as fh:
            fh.write(data)
    elif mode == "bgzip":
        import pysam

        with pysam.BGZFile(str(path), "wb") as fh:
            fh.write(data)
    else:
        with open(path, "wb") as fh:
            fh.write(data)
    return str(path)


FA_TEXT = (
    "\n>chr1 first contig\nACGTacgtNN\nNNRYn\n\n>chr2\tdesc two\nggcc\nAAAA\n>empty\n>chr3\n"
    "NnNNaC\n"
)


def _expected_codes():
    # chr1: ACGTacgt NNNN R Y n ; chr2: ggccAAAA ; empty ; chr3: N n NN a C
    seq = "ACGTacgtNNNNRYn" + "ggccAAAA" + "" + "NnNNaC"
    draws = iter(F.lrand48_seq(11, 100) & 3)
    return np.array(["ACGTacgt".index(ch) % 4 if ch in "ACGTacgt" else int(next(draws)) for ch in seq],
                    dtype=np.uint8)


@pytest.mark.parametrize("mode", ["plain", "gzip", "bgzip", "crlf"])
def test_read_fasta_packing(tmp_path, mode):
    text = FA_TEXT.replace("\n", "\r\n") if mode == "crlf" else FA_TEXT
    path = _write(tmp_path / "r.fa", text, "plain" if mode == "crlf" else mode)
    ref = F.read_fasta(path)
    assert ref.names == ["chr1", "chr2", "empty", "chr3"]
    assert ref.comments == ["first contig", "desc two", "", ""]
    assert ref.offsets.tolist() == [0, 15, 23, 23, 29]
    assert ref.l_pac == 29 and ref.pac.dtype == np.uint8
    assert np.array_equal(ref.pac, _expected_codes())
    # holes: runs of the same character within a contig (case-sensitive), offsets in pac
    assert ref.hole_off.tolist() == [8, 12, 13, 14, 23, 24, 25]
    assert ref.hole_len.tolist() == [4, 1, 1, 1, 1, 1, 2]
    assert bytes(ref.hole_chr).decode() == "NRYnNnN"
    assert ref.src_size == os.path.getsize(path)


def test_holes_do_not_span_contigs(tmp_path):
    ref = F.read_fasta(_write(tmp_path / "r.fa", ">a\nACNN\n>b\nNNAC\n"))
    assert ref.hole_off.tolist() == [2, 4] and ref.hole_len.tolist() == [2, 2]


@pytest.mark.parametrize(
    "text,msg",
    [
        ("", "empty file"),
        ("ACGT\nACGT\n", "no '>' header"),
        ("\nACGT\n>a\nACGT\n", "before the first '>' header"),
        (">a\nACGT\n>b\nAC\n>a\nGG\n", "duplicate sequence name 'a'"),
        (">a\n>b\n\n", "zero contigs"),
        (">a\nACGT\n+\nIIII\n", r"line 3 \(record 'a'\): .*FASTQ"),
        (">a\nACGT\n>b x\nAC\n@r\n", r"line 5 \(record 'b'\): .*FASTQ"),
        ("> x\nACGT\n", "empty sequence name"),
    ],
)
def test_read_fasta_errors(tmp_path, text, msg):
    path = _write(tmp_path / "bad.fa", text)
    with pytest.raises(F.FastaFormatError, match=msg) as ei:
        F.read_fasta(path)
    assert "bad.fa" in str(ei.value)
    assert isinstance(ei.value, ValueError)


SCAN_CASES = [
    FA_TEXT,
    FA_TEXT.replace("\n", "\r\n"),  # '\r': the pieces leave it to the serial scan
    ">a\nACGT\n>b x\nAC\n@r\n",  # a FASTQ-like line: likewise
    ">a desc\r\nACGT\n>b\r\nAC\n>c x\r\nGG\n>d \r\nT\n",  # '\r' in header lines only: the pieces read them
    ">a\nACGT\n+\nIIII\n>b\nAC\n",
    "  \n\t>a desc with  spaces\n" + "ACGTN" * 40 + "\n\n\n" + ">b\n" + "acgt\n" * 30 + ">c\n>d\nA",
    ">only header no newline",
    ">x\n" + "ACGTTGCA" * 25 + ">",  # a '>' that ends the text: a record with an empty name
    ">e1\n>e2\n>e3\n\n>e4\nAC\nGT\n",
    "ACGT\n>a\nAC\n",  # text before the first header
]


@pytest.mark.parametrize("text", SCAN_CASES)
@pytest.mark.parametrize("fastq", [False, True])
@pytest.mark.parametrize("piece", [1, 3, 7, 64])
def test_scan_in_pieces_equals_serial_scan(text, fastq, piece, monkeypatch):
    """scan_records with the text cut into pieces of a few bytes (SCAN_PIECE) finds what one serial _scan finds:
    records, sequence bytes, errors."""
    data = text.encode()
    table = np.arange(256, dtype=np.uint8)[::-1].copy()  # any byte table: each sequence byte is looked up
    arr = np.frombuffer(data, np.uint8)
    seq = np.empty(arr.size, np.uint8)
    n, olen, err, epos, rec = F._scan(arr, fastq, table, seq)
    monkeypatch.setattr(F, "SCAN_PIECE", piece)
    r = F.scan_records(data, fastq, table)
    assert (r.n, r.seq_len, r.err, r.err_pos) == (n, olen, err, epos)
    assert np.array_equal(r.rec[:n], rec[:n]) and np.array_equal(r.seq[:olen], seq[:olen])


def test_scan_pieces_of_random_fasta(monkeypatch):
    rng = np.random.default_rng(5)
    lines = []
    for r in range(300):
        lines.append(f">c{r}" + (f" note {r}" if r % 3 else ""))
        for _ in range(int(rng.integers(0, 6))):
            lines.append("".join(rng.choice(list("ACGTNacgtn"), int(rng.integers(0, 90)))))
    data = ("\n".join(lines) + "\n").encode()
    arr = np.frombuffer(data, np.uint8)
    seq = np.empty(arr.size, np.uint8)
    n, olen, _, _, rec = F._scan(arr, True, F.RAW_BYTES, seq)
    monkeypatch.setattr(F, "SCAN_PIECE", 97)
    assert F._scan_parallel(arr, F.RAW_BYTES, np.empty(arr.size, np.uint8)) is not None  # the pieces' path
    r = F.scan_records(data, True)
    assert r.n == n == 300 and r.seq_len == olen
    assert np.array_equal(r.rec[:n], rec[:n]) and np.array_equal(r.seq[:olen], seq[:olen])


@pytest.mark.parametrize("piece", [5, 64, 1 << 20])
def test_read_ref_bytes_in_pieces(tmp_path, piece, monkeypatch):
    """A plain file of several READ_PIECE bytes is read by threads into an array: the same bytes, and read_fasta
    packs it as from one read."""
    from g3align.index.mmidx import read_mm_ref
    path = _write(tmp_path / "r.fa", "".join(f">s{i} c{i}\nACGTNNAC\nGG\n" for i in range(40)))
    want = open(path, "rb").read()
    ref0, mm0 = F.read_fasta(path), read_mm_ref(path)
    monkeypatch.setattr(F, "READ_PIECE", piece)
    monkeypatch.setattr(F, "SCAN_PIECE", 16)
    got = F.read_ref_bytes(path)
    assert bytes(got) == want and (isinstance(got, np.ndarray) or 2 * piece > len(want))
    ref, mm = F.read_fasta(path), read_mm_ref(path)
    assert ref.names == ref0.names and ref.comments == ref0.comments and np.array_equal(ref.pac, ref0.pac)
    assert ref.hole_off.tolist() == ref0.hole_off.tolist()
    assert mm.names == mm0.names and np.array_equal(mm.ref_seq, mm0.ref_seq) and np.array_equal(mm.ref_off,
                                                                                                mm0.ref_off)


def test_read_fasta_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothere.fa"):
        F.read_fasta(str(tmp_path / "nothere.fa"))


def _random_fasta(rng, n_contigs=5, crlf=False):
    iupac = "NNNNRYKMSWBDHVnnx-."
    out = []
    for r in range(n_contigs):
        out.append(f">ctg{r} comment {r}\n" if r % 2 else f">ctg{r}\n")
        L = int(rng.integers(0, 1500)) if r != 2 else 0
        s, i = [], 0
        while i < L:
            if rng.random() < 0.02:
                k = int(rng.integers(1, 40))
                s.append(iupac[int(rng.integers(len(iupac)))] * k)
                i += k
            else:
                s.append("ACGTacgt"[int(rng.integers(8))])
                i += 1
        s = "".join(s)
        w = int(rng.choice([50, 60, 77]))
        for j in range(0, len(s), w):
            out.append(s[j:j + w] + ("\n" if rng.random() < 0.9 else "\n\n"))
    text = "".join(out)
    return text.replace("\n", "\r\n") if crlf else text


def _read_bwa_sa(fn):
    h = np.fromfile(fn, dtype=np.uint64, count=7)
    return int(h[0]), h[1:5].astype(np.int64), int(h[5]), int(h[6]), np.fromfile(fn, np.uint64, offset=56)


@njit
def _sa_rows(fm, rows):
    out = np.empty(rows.shape[0], np.int64)
    for i in range(rows.shape[0]):
        out[i] = fm_sa(fm, rows[i])
    return out


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH")
@pytest.mark.parametrize("crlf", [False, True])
def test_against_bwa_index(tmp_path, crlf):
    rng = np.random.default_rng(7 + crlf)
    fa = _write(tmp_path / "syn.fa", _random_fasta(rng, crlf=crlf))
    prefix = str(tmp_path / "bwa")
    subprocess.run(["bwa", "index", "-p", prefix, fa], check=True, capture_output=True)
    ref = F.read_fasta(fa)
    # .pac / .ann / .amb
    assert np.array_equal(F.read_bwa_pac(prefix), ref.pac)
    l_pac, _, hoff, hlen, hchr = F.read_bwa_amb(prefix)
    assert l_pac == ref.l_pac
    assert np.array_equal(hoff, ref.hole_off) and np.array_equal(hlen, ref.hole_len)
    assert np.array_equal(hchr, ref.hole_chr)
    _, names, _, offs, lens = F.read_bwa_ann(prefix)
    assert names == ref.names
    assert np.array_equal(offs, ref.offsets[:-1]) and np.array_equal(lens, ref.lengths)
    # .sa: primary, C, and every sampled suffix-array row
    fm = build_fm(ref.pac, sa_intv=8)
    primary, L2, intv, seq_len, bsa = _read_bwa_sa(prefix + ".sa")
    assert primary == fm.primary and seq_len == fm.n
    assert (L2 + 1).tolist() == fm.C1[1:5].tolist()
    rows = np.arange(1, bsa.size + 1, dtype=np.int64) * intv
    assert np.array_equal(_sa_rows(fm, rows), bsa.astype(np.int64))


# ------------------------------------------------------------------------------------------------
# FM-index brute force
# ------------------------------------------------------------------------------------------------


@njit
def _dump(fm):
    m = fm.n + 2
    o1 = np.empty((m, 4), np.int64)
    o4 = np.empty((m, 4), np.int64)
    o2 = np.empty((m, 16), np.int64)
    for i in range(m):
        a0, a1, a2, a3 = fm_occ4(fm, i)
        o4[i, 0] = a0
        o4[i, 1] = a1
        o4[i, 2] = a2
        o4[i, 3] = a3
        for c in range(4):
            o1[i, c] = fm_occ1(fm, c, i)
        for ab in range(16):
            o2[i, ab] = fm_occ2(fm, ab, i)
    sa = np.empty(m - 1, np.int64)
    bwt = np.empty(m - 1, np.int64)
    lf = np.empty(m - 1, np.int64)
    for r in range(m - 1):
        sa[r] = fm_sa(fm, r)
        bwt[r] = fm_bwt(fm, r)
        lf[r] = fm_lf(fm, r)
    return o1, o4, o2, sa, bwt, lf


def _naive_sa(T):
    n = len(T)
    tb = bytes(T.tolist())
    return np.array(sorted(range(n + 1), key=lambda i: tb[i:]), dtype=np.int64)  # '$' = shortest


def _texts():
    rng = np.random.default_rng(1)
    lengths = list(range(1, 26)) + [31, 32, 33, 63, 64, 65, 97, 128, 129, 200]
    for L in lengths:
        yield rng.integers(0, 4, L).astype(np.uint8)
    for L in (1, 2, 3, 7, 32, 33, 64, 150):
        yield np.zeros(L, np.uint8)  # all A (its revcomp is all T)
        yield np.full(L, rng.integers(4), np.uint8)
        yield np.tile(rng.integers(0, 4, 2).astype(np.uint8), L)[:L]
    yield np.tile(np.array([0, 3], np.uint8), 90)  # palindromic: T == revcomp
    yield np.array([1, 2] * 70, np.uint8)


@pytest.mark.parametrize("wide", [False, True, 7])  # 7: superblocks of 128 rows (the wide layout's counts)
def test_fm_bruteforce(wide):
    rng = np.random.default_rng(2)
    for pac in _texts():
        sa_intv = int(rng.choice([1, 2, 4, 8, 16, 32]))
        fm = build_fm(pac, sa_intv=sa_intv, wide=wide)
        T = build_text(pac)
        n = T.size
        SA = _naive_sa(T)
        assert fm.n == n and fm.l_pac == pac.size
        assert SA[fm.primary] == 0 and SA[fm.row_sa1] == 1
        o1, o4, o2, sa, bwt, lf = _dump(fm)
        assert np.array_equal(sa, SA), (pac, sa_intv)
        prev = np.array([T[s - 1] if s >= 1 else 4 for s in SA])
        prev2 = np.array([T[s - 2] * 4 + T[s - 1] if s >= 2 else 99 for s in SA])
        exp1 = np.zeros((n + 2, 4), np.int64)  # exp1[i] counts rows < i (i = 0..n+1)
        exp1[1:] = np.cumsum(prev[:, None] == np.arange(4)[None, :], axis=0)
        exp2 = np.zeros((n + 2, 16), np.int64)
        exp2[1:] = np.cumsum(prev2[:, None] == np.arange(16)[None, :], axis=0)
        assert np.array_equal(o1, exp1) and np.array_equal(o4, exp1)
        assert np.array_equal(o2, exp2)
        assert np.array_equal(bwt, prev)
        isa = np.empty(n + 1, np.int64)
        isa[SA] = np.arange(n + 1)
        assert np.array_equal(lf, np.where(SA >= 1, isa[np.maximum(SA - 1, 0)], 0))
        # C1 / C2
        starts = [T[s] if s < n else -1 for s in SA]
        for c in range(4):
            rows = [r for r in range(n + 1) if starts[r] == c]
            assert fm.C1[c] == (rows[0] if rows else fm.C1[c + 1])
        assert fm.C1[4] == fm.C1[5] == n + 1 and fm.C1[0] == 1


def test_wide_sa_samples_keep_bit_32():
    """The wide layout's sampled SA (values up to 2**33 - 2: a 4.29 Gbp reference): pack_sa keeps each value's bit 32
    in the words after the low words, and fm_sa reads it back (rows on the sampling grid: no LF step)."""
    from g3align.index.fm import MAX_ROWS, SUPER_SHIFT, FMIndex, pack_sa, sa_words
    rng = np.random.default_rng(11)
    n = MAX_ROWS - 1
    shift = 27
    m = (n >> shift) + 1
    vals = rng.integers(0, n + 1, m).astype(np.int64)
    vals[:3] = [n, (1 << 32) - 1, 1 << 32]
    sa = pack_sa(vals, SUPER_SHIFT)
    assert sa.dtype == np.uint32 and sa.shape[0] == sa_words(n, shift, SUPER_SHIFT) == m + (m + 31) // 32
    assert np.array_equal(pack_sa(vals[vals < (1 << 32)], 0), vals[vals < (1 << 32)].astype(np.uint32))
    z = np.zeros(1, np.uint32)
    fm = FMIndex(n=n, l_pac=n // 2, primary=n, row_sa1=n, t0=0, C1=np.zeros(6, np.int64),
                 C2=np.zeros(17, np.int64), occ=z, occ_shift=6, occ_stride=24, occ_wide=SUPER_SHIFT, sa=sa,
                 sa_shift=shift)
    assert [fm_sa(fm, j << shift) for j in range(m)] == vals.tolist()


def test_reference_beyond_the_index_limit(tmp_path):
    """A reference of more than 4,294,967,295 bp is refused, before any work, with what the limit is."""
    from g3align.index.build import check_memory
    with pytest.raises(ValueError, match="at most 4294967295 bp"):
        check_memory((1 << 32) + 5, "cpu")


def test_fm_search_bruteforce():
    rng = np.random.default_rng(3)
    for L in (1, 5, 40, 127, 300):
        pac = rng.integers(0, 4, L).astype(np.uint8)
        if L == 300:
            pac[100:200] = 0
        fm = build_fm(pac, sa_intv=4)
        T = build_text(pac)
        tb = bytes(T.tolist())
        SA = _naive_sa(T)
        suf = [tb[s:] for s in SA]
        for plen in (1, 2, 3, 4, 5, 8, 13):
            for _ in range(25):
                if rng.random() < 0.5 and plen <= T.size:
                    st = int(rng.integers(0, T.size - plen + 1))
                    p = T[st:st + plen].copy()
                else:
                    p = rng.integers(0, 4, plen).astype(np.uint8)
                pb = bytes(p.tolist())
                rows = [r for r in range(T.size + 1) if suf[r][:plen] == pb]
                k, l = fm_count(fm, p)
                # single steps only
                k1, l1 = 0, fm.n + 1
                for c in p[::-1]:
                    k1, l1 = fm_step1(fm, k1, l1, int(c))
                if rows:
                    assert (k, l) == (rows[0], rows[-1] + 1) == (k1, l1)
                    assert sorted(fm_locate(fm, k, l).tolist()) == sorted(SA[rows].tolist())
                else:
                    assert k >= l and k1 >= l1
        # ambiguous bases give empty intervals
        k, l = fm_step1(fm, 0, fm.n + 1, 4)
        assert k >= l
        k, l = fm_step2(fm, 0, fm.n + 1, 1, 4)
        assert k >= l


# ------------------------------------------------------------------------------------------------
# index file
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def small_index(tmp_path):
    rng = np.random.default_rng(11)
    fa = _write(tmp_path / "ref.fa", _random_fasta(rng, n_contigs=4))
    prefix = str(tmp_path / "idx")
    ref = F.read_fasta(fa)
    fm = build_fm(ref.pac, sa_intv=4)
    save_index(prefix, ref, fm)
    return prefix, ref, fm, fa


@pytest.mark.parametrize("use_mmap", [True, False])
def test_store_roundtrip(small_index, use_mmap):
    prefix, ref, fm, fa = small_index
    ref2, fm2 = load_index(prefix, use_mmap=use_mmap)
    for k in ("pac", "offsets", "hole_off", "hole_len", "hole_chr"):
        a, b = getattr(ref, k), getattr(ref2, k)
        assert a.dtype == b.dtype and np.array_equal(a, b), k
    assert ref2.names == ref.names and ref2.comments == ref.comments and ref2.l_pac == ref.l_pac
    for k, v in fm._asdict().items():
        v2 = getattr(fm2, k)
        if isinstance(v, np.ndarray):
            assert v.dtype == v2.dtype and np.array_equal(v, v2), k
        else:
            assert v == v2, k
    assert fm2.occ.flags.writeable  # numba-friendly plain arrays
    rows = np.arange(fm.n + 1, dtype=np.int64)
    assert np.array_equal(_sa_rows(fm2, rows), _sa_rows(fm, rows))
    meta = read_index_meta(prefix)
    assert meta["params"]["sa_intv"] == 4 and meta["ref"]["names"] == ref.names
    assert meta["source"]["size"] == os.path.getsize(fa)
    # the bases are stored 4 a byte, as bwa's .pac body
    assert "ref.pac" not in meta["arrays"] and meta["arrays"]["ref.pac2"]["nbytes"] == (ref.l_pac + 3) // 4
    write_pac(prefix, ref.pac)
    off = meta["arrays"]["ref.pac2"]["offset"]
    with open(index_path(prefix), "rb") as fh:
        fh.seek(off)
        stored = fh.read((ref.l_pac + 3) // 4)
    with open(prefix + ".pac", "rb") as fh:
        assert fh.read((ref.l_pac + 3) // 4) == stored


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 4 * (1 << 22) + 7])
def test_pack_2bit_roundtrip(n):
    """pack_2bit is bwa's .pac body (first base in the high bits, the last byte padded with 0), in pieces on
    threads past 4M bytes; unpack_2bit inverts it."""
    codes = np.random.default_rng(n).integers(0, 4, n).astype(np.uint8)
    body = F.pack_2bit(codes)
    q = np.concatenate([codes, np.zeros(-n % 4, np.uint8)]).reshape(-1, 4).astype(np.uint8)
    assert np.array_equal(body, (q[:, 0] << 6) | (q[:, 1] << 4) | (q[:, 2] << 2) | q[:, 3])
    assert np.array_equal(F.unpack_2bit(body, n), codes)
    with pytest.raises(ValueError):
        F.unpack_2bit(body, 4 * body.size + 1)


def _corrupt(path, offset, data):
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def test_store_errors(small_index, tmp_path):
    prefix, ref, _fm, _ = small_index
    path = index_path(prefix)
    with open(path, "rb") as fh:
        raw = fh.read()
    meta = read_index_meta(prefix)

    with pytest.raises(IndexFormatError, match="nothere.g3i.*not found"):
        load_index(str(tmp_path / "nothere"))

    def fresh():
        with open(path, "wb") as fh:
            fh.write(raw)

    # truncated
    with open(path, "r+b") as fh:
        fh.truncate(len(raw) - 10)
    with pytest.raises(IndexFormatError, match="truncated"):
        load_index(prefix)
    with open(path, "wb") as fh:
        fh.write(raw[:10])
    with pytest.raises(IndexFormatError, match="too short"):
        load_index(prefix)
    # corrupt array data -> checksum error naming the array; verify=False skips the check
    fresh()
    off = meta["arrays"]["fm.occ"]["offset"] + 20
    _corrupt(path, off, bytes([raw[off] ^ 0x5A]))
    with pytest.raises(IndexFormatError, match=r"idx\.g3i.*checksum mismatch in array fm\.occ"):
        load_index(prefix)
    load_index(prefix, verify=False)
    # corrupt header
    fresh()
    _corrupt(path, 40, b"#")
    with pytest.raises(IndexFormatError, match="header is corrupt"):
        load_index(prefix)
    # wrong version
    fresh()
    _corrupt(path, 8, struct.pack("<I", 999))
    with pytest.raises(IndexFormatError, match="version 999 is not supported"):
        load_index(prefix)
    # not an index
    fresh()
    _corrupt(path, 0, b"BWAINDEX")
    with pytest.raises(IndexFormatError, match="bad magic"):
        load_index(prefix)
    fresh()
    ref2, _ = load_index(prefix)
    assert ref2.names == ref.names
    # messages are one line
    try:
        load_index(str(tmp_path / "nothere"))
    except IndexFormatError as e:
        assert "\n" not in str(e)


def test_build_index(tmp_path, capsys):
    fa = _write(tmp_path / "g.fa.gz", FA_TEXT, "bgzip")
    out = build_index(fa, str(tmp_path / "g"), sa_intv=2, progress=True)
    assert out == str(tmp_path / "g.g3i") and os.path.exists(out)
    err = capsys.readouterr().err
    assert "[M::index] read 4 sequence(s), 29 bp" in err and "[M::index] index built in" in err
    ref, fm = load_index(str(tmp_path / "g"))
    assert np.array_equal(ref.pac, _expected_codes())
    assert fm.sa_shift == 1 and fm.n == 58
    # default prefix = the FASTA path
    assert build_index(fa, progress=False) == fa + ".g3i"


def _bwa_test_fasta(path):
    """Contigs with comments (one with a tab), N runs, IUPAC codes, lowercase, and l_pac % 4 == 0."""
    rng = np.random.default_rng(9)
    s = lambda n: "".join("ACGT"[i] for i in rng.integers(0, 4, n))  # noqa: E731
    recs = [("c1 first contig, with a comment", s(500) + "N" * 37 + s(400).lower() + "NNNN" + s(301)),
            ("c2", s(100) + "RRY" + s(300) + "n" * 10 + s(87)),
            ("c3\tTAB comment", s(400)),
            ("c4", "ACGT" * 25)]
    tot = sum(len(x) for _, x in recs)
    recs.append(("c5 pad", s(1000 + (-tot) % 4)))
    path.write_text("".join(f">{h}\n" + "\n".join(x[i:i + 70] for i in range(0, len(x), 70)) + "\n"
                            for h, x in recs))
    return str(path)


def test_bwa_index_files(tmp_path):
    """index --bwa writes bwa's five files: they decode to the reference, and equal `bwa index`'s byte for byte."""
    from g3align.index.bwafmt import write_bwa_index
    for fa in (_bwa_test_fasta(tmp_path / "m.fa"), str(tmp_path / "lambda.fa")):
        if fa.endswith("lambda.fa"):
            with gzip.open(os.path.join(os.path.dirname(__file__), "..", "data", "lambda.fa.gz"), "rb") as fi:
                open(fa, "wb").write(fi.read())
        ref = F.read_fasta(fa)
        ours = str(tmp_path / ("g_" + os.path.basename(fa)))
        write_bwa_index(ours, ref)
        assert np.array_equal(F.read_bwa_pac(ours), ref.pac)
        l_pac, names, comments, offs, lens = F.read_bwa_ann(ours)
        assert l_pac == ref.l_pac and names == list(ref.names) and np.array_equal(offs, ref.offsets[:-1])
        _, _, hoff, hlen, hchr = F.read_bwa_amb(ours)
        assert np.array_equal(hoff, ref.hole_off) and np.array_equal(hlen, ref.hole_len)
        assert np.array_equal(hchr, ref.hole_chr)
        primary, n = struct.unpack("<Q", open(ours + ".bwt", "rb").read(8))[0], 2 * ref.l_pac
        assert 1 <= primary <= n
        head = struct.unpack("<7Q", open(ours + ".sa", "rb").read(56))   # primary, L2[1..4], interval, length
        assert head[0] == primary and head[4] == n and head[5:] == (32, n)
        if HAVE_BWA:
            theirs = str(tmp_path / ("b_" + os.path.basename(fa)))
            subprocess.run(["bwa", "index", "-p", theirs, fa], check=True, capture_output=True)
            for ext in ("pac", "ann", "amb", "bwt", "sa"):
                assert open(ours + "." + ext, "rb").read() == open(theirs + "." + ext, "rb").read(), ext


def test_index_cli_writes_bwa_files(tmp_path):
    fa = _bwa_test_fasta(tmp_path / "m.fa")
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "index", "--bwa", "-p", str(tmp_path / "x"), fa],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "wrote bwa's index files" in r.stderr
    for ext in ("g3i", "pac", "ann", "amb", "bwt", "sa"):
        assert os.path.getsize(tmp_path / f"x.{ext}") > 0
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "index", "--bwa", "--no-fm", "-x", "sr", fa],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--bwa needs the FM-index" in r.stderr and "Traceback" not in r.stderr


def test_crc_in_blocks_equals_zlib(monkeypatch):
    """Large arrays are checksummed in blocks on several threads and the block CRCs combined: the same CRC-32 as
    zlib over the whole array (what the .g3i header stores), for any block size and length."""
    import zlib

    from g3align.index import store
    rng = np.random.default_rng(12)
    for n, m in [(0, 0), (1, 0), (0, 7), (5, 64), (1000, 999), (12345, 5000)]:
        a, b = rng.bytes(n), rng.bytes(m)
        assert store.crc32_combine(zlib.crc32(a), zlib.crc32(b), m) == zlib.crc32(a + b)
    for block in (1, 64, 1000):
        monkeypatch.setattr(store, "_CRC_BLOCK", block)
        for size in (0, 3, 64 * 3 + 5, 10_000, 100_003):
            x = rng.integers(0, 256, size, dtype=np.uint8)
            assert store._crc(x) == zlib.crc32(x.tobytes()), (block, size)
    x = rng.integers(0, 2**32, 20_001, dtype=np.uint32)
    assert store._crc(x) == zlib.crc32(x.tobytes())
