"""Minimizer index (index/mmidx.py) and query seeding (aligner/map/seed.py) against minimap2 2.24.

* stored: tests/data/mm_sketch_golden.npz holds mm_sketch output (values and order) of a one-off C
  harness linked with minimap2 2.24's sketch.c for 200 random sequences (N runs, homopolymers, short
  tandem repeats, palindromes, lowercase/IUPAC bytes; k 1..28, w 1..255, HPC on/off).
* live (skipped when `minimap2` or the shared data is missing): our index against minimap2's own
  dumped index (`minimap2 -d`, every hash with every position), and our anchors against
  `minimap2 --print-seeds` (SD lines: same anchors in the same order; RS: rep_len; mid_occ from the
  log) for the presets map-ont, map-pb, map-hifi and sr (single and paired), on E. coli and on a
  repetitive slice of human chr20.
"""
import gzip
import itertools
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

from g3align.aligner.map import seed as mmseed
from g3align.index import mmidx
from g3align.index.mmidx import IndexFormatError, MMRefFormatError

HERE = os.path.dirname(os.path.abspath(__file__))
_CANDIDATES = [os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data")), "/work/shared/data"]
DATA = next((d for d in _CANDIDATES if os.path.isdir(d)), _CANDIDATES[0])
MINIMAP2 = shutil.which("minimap2")
ECOLI = os.path.join(DATA, "ref", "ecoli_K12_MG1655.fa.gz")
ECOLI_PB_REF = os.path.join(DATA, "ref", "ecoli_K12_PBcR_reference.fa.gz")
CHR20 = os.path.join(DATA, "ref", "human_GRCh37_chr20.fa.gz")
ONT = os.path.join(DATA, "reads", "ecoli_K12_ont_R9_nanoget.fastq.gz")
PB = os.path.join(DATA, "reads", "ecoli_K12_pacbio_RSII_first3000.fastq.gz")
SR1 = os.path.join(DATA, "sim", "ecoli_MG1655_wgsim_2x150_R1.fq.gz")
SR2 = os.path.join(DATA, "sim", "ecoli_MG1655_wgsim_2x150_R2.fq.gz")

live = pytest.mark.skipif(MINIMAP2 is None or not os.path.exists(ECOLI),
                          reason="minimap2 not on PATH or shared data missing")


# ------------------------------------------------------------------------------------------------
# sketch
# ------------------------------------------------------------------------------------------------

def test_sketch_golden():
    g = np.load(os.path.join(HERE, "data", "mm_sketch_golden.npz"))
    seqs = g["seqs"].tobytes().split(b"\n")
    cnt = g["cnt"]
    off = np.concatenate([[0], np.cumsum(cnt)])
    assert len(seqs) == len(cnt)
    for i, s in enumerate(seqs):
        got = mmidx.sketch(mmidx.encode_seq(s), int(g["w"][i]), int(g["k"][i]), 7, bool(g["hpc"][i]))
        exp = g["mz"][off[i]:off[i + 1]]
        assert np.array_equal(got, exp), (i, s[:60], int(g["w"][i]), int(g["k"][i]), int(g["hpc"][i]))


def _mz(s, w, k, hpc=False, rid=0):
    return mmidx.sketch(mmidx.encode_seq(s), w, k, rid, hpc)


def test_sketch_edges():
    assert _mz("", 10, 15).shape == (0, 2)
    assert _mz("ACGTTGCA", 10, 15).shape == (0, 2)          # shorter than k
    assert _mz("N" * 100, 5, 5).shape == (0, 2)             # all ambiguous
    # every 4-mer of (ACGT)^n is ACGT/CGTA/GTAC/TACG; ACGT and GTAC are their own reverse complement
    # and are skipped, so only CGTA/TACG (a reverse-complement pair) remain
    m = _mz("ACGT" * 10, 1, 4)
    ks = {int(x >> np.uint64(8)) for x in m[:, 0]}
    assert len(ks) == 1
    # an N breaks k-mers: nothing spans it
    s = "ACGTTAGCATCGATCGGATC" + "N" + "TTAGCGGATCCATGCAAGTC"
    for x, y in _mz(s, 1, 5):
        end = int(y & np.uint64(0xFFFFFFFF)) >> 1
        span = int(x & np.uint64(0xFF))
        assert not (end - span + 1 <= 20 <= end)
    # rid goes to the high half of y; strand to bit 0; span in the low byte of x
    m = _mz("GATTACAGATTACCAGGAT", 2, 5, rid=3)
    assert np.all(m[:, 1] >> np.uint64(32) == 3)
    assert np.all(m[:, 0] & np.uint64(0xFF) == 5)
    # HPC: runs collapse, the span covers the run lengths
    m = _mz("AAAACCCCGGGGTTTTAAAACCCC", 1, 3, hpc=True)
    assert len(m) > 0 and np.all(m[:, 0] & np.uint64(0xFF) > 3)
    assert len(_mz("A" * 50, 1, 3, hpc=True)) == 0          # one run: a single 1-mer of HPC space
    with pytest.raises(ValueError):
        mmidx.build_mm_index(mmidx.mm_ref_from_strings(["ACGT"]), 29, 10, False)


def test_encode_table():
    c = mmidx.encode_seq("ACGTacgtUuNnRY-.* ")
    assert c.tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4]


