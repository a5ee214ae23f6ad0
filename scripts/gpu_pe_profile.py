#!/usr/bin/env python3
"""Where the host time of the GPU paired-end pipeline goes (issue 4), on the GPU box.

  python scripts/gpu_pe_profile.py --fasta .devdata/human_GRCh37_chr20.fa.gz --pairs 1000000 --out $OUT \
      [--py-spy PATH]

Same inputs as scripts/gpu_check.py (chr20 FM-index built here, simulated 2x150 pairs, seed 7). After a
warm-up it times, GPU path only:
  1. the reader alone (parse + interleave + -K parts), nothing else running;
  2. prepare alone (GPU seeding, chaining, extension) over every part, with 1 and 2 prepare threads;
  3. prepare + regions (no pairing);
  4. the whole PE pipeline (run_mem_pe), and again under py-spy twice: `--gil` (only samples of the thread
     that holds the GIL: how busy the GIL is and who holds it) and without (every active thread).
The py-spy samples are summarised per thread and per function (self and inclusive) in OUT/profile_pe.md.
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check import _ListSink, reference_and_reads  # noqa: E402

from g3align.aligner.io.reads import prefetch, read_pair_batch_parts, read_pair_batches  # noqa: E402
from g3align.aligner.mem.options import MemOpt  # noqa: E402
from g3align.aligner.mem.pipeline import MemAligner, ahead, run_mem_pe  # noqa: E402


def log(*a):
    print(*a, flush=True)


_FRAME = re.compile(r"^(.*) \((.*?):(\d+)\)$")


def _frame(f):
    """py-spy's 'func (path:line)' -> 'func file.py:line'."""
    m = _FRAME.match(f)
    return f"{m.group(1)} {os.path.basename(m.group(2))}:{m.group(3)}" if m else f


def summarise(raw_path, seconds, rate, top=25):
    """py-spy raw (collapsed) stacks -> markdown: samples per thread, top self and inclusive frames."""
    per_thread = collections.Counter()
    self_f = collections.Counter()
    incl = collections.Counter()
    total = 0
    for line in open(raw_path):
        line = line.rstrip("\n")
        if not line:
            continue
        stack, _, cnt = line.rpartition(" ")
        cnt = int(cnt)
        frames = stack.split(";")
        th = frames[0]
        th = th.split(": ", 1)[1] if ": " in th else th
        th = th.rstrip("0123456789_") or th
        per_thread[th] += cnt
        fr = [_frame(f) for f in frames[1:]]
        if fr:
            self_f[fr[-1]] += cnt
        for f in {f.rsplit(":", 1)[0] for f in fr}:  # inclusive: per function, any line
            incl[f] += cnt
        total += cnt
    expect = seconds * rate
    out = [f"samples {total} over {seconds:.2f} s at {rate}/s = {100 * total / max(1, expect):.0f} % of one "
           "sampler's ticks"]
    out += table("thread", per_thread.most_common(), expect, "share of ticks")
    out += table("self frame", self_f.most_common(top), expect, "share of ticks")
    out += table("inclusive frame", incl.most_common(top), expect, "share of ticks")
    return "\n".join(out)


def table(what, rows, denom, share="share"):
    """Markdown rows (blank line first) of (name, count) pairs with each count's share of `denom`."""
    return (["", f"| {what} | samples | {share} |", "|---|---|---|"]
            + [f"| `{f}` | {c} | {100 * c / max(1, denom):.1f} % |" for f, c in rows])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fasta", required=True)
    ap.add_argument("--pairs", type=int, default=1000000)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=".")
    ap.add_argument("--py-spy", default="py-spy")
    ap.add_argument("--rate", type=int, default=250)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    fa, ref, fm, f1, f2, _ = reference_and_reads(a.fasta, a.pairs, "/tmp/g3work")
    K = 10_000_000 * a.threads
    opt = MemOpt()
    opt.n_threads = a.threads
    al = MemAligner(ref, fm, opt, device="gpu")
    al.align_batch_pe(next(read_pair_batches(f1, f2, chunk_size=3_000_000)))  # warm-up (compile, caches)
    rows = []

    def parts():
        return read_pair_batch_parts(f1, f2, chunk_size=K, keep_raw=False)

    t = time.time()
    n = sum(p.n for p, _ in prefetch(parts()))
    rows.append(("reader alone (parse, interleave, parts)", time.time() - t, n))
    for w in (1, 2):
        al.stage_times.clear()
        t = time.time()
        for _ in ahead(lambda it: al.prepare(it[0]) if it[0].n else None, prefetch(parts()), workers=w):
            pass
        rows.append((f"reader + prepare, {w} thread(s); stages {_fmt(al.stage_times)}", time.time() - t, n))
    al.stage_times.clear()
    t = time.time()
    preps = ahead(lambda it: al.prepare(it[0]) if it[0].n else None, prefetch(parts()), workers=2)
    for _ in ahead(lambda p: al.pe_regions_of(p) if p is not None else None, preps, depth=16):
        pass
    rows.append((f"reader + prepare (2) + regions; stages {_fmt(al.stage_times)}", time.time() - t, n))
    al.stage_times.clear()
    t = time.time()
    run_mem_pe(al, parts(), _ListSink(), verbose=0)
    rows.append((f"run_mem_pe; stages {_fmt(al.stage_times)}", time.time() - t, n))
    md = ["| run | wall | reads/s |", "|---|---|---|"] + [f"| {x} | {dt:.2f} s | {m / dt:,.0f} |" for x, dt, m in rows]
    for mode in ("gil", "all"):
        raw = os.path.join(a.out, f"pyspy_pe_{mode}.txt")
        cmd = [a.py_spy, "record", "--pid", str(os.getpid()), "-r", str(a.rate), "--nonblocking", "--threads",
               "-f", "raw", "-o", raw] + (["--gil"] if mode == "gil" else [])
        try:
            sp = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except OSError as e:
            md.append(f"\npy-spy not run: {e}")
            break
        time.sleep(1.0)
        t = time.time()
        run_mem_pe(al, parts(), _ListSink(), verbose=0)
        dt = time.time() - t
        time.sleep(0.05)
        sp.send_signal(signal.SIGINT)
        err = sp.communicate(timeout=60)[1].decode(errors="replace")
        md.append(f"\n## run_mem_pe under py-spy ({mode}): {dt:.2f} s\n")
        if os.path.exists(raw):
            md.append(summarise(raw, dt + 1.05, a.rate))
        else:
            md.append("py-spy wrote nothing: " + err[-400:])
    open(os.path.join(a.out, "profile_pe.md"), "w").write("\n".join(md) + "\n")
    log("\n".join(md))
    return 0


def _fmt(times):
    return ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in times.items())


if __name__ == "__main__":
    sys.exit(main())
