"""Chaining (aligner/map/lchain.py) and region bookkeeping (aligner/map/hit.py) against minimap2 2.24.

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

from g3align.aligner.map import hit as mmhit
from g3align.aligner.map import lchain as lc
from g3align.aligner.map.types import AS, CIG_OFF, CNT, NR, SEG_ID, SEG_SPLIT

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")
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
        s, c = int(R[j, AS]), int(R[j, CNT])
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
    ("map-ont", "ref/ecoli_K12_MG1655.fa.gz", ["reads/ecoli_K12_ont_R9_nanoget.fastq.gz"], 120),
    ("map-pb", "ref/ecoli_K12_PBcR_reference.fa.gz", ["reads/ecoli_K12_pacbio_RSII_first3000.fastq.gz"], 200),
    ("map-hifi", "ref/ecoli_K12_MG1655.fa.gz", ["reads/ecoli_K12_pacbio_RSII_first3000.fastq.gz"], 200),
    ("sr", "ref/ecoli_K12_MG1655.fa.gz", ["reads/ecoli_illumina_spades_1K_R1.fastq.gz"], 400),
    ("sr", "ref/ecoli_K12_MG1655.fa.gz", ["reads/ecoli_illumina_spades_1K_R1.fastq.gz",
                                         "reads/ecoli_illumina_spades_1K_R2.fastq.gz"], 400),
]


def head_fastq(src, dst, n):
    """First n records of src written to dst; returns their sequence lengths."""
    lens = []
    with gzip.open(src, "rt") as fi, open(dst, "w") as fo:
        for k, ln in enumerate(fi):
            if k >= 4 * n:
                break
            if k % 4 == 1:
                lens.append(len(ln.rstrip("\n")))
            fo.write(ln)
    return lens


def live_compare(preset, ref, reads, n, tmp_path):
    """Chain every read from its SD lines and compare with its CN lines: (compared, identical, paths, bad)."""
    ref = os.path.join(DATA, ref)
    fqs, lens = [], []
    for k, r in enumerate(reads):
        fqs.append(str(tmp_path / f"r{k}.fq"))
        lens.append(head_fastq(os.path.join(DATA, r), fqs[-1], n))
    names = ref_names(ref)
    rid_of = {s: i for i, s in enumerate(names)}
    reads_ = parse_dbg(run_minimap2(preset, ref, fqs), rid_of)
    n_cmp = n_same = 0
    paths = {}
    bad = []
    for k, rd in enumerate(reads_):
        qlens = [ls[k] for ls in lens]
        rd["qlen"] = sum(qlens)
        res = chain_read(rd, PRESETS[preset], len(qlens), qlens)
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


# ---------------------------------------------------------------------------------------------
# stored vectors from a patched minimap2 2.24 (see the module docstring)
# ---------------------------------------------------------------------------------------------
MAGIC = 0x4D4D4844
FNAMES = {1: "set_parent", 2: "hit_sort", 3: "set_sam_pri", 4: "sync_regs", 5: "select_sub",
          6: "filter_strand_retained", 7: "filter_regs", 8: "squeeze_a", 9: "split_reg", 10: "set_mapq", 11: "est_err",
          12: "select_sub_multi", 13: "gen_regs", 14: "lchain_dp", 15: "lchain_rmq"}


def read_records(buf):
    """Records of a dump: dicts fid, phase, n, par (float64), R (int64 [n, NR]), a (uint64 [m, 2]), u (uint64)."""
    off = 0
    out = []
    while off < len(buf):
        h = np.frombuffer(buf, np.int64, 7, off)
        assert h[0] == MAGIC
        fid, phase, n, n_par, n_a, n_u = (int(v) for v in h[1:])
        off += 56
        par = np.frombuffer(buf, np.float64, n_par, off).copy()
        off += 8 * n_par
        if fid == 0:
            out.append(dict(fid=0, phase=0, qlen=int(par[0]), name=bytes(buf[off:off + n_a]).decode()))
            off += n_a
            continue
        R = np.frombuffer(buf, np.int64, n * NR, off).reshape(n, NR).copy()
        off += 8 * n * NR
        a = np.frombuffer(buf, np.uint64, 2 * n_a, off).reshape(n_a, 2).copy()
        off += 16 * n_a
        u = np.frombuffer(buf, np.uint64, n_u, off).copy()
        off += 8 * n_u
        out.append(dict(fid=fid, phase=phase, n=n, par=par, R=R, a=a, u=u))
    return out


def pair_records(recs):
    """(input, output) pairs of each dumped call (nested calls are matched by a stack)."""
    pairs = []
    stack = []
    for r in recs:
        if r["fid"] == 0:
            continue
        if r["phase"] == 0:
            stack.append(r)
        else:
            ri = stack.pop()
            assert ri["fid"] == r["fid"]
            pairs.append((ri, r))
    return pairs


def replay(ri, ro):
    """Run our port of the dumped call on its input; True when the output is identical."""
    fid, p = ri["fid"], ri["par"]
    R = ri["R"].copy()
    n = ri["n"]
    if fid == 1:
        mmhit.set_parent(np.float32(p[0]), int(p[1]), R, n, int(p[2]), int(p[3]), np.float32(p[4]))
    elif fid == 2:
        n = mmhit.hit_sort(R, n, np.float32(p[0]))
    elif fid == 3:
        if mmhit.set_sam_pri(R, n) != int(ro["par"][0]):
            return False
    elif fid == 4:
        mmhit.sync_regs(R, n)
    elif fid == 5:
        n = mmhit.select_sub(np.float32(p[0]), int(p[1]), int(p[2]), int(p[3]), int(p[4]), R, n)
    elif fid == 6:
        n = mmhit.filter_strand_retained(R, n)
    elif fid == 7:
        n = mmhit.filter_regs(int(p[0]), int(p[1]), int(p[2]), np.float32(p[3]), int(p[4]), R, n)
    elif fid == 8:
        a = ri["a"].copy()
        k = mmhit.squeeze_a(R, n, a)
        if k != int(ro["par"][0]) or not np.array_equal(a[:k], ro["a"]):
            return False
    elif fid == 9:
        off = R[0, AS]
        R[0, AS] -= off
        mmhit.split_reg(R, 0, 1, int(p[0]), int(p[1]), ri["a"], int(p[2]))
        exp = ro["R"].copy()
        exp[0, AS] -= off
        if int(p[0]) > 0 and int(p[0]) < ri["R"][0, CNT]:
            exp[1, AS] -= off
            R[1, CIG_OFF] = 0
            return np.array_equal(R, exp)
        return np.array_equal(R[0], exp[0])
    elif fid == 10:
        mmhit.set_mapq(R, n, int(p[0]), int(p[1]), int(p[2]), int(p[3]))
    elif fid == 11:
        mmhit.est_err(int(p[0]), R, n, ri["a"], ri["u"], p[1:].astype(np.int64))
    elif fid == 12:
        qlens = np.array([int(p[7]), int(p[8])], np.int64)
        n = mmhit.select_sub_multi(np.float32(p[0]), np.float32(p[1]), np.float32(p[2]), int(p[3]), int(p[4]),
                                   int(p[5]), int(p[6]), qlens, R, n)
    elif fid == 13:
        R = lc.gen_regs(np.uint64(int(p[0])), int(p[1]), ri["u"], ri["a"], int(p[2]))
        n = R.shape[0]
    elif fid in (14, 15):
        q = [int(v) for v in p]
        if fid == 14:
            a2, u2 = lc.lchain_dp(q[0], q[1], q[2], q[3], q[4], q[5], q[6], np.float32(p[7]), np.float32(p[8]), q[9],
                                  q[10], ri["a"].copy())
        else:
            a2, u2 = lc.lchain_rmq(q[0], q[1], q[2], q[3], q[4], q[5], q[6], np.float32(p[7]), np.float32(p[8]),
                                   ri["a"].copy())
        return np.array_equal(a2, ro["a"]) and np.array_equal(u2, ro["u"])
    return n == ro["n"] and np.array_equal(R[:n], ro["R"])


def replay_all(buf):
    """{function name: [n_calls, n_identical]} over a dump."""
    stats = {}
    for ri, ro in pair_records(read_records(buf)):
        s = stats.setdefault(FNAMES[ri["fid"]], [0, 0])
        s[0] += 1
        s[1] += bool(replay(ri, ro))
    return stats


STORED = ["ont", "pb", "hifi", "sr", "srpe", "rnd", "rndchain"]


@pytest.mark.parametrize("name", STORED)
def test_stored_vectors(name):
    """Every dumped call (chaining, gen_regs and the hit.c/esterr.c/pe.c functions) reproduced exactly."""
    with gzip.open(os.path.join(HERE, "data", f"mmhit_{name}.bin.gz"), "rb") as fh:
        stats = replay_all(fh.read())
    print(name, stats)
    assert stats
    for fn, (n_calls, n_same) in stats.items():
        assert n_same == n_calls, (name, fn, n_calls, n_same)


def test_seg_gen_stored():
    """mm_seg_gen: fragment chains after chain_post (select_sub_multi output) split into the per-segment
    chains that minimap2 passed to its two per-segment gen_regs calls."""
    with gzip.open(os.path.join(HERE, "data", "mmhit_srpe.bin.gz"), "rb") as fh:
        recs = read_records(fh.read())
    reads, cur = [], None
    for r in recs:
        if r["fid"] == 0:
            cur = []
            reads.append(cur)
        else:
            cur.append(r)
    n_cmp = 0
    for rr in reads:
        pairs = pair_records(rr)
        g = [p for p in pairs if p[0]["fid"] == 13]
        m = [p for p in pairs if p[0]["fid"] == 12]
        assert len(g) == 3 and len(m) == 1
        frag_in = g[0][0]
        R0 = m[0][1]["R"]
        qlens = np.array([int(m[0][0]["par"][7]), int(m[0][0]["par"][8])], np.int64)
        a_cat, a_off, R_cat, r_off = lc.seg_gen(np.uint64(int(frag_in["par"][0])), qlens, R0, R0.shape[0],
                                                frag_in["a"])
        for s in range(2):
            gin, gout = g[1 + s]
            assert np.array_equal(a_cat[a_off[s]:a_off[s + 1]], gin["a"])
            exp = gout["R"].copy()
            exp[:, SEG_SPLIT] = 1
            exp[:, SEG_ID] = s
            assert np.array_equal(R_cat[r_off[s]:r_off[s + 1]], exp)
        n_cmp += 1
    assert n_cmp > 50


@pytest.mark.parametrize("name,k,max_gap", [("pb", 19, 5000), ("hifi", 19, 10000)])
def test_chain_post_stored(name, k, max_gap):
    """chain_post / align_post (set_parent + select_sub [+ set_sam_pri]) as map.c sequences them."""
    with gzip.open(os.path.join(HERE, "data", f"mmhit_{name}.bin.gz"), "rb") as fh:
        recs = read_records(fh.read())
    reads, cur = [], None
    for r in recs:
        if r["fid"] == 0:
            cur = []
            reads.append(cur)
        else:
            cur.append(r)
    n_cmp = 0
    sub_diff = 2 * 2 + 4 if name == "pb" else 1 * 2 + 4
    for rr in reads:
        pairs = pair_records(rr)
        sp = [p for p in pairs if p[0]["fid"] == 1]
        ss = [p for p in pairs if p[0]["fid"] == 5]
        if len(sp) != 2 or len(ss) != 2:
            continue
        qlens = np.zeros(2, np.int64)
        R = sp[0][0]["R"].copy()
        n = mmhit.chain_post(0, 0.5, 2**31 - 1, sub_diff, 0, 0.15, 0.8, k, 5, max_gap, 1, qlens, max_gap, R, R.shape[0])
        assert n == ss[0][1]["n"] and np.array_equal(R[:n], ss[0][1]["R"])
        R = sp[1][0]["R"].copy()
        n = mmhit.align_post(0, 0.5, 2**31 - 1, sub_diff, 0, 0.15, 0.8, k, 5, max_gap, R, R.shape[0])
        exp = ss[1][1]["R"].copy()
        mmhit.set_sam_pri(exp, exp.shape[0])
        assert n == ss[1][1]["n"] and np.array_equal(R[:n], exp)
        n_cmp += 1
    assert n_cmp > 10