# ------------------------------------------------------------------------------------------------
# reference reading
# ------------------------------------------------------------------------------------------------

TINY_FA = (b">chr1 some comment\nACGTNNacgtRYacgtacgtaCCCCCCCCGGGATTACAGATTACAGGGTTTAAACCC\r\n"
           b"ACGATCGATCGGGCTAGCTAGCTAGGCTTTTTTTTTTAGCAGCATCAGCGACGACTACGACTACGACTAGCAGCATCAGC\r\n"
           b"\n>empty1\n>short\nACG\n>chr2\tx\nUUUGGGCCCAAATTTGGGACGACGACTAGCTACGTAGCTAGCATCGATCGACTAGC\n"
           b"GATCGATCAGCTACGATCGACTAGCATCGACTAGCATCGACTAGCATCGACTAG\n>empty2\n")


def test_read_ref(tmp_path):
    p = tmp_path / "tiny.fa"
    p.write_bytes(TINY_FA)
    ref = mmidx.read_mm_ref(p)
    assert ref.names == ["chr1", "empty1", "short", "chr2", "empty2"]
    assert ref.lengths.tolist() == [137, 0, 3, 110, 0]
    assert ref.ref_off.tolist() == [0, 137, 137, 140, 250, 250]
    assert ref.seq(0)[:14].tolist() == [0, 1, 2, 3, 4, 4, 0, 1, 2, 3, 4, 4, 0, 1]
    assert ref.seq(3)[:3].tolist() == [3, 3, 3]
    # gzip and FASTQ input
    pg = tmp_path / "tiny.fa.gz"
    pg.write_bytes(gzip.compress(TINY_FA))
    r2 = mmidx.read_mm_ref(pg)
    assert r2.names == ref.names and np.array_equal(r2.ref_seq, ref.ref_seq)
    pq = tmp_path / "r.fq"
    pq.write_bytes(b"@r1 c\nACGTN\n+\nIIIII\n@r2\nGG\n+r2\n@@\n")
    r3 = mmidx.read_mm_ref(pq)
    assert r3.names == ["r1", "r2"] and r3.ref_seq.tolist() == [0, 1, 2, 3, 4, 2, 2]
    # index with empty and short contigs: positions only from the contigs long enough
    idx = mmidx.build_mm_index(ref, 5, 3, False)
    rids = set((idx.pos >> np.uint64(32)).tolist())
    assert rids == {0, 3}


