#!/usr/bin/env python3
"""`g3align mem` on the GPU box: GPU path == CPU twin byte for byte, then timings beside bwa -t N.

  python scripts/gpu_check.py --fasta .devdata/human_GRCh37_chr20.fa.gz --pairs 250000 --out $OUT \
      [--bwa .devdata/bwa]

Builds the FM-index, simulates pairs with numpy (fixed seed; 2x150, insert ~N(400, 40), 0.2 %
substitutions, reference N kept as N) and writes them as FASTQ; then aligns single-end (R1) and
paired-end with MemAligner(device="cpu") and MemAligner(device="gpu") (GPU seeding kernel, CPU twin for
the later stages), checks the SAM bodies are byte-identical, and times both. With --bwa, runs
`bwa index` (in the background, from the start) and `bwa mem -t N` on the same FASTQ and reports the
share of records identical to bwa's. Prints a table last and writes OUT/gpu_check.md.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

import g3align.aligner as ag
from g3align.aligner.io.reads import read_batches, read_pair_batch_parts, read_pair_batches
from g3align.aligner.mem import pipeline
from g3align.aligner.mem.options import MemOpt
from g3align.aligner.mem.pipeline import MemAligner, run_mem_pe, run_mem_se, se_chunk
from g3align.index.fasta import read_fasta
from g3align.index.fm import build_fm


def log(*a):
    print(*a, flush=True)


def simulate_pairs(pac, hole_off, hole_len, n, L, seed):
    rng = np.random.default_rng(seed)
    ref = pac.copy()
    for o, ln in zip(hole_off, hole_len):
        ref[o:o + ln] = 4
    ins = np.clip(rng.normal(400, 40, n).astype(np.int64), L, 1000)
    pos = rng.integers(0, len(ref) - 1000, n)
    idx1 = pos[:, None] + np.arange(L)[None, :]
    idx2 = (pos + ins - L)[:, None] + np.arange(L)[None, :]
    r1 = ref[idx1]
    r2 = ref[idx2][:, ::-1]
    r2 = np.where(r2 < 4, 3 - r2, 4)
    swap = rng.random(n) < 0.5
    r1[swap], r2[swap] = r2[swap].copy(), r1[swap].copy()
    for r in (r1, r2):
        m = (rng.random(r.shape) < 0.002) & (r < 4)
        r[m] = (r[m] + rng.integers(1, 4, int(m.sum()))) % 4
    return r1.astype(np.uint8), r2.astype(np.uint8)


def reference_and_reads(fasta_gz, pairs, work, on_fasta=None):
    """The benchmark inputs in `work`: the reference as plain FASTA, its FM-index (built here) and
    `pairs` simulated pairs as r1.fq/r2.fq (simulate_pairs, seed 7). on_fasta(fa) runs once the FASTA
    exists (e.g. to start `bwa index` beside the build). Returns (fa, ref, fm, f1, f2, fm_build_s)."""
    os.makedirs(work, exist_ok=True)
    fa = os.path.join(work, "ref.fa")
    subprocess.run(f"zcat {fasta_gz} > {fa}", shell=True, check=True)
    if on_fasta is not None:
        on_fasta(fa)
    t = time.time()
    ref = read_fasta(fa)
    fm = build_fm(ref.pac)
    dt = time.time() - t
    r1, r2 = simulate_pairs(ref.pac, ref.hole_off, ref.hole_len, pairs, 150, 7)
    f1, f2 = os.path.join(work, "r1.fq"), os.path.join(work, "r2.fq")
    write_fastq(f1, r1, 1)
    write_fastq(f2, r2, 2)
    return fa, ref, fm, f1, f2, dt


def write_fastq(path, reads, tag):
    n, L = reads.shape
    acgt = np.frombuffer(b"ACGTN", np.uint8)
    with open(path, "wb") as fh:
        seqs = acgt[reads]
        qual = b"I" * L
        chunk = 100000
        for s in range(0, n, chunk):
            fh.write(b"".join(b"@p%d/%d\n%s\n+\n%s\n" % (i, tag, seqs[i].tobytes(), qual)
                              for i in range(s, min(n, s + chunk))))


class _ListSink:
    def __init__(self):
        self.parts = []

    def write_sam_bytes(self, b):
        self.parts.append(b)


def gantt(events, t0, t1, step=0.1):
    """Text timeline of ag.TRACE events: one row per (thread, stage), one column per `step` seconds
    ('#': the stage ran for at least half of the column)."""
    n = int((t1 - t0) / step) + 1
    rows = {}
    for stage, thread, a, b in events:
        busy = rows.setdefault((thread, stage), [0.0] * n)
        for c in range(max(0, int((a - t0) / step)), min(n, int((b - t0) / step) + 1)):
            lo, hi = t0 + c * step, t0 + (c + 1) * step
            busy[c] += max(0.0, min(b, hi) - max(a, lo))
    w = max(len(f"{t} {s}") for t, s in rows) if rows else 10
    out = [f"{'':{w}} |" + "".join(str(c // 10 % 10) if c % 10 == 0 else " " for c in range(n)) + "| (x%.1f s)" % step]
    for (t, s), busy in sorted(rows.items(), key=lambda kv: min(e[2] for e in events if (e[1], e[0]) == kv[0])):
        out.append(f"{t + ' ' + s:{w}} |" + "".join("#" if x >= step / 2 else ("." if x > 0 else " ") for x in busy)
                   + "|")
    return "\n".join(out)


def body(sam: bytes):
    return [ln for ln in sam.split(b"\n") if ln and not ln.startswith(b"@")]


def cli_runs(a, fa, f1, f2, dev):
    """`g3align index` once, then `g3align mem` SE and PE through the CLI (a fresh process each: index file
    load, module set-up and cached-kernel loading included). The CLI's own "Processed ... in X sec" is the
    alignment part; the rest of the wall time is reported as start-up + index load."""
    rows = []
    prefix = os.path.join(os.path.dirname(fa), "cli_idx")
    t = time.time()
    subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "index", "-p", prefix, fa], check=True,
                   capture_output=True)
    rows.append(("g3align index (CLI, chr20)", f"{time.time() - t:.1f} s", ""))
    for mode, files in (("se", [f1]), ("pe", [f1, f2])):
        t = time.time()
        p = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", "-t", str(a.threads), "--device", dev,
                            prefix, *files], capture_output=True, check=True)
        wall = time.time() - t
        m = re.search(rb"\[M::main\] Processed (\d+) reads in ([0-9.]+) sec", p.stderr)
        n, proc = (int(m.group(1)), float(m.group(2))) if m else (0, float("nan"))
        rows.append((f"g3align mem CLI --device {dev} {mode.upper()}: wall (alignment + start-up/index load)",
                     f"{wall:.2f} s ({proc:.2f} + {wall - proc:.2f})", f"{n / wall:,.0f} reads/s end to end"))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fasta", required=True)
    ap.add_argument("--pairs", type=int, default=250000)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=".")
    ap.add_argument("--bwa", default=None)
    ap.add_argument("--devices", default="cpu,gpu")
    ap.add_argument("--minimap2", default=None, help="also time minimap2 -ax sr -t N on the same FASTQ (context)")
    ap.add_argument("--pe-variants", default="",
                    help="';'-separated pipeline settings (e.g. 'WORKER_NICE=0;RESCUE_GROUP_BASES=1') for extra GPU PE "
                         "runs, timed beside the default and checked against its SAM")
    ap.add_argument("--cli", action="store_true",
                    help="also run the g3align CLI end to end (index file load included, reported apart)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    bwa_idx = []

    def start_bwa_index(fa):
        if a.bwa:
            bwa_idx.append(subprocess.Popen([a.bwa, "index", fa], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    fa, ref, fm, f1, f2, dt = reference_and_reads(a.fasta, a.pairs, "/tmp/g3work", start_bwa_index)
    rows.append(("g3align FM-index build (chr20)", f"{dt:.1f} s", ""))
    K = 10_000_000 * a.threads
    opt = MemOpt()
    opt.n_threads = a.threads
    res = {}
    devs = a.devices.split(",")
    for dev in devs:
        pool = None
        if dev == "gpu":
            import cupy as cp
            pool = cp.get_default_memory_pool()
            used0 = pool.used_bytes()
        al = MemAligner(ref, fm, opt, device=dev)
        if pool is not None:
            idx_b = pool.used_bytes() - used0
            rows.append(("GPU memory: chr20 index on the device (FM + SA + pac)", f"{idx_b / 2**30:.2f} GiB",
                         f"{idx_b / ref.l_pac:.2f} B/bp -> {idx_b / ref.l_pac * 3.1e9 / 2**30:.1f} GiB at 3.1 Gbp"))
        # warm-up: compile numba kernels / NVRTC modules, and CuPy's kernels for batch-sized arrays, on
        # a 3-Mbase batch (not timed)
        warm = next(read_batches(f1, chunk_size=3_000_000))
        al.align_batch_se(warm)
        wp = next(read_pair_batches(f1, f2, chunk_size=3_000_000))
        al.align_batch_pe(wp)
        al.stage_times.clear()
        for mode in ("se", "pe"):
            sink = _ListSink()
            if dev == "gpu":
                ag.TRACE = []
            t = time.time()
            tp = time.perf_counter()
            if mode == "se":  # as `g3align mem`: reader thread ahead, SE batches of se_chunk bases
                run_mem_se(al, read_batches(f1, chunk_size=se_chunk(al, K), keep_raw=False), sink, verbose=0)
                n = a.pairs
            else:
                run_mem_pe(al, read_pair_batch_parts(f1, f2, chunk_size=K, keep_raw=False), sink, verbose=0)
                n = 2 * a.pairs
            out = sink.parts
            dt = time.time() - t
            if ag.TRACE is not None:
                g = gantt(ag.TRACE, tp, time.perf_counter())
                open(os.path.join(a.out, f"trace_{mode}.txt"), "w").write(g + "\n")
                json.dump([(e[0], e[1], e[2] - tp, e[3] - tp) for e in ag.TRACE],
                          open(os.path.join(a.out, f"trace_{mode}.json"), "w"))
                log(g)
                ag.TRACE = None
            if pool is not None:  # the pool keeps freed blocks: its size is the run's high-water mark
                rows.append((f"GPU memory pool after the {mode.upper()} run (index + batches in flight)",
                             f"{pool.total_bytes() / 2**30:.2f} GiB", ""))
            res[(dev, mode)] = (b"".join(out), dt, n)
            log(f"{dev} {mode}: {n} reads in {dt:.2f} s ({n / dt:,.0f} reads/s)")
            if al.stage_times:
                parts = ", ".join(f"{k} {v:.2f} s" if isinstance(v, float) else f"{k} {v}"
                                  for k, v in al.stage_times.items())
                rows.append((f"stages {dev} {mode.upper()}", parts, ""))
                log(f"  stages: {parts}")
            al.stage_times.clear()
    for spec in filter(None, a.pe_variants.split(";")):
        saved = {}
        for kv in spec.split(","):
            k, v = kv.split("=")
            saved[k] = getattr(pipeline, k)
            setattr(pipeline, k, type(saved[k])(v))
        al = MemAligner(ref, fm, opt, device="gpu")
        sink = _ListSink()
        t = time.time()
        run_mem_pe(al, read_pair_batch_parts(f1, f2, chunk_size=K, keep_raw=False), sink, verbose=0)
        dt = time.time() - t
        same = b"".join(sink.parts) == res[("gpu", "pe")][0]
        rows.append((f"g3align PE --device gpu, {spec}", f"{dt:.2f} s",
                     f"{2 * a.pairs / dt:,.0f} reads/s; SAM {'identical' if same else 'DIFFERENT'}"))
        log(rows[-1])
        for k, v in saved.items():
            setattr(pipeline, k, v)
    for mode in ("se", "pe"):
        if len(devs) == 2:
            same = res[("cpu", mode)][0] == res[("gpu", mode)][0]
            rows.append((f"GPU == CPU twin, {mode.upper()} SAM bytes", "identical" if same else "DIFFERENT", ""))
        for dev in devs:
            _, dt, n = res[(dev, mode)]
            rows.append((f"g3align {mode.upper()} --device {dev} -t {a.threads}", f"{dt:.2f} s",
                         f"{n / dt:,.0f} reads/s"))
    if a.bwa:
        bwa_idx[0].wait()
        for mode, files in (("se", [f1]), ("pe", [f1, f2])):
            t = time.time()
            p = subprocess.run([a.bwa, "mem", "-t", str(a.threads), fa, *files], capture_output=True)
            dt = time.time() - t
            n = a.pairs * len(files)
            ours = body(res[(devs[-1], mode)][0])
            theirs = body(p.stdout)
            ident = sum(x == y for x, y in zip(ours, theirs))
            rows.append((f"bwa mem -t {a.threads} {mode.upper()}", f"{dt:.2f} s", f"{n / dt:,.0f} reads/s"))
            rows.append((f"records identical to bwa ({mode.upper()})", f"{ident}/{len(theirs)}",
                         f"{100.0 * ident / max(1, len(theirs)):.3f} %"))
            rows.append((f"speed g3align --device {devs[-1]} vs bwa ({mode.upper()})",
                         f"{dt / res[(devs[-1], mode)][1]:.2f} x", ""))
    if a.minimap2:
        for mode, files in (("se", [f1]), ("pe", [f1, f2])):
            t = time.time()
            subprocess.run([a.minimap2, "-ax", "sr", "-t", str(a.threads), fa, *files], capture_output=True,
                           check=True)
            dt = time.time() - t
            n = a.pairs * len(files)
            rows.append((f"minimap2 -ax sr -t {a.threads} {mode.upper()} (context, index built on the fly)",
                         f"{dt:.2f} s", f"{n / dt:,.0f} reads/s"))
    if a.cli:
        rows += cli_runs(a, fa, f1, f2, devs[-1])
    md = ["| measurement | value | rate |", "|---|---|---|"] + [f"| {x} | {y} | {z} |" for x, y, z in rows]
    open(os.path.join(a.out, "gpu_check.md"), "w").write("\n".join(md) + "\n")
    log("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
