#!/usr/bin/env python3
"""DP chaining kernels on the same anchors (issue 6): lchain_dp_kernel (one thread per read, one source
anchor at a time) vs lchain_dp_warp_kernel (a warp per read, 32 predecessors at once).

  python scripts/gpu_lchain_bench.py --out DIR [--ref .devdata/ecoli_K12_MG1655.fa.gz \
      --reads ONT.fastq.gz:map-ont,PACBIO.fastq.gz:map-pb]

Anchor sets: the seeds of real reads (g3align map's batch seeding, CPU twin) when --ref/--reads are given,
and synthetic dense reads (tests/test_lchain_gpu.dense_reads, thousands of predecessors in range). Each
kernel is timed with CUDA events around the launch (inputs already on the GPU, best of 3); both results
must equal each other and, for the real sets, the numba twin. Writes DIR/lchain_bench.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def real_sets(ref, specs):
    from g3align.aligner.io.reads import read_all
    from g3align.aligner.map import lchain as LC
    from g3align.aligner.map import options as MO
    from g3align.aligner.map import pipeline as MP
    from g3align.index import mmidx
    out = []
    for spec in specs:
        path, preset = spec.rsplit(":", 1)
        opt, _, _ = MO.parse_map_args(["-x", preset, ref, path])
        idx = mmidx.build_mm_index(mmidx.read_mm_ref(ref), opt.k, opt.w, opt.is_hpc, opt.bucket_bits)
        MO.update_mid_occ(opt, idx.cal_max_occ)
        al = MP.MapAligner(idx, opt, device="cpu", batch_seed=True)
        b = read_all(path, trim_readno=False)
        seq_off = b.seq_off - b.seq_off[0]
        sd = al._seed_batch(b.seq, seq_off, np.full(b.n, -1, np.int64), idx.arrays())
        a, a_off = sd[2], sd[3]
        iv, fv = al.iv, al.fv
        qlen = np.diff(seq_off)
        gq = np.full(b.n, int(iv[MP.I_MAX_GAP]), np.int64)
        gr = np.full(b.n, int(iv[MP.I_MAX_GAP_REF]) if iv[MP.I_MAX_GAP_REF] > 0 else int(iv[MP.I_MAX_GAP]), np.int64)
        pg, ps = LC.chain_pens(fv[MP.F_CHAIN_GAP_SCALE], fv[MP.F_CHAIN_SKIP_SCALE], iv[MP.I_K])
        out.append((f"{os.path.basename(path)} ({preset}, {b.n} reads, {int(qlen.sum()) / 1e6:.1f} Mbp)",
                    a, a_off, gr, gq, int(iv[MP.I_BW]), int(iv[MP.I_MAX_CHAIN_SKIP]), int(iv[MP.I_MAX_CHAIN_ITER]),
                    np.float32(pg), np.float32(ps), True))
    return out


def dense_set(n_reads, n_anchors):
    from test_lchain_gpu import dense_reads
    items = [it for s in range(max(1, n_reads // 6)) for it in dense_reads(100 + s, 6, n_anchors)]
    a = np.concatenate([it[0] for it in items])
    off = np.zeros(len(items) + 1, np.int64)
    np.cumsum([len(it[0]) for it in items], out=off[1:])
    one = np.full(len(items), 5000, np.int64)
    return (f"synthetic dense reads ({len(items)} reads, {a.shape[0]:,} anchors)", a, off, one, one, 500, 25, 5000,
            np.float32(0.12), np.float32(0.0), False)


def time_kernel(fn_name, a_d, off_d, mdx_d, mdy_d, nseg_d, bw, ms, mi, pg, ps, block):
    import cupy as cp

    from g3align.kernels.loader import get_module
    n, n_reads = int(a_d.shape[0]), int(off_d.shape[0]) - 1
    f = cp.empty(n, cp.int64)
    p = cp.empty(n, cp.int64)
    t = cp.empty(n, cp.int64)
    ax, ay = cp.ascontiguousarray(a_d[:, 0]), cp.ascontiguousarray(a_d[:, 1])
    k = get_module("lchain").get_function(fn_name)
    if fn_name == "lchain_dp_kernel":
        grid = ((n_reads + block - 1) // block,)
        args = (ax, ay, off_d, np.int64(n_reads), mdx_d, mdy_d, nseg_d)
    else:
        order = cp.argsort(-(off_d[1:] - off_d[:-1]), kind="stable").astype(cp.int64)
        grid = ((n_reads + block // 32 - 1) // (block // 32),)
        args = (ax, ay, off_d, order, np.int64(n_reads), mdx_d, mdy_d, nseg_d)
    args += (np.int32(bw), np.int32(ms), np.int32(mi), np.float32(pg), np.float32(ps), np.int32(0), f, p, t)
    best = 1e9
    for _ in range(3):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        k(grid, (block,), args)
        e1.record()
        e1.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(e0, e1) / 1e3)
    return best, cp.asnumpy(f), cp.asnumpy(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--ref", default=None)
    ap.add_argument("--reads", default="")
    ap.add_argument("--dense-reads", type=int, default=600)
    ap.add_argument("--dense-anchors", type=int, default=8000)
    a = ap.parse_args()
    import cupy as cp

    from g3align.aligner.map.gpu import lchain as LG
    os.makedirs(a.out, exist_ok=True)
    sets = real_sets(a.ref, [s for s in a.reads.split(",") if s]) if a.ref else []
    sets.append(dense_set(a.dense_reads, a.dense_anchors))
    rows = ["| anchors | n anchors | one thread per read | warp per read | speed-up | equal |",
            "|---|---|---|---|---|---|"]
    for name, anc, off, mdx0, mdy0, bw, ms, mi, pg, ps, twin in sets:
        mdx, mdy = LG.limits_batch(np.asarray(mdx0, np.int64), np.asarray(mdy0, np.int64), bw, 0)
        nseg = np.ones(off.shape[0] - 1, np.int64)
        d = [cp.asarray(x) for x in (anc, off, mdx, mdy, nseg)]
        t1, f1, p1 = time_kernel("lchain_dp_kernel", *d, bw, ms, mi, pg, ps, 64)
        t2, f2, p2 = time_kernel("lchain_dp_warp_kernel", *d, bw, ms, mi, pg, ps, 128)
        same = np.array_equal(f1, f2) and np.array_equal(p1, p2)
        if twin:
            t = time.time()
            fw, pw = LG.dp_scores_batch(anc, off, mdx, mdy, nseg, bw, ms, mi, pg, ps, 0)
            same = same and np.array_equal(f1, fw) and np.array_equal(p1, pw)
            name += f"; twin 1 thread {time.time() - t:.2f} s"
        rows.append(f"| {name} | {anc.shape[0]:,} | {t1 * 1e3:.2f} ms | {t2 * 1e3:.2f} ms | {t1 / t2:.1f}x | "
                    f"{'yes' if same else 'NO'} |")
        print(rows[-1], flush=True)
    open(os.path.join(a.out, "lchain_bench.md"), "w").write("\n".join(rows) + "\n")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
