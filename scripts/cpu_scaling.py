#!/usr/bin/env python3
"""Thread scaling of the CPU stages of the staged `g3align mem` path on the GPU box: regions+SAM (SE),
regions and pairing+SAM (PE) with 1..N pool threads on one prepared batch (seeds, chains, extensions
and mate rescue computed once on the GPU), printing us per read and per read-thread. Shows whether the
CPU stages scale with threads (what bounds the GPU path's wall time).

  python scripts/cpu_scaling.py --fasta .devdata/human_GRCh37_chr20.fa.gz --pairs 200000 --out $OUT
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from g3align.aligner.options import MemOpt  # noqa: E402
from g3align.aligner.pipeline import MemAligner  # noqa: E402
from g3align.aligner.reads import read_batches, read_pair_batches  # noqa: E402
from gpu_check import reference_and_reads  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fasta", required=True)
    ap.add_argument("--pairs", type=int, default=200000)
    ap.add_argument("--out", default=".")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--prep-device", default="gpu", help="where the batch is prepared (cpu: the staged CPU twin)")
    a = ap.parse_args()
    fa, ref, fm, f1, f2, _ = reference_and_reads(a.fasta, a.pairs, os.path.join(a.out, "scaling"))
    se = next(read_batches(f1, chunk_size=1 << 40))
    pe = next(read_pair_batches(f1, f2, chunk_size=1 << 40))
    opt = MemOpt()
    opt.n_threads = 16
    g = MemAligner(ref, fm, opt, device=a.prep_device, staged=True)
    g.align_batch_se(next(read_batches(f1, chunk_size=3_000_000)))
    prep_se = g.prepare(se)
    prep_pe = g.prepare(pe)
    st = g.pe_regions_of(prep_pe)
    pes = g.pe_stat([st])
    sw = g.pe_rescue(st, pes)
    print(f"malloc env: {os.environ.get('MALLOC_MMAP_THRESHOLD_', 'default')}; {se.n} SE reads, {pe.n} PE reads",
          flush=True)
    base = {}
    for nt in (int(x) for x in a.threads.split(",")):
        o = MemOpt()
        o.n_threads = nt
        al = MemAligner(ref, fm, o, staged=True)
        al.finish_se(prep_se)  # warm (compiled already, first-touch of buffers)
        res = {}
        for name, fn, args, n in (("SE regions+SAM", al.finish_se, (prep_se,), se.n),
                                  ("PE regions", al.pe_regions_of, (prep_pe,), pe.n),
                                  ("PE pairing+SAM", al.pe_sam, (st, pes, sw), pe.n)):
            best = 1e9
            for _ in range(2):
                t = time.perf_counter()
                fn(*args)
                best = min(best, time.perf_counter() - t)
            res[name] = best
            b = base.setdefault(name, best)
            print(f"threads {nt:2d} {name:15s} {best:6.3f} s  {best / n * 1e6:6.2f} us/read  "
                  f"{best * nt / n * 1e6:6.2f} us/read-thread  speedup {b / best:5.2f}", flush=True)


if __name__ == "__main__":
    main()
