#!/usr/bin/env python3
"""GPU seed lookup of `g3align map` (issue 6) on the GPU box: GPU == CPU check and timings.

  python3 scripts/gpu_mmseed_check.py REF.fa[.gz]|REF.g3m READS.fq[.gz] [-x map-ont] [--out DIR]

Builds the minimizer index of the reference (index/mmidx.py; or loads a g3align minimizer index,
`g3align map -d`), resolves mid_occ as `g3align map` does, reads the FASTQ/FASTA in batches of
--batch-bases bases (aligner/io/reads.py, as `g3align map`), and per batch runs

  * GPU: sketch_batch_gpu -> seed_batch_gpu, minimizers and index resident on the device
    (aligner/map/gpu/sketch.py, aligner/map/gpu/seed.py; CUDA-event times of the device part, best of
    --reps, plus one end-to-end call: reads H2D, every seed array D2H);
  * CPU twin: sketch_batch_cpu -> seed_batch_cpu (numba prange over reads, NUMBA_NUM_THREADS threads);
  * the per-read loop: aligner/map/seed.py:seed_read for every read (one thread; --loop-reads limits it),

and asserts that all three give identical arrays (mv, anchors in order, rep_len, mini_pos). Prints
one table; writes OUT/gpu_mmseed_check.json and .md when --out is given. Exit status 1 on any
mismatch (the first differing read and array are printed), 0 otherwise.

Needs CuPy and a GPU, numba, numpy; no network. Run from the repository root with g3align importable
(`pip install -e .`, or the /tmp/pkg shim of docs/BENCHMARKS.md: PYTHONPATH=/tmp/pkg PYTHONSAFEPATH=1).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

FIELDS = ("mv", "mv_off", "a", "a_off", "rep_len", "mini_pos", "mini_off")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def load_index(path, preset, save=None):
    from g3align.aligner.map import seed as mmseed
    from g3align.index import mmidx

    P = mmseed.seed_params(preset)
    with open(path, "rb") as fh:
        is_idx = fh.read(len(mmidx.MM_MAGIC)) == mmidx.MM_MAGIC
    t = time.perf_counter()
    if is_idx:
        idx = mmidx.load_mm_index(path)
        if (idx.k, idx.w, idx.is_hpc) != (P["k"], P["w"], P["is_hpc"]):
            log(f"[W] index {path} has k/w/hpc {idx.k}/{idx.w}/{int(idx.is_hpc)}, preset {preset} wants "
                f"{P['k']}/{P['w']}/{int(P['is_hpc'])}; using the index's")
    else:
        idx = mmidx.build_mm_index(mmidx.read_mm_ref(path), P["k"], P["w"], P["is_hpc"], P["bucket_bits"])
        if save:
            mmidx.save_mm_index(save, idx)
    dt = time.perf_counter() - t
    return idx, P, dt


def first_diff(x: dict, y: dict, n_reads: int):
    """(array, read or -1) of the first difference between two SeedBatch dicts of host arrays, or None."""
    diff = [f for f in FIELDS
            if x[f].dtype != y[f].dtype or x[f].shape != y[f].shape or not np.array_equal(x[f], y[f])]
    if not diff:
        return None
    for r in range(n_reads):
        if r >= len(x["rep_len"]) or r >= len(y["rep_len"]) or x["rep_len"][r] != y["rep_len"][r]:
            return "rep_len", r
        for v, o in (("mv", "mv_off"), ("a", "a_off"), ("mini_pos", "mini_off")):
            if r + 1 >= len(x[o]) or r + 1 >= len(y[o]):
                return o, r
            if not np.array_equal(x[v][x[o][r]:x[o][r + 1]], y[v][y[o][r]:y[o][r + 1]]):
                return v, r
    return diff[0], -1


def per_read(seq, seq_off, idx, o, n_loop):
    """seed_read for reads [0, n_loop): SeedBatch-like dict of host arrays."""
    from g3align.aligner.map.seed import seed_read

    b, bkt, keys, koff, pos = idx.arrays()
    dual = np.zeros(0, np.uint8)
    seg = np.zeros(2, np.int64)
    mvs, as_, reps, mps = [], [], [], []
    for r in range(n_loop):
        q = seq[seq_off[r]:seq_off[r + 1]]
        seg[1] = q.shape[0]
        mv, a, rep, mp = seed_read(q, seg, idx.w, idx.k, idx.is_hpc, o["mid_occ"], o["max_max_occ"], o["occ_dist"],
                                   o["q_occ_frac"], o["flag"], b, bkt, keys, koff, pos, idx.ref.lengths, -1, dual)
        mvs.append(mv.reshape(-1, 2))
        as_.append(a.reshape(-1, 2))
        reps.append(rep)
        mps.append(mp)

    def csr(parts, shape):
        off = np.zeros(len(parts) + 1, np.int64)
        off[1:] = np.cumsum([len(p) for p in parts])
        v = np.concatenate(parts).astype(np.uint64).reshape(shape) if parts else np.empty(shape, np.uint64)
        return v.reshape(shape), off

    d = {}
    d["mv"], d["mv_off"] = csr(mvs, (-1, 2))
    d["a"], d["a_off"] = csr(as_, (-1, 2))
    d["mini_pos"], d["mini_off"] = csr(mps, (-1,))
    d["rep_len"] = np.array(reps, np.int64)
    return d


def prefix(d: dict, n: int) -> dict:
    """The first n reads of a SeedBatch dict."""
    out = {"rep_len": d["rep_len"][:n]}
    for v, o in (("mv", "mv_off"), ("a", "a_off"), ("mini_pos", "mini_off")):
        out[o] = d[o][:n + 1] - d[o][0]
        out[v] = d[v][d[o][0]:d[o][n]]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ref", help="reference FASTA/FASTQ (gz ok) or a g3align minimizer index")
    ap.add_argument("reads", help="reads FASTQ/FASTA (gz ok)")
    ap.add_argument("-x", "--preset", default="map-ont", choices=["map-ont", "map-pb", "map-hifi", "sr"])
    ap.add_argument("--batch-bases", type=int, default=100_000_000, help="bases per batch [100M]")
    ap.add_argument("--max-reads", type=int, default=0, help="stop after this many reads (0: all)")
    ap.add_argument("--loop-reads", type=int, default=-1,
                    help="reads per batch checked with the per-read seed_read loop (-1: all, 0: none)")
    ap.add_argument("--reps", type=int, default=3, help="GPU repetitions (best is reported)")
    ap.add_argument("--save-index", default=None, help="write the built index here (g3align minimizer index)")
    ap.add_argument("--out", default=None, help="directory for gpu_mmseed_check.json / .md")
    a = ap.parse_args(argv)

    import cupy as cp
    import numba

    from g3align.aligner.io.reads import read_batches
    from g3align.aligner.map import seed as mmseed
    from g3align.aligner.map.gpu import seed as sg
    from g3align.aligner.map.gpu import sketch as mg

    dev = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    idx, P, t_idx = load_index(a.ref, a.preset, a.save_index)
    mid = mmseed.resolve_mid_occ(P, idx)
    o = dict(mid_occ=mid, max_max_occ=P["max_max_occ"], occ_dist=P["occ_dist"], q_occ_frac=P["q_occ_frac"],
             flag=P["flag"])
    log(f"[M] {dev}; index of {idx.ref.n_seq} sequences, {int(idx.ref.lengths.sum())} bp, k/w/hpc "
        f"{idx.k}/{idx.w}/{int(idx.is_hpc)}, {idx.n_pos} positions ({t_idx:.1f} s); preset {a.preset}, mid_occ {mid}; "
        f"numba threads {numba.get_num_threads()}")
    b, bkt_d, keys_d, koff_d, pos_d, rlen_d = sg.index_to_device(*idx.arrays(), idx.ref.lengths)
    host_idx = dict(b=idx.b, bkt_off=idx.bkt_off, keys=idx.keys, key_off=idx.key_off, pos=idx.pos,
                    ref_len=idx.ref.lengths)
    dev_idx = dict(b=b, bkt_off=bkt_d, keys=keys_d, key_off=koff_d, pos=pos_d, ref_len=rlen_d)
    w, k, hpc = idx.w, idx.k, idx.is_hpc

    # warm-up: numba compilation and NVRTC outside the timings
    tiny = np.array([0, 1, 2, 3] * 300, np.uint8)
    tiny_off = np.array([0, tiny.size], np.int64)
    mz, mo = mg.sketch_batch_cpu(tiny, tiny_off, w, k, hpc)
    sg.seed_batch_cpu(mz, mo, tiny_off, **o, **host_idx)
    mz, mo = mg.sketch_batch_gpu(tiny, tiny_off, w, k, hpc)
    sg.seed_batch_gpu(mz, mo, tiny_off, **o, **dev_idx)
    per_read(tiny, tiny_off, idx, o, 1)

    tot = dict(reads=0, bases=0, minimizers=0, anchors=0, gpu_sketch_ms=0.0, gpu_seed_ms=0.0, gpu_e2e_s=0.0,
               cpu_twin_s=0.0, loop_reads=0, loop_s=0.0, loop_twin_s=0.0)
    bad = []
    for bi, batch in enumerate(read_batches(a.reads, chunk_size=a.batch_bases, trim_readno=False)):
        if a.max_reads and tot["reads"] >= a.max_reads:
            break
        if a.max_reads and tot["reads"] + batch.n > a.max_reads:
            batch = batch.slice(0, a.max_reads - tot["reads"])
        seq = np.ascontiguousarray(batch.seq)
        seq_off = np.ascontiguousarray(batch.seq_off - batch.seq_off[0], np.int64)
        n = batch.n
        # CPU twin
        t = time.perf_counter()
        mz_c, mo_c = mg.sketch_batch_cpu(seq, seq_off, w, k, hpc)
        cpu = sg.seed_batch_cpu(mz_c, mo_c, seq_off, **o, **host_idx)._asdict()
        t_cpu = time.perf_counter() - t
        # GPU, device resident (reads uploaded once), best of reps
        seq_d = cp.asarray(seq)
        off_d = cp.asarray(seq_off)
        best_sk, best_sd = float("inf"), float("inf")
        for _ in range(max(1, a.reps)):
            ts, tsd = {}, {}
            mz_d, mo_d = mg.sketch_batch_gpu(seq_d, off_d, w, k, hpc, to_host=False, timings=ts)
            res = sg.seed_batch_gpu(mz_d, mo_d, off_d, **o, **dev_idx, to_host=False, timings=tsd)
            best_sk, best_sd = min(best_sk, ts["kernels_ms"]), min(best_sd, tsd["kernels_ms"])
            del mz_d, mo_d, res
        del seq_d, off_d
        # GPU end to end: host reads in, host seeds out
        cp.cuda.Device().synchronize()
        t = time.perf_counter()
        mz_d, mo_d = mg.sketch_batch_gpu(seq, seq_off, w, k, hpc, to_host=False)
        gpu = sg.seed_batch_gpu(mz_d, mo_d, seq_off, **o, **dev_idx, to_host=True)._asdict()
        t_e2e = time.perf_counter() - t
        del mz_d, mo_d
        d = first_diff(gpu, cpu, n)
        if d is not None:
            bad.append(f"batch {bi}: GPU != CPU twin in {d[0]}, first differing read {d[1]} "
                       f"({batch.names[d[1]] if 0 <= d[1] < n else '-'})")
            log("[E] " + bad[-1])
        # per-read loop
        n_loop = n if a.loop_reads < 0 else min(n, a.loop_reads)
        if n_loop:
            t = time.perf_counter()
            ref = per_read(seq, seq_off, idx, o, n_loop)
            t_loop = time.perf_counter() - t
            sub = seq_off[:n_loop + 1]
            t = time.perf_counter()
            mz_s, mo_s = mg.sketch_batch_cpu(seq[:sub[-1]], sub, w, k, hpc)
            sg.seed_batch_cpu(mz_s, mo_s, sub, **o, **host_idx)
            tot["loop_twin_s"] += time.perf_counter() - t
            d = first_diff(prefix(cpu, n_loop), ref, n_loop)
            if d is not None:
                bad.append(f"batch {bi}: CPU twin != per-read seed_read in {d[0]}, first differing read {d[1]} "
                           f"({batch.names[d[1]] if 0 <= d[1] < n else '-'})")
                log("[E] " + bad[-1])
            tot["loop_reads"] += n_loop
            tot["loop_s"] += t_loop
        tot["reads"] += n
        tot["bases"] += int(seq_off[-1])
        tot["minimizers"] += int(cpu["mv"].shape[0])
        tot["anchors"] += int(cpu["a"].shape[0])
        tot["gpu_sketch_ms"] += best_sk
        tot["gpu_seed_ms"] += best_sd
        tot["gpu_e2e_s"] += t_e2e
        tot["cpu_twin_s"] += t_cpu
        log(f"[M] batch {bi}: {n} reads, {int(seq_off[-1])} bp, {cpu['a'].shape[0]} anchors; "
            f"GPU sketch {best_sk:.2f} ms + seed {best_sd:.2f} ms, e2e {t_e2e:.3f} s; CPU twin {t_cpu:.3f} s; "
            f"loop {n_loop} reads; {'identical' if not bad else 'MISMATCH'}")

    gpu_ms = tot["gpu_sketch_ms"] + tot["gpu_seed_ms"]
    loop_note = (f"{tot['loop_s']:.3f} s for {tot['loop_reads']} reads (CPU twin on the same reads "
                 f"{tot['loop_twin_s']:.3f} s)" if tot["loop_reads"] else "not run")
    rows = [f"# gpu_mmseed_check: {a.preset}, {os.path.basename(a.ref)} ({int(idx.ref.lengths.sum())} bp, "
            f"mid_occ {mid}), {os.path.basename(a.reads)}: {tot['reads']} reads, {tot['bases']} bp, on {dev}; "
            f"CPU twin numba threads {numba.get_num_threads()}",
            "| stage | time | Mbases/s |", "|---|---|---|",
            f"| GPU sketch (device, best of {a.reps}) | {tot['gpu_sketch_ms']:.2f} ms | "
            f"{tot['bases'] / max(tot['gpu_sketch_ms'], 1e-9) / 1e3:.0f} |",
            f"| GPU seed (device, best of {a.reps}) | {tot['gpu_seed_ms']:.2f} ms | "
            f"{tot['bases'] / max(tot['gpu_seed_ms'], 1e-9) / 1e3:.0f} |",
            f"| GPU sketch + seed | {gpu_ms:.2f} ms | {tot['bases'] / max(gpu_ms, 1e-9) / 1e3:.0f} |",
            f"| GPU end to end (H2D reads, D2H seeds) | {tot['gpu_e2e_s'] * 1e3:.1f} ms | "
            f"{tot['bases'] / max(tot['gpu_e2e_s'], 1e-12) / 1e6:.0f} |",
            f"| CPU twin (sketch + seed) | {tot['cpu_twin_s'] * 1e3:.1f} ms | "
            f"{tot['bases'] / max(tot['cpu_twin_s'], 1e-12) / 1e6:.1f} |",
            f"| per-read seed_read loop (1 thread) | {loop_note} | |",
            "",
            f"minimizers after the q-occ filter {tot['minimizers']}, anchors {tot['anchors']}; "
            f"CPU twin / GPU device: {tot['cpu_twin_s'] * 1e3 / max(gpu_ms, 1e-9):.0f}x; "
            f"result: {'IDENTICAL' if not bad else 'MISMATCH (' + str(len(bad)) + ')'}"]
    text = "\n".join(rows) + "\n"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "gpu_mmseed_check.md"), "w") as fh:
            fh.write(text)
        with open(os.path.join(a.out, "gpu_mmseed_check.json"), "w") as fh:
            json.dump(dict(device=dev, preset=a.preset, ref_path=a.ref, reads_path=a.reads, mid_occ=mid,
                           mismatches=bad, **tot), fh, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