@pytest.mark.parametrize("content,what", [
    (b"hello\n>x\nACGT\n", "not FASTA/FASTQ"),
    (b"", "no sequences"),
    (b"\n\n", "no sequences"),
    (b"@r1\nACGT\n+\n", "quality"),
    (b"@r1\nACGT\n+\nII\n", "quality"),
    (b"@r1\nACGT\n", None),  # no '+' line: kseq reads it as FASTA-like; accepted
])
def test_read_ref_errors(tmp_path, content, what):
    p = tmp_path / "bad.fa"
    p.write_bytes(content)
    if what is None:
        assert mmidx.read_mm_ref(p).names == ["r1"]
        return
    with pytest.raises(MMRefFormatError, match=what) as e:
        mmidx.read_mm_ref(p)
    assert str(p) in str(e.value) and "\n" not in str(e.value)


def test_read_ref_unreadable(tmp_path):
    with pytest.raises(MMRefFormatError, match="not found"):
        mmidx.read_mm_ref(tmp_path / "missing.fa")
    p = tmp_path / "broken.fa.gz"
    body = bytes(np.random.default_rng(0).choice(list(b"ACGT"), 20000).astype(np.uint8))
    p.write_bytes(gzip.compress(b">a\n" + body + b"\n")[:2000])
    with pytest.raises(MMRefFormatError, match="cannot read"):
        mmidx.read_mm_ref(p)
    with pytest.raises(MMRefFormatError):
        mmidx.read_mm_ref(tmp_path)  # a directory


# ------------------------------------------------------------------------------------------------
# index: lookups, cal_max_occ, storage
# ------------------------------------------------------------------------------------------------

def _random_ref(seed=3, n=4, L=20000):
    rng = np.random.default_rng(seed)
    seqs = []
    rep = "".join(rng.choice(list("ACGT"), 300))
    for _ in range(n):
        s = "".join(rng.choice(list("ACGT"), L))
        s = s[:5000] + rep + s[5000:9000] + rep + "N" * 50 + s[9000:]
        seqs.append(s)
    seqs.append("")
    return mmidx.mm_ref_from_strings(seqs)


def _hard_ref(seed=5):
    """Contigs whose piece edges (SKETCH_PIECE made small) fall in random sequence, long homopolymers and tandem
    repeats longer than the warm-up, N runs and palindromes, and contigs shorter than a piece."""
    rng = np.random.default_rng(seed)
    rnd = lambda n: "".join(rng.choice(list("ACGT"), n))  # noqa: E731
    seqs = [rnd(9000) + "A" * 3000 + rnd(500) + "ACGT" * 900 + "N" * 30 + rnd(4000) + "CA" * 2500 + rnd(3000),
            "ACGTACGT" * 700 + rnd(100), rnd(50), "", "T" * 6000, rnd(12000) + "GATC" * 40 + rnd(2000),
            # N runs longer than a piece, with few bases between them (the k-mer registers keep older bases)
            rnd(3000) + "N" * 9000 + rnd(7) + "N" * 2500 + "ACGTTGCA" + "N" * 4000 + rnd(5000) + "N" * 3 + rnd(2)]
    return mmidx.mm_ref_from_strings(seqs)


@pytest.mark.parametrize("k,w,hpc", [(15, 10, False), (19, 10, True), (21, 11, False), (19, 19, True), (5, 3, True),
                                     (4, 3, False), (6, 5, True), (16, 10, False)])
def test_pieced_sketch_equals_sequential(monkeypatch, k, w, hpc):
    """The index build sketches contigs in pieces, in parallel, each after a warm-up; the result must be the
    sequential sketch's exactly, including where a warm-up is too short (long repeats: a piece redone)."""
    ref = _hard_ref()
    want = [mmidx.sketch(ref.seq(r), w, k, r, hpc) for r in range(ref.n_seq)]
    want = np.concatenate(want)
    for piece, warm in ((997, 300), (4096, 64), (1 << 20, 4096)):
        monkeypatch.setattr(mmidx, "SKETCH_PIECE", piece)
        monkeypatch.setattr(mmidx, "SKETCH_WARM", warm)
        got, n = mmidx._sketch_all(ref.ref_seq, ref.ref_off, w, k, hpc)
        assert n == want.shape[0] and np.array_equal(got[:n], want), (piece, warm)


