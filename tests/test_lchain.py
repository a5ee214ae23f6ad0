"""Chaining (aligner/lchain.py) and region bookkeeping (aligner/mmhit.py) against minimap2 2.24.

* live: `minimap2 --print-seeds` prints each read's anchors (SD lines) and, after mm_gen_regs, the
  chains (CN lines). We rebuild anchors from SD lines, run our chaining + gen_regs with the preset's
  parameters and compare the CN lines exactly (skipped when minimap2 is not on PATH).
* stored: tests/data/mmhit_*.npz hold dumps of a patched minimap2 2.24 (regions before/after each
  hit.c / esterr.c step for real reads) so the hit functions are checked in CI without minimap2.
"""
import gzip
import os
import shutil
import subprocess

import numpy as np
import pytest
from g3align.aligner import lchain as lc

DATA = "/work/shared/data"
HERE = os.path.dirname(os.path.abspath(__file__))

# preset -> chaining parameters of mm_map_frag (options.c), k of the index
PRESETS = {
    "map-ont": dict(k=15, max_gap=5000, bw=500, bw_long=20000, min_cnt=3, min_sc=40, sr=False, max_occ=0, mid_occ=0),
    "map-pb": dict(k=19, max_gap=5000, bw=500, bw_long=20000, min_cnt=3, min_sc=40, sr=False, max_occ=0, mid_occ=0),
    "map-hifi": dict(k=19, max_gap=10000, bw=500, bw_long=20000, min_cnt=3, min_sc=40, sr=False, max_occ=0,
                     mid_occ=0),
    "sr": dict(k=21, max_gap=100, bw=100, bw_long=100, min_cnt=2, min_sc=25, sr=True, max_occ=5000, mid_occ=1000,
               max_frag_len=800),
}


def ref_names(fa_gz):
    fai = fa_gz + ".fai"
    if os.path.exists(fai):
        with open(fai) as fh:
            return [ln.split("\t")[0] for ln in fh]
    names = []
    with gzip.open(fa_gz, "rt") as fh:
        for ln in fh:
            if ln.startswith(">"):
                names.append(ln[1:].split()[0])
    return names


def parse_dbg(text, rid_of):
    """Per read: dict(name, qlen, rep_len, sd=[(x, y)], cn=[tuple])."""
    reads = []
    cur = None
    for ln in text.splitlines():
        f = ln.split("\t")
        tag = f[0]
        if tag == "QR":
            cur = dict(name=f[1], qlen=int(f[3]), rep_len=0, sd=[], cn=[])
            reads.append(cur)
        elif tag == "RS":
            cur["rep_len"] = int(f[1])
        elif tag == "SD":
            rid = rid_of[f[1]]
            rev = 1 if f[3] == "-" else 0
            x = (rev << 63) | (rid << 32) | (int(f[2]) & 0xFFFFFFFF)
            y = (int(f[5]) << 32) | (int(f[4]) & 0xFFFFFFFF)
            cur["sd"].append((x, y))
        elif tag == "CN":
            cur["cn"].append(tuple(f[1:]))
    return reads


def cn_lines(R, a, names):
    out = []
    for j in range(R.shape[0]):
        s, c = int(R[j, lc.AS]), int(R[j, lc.CNT])
        for i in range(s, s + c):
            x, y = int(a[i, 0]), int(a[i, 1])
            rpos = lc_i32(x)
            qpos = lc_i32(y)
            d = 0 if i == s else (qpos - lc_i32(int(a[i - 1, 1]))) - (rpos - lc_i32(int(a[i - 1, 0])))
            out.append((str(j), names[(x << 1 & 0xFFFFFFFFFFFFFFFF) >> 33], str(rpos), "+-"[x >> 63], str(qpos),
                        str(y >> 32 & 0xFF), str(d)))
    return out


def lc_i32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def chain_read(rd, P, n_segs=1, qlens=None):
    """minimap2's chaining of one read from its SD anchors; returns (a, R, path) or None when the read
    took the short-read re-chaining branch (its second seed set is not printed)."""
    a = np.array(rd["sd"], dtype=np.uint64).reshape(-1, 2)
    qlen = rd["qlen"]
    pg, ps = lc.chain_pens(0.8, 0.0, P["k"])
    max_gap = P["max_gap"]
    if P["sr"]:
        mgq = qlen if qlen > max_gap else max_gap
        mgr = max(P["max_frag_len"] - qlen, max_gap)
    else:
        mgq = mgr = max_gap
    if n_segs > 1:
        a = seg_ids(a, qlens)
    a2, u = lc.lchain_dp(mgr, mgq, P["bw"], 25, 5000, P["min_cnt"], P["min_sc"], pg, ps, 0, n_segs, a)
    path = "dp"
    flags = 1 if P["sr"] else 0
    if lc.need_long_rechain(P["bw"], P["bw_long"], flags, n_segs, qlen, 1000, 0.1, a2, u):
        a2, u, _ = lc.maybe_rechain_long(P["bw"], P["bw_long"], flags, n_segs, qlen, 1000, 0.1, max_gap, 1000, 25,
                                         100000, P["min_cnt"], P["min_sc"], pg, ps, a2, u)
        path = "dp+rmq"
    elif lc.need_occ_rechain(P["max_occ"], P["mid_occ"], rd["rep_len"], False, n_segs, a2, u):
        return None
    h = lc.read_hash(np.frombuffer(rd["name"].encode(), np.uint8), qlen, 11)
    R = lc.gen_regs(h, qlen, u, a2, 0)
    return a2, R, path


