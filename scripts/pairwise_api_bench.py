#!/usr/bin/env python3
"""The pairwise engine measured end to end through its public API and CLI (GPU box).

  python scripts/pairwise_api_bench.py [--stages xfer,api,cli] [--pairs 1000000] [--cli-pairs 10000000]
                                       [--out DIR]

GCUPS here = DP cells (sum of m*n) / wall time of the whole call (`align_pairs(...)` returning numpy
arrays, or the `g3align align` process), not kernel time.  Each API row is the best of 3 warm calls;
the breakdown (``timings=``) is that of the best call.  Pairs: random query, target = query with 8 %
substitutions (no N, so that the 2-bit packed input holds the same pairs), fixed seed.
Stages:
  xfer  host <-> device copy rates (pageable, pinned) and host copy rates, for the breakdown
  api   1M x 150 bp and 1M x 1 kb (--pairs), local and global, score only and traceback, from
        Python strings, numpy codes, CuPy codes and 2-bit packed codes
  cli   `g3align align` on FASTA files of --cli-pairs pairs of 150 bp (written here), TSV to a file
  prof  cProfile of warm 150 bp calls (host time by function)
  cliprof  the CLI's parts timed one by one in process (after cli, on its files)
Writes DIR/pairwise_api.json and DIR/pairwise_api.md (DIR: $OUT or gpu_out).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from g3align.aligner.pairwise import engine as pw

ROWS: list[dict] = []


def log(*a):
    print(*a, flush=True)


def gen(rng, k, m, sub=0.08):
    """k pairs of m bp (query random, target = query with sub substitutions) as CSR codes."""
    q = rng.integers(0, 4, k * m, dtype=np.uint8)
    t = q.copy()
    mut = np.flatnonzero(rng.random(t.size) < sub)
    t[mut] = (t[mut] + rng.integers(1, 4, mut.size, dtype=np.uint8)) & 3
    off = np.arange(k + 1, dtype=np.int64) * m
    return (q, off), (t, off.copy())


def as_strings(codes, off, m):
    raw = np.frombuffer(b"ACGT", np.uint8)[codes].tobytes().decode("ascii")
    return [raw[i:i + m] for i in range(0, len(raw), m)]


def timed(fn, reps=3):
    best, tim, res = 1e30, {}, None
    for _ in range(reps):
        t = {}
        t0 = time.perf_counter()
        res = fn(t)
        w = time.perf_counter() - t0
        if w < best:
            best, tim = w, t
    return best, tim, res


def stage_xfer(out):
    import cupy as cp
    n = 300 << 20
    h = np.ones(n, np.uint8)
    d = cp.empty(n, cp.uint8)
    cp.cuda.Device().synchronize()
    r = {}
    mem = cp.cuda.alloc_pinned_memory(n)
    p = np.frombuffer(mem, np.uint8, n)
    p[:] = 1
    for name, fn in [("h2d_pageable", lambda: d.set(h)), ("d2h_pageable", lambda: d.get(out=h)),
                     ("h2d_pinned", lambda: d.set(p)), ("d2h_pinned", lambda: d.get(out=p)),
                     ("host_copy_to_pinned", lambda: np.copyto(p, h))]:
        fn()                                          # once untimed (first-touch costs), then timed
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        fn()
        cp.cuda.Device().synchronize()
        r[name] = n / (time.perf_counter() - t0) / 1e9
    h2 = np.ones(n, np.uint8)
    t0 = time.perf_counter()
    cp.cuda.runtime.hostRegister(h2.ctypes.data, n, 0)
    r["host_register_ms_300MB"] = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    d.set(h2)
    cp.cuda.Device().synchronize()
    r["h2d_registered"] = n / (time.perf_counter() - t0) / 1e9
    cp.cuda.runtime.hostUnregister(h2.ctypes.data)
    out["xfer"] = {k: round(v, 2) for k, v in r.items()}
    log("xfer (GB/s):", out["xfer"])


def stage_api(out, pairs, modes_1kb=("local", "global")):
    import cupy as cp
    rng = np.random.default_rng(7)
    for m in (150, 1000):
        k = pairs
        (qc, qo), (tc, to) = gen(rng, k, m)
        cells = float(k) * m * m
        inputs = {"numpy": ((qc, qo), (tc, to)), "packed2": (pw.pack2(qc, qo), pw.pack2(tc, to)),
                  "cupy": ((cp.asarray(qc), qo), (cp.asarray(tc), to))}
        if m == 150:
            inputs["str"] = (as_strings(qc, qo, m), as_strings(tc, to, m))
        ref = {}
        for mode in ("local", "global") if m == 150 else modes_1kb:
            for tb in (False, True):
                for kind, (q, t) in inputs.items():
                    def call(t_, q=q, t=t, mode=mode, tb=tb):
                        return pw.align_pairs(q, t, mode=mode, traceback=tb, device="gpu", timings=t_)
                    try:
                        call({})                                  # warm
                        wall, tim, res = timed(call)
                    except Exception as e:     # noqa: BLE001
                        log(f"{m} {mode} tb={tb} {kind}: {type(e).__name__}: {e}")
                        continue
                    key = (mode, tb)
                    sig = (np.asarray(res.score).tobytes(), np.asarray(res.t_end).tobytes(),
                           np.asarray(res.cigar).tobytes() if tb else b"")
                    same = ref.setdefault(key, sig) == sig
                    row = dict(length=m, pairs=k, mode=mode, traceback=tb, input=kind, wall_s=round(wall, 4),
                               gcups=round(cells / wall / 1e9, 1), same_as_first=same,
                               timings={a: (round(b, 4) if isinstance(b, float) else b) for a, b in tim.items()})
                    ROWS.append(row)
                    log(f"{m:5d} bp {mode:8s} {'tb   ' if tb else 'score'} {kind:8s} {wall:7.3f} s "
                        f"{row['gcups']:8.1f} GCUPS same={same} {row['timings']}")
        del inputs
        cp.get_default_memory_pool().free_all_blocks()


def cli_files(k, tmp="/tmp/pw_cli", m=150):
    """FASTA files of k queries and k targets of m bp (written once; kept while the box stays warm)."""
    os.makedirs(tmp, exist_ok=True)
    rng = np.random.default_rng(11)
    qf, tf = f"{tmp}/q.fa", f"{tmp}/t.fa"
    if not (os.path.exists(qf) and os.path.getsize(qf) == k * (12 + m)):
        t0 = time.perf_counter()
        step = 1_000_000
        with open(qf, "wb") as fq, open(tf, "wb") as ft:
            for a in range(0, k, step):
                b = min(k, a + step)
                (qc, _), (tc, _) = gen(rng, b - a, m)
                for fh, c, p in ((fq, qc, "q"), (ft, tc, "t")):
                    rec = np.empty((b - a, 12 + m), np.uint8)          # ">q00000042\n" + bases + "\n"
                    rec[:, 0], rec[:, 1], rec[:, 10], rec[:, -1] = ord(">"), ord(p), 10, 10
                    idx = np.arange(a, b)
                    for d in range(8):
                        rec[:, 9 - d] = 48 + (idx // 10 ** d) % 10
                    rec[:, 11:11 + m] = np.frombuffer(b"ACGT", np.uint8)[c].reshape(b - a, m)
                    fh.write(rec.tobytes())
        log(f"cli input written: {k} pairs in {time.perf_counter() - t0:.1f} s")
    return qf, tf


def stage_cli(out, k, tmp="/tmp/pw_cli"):
    m = 150
    qf, tf = cli_files(k, tmp, m)
    cells = float(k) * m * m
    for extra in ([], ["--traceback"]):
        cmd = [sys.executable, "-c", "from g3align.aligner.cli import entry; entry()", "align", "--mode", "local",
               "--device", "gpu", *extra, "-o", f"{tmp}/out.tsv", qf, tf]
        if os.environ.get("CLI_WARM", "1") == "1":
            subprocess.run(cmd, check=False, capture_output=True)   # warm (modules, caches)
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        rss = [ln for ln in p.stderr.splitlines() if "Maximum resident" in ln]
        lines = int(subprocess.run(["wc", "-l", f"{tmp}/out.tsv"], capture_output=True, text=True).stdout.split()[0])
        row = dict(cli=True, pairs=k, length=m, traceback=bool(extra), rc=p.returncode, wall_s=round(wall, 2),
                   gcups=round(cells / wall / 1e9, 1), out_lines=lines,
                   max_rss=rss[0].split(":")[1].strip() if rss else "?")
        ROWS.append(row)
        log("cli:", row, p.stderr[-600:] if p.returncode else "")


def stage_prof(out, pairs):
    """cProfile of warm 1M x 150 bp score-only calls (CuPy and numpy input): where the host time goes."""
    import cProfile
    import io
    import pstats

    import cupy as cp
    rng = np.random.default_rng(7)
    (qc, qo), (tc, to) = gen(rng, pairs, 150)
    for name, q, t in (("cupy", (cp.asarray(qc), qo), (cp.asarray(tc), to)), ("numpy", (qc, qo), (tc, to))):
        for tb in (False, True):
            pw.align_pairs(q, t, mode="local", traceback=tb, device="gpu")
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(3):
                pw.align_pairs(q, t, mode="local", traceback=tb, device="gpu")
            pr.disable()
            sio = io.StringIO()
            pstats.Stats(pr, stream=sio).sort_stats("tottime").print_stats(22)
            log(f"--- profile {name} tb={tb} (3 calls)\n" + "\n".join(sio.getvalue().splitlines()[4:40]))


def stage_cliprof(out, k, tmp="/tmp/pw_cli"):
    """Where the CLI's time goes, in process: the two files parsed alone (aligner/cli/align.py's _chunks), then each
    chunk aligned, formatted and written, one after the other (no overlap)."""
    from g3align.aligner.cli import align as align_cli
    qf, tf = cli_files(k, tmp)
    from g3align.aligner.io import reads
    t0 = time.perf_counter()
    n1 = sum(b.n for b in reads.iter_pieces(qf, trim_readno=False, keep_raw=False))
    t_one = time.perf_counter() - t0
    t0 = time.perf_counter()
    n = sum(q.n for q, _ in align_cli._chunks(qf, tf, align_cli.CHUNK_PAIRS))
    t_parse = time.perf_counter() - t0
    t = dict(parse_one_file_s=t_one, parse_s=t_parse, align_s=0.0, tsv_s=0.0, write_s=0.0,
             parse_threads=reads.PARSE_THREADS, records_one_file=n1)
    t0 = time.perf_counter()
    with open(f"{tmp}/prof.tsv", "wb") as fh:
        for q, tb in align_cli._chunks(qf, tf, align_cli.CHUNK_PAIRS):
            a = time.perf_counter()
            r = pw.align_pairs((q.seq, q.seq_off), (tb.seq, tb.seq_off), mode="local", device="gpu")
            b = time.perf_counter()
            buf = align_cli._tsv(q, tb, r, False)
            c = time.perf_counter()
            fh.write(buf)
            d = time.perf_counter()
            t["align_s"] += b - a
            t["tsv_s"] += c - b
            t["write_s"] += d - c
    t["serial_total_s"] = time.perf_counter() - t0
    out["cliprof"] = {k: round(v, 3) for k, v in t.items()} | {"pairs": n}
    log("cliprof:", out["cliprof"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", default="xfer,api,cli")
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument("--cli-pairs", type=int, default=10_000_000)
    ap.add_argument("--modes-1kb", default="local,global", help="the modes measured at 1 kb")
    ap.add_argument("--out", default=os.environ.get("OUT", "gpu_out"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    out: dict = {}
    st = a.stages.split(",")
    if "xfer" in st:
        stage_xfer(out)
    if "api" in st:
        stage_api(out, a.pairs, a.modes_1kb.split(","))
    if "cli" in st:
        stage_cli(out, a.cli_pairs)
    if "prof" in st:
        stage_prof(out, a.pairs)
    if "cliprof" in st:
        stage_cliprof(out, a.cli_pairs)
    out["rows"] = ROWS
    with open(os.path.join(a.out, "pairwise_api.json"), "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