@pytest.mark.parametrize("k,w,hpc,b", [(15, 10, False, 14), (19, 10, True, 14), (5, 3, False, 8), (21, 11, False, 3)])
def test_group_buckets_equals_lsd(k, w, hpc, b):
    """The parallel bucket grouping of the index build gives the one-thread LSD radix grouping's arrays."""
    for ref in (_random_ref(), _hard_ref()):
        mz, n = mmidx._sketch_all(ref.ref_seq, ref.ref_off, w, k, hpc)
        mz = np.concatenate([mz[:n], mz[:n][::7]])  # repeated (hash, position) pairs too
        for x, y in zip(mmidx._group_buckets(mz, mz.shape[0], b), mmidx._group_lsd(mz, mz.shape[0], k, b)):
            assert x.dtype == y.dtype and np.array_equal(x, y)
    e = np.zeros((0, 2), np.uint64)
    for x, y in zip(mmidx._group_buckets(e, 0, 14), mmidx._group_lsd(e, 0, 15, 14)):
        assert np.array_equal(x, y)


def _brute_lookup(ref, k, w, hpc):
    table = {}
    for r in range(ref.n_seq):
        for x, y in mmidx.sketch(ref.seq(r), w, k, r, hpc):
            table.setdefault(int(x >> np.uint64(8)), []).append(int(y))
    return {h: sorted(v) for h, v in table.items()}


@pytest.mark.parametrize("k,w,hpc", [(15, 10, False), (19, 10, True), (5, 3, False), (21, 11, False)])
def test_index_lookup_vs_bruteforce(k, w, hpc):
    ref = _random_ref()
    idx = mmidx.build_mm_index(ref, k, w, hpc)
    brute = _brute_lookup(ref, k, w, hpc)
    assert idx.n_keys == len(brute) and idx.n_pos == sum(len(v) for v in brute.values())
    for h, v in brute.items():
        assert idx.get(h).tolist() == v
    assert len(idx.get(0x123456789)) == 0 or 0x123456789 in brute
    cnt = np.array(sorted(len(v) for v in brute.values()))
    for f in (2e-4, 0.01, 0.3, 0.5, 0.9, 0.999):
        ff = float(np.float32(f))
        assert idx.cal_max_occ(f) == int(cnt[int((1.0 - ff) * len(cnt))]) + 1
    assert idx.cal_max_occ(0) == mmidx.INT32_MAX