def seg_ids(a, qlens):
    """Segment ids of paired-end anchors (not printed in SD lines): derived from the query position."""
    a = a.copy()
    for i in range(a.shape[0]):
        x, y = int(a[i, 0]), int(a[i, 1])
        q = lc_i32(y)
        sid = (1 if q >= qlens[0] else 0) if x >> 63 == 0 else (0 if q >= qlens[1] else 1)
        a[i, 1] = np.uint64(y | sid << 48)
    return a


def run_minimap2(preset, ref, reads):
    p = subprocess.run(["minimap2", "-x", preset, "--print-seeds", ref] + reads, capture_output=True, text=True,
                       check=True)
    return p.stderr


LIVE = [
    ("map-ont", "ref/ecoli_K12_MG1655.fa.gz", "reads/ecoli_K12_ont_R9_nanoget.fastq.gz", 120),
    ("map-pb", "ref/ecoli_K12_PBcR_reference.fa.gz", "reads/ecoli_K12_pacbio_RSII_first3000.fastq.gz", 200),
    ("map-hifi", "ref/ecoli_K12_MG1655.fa.gz", "reads/ecoli_K12_pacbio_RSII_first3000.fastq.gz", 200),
    ("sr", "ref/ecoli_K12_MG1655.fa.gz", "reads/ecoli_illumina_spades_1K_R1.fastq.gz", 400),
]


def head_fastq(src, dst, n):
    with gzip.open(src, "rt") as fi, open(dst, "w") as fo:
        for k, ln in enumerate(fi):
            if k >= 4 * n:
                break
            fo.write(ln)


def live_compare(preset, ref, reads, n, tmp_path):
    ref = os.path.join(DATA, ref)
    fq = str(tmp_path / "r.fq")
    head_fastq(os.path.join(DATA, reads), fq, n)
    names = ref_names(ref)
    rid_of = {s: i for i, s in enumerate(names)}
    reads_ = parse_dbg(run_minimap2(preset, ref, [fq]), rid_of)
    n_cmp = n_same = 0
    paths = {}
    bad = []
    for rd in reads_:
        res = chain_read(rd, PRESETS[preset])
        if res is None:
            paths["occ-rechain"] = paths.get("occ-rechain", 0) + 1
            continue
        a2, R, path = res
        paths[path] = paths.get(path, 0) + 1
        n_cmp += 1
        if cn_lines(R, a2, names) == rd["cn"]:
            n_same += 1
        else:
            bad.append(rd["name"])
    return n_cmp, n_same, paths, bad


needs_mm2 = pytest.mark.skipif(shutil.which("minimap2") is None or not os.path.isdir(DATA),
                               reason="minimap2 or shared data not available")


@needs_mm2
@pytest.mark.parametrize("preset,ref,reads,n", LIVE)
def test_chains_live(preset, ref, reads, n, tmp_path):
    n_cmp, n_same, paths, bad = live_compare(preset, ref, reads, n, tmp_path)
    print(preset, n_cmp, n_same, paths, bad[:5])
    assert n_cmp > 0 and n_same == n_cmp, (preset, n_cmp, n_same, bad[:5])


def test_hashes():
    # values from minimap2's khash functions (computed by hand from their definitions)
    assert int(lc.wang_hash(0)) == int(lc.wang_hash(np.uint64(0)))
    assert int(lc.x31_hash(np.frombuffer(b"ab", np.uint8))) == 97 * 31 + 98
    assert int(lc.x31_hash(np.frombuffer(b"", np.uint8))) == 0


def test_radix_sort_matches_order_of_keys():
    rng = np.random.default_rng(1)
    for n in (10, 64, 65, 300, 5000):
        x = rng.integers(0, 50, n).astype(np.uint64) << np.uint64(rng.integers(0, 56))
        y = np.arange(n, dtype=np.uint64)
        x2, y2 = x.copy(), y.copy()
        lc.radix_sort_128x(x2, y2, 0, n)
        assert np.all(np.diff(x2.astype(np.float64)) >= 0)
        assert sorted(zip(x.tolist(), y.tolist())) == sorted(zip(x2.tolist(), y2.tolist()))
