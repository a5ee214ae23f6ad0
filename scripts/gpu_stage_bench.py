#!/usr/bin/env python3
"""GPU time of each `g3align mem` GPU stage on one part (issue 4: what bounds the GPU path).

  python scripts/gpu_stage_bench.py --fasta .devdata/human_GRCh37_chr20.fa.gz --out $OUT [--pairs 33333]

One part of simulated pairs (gpu_check's reads; 2x150, 10 Mbases by default: the pipeline's part size),
each stage function called alone on an idle GPU through cupyx.profiler.benchmark: its GPU time (CUDA
events on the stream: kernels and copies) and its host time (launch, synchronisation, host-side work),
per million reads, and the cell-update rate of the extension and mate-rescue kernels. Writes
OUT/gpu_stages.md.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check import reference_and_reads  # noqa: E402

from g3align.aligner.io.reads import read_pair_batches  # noqa: E402
from g3align.aligner.mem.gpu import stage as ms  # noqa: E402
from g3align.aligner.mem.gpu.smem import collect_intv_batch_gpu, seed_pos_batch_gpu  # noqa: E402
from g3align.aligner.mem.options import MemOpt  # noqa: E402
from g3align.aligner.mem.pipeline import MemAligner  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fasta", required=True)
    ap.add_argument("--pairs", type=int, default=33333)
    ap.add_argument("--out", default=".")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    import cupy as cp
    from cupyx.profiler import benchmark

    fa, ref, fm, f1, f2, _ = reference_and_reads(a.fasta, a.pairs, "/tmp/g3stage")
    opt = MemOpt()
    opt.n_threads = 16
    al = MemAligner(ref, fm, opt, device="gpu")
    batch = next(read_pair_batches(f1, f2, chunk_size=1 << 40))
    n = batch.n
    st = al.pe_regions(batch)  # warm-up (compiles) and the part's state for the rescue jobs
    pes = al.pe_stat([st])
    al.pe_rescue(st, pes)
    p = al.params
    seq_off = np.ascontiguousarray(batch.seq_off - batch.seq_off[0], np.int64)
    seq_d, off_d = cp.asarray(batch.seq), cp.asarray(seq_off)
    rows = []

    def bench(name, fn, cells=None, bound=""):
        r = benchmark(fn, n_repeat=a.repeat, n_warmup=1)
        g = float(np.median(r.gpu_times[0]))
        c = float(np.median(r.cpu_times))
        extra = f"{cells / g / 1e9:.1f} GCUPS ({cells / n:,.0f} cells/read{bound})" if cells else ""
        rows.append((name, f"{g * 1e3:.2f} ms", f"{c * 1e3:.2f} ms", f"{g / n * 1e6:.3f} s", extra))
        print(rows[-1], flush=True)
    iv = collect_intv_batch_gpu(al._fm_dev, seq_d, off_d, p)
    bench("SMEM + re-seeding + 3rd round (collect_intv_batch_gpu)",
          lambda: collect_intv_batch_gpu(al._fm_dev, seq_d, off_d, p))
    mb, me, mk, mss, ioff = iv
    bench("rep_len", lambda: ms.rep_len_gpu(mb, me, mss, ioff, p.max_occ))
    seeds = seed_pos_batch_gpu(al._fm_dev, al.offsets, mb, me, mk, mss, ioff, p.max_occ)
    bench("SA lookups -> seeds (seed_pos_batch_gpu)",
          lambda: seed_pos_batch_gpu(al._fm_dev, al.offsets, mb, me, mk, mss, ioff, p.max_occ))
    _, jobs = ms.chain_gpu(p, al.mat, al.offsets, al.l_pac, al.pac, batch.seq, seq_off, off_d, seeds)
    bench("chaining + filtering (chain_gpu)",
          lambda: ms.chain_gpu(p, al.mat, al.offsets, al.l_pac, al.pac, batch.seq, seq_off, off_d, seeds))
    X = ms.ext_jobs_gpu(p, al.mat, al._pac_dev, al.l_pac, seq_d, off_d, jobs)
    j_read = cp.asnumpy(jobs[0])
    rl = np.diff(seq_off)[j_read]
    # cells: banded (w) left + right extension, about query length x (2w+1) per job (upper bound)
    cells = float(np.sum(rl * np.minimum(2 * X[:, 6] + 1, rl + 2 * p.w)))
    sh_max = ms.EXT_SH_MAX
    for shared in (True, False):  # scratch in shared memory (16-bit H, E) where it fits, or in global memory
        ms.EXT_SH_MAX = sh_max if shared else 0  # (a cap of 0 bytes: no read's column fits)
        X2 = ms.ext_jobs_gpu(p, al.mat, al._pac_dev, al.l_pac, seq_d, off_d, jobs)
        assert (X2 == X).all(), "the two extension kernels differ"
        bench(f"seed extension (ext_jobs_gpu, scratch in {'shared' if shared else 'global'} memory)",
              lambda: ms.ext_jobs_gpu(p, al.mat, al._pac_dev, al.l_pac, seq_d, off_d, jobs), cells,
              ", band upper bound")
    ms.EXT_SH_MAX = sh_max
    # mate rescue: the part's jobs as the pipeline makes them
    low, high, failed, _, _ = pes
    from g3align.aligner.mem.pair import rescue_jobs_range
    sw_off, key, jb = ms.assemble_rescue(n // 2, [rescue_jobs_range(p, al.offsets, al.l_pac, low, high, failed,
                                                                    seq_off, st[2], st[3], 0, n // 2)])
    lm = np.diff(seq_off)[jb[0]]
    cells = float(np.sum(lm * (jb[2] - jb[1])))
    for warp in (True, False):
        bench(f"mate rescue SW, {len(jb[0])} jobs ({'warp' if warp else 'thread'} per job)",
              lambda w=warp: ms.rescue_sw_gpu(p, al.mat, al._pac_dev, al.l_pac, seq_d, off_d, jb, warp=w), cells)
    # traceback: CIGAR, NM, MD of every region of the part (aligner/mem/gpu/cigar.py)
    from g3align.aligner.mem.gpu.cigar import cigar_jobs_gpu, cigar_keys
    keys, j_read = cigar_keys(st[2], st[3])
    bench(f"traceback (cigar_jobs_gpu), {len(keys)} regions",
          lambda: cigar_jobs_gpu(p, al.mat, al._pac_dev, al.l_pac, seq_d, off_d, keys, j_read))
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    md = [f"{n:,} reads (one part), {gpu} idle otherwise, median of {a.repeat}", "",
          "| stage | GPU time | host time | GPU s per 1M reads | rate |", "|---|---|---|---|---|"]
    md += [f"| {x[0]} | {x[1]} | {x[2]} | {x[3]} | {x[4]} |" for x in rows]
    open(os.path.join(a.out, "gpu_stages.md"), "w").write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
