#!/usr/bin/env python3
"""Sweep of the staged GPU mem path's batch geometry on the GPU box (no peers, no CPU run):
SE batch size (reads.SE_STAGED_CHUNK), PE part size (read_pair_batch_parts part_bases) and the number
of CPU threads, on gpu_check.py's simulated chr20 pairs. Prints wall time and stage times per setting.

  python scripts/gpu_mem_tune.py --fasta .devdata/human_GRCh37_chr20.fa.gz --pairs 500000 --out $OUT
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import Future

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from g3align.aligner import pipeline as pl  # noqa: E402
from g3align.aligner import reads  # noqa: E402
from g3align.aligner.options import MemOpt  # noqa: E402
from g3align.aligner.reads import read_batches, read_pair_batch_parts, read_pair_batches  # noqa: E402
from gpu_check import _ListSink, reference_and_reads  # noqa: E402


class _Inline:
    """An executor that runs each job at once in the caller's thread (parsing without the pool)."""

    def submit(self, fn, *a):
        f = Future()
        f.set_result(fn(*a))
        return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fasta", required=True)
    ap.add_argument("--pairs", type=int, default=500000)
    ap.add_argument("--out", default=".")
    ap.add_argument("--se-chunks", default="2500000,5000000,10000000,20000000")
    ap.add_argument("--pe-parts", default="5000000,10000000,20000000")
    ap.add_argument("--threads", default=str(os.cpu_count()))
    ap.add_argument("--parse", default="pool,inline", help="FASTQ block parsing: on the pool and/or inline")
    a = ap.parse_args()
    fa, ref, fm, f1, f2, _ = reference_and_reads(a.fasta, a.pairs, os.path.join(a.out, "tune"))
    inline = {"pool": reads._parse_pool, "inline": lambda: _Inline()}
    for mode in a.parse.split(","):  # parsing alone (the reader threads' share of the wall time)
        reads._parse_pool = inline[mode]
        for _rep in range(2):
            t = time.time()
            n = sum(b.n for b in read_batches(f1, chunk_size=10_000_000))
            t1 = time.time()
            m = sum(b.n for b, _ in read_pair_batch_parts(f1, f2, chunk_size=160_000_000, part_bases=20_000_000))
            print(f"parse only ({mode}): SE {n} reads {t1 - t:.2f} s, PE {m} reads {time.time() - t1:.2f} s",
                  flush=True)
    ref_out = {}
    for nt, mode in ((int(x), m) for x in a.threads.split(",") for m in a.parse.split(",")):
        reads._parse_pool = inline[mode]
        opt = MemOpt()
        opt.n_threads = nt
        al = pl.MemAligner(ref, fm, opt, device="gpu")
        al.align_batch_se(next(read_batches(f1, chunk_size=3_000_000)))
        al.align_batch_pe(next(read_pair_batches(f1, f2, chunk_size=3_000_000)))
        for ch in (int(x) for x in a.se_chunks.split(",")):
            al.stage_times.clear()
            sink = _ListSink()
            t = time.time()
            pl.run_mem_se(al, read_batches(f1, chunk_size=ch), sink, verbose=0)
            dt = time.time() - t
            out = b"".join(sink.parts)
            same = ref_out.setdefault("se", out) == out
            st = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in al.stage_times.items())
            print(f"threads {nt} parse {mode} SE chunk {ch}: {dt:.2f} s same={same} | {st}", flush=True)
        for part in (int(x) for x in a.pe_parts.split(",")):
            al.stage_times.clear()
            sink = _ListSink()
            t = time.time()
            pl.run_mem_pe(al, read_pair_batch_parts(f1, f2, chunk_size=160_000_000, part_bases=part), sink,
                          verbose=0)
            dt = time.time() - t
            out = b"".join(sink.parts)
            same = ref_out.setdefault("pe", out) == out
            st = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in al.stage_times.items())
            print(f"threads {nt} parse {mode} PE part {part}: {dt:.2f} s same={same} | {st}", flush=True)


if __name__ == "__main__":
    main()
