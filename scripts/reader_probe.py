#!/usr/bin/env python3
"""How fast `g3align mem`'s paired-end reader runs alone (no aligner): each layer of reads.py on the same two
FASTQ files, best of --repeat, reads per second. Shows whether the reader can feed the GPU pipeline, and
which layer costs (raw reads of the files; one file's parsed pieces; the two files' interleaved pair pieces;
the -K batch parts mem consumes).

  python scripts/reader_probe.py R1.fq R2.fq [--repeat 2]
"""
from __future__ import annotations

import argparse
import time

from g3align.aligner.io import reads


def _timed(name, fn, repeat):
    best, n = 1e9, 0
    for _ in range(repeat):
        t = time.perf_counter()
        n = fn()
        best = min(best, time.perf_counter() - t)
    print(f"{name:<44} {best:7.3f} s  {n / best / 1e6:6.2f} M reads/s ({n} reads)", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("r1")
    ap.add_argument("r2")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=160_000_000, help="-K (the CLI's default: 10M bases x 16 threads)")
    a = ap.parse_args()
    print(f"PARSE_THREADS {reads.PARSE_THREADS}, PARSE_AHEAD {reads.PARSE_AHEAD}, block {reads.DEFAULT_BLOCK_SIZE}, "
          f"PART_BASES {reads.PART_BASES}", flush=True)

    def raw():
        n = 0
        for p in (a.r1, a.r2):
            with open(p, "rb") as fh:
                while True:
                    b = fh.read(reads.DEFAULT_BLOCK_SIZE)
                    if not b:
                        break
                    n += b.count(b"\n")
        return n // 4

    _timed("raw block reads (both files, newlines counted)", raw, a.repeat)
    _timed("iter_pieces (R1 only, keep_raw=False)",
           lambda: sum(b.n for b in reads.iter_pieces(a.r1, keep_raw=False)), a.repeat)
    _timed("_pair_pieces (R1+R2 interleaved)",
           lambda: sum(b.n for b in reads._pair_pieces(a.r1, a.r2, reads.DEFAULT_BLOCK_SIZE, True, False)), a.repeat)
    _timed("read_pair_batch_parts (mem's PE reader)",
           lambda: sum(p.n for p, _ in reads.read_pair_batch_parts(a.r1, a.r2, chunk_size=a.chunk, keep_raw=False)),
           a.repeat)


if __name__ == "__main__":
    main()
