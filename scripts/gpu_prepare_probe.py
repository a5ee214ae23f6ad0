#!/usr/bin/env python3
"""Where the host time of MemAligner.prepare goes (issue 4), on the GPU box.

  python scripts/gpu_prepare_probe.py --fasta .devdata/human_GRCh37_chr20.fa.gz --out $OUT [--py-spy PATH]

Prepares the same 10-Mbase batch (66,666 simulated 150-bp reads, gpu_check's simulation) over and over in
one thread, nothing else running: wall time per prepare beside its stage times, then the same loop under
py-spy (`--native`: CuPy's Cython and the CUDA driver frames too) summarised per line of our code in
OUT/prepare_probe.md. The GPU kernel time per stage is scripts/gpu_stage_bench.py's job.
"""
from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from g3align.aligner.options import MemOpt  # noqa: E402
from g3align.aligner.pipeline import MemAligner  # noqa: E402
from g3align.aligner.reads import read_batches  # noqa: E402
from gpu_check import reference_and_reads  # noqa: E402
from gpu_pe_profile import table  # noqa: E402


def by_line(raw, top=40):
    """py-spy raw stacks -> samples per innermost frame of g3align code (file:line), and per leaf frame."""
    ours = collections.Counter()
    leaf = collections.Counter()
    total = 0
    for line in open(raw):
        stack, _, cnt = line.rstrip("\n").rpartition(" ")
        if not stack:
            continue
        cnt = int(cnt)
        frames = stack.split(";")
        total += cnt
        leaf[frames[-1]] += cnt
        mine = [f for f in frames if "/g3align/" in f or "aligner/" in f]
        ours[mine[-1] if mine else "(other)"] += cnt
    out = [f"total samples {total}"] + table("innermost g3align frame", ours.most_common(top), total)
    out += table("leaf frame", leaf.most_common(top), total)
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fasta", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--py-spy", default="py-spy")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    fa, ref, fm, f1, f2, _ = reference_and_reads(a.fasta, 70000, "/tmp/g3probe")
    opt = MemOpt()
    opt.n_threads = 16
    al = MemAligner(ref, fm, opt, device="gpu")
    batch = next(read_batches(f1, chunk_size=10_000_000))
    for _ in range(3):
        al.prepare(batch)
    al.stage_times.clear()
    t = time.perf_counter()
    for _ in range(a.reps):
        al.prepare(batch)
    dt = (time.perf_counter() - t) / a.reps
    st = ", ".join(f"{k} {v / a.reps * 1e3:.1f} ms" if isinstance(v, float) else f"{k} {v // a.reps}"
                   for k, v in al.stage_times.items())
    md = [f"# prepare of one batch ({batch.n} reads, {batch.bases} bases), one thread, idle machine",
          "", f"wall per prepare {dt * 1e3:.1f} ms; per stage: {st}", ""]
    raw = os.path.join(a.out, "pyspy_prepare.txt")
    try:
        sp = subprocess.Popen([a.py_spy, "record", "--pid", str(os.getpid()), "-r", "500", "--native",
                               "-f", "raw", "-o", raw], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(1.0)
        for _ in range(a.reps):
            al.prepare(batch)
        sp.send_signal(signal.SIGINT)
        err = sp.communicate(timeout=60)[1].decode(errors="replace")
        md.append(by_line(raw) if os.path.exists(raw) else "py-spy wrote nothing: " + err[-400:])
    except OSError as e:
        md.append(f"py-spy not run: {e}")
    open(os.path.join(a.out, "prepare_probe.md"), "w").write("\n".join(md) + "\n")
    print("\n".join(md[:60]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