def test_save_load_roundtrip(tmp_path):
    ref = _random_ref()
    idx = mmidx.build_mm_index(ref, 15, 10, False)
    path = mmidx.save_mm_index(tmp_path / "x.mmi", idx)
    for use_mmap in (True, False):
        j = mmidx.load_mm_index(path, use_mmap=use_mmap)
        assert (j.k, j.w, j.b, j.is_hpc) == (idx.k, idx.w, idx.b, idx.is_hpc)
        assert j.ref.names == ref.names
        for name in ("bkt_off", "keys", "key_off", "pos"):
            assert np.array_equal(getattr(j, name), getattr(idx, name))
        for name in ("lengths", "ref_off", "ref_seq"):
            assert np.array_equal(getattr(j.ref, name), getattr(ref, name))
        h = int(idx.keys[len(idx.keys) // 2])
        assert np.array_equal(j.get(h), idx.get(h))
        assert j.cal_max_occ(2e-4) == idx.cal_max_occ(2e-4)


def _flip(path, off):
    b = bytearray(open(path, "rb").read())
    b[off] ^= 0x40
    open(path, "wb").write(bytes(b))


def test_corrupt_index(tmp_path):
    ref = _random_ref(n=1, L=3000)
    idx = mmidx.build_mm_index(ref, 15, 10, False)
    good = open(mmidx.save_mm_index(tmp_path / "g.mmi", idx), "rb").read()
    meta = mmidx._header(str(tmp_path / "g.mmi"))[0]
    p = tmp_path / "c.mmi"

    def expect(data, msg):
        p.write_bytes(data)
        with pytest.raises(IndexFormatError, match=msg) as e:
            mmidx.load_mm_index(p)
        assert str(p) in str(e.value)

    for name in ("pos", "keys", "ref_seq", "key_off"):
        b = bytearray(good)
        b[meta["arrays"][name]["offset"] + 3] ^= 0x40
        expect(bytes(b), "checksum mismatch in array " + name)
    expect(good[:-5], "truncated")
    expect(good[:10], "too short")
    expect(b"XXXXXXXX" + good[8:], "bad magic")
    b = bytearray(good)
    b[8:12] = struct.pack("<I", 99)
    expect(bytes(b), "version 99")
    b = bytearray(good)
    b[40] ^= 0x01
    expect(bytes(b), "header is corrupt")
    with pytest.raises(IndexFormatError, match="not found"):
        mmidx.load_mm_index(tmp_path / "nope.mmi")


def test_radix_sort_x_is_a_sort():
    rng = np.random.default_rng(1)
    for n in (0, 1, 5, 64, 65, 300, 5000):
        a = np.empty((n, 2), np.uint64)
        a[:, 0] = rng.integers(0, 40, n).astype(np.uint64) << np.uint64(rng.integers(0, 60))
        a[:, 1] = np.arange(n, dtype=np.uint64)
        b = a.copy()
        mmseed.radix_sort_x(b)
        assert np.all(b[:-1, 0] <= b[1:, 0]) if n else True
        assert sorted(map(tuple, b.tolist())) == sorted(map(tuple, a.tolist()))


# ------------------------------------------------------------------------------------------------
# live: index against minimap2 -d
# ------------------------------------------------------------------------------------------------

def read_mmi(path):
    """minimap2 .mmi -> (k, w, b, flag, names, lengths, H, P) with one (hash, position) per occurrence,
    positions of a hash in minimap2's stored order."""
    d = open(path, "rb").read()
    assert d[:4] == b"MMI\2"
    w, k, b, nseq, flag = struct.unpack_from("<5I", d, 4)
    o = 24
    names, lens = [], []
    for _ in range(nseq):
        ln = d[o]
        o += 1
        names.append(d[o:o + ln].decode())
        o += ln
        lens.append(struct.unpack_from("<I", d, o)[0])
        o += 4
    H, P = [], []
    for bi in range(1 << b):
        n = struct.unpack_from("<i", d, o)[0]
        o += 4
        p = np.frombuffer(d, np.uint64, n, o)
        o += 8 * n
        size = struct.unpack_from("<I", d, o)[0]
        o += 4
        if size == 0:
            continue
        kv = np.frombuffer(d, np.uint64, 2 * size, o).reshape(size, 2)
        o += 16 * size
        h = ((kv[:, 0] >> np.uint64(1)) << np.uint64(b)) | np.uint64(bi)
        single = (kv[:, 0] & np.uint64(1)) == 1
        cnt = (kv[:, 1] & np.uint64(0xFFFFFFFF)).astype(np.int64)[~single]
        st = (kv[:, 1] >> np.uint64(32)).astype(np.int64)[~single]
        rep = np.repeat(np.arange(len(cnt)), cnt)
        within = np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        H += [h[single], h[~single][rep]]
        P += [kv[single, 1], p[st[rep] + within]]
    return k, w, b, flag, names, lens, np.concatenate(H), np.concatenate(P)


def _compare_with_mmi(idx, mmi):
    k, w, b, flag, names, lens, H, P = read_mmi(mmi)
    assert (k, w, flag & 1) == (idx.k, idx.w, int(idx.is_hpc))
    assert names == idx.ref.names and lens == idx.ref.lengths.tolist()
    # same hashes, same position lists (minimap2's stored order, which is ascending)
    o = np.argsort(H, kind="stable")
    H, P = H[o], P[o]
    ours_h = np.repeat(idx.keys, np.diff(idx.key_off))
    o2 = np.argsort(ours_h, kind="stable")
    assert np.array_equal(H, ours_h[o2])
    assert np.array_equal(P, idx.pos[o2])


@live
@pytest.mark.parametrize("preset", ["map-ont", "map-pb", "map-hifi", "sr"])
def test_index_vs_minimap2_dump(tmp_path, preset):
    P = mmseed.seed_params(preset)
    ref_path = ECOLI_PB_REF if preset == "map-pb" else ECOLI
    subprocess.run([MINIMAP2, "-x", preset, "-d", str(tmp_path / "r.mmi"), ref_path], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    idx = mmidx.build_mm_index(mmidx.read_mm_ref(ref_path), P["k"], P["w"], P["is_hpc"])
    _compare_with_mmi(idx, tmp_path / "r.mmi")


@live
@pytest.mark.parametrize("k,w,hpc", [(5, 3, False), (5, 3, True), (15, 10, False), (3, 1, True)])
def test_tiny_index_vs_minimap2_dump(tmp_path, k, w, hpc):
    p = tmp_path / "tiny.fa"
    p.write_bytes(TINY_FA)
    cmd = [MINIMAP2, "-k", str(k), "-w", str(w), "-d", str(tmp_path / "t.mmi"), str(p)] + (["-H"] if hpc else [])
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _compare_with_mmi(mmidx.build_mm_index(mmidx.read_mm_ref(p), k, w, hpc), tmp_path / "t.mmi")


# ------------------------------------------------------------------------------------------------
# live: anchors against minimap2 --print-seeds
# ------------------------------------------------------------------------------------------------

def _subset(src, n, dst):
    with gzip.open(src, "rt") as f, open(dst, "w") as g:
        for rec in itertools.islice(zip(*[f] * 4), n):
            g.write("".join(rec))
    return str(dst)


def mm_print_seeds(args, rid_of):
    """Run minimap2 --print-seeds; per read name: (rep_len, int64 array [rid, rpos, rev, qpos, span]), mid_occ."""
    p = subprocess.run([MINIMAP2, "--print-seeds", "-t", "1"] + args, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, check=True)
    res, cur, mid, rows = {}, None, None, []

    def close():
        if cur is not None:
            res[cur[0]] = (cur[1], np.array(rows, np.int64).reshape(-1, 5))

    for ln in p.stderr.decode().split("\n"):
        f = ln.split("\t")
        if f[0] == "QR":
            close()
            cur, rows = [f[1], 0], []
        elif f[0] == "RS":
            cur[1] = int(f[1])
        elif f[0] == "SD":
            rows.append((rid_of[f[1]], int(f[2]), f[3] == "-", int(f[4]), int(f[5])))
        elif "mid_occ = " in ln:
            mid = int(ln.rsplit("=", 1)[1])
    close()
    return res, mid


def our_seeds(idx, P, mid, reads, reads2=None, diag_dual=False):
    names, _, off, codes = mmidx.parse_mm_seqs(open(reads, "rb").read(), reads)
    mates = mmidx.parse_mm_seqs(open(reads2, "rb").read(), reads2) if reads2 else None
    b, bkt, keys, koff, pos = idx.arrays()
    empty = np.zeros(0, np.uint8)
    res = {}
    for i, nm in enumerate(names):
        parts = [codes[off[i]:off[i + 1]]]
        if mates is not None:  # sr pairs: minimap2 (pe_ori FR) reverse-complements mate 2 before seeding
            s = mates[3][mates[2][i]:mates[2][i + 1]]
            parts.append(np.where(s < 4, 3 - s, 4).astype(np.uint8)[::-1].copy())
        seq = np.concatenate(parts)
        seg_off = np.zeros(len(parts) + 1, np.int64)
        seg_off[1:] = np.cumsum([len(x) for x in parts])
        diag, dual = mmseed.skip_info(nm, len(seq), idx.ref) if diag_dual else (-1, empty)
        _, a, rep, _ = mmseed.seed_read(seq, seg_off, idx.w, idx.k, idx.is_hpc, mid, P["max_max_occ"],
                                        P["occ_dist"], P["q_occ_frac"], P["flag"], b, bkt, keys, koff, pos,
                                        idx.ref.lengths, diag, dual)
        x, y = a[:, 0], a[:, 1]
        arr = np.stack([((x >> np.uint64(32)) & np.uint64(0x7FFFFFFF)).astype(np.int64),
                        (x & np.uint64(0xFFFFFFFF)).astype(np.int64), (x >> np.uint64(63)).astype(np.int64),
                        (y & np.uint64(0xFFFFFFFF)).astype(np.int64),
                        ((y >> np.uint64(32)) & np.uint64(0xFF)).astype(np.int64)], axis=1).reshape(-1, 5)
        res[nm] = (rep, arr)
    return res


def compare_seeds(preset, ref_path, reads, reads2=None, params=None, extra_args=(), diag_dual=False, base=None):
    P = dict(mmseed.seed_params(base or preset), **(params or {}))
    ref = mmidx.read_mm_ref(ref_path)
    idx = mmidx.build_mm_index(ref, P["k"], P["w"], P["is_hpc"])
    mid = mmseed.resolve_mid_occ(P, idx)
    rid_of = {n: i for i, n in enumerate(ref.names)}
    args = ["-x", preset, *extra_args, str(ref_path), str(reads)] + ([str(reads2)] if reads2 else [])
    exp, mm_mid = mm_print_seeds(args, rid_of)
    got = our_seeds(idx, P, mid, reads, reads2, diag_dual)
    same = [n for n in exp if n in got and exp[n][0] == got[n][0] and np.array_equal(exp[n][1], got[n][1])]
    n_anchor = sum(len(v[1]) for v in exp.values())
    n_rep = sum(1 for v in exp.values() if v[0] > 0)
    print(f"\n{preset} {os.path.basename(str(ref_path))}: {len(exp)} reads, {len(same)} identical "
          f"({n_anchor} anchors, {n_rep} reads with rep_len > 0), mid_occ minimap2 {mm_mid} ours {mid}")
    assert mm_mid is None or mm_mid == mid
    assert len(exp) > 0 and set(exp) == set(got)
    bad = [n for n in exp if n not in same]
    assert not bad, (len(bad), bad[:3])
    return len(exp), n_anchor, n_rep


@live
def test_seeds_map_ont(tmp_path):
    compare_seeds("map-ont", ECOLI, _subset(ONT, 120, tmp_path / "ont.fq"))


@live
def test_seeds_map_pb(tmp_path):
    compare_seeds("map-pb", ECOLI_PB_REF, _subset(PB, 300, tmp_path / "pb.fq"))


@live
def test_seeds_map_hifi(tmp_path):
    compare_seeds("map-hifi", ECOLI, _subset(PB, 300, tmp_path / "pb.fq"))


@live
def test_seeds_sr(tmp_path):
    compare_seeds("sr", ECOLI, _subset(SR1, 500, tmp_path / "r1.fq"))
    compare_seeds("sr", ECOLI, _subset(SR1, 500, tmp_path / "r1.fq"), _subset(SR2, 500, tmp_path / "r2.fq"))


@live
def test_seeds_strand_options(tmp_path):
    reads = _subset(ONT, 15, tmp_path / "ont.fq")
    compare_seeds("map-ont", ECOLI, reads, params=dict(flag=mmseed.MM_F_REV_ONLY), extra_args=["--rev-only"])
    compare_seeds("map-ont", ECOLI, reads, params=dict(flag=mmseed.MM_F_FOR_ONLY), extra_args=["--for-only"])
    compare_seeds("map-ont", ECOLI, reads, params=dict(flag=mmseed.MM_F_QSTRAND), extra_args=["--qstrand"])


@live
def test_seeds_all_vs_all(tmp_path):
    # ava-pb: reads against themselves, -D (no diagonal) and --dual=no; index of many contigs
    reads = _subset(PB, 60, tmp_path / "pb.fq")
    P = dict(w=5, occ_dist=0, flag=mmseed.MM_F_NO_DIAG | mmseed.MM_F_NO_DUAL)
    compare_seeds("ava-pb", reads, reads, params=P, diag_dual=True, base="map-pb")


def _chr20_slice(tmp_path, region="20:31000000-33000000"):
    pysam = pytest.importorskip("pysam")
    if not os.path.exists(CHR20):
        pytest.skip("chr20 not available")
    s = pysam.FastaFile(CHR20).fetch(region=region)
    p = tmp_path / "chr20s.fa"
    p.write_text(">chr20s\n" + s + "\n")
    return p, s


def _sim_long(s, n, seed, dst):
    rng = np.random.default_rng(seed)
    comp = str.maketrans("ACGTNacgtn", "TGCANtgcan")
    with open(dst, "w") as g:
        for i in range(n):
            L = int(rng.integers(500, 8000))
            st = int(rng.integers(0, len(s) - L))
            t = np.array(list(s[st:st + L]))
            r = rng.random(L)
            t = np.where(r < 0.04, rng.choice(list("ACGT"), L), t)  # 3% substitutions (r in [0.01, 0.04))
            t = "".join(t[r >= 0.01])                                # 1% deletions
            if rng.random() < 0.5:
                t = t.translate(comp)[::-1]
            g.write(f"@s{i}\n{t}\n+\n{'I' * len(t)}\n")
    return str(dst)


def _sim_short(s, n, seed, dst1, dst2):
    rng = np.random.default_rng(seed)
    comp = str.maketrans("ACGTNacgtn", "TGCANtgcan")
    with open(dst1, "w") as g1, open(dst2, "w") as g2:
        for i in range(n):
            st = int(rng.integers(0, len(s) - 400))
            ins = int(rng.integers(200, 400))
            f = s[st:st + 150]
            r = s[st + ins - 150:st + ins].translate(comp)[::-1]
            g1.write(f"@p{i}/1\n{f}\n+\n{'I' * 150}\n")
            g2.write(f"@p{i}/2\n{r}\n+\n{'I' * 150}\n")
    return str(dst1), str(dst2)


@live
def test_seeds_repetitive_human(tmp_path):
    ref, s = _chr20_slice(tmp_path)
    long_reads = _sim_long(s, 80, 5, tmp_path / "l.fq")
    for preset in ("map-ont", "map-pb", "map-hifi"):
        _, _, n_rep = compare_seeds(preset, ref, long_reads)
        assert n_rep > 0
    r1, r2 = _sim_short(s, 400, 6, tmp_path / "s1.fq", tmp_path / "s2.fq")
    compare_seeds("sr", ref, r1)
    compare_seeds("sr", ref, r1, r2)


@live
def test_many_short_contigs_vs_minimap2_dump(tmp_path):
    rng = np.random.default_rng(9)
    lines = []
    for i in range(3000):
        L = int(rng.choice([0, 1, 5, 14, 15, 16, 30, 80]))
        lines.append(f">c{i} d\n" + "".join(rng.choice(list("ACGTN"), L, p=[0.24, 0.24, 0.24, 0.24, 0.04])) + "\n")
    p = tmp_path / "many.fa"
    p.write_text("".join(lines))
    subprocess.run([MINIMAP2, "-x", "map-ont", "-d", str(tmp_path / "m.mmi"), str(p)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ref = mmidx.read_mm_ref(p)
    assert ref.n_seq == 3000
    _compare_with_mmi(mmidx.build_mm_index(ref, 15, 10, False), tmp_path / "m.mmi")
