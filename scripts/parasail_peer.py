#!/usr/bin/env python3
"""CPU peer for the pairwise engine (issue 7): parasail on all cores, in C, on fixed workloads.

  python scripts/parasail_peer.py [--threads N] [--scale X] [--quick] [--out DIR] [--lib-dir DIR]
         [--bin .whl/parasail_peer] [--workloads 150bp,1kb,10kb] [--modes local,global,semiglobal]

Writes DIR/parasail_peer.md (table) and DIR/parasail_peer.json, prints the table last.  The full run
takes about 2.5-3 min on 16 cores (2.6 min at --scale 0.125 on 2 cores, the same work per thread);
--quick about 40 s on 2 cores.
Workloads are scripts/gpu_pairwise_bench.py's ``gen_pairs`` (random query, target = query with 5 %
substitutions, 0.5 % N), fixed seed, lengths 150 x 150, 1000 x 1000 and 10000 x 10000.  For each
workload and mode the pairs go to the C driver scripts/parasail_peer.c (built by
scripts/build_parasail_peer.sh), which aligns them with each parasail function on --threads
pthreads (contiguous slices of equal cells) and reports the best of --reps wall times of the parallel
part; GCUPS = cells (sum of m*n) / that time.  Candidates (parasail's run-time dispatchers, AVX2 /
SSE4.1 / SSE2 chosen by the CPU):
  score only  {sw,nw,sg_dx}_{striped,scan,diag}_16, {sw,nw,sg_dx}_{striped,scan}_sat
  traceback   {sw,nw,sg_dx}_trace_{striped,scan,diag}_16, each result's CIGAR built and freed too
Mapping and scoring as in scripts/pairwise_parasail_sweep.py: local -> sw, global -> nw,
semiglobal -> sg_dx (s1 = query, s2 = target); g3align's 1/4/6/1 (gap of length L costs 6 + L) is
parasail's open 7 / extend 1 with the matrix ACGTN 1/-4 and N = -1 against everything.

Checks: ``verified`` means the scores of the first pairs (up to 2000, and up to --verify-cells
cells) equal those of the CPU twin ``pairwise.align_pairs(..., device="cpu")``; ``vs consensus``
counts the pairs (all of them) whose score differs from the median over the functions run for that
workload and mode (the majority score wherever more than half agree).  A function that is not
verified, saturates (16-bit) or fails a pair is listed but never "best".  The traceback functions
keep a full m*n trace table per call (about 2 bytes per cell measured, 4 assumed); they are skipped
when threads x m x n x 4 bytes exceeds 3/4 of --mem-gb (default MemAvailable; on the GPU boxes memory
grows as it is used and MemAvailable starts low, see the device notes), and the table says so.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from g3align.aligner.pairwise import engine as pw

ROOT = Path(__file__).resolve().parents[1]
# (name, query length, target length, pairs at --scale 1).  Sized so that each workload takes about
# 50 s of parasail time on 16 cores at the speed of a 2-core AMD EPYC VM (about 2.5-3 min in all);
# the slow candidates (trace_striped_16, trace_diag_16, *_striped_sat) take most of it.
WORKLOADS = [
    ("150bp", 150, 150, 700_000),
    ("1kb", 1000, 1000, 21_000),
    ("10kb", 10_000, 10_000, 160),
]
QUICK_SCALE = 0.02
MODES = {"local": "sw", "global": "nw", "semiglobal": "sg_dx"}
SCORE_FUNCS = ("striped_16", "scan_16", "diag_16", "striped_sat", "scan_sat")
TRACE_FUNCS = ("trace_striped_16", "trace_scan_16", "trace_diag_16")
TRACE_BYTES_PER_CELL = 4          # assumed trace-table bytes per cell (peak RSS shows about 2)
MATCH, MISMATCH, GAP_OPEN, GAP_EXTEND, N_SCORE = 1, 4, 6, 1, -1   # g3align convention
LETTERS = np.frombuffer(b"ACGTN", np.uint8)


def log(*a):
    print(*a, flush=True)


def load_gen_pairs():
    """gen_pairs from scripts/gpu_pairwise_bench.py (a script, not a module: imported by path)."""
    spec = importlib.util.spec_from_file_location("gpu_pairwise_bench", ROOT / "scripts" / "gpu_pairwise_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.gen_pairs


def write_pairs(path, q, t):
    """The G3PAIRS1 file read by parasail_peer.c: header, int64 offsets, then ASCII letters."""
    (qc, qoff), (tc, toff) = q, t
    with open(path, "wb") as fh:
        fh.write(b"G3PAIRS1")
        fh.write(np.array([qoff.size - 1, qc.size, tc.size], "<i8").tobytes())
        fh.write(qoff.astype("<i8").tobytes())
        fh.write(toff.astype("<i8").tobytes())
        fh.write(LETTERS[qc].tobytes())
        fh.write(LETTERS[tc].tobytes())


def prefix(qt, k):
    """The first k pairs of a CSR (codes, offsets) pair list."""
    c, off = qt
    return c[:off[k]], off[:k + 1]


def mem_available():
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_name():
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def run_peer(a, env, pairs_path, score_dir, funcs):
    """Run the C driver on one pairs file; returns ({function: fields}, stderr header line)."""
    cmd = [a.bin, "-t", str(a.threads), "-r", str(a.reps), "-M", str(MATCH), "-X", str(MISMATCH),
           "-N", str(N_SCORE), "-o", str(GAP_OPEN + GAP_EXTEND), "-e", str(GAP_EXTEND),
           "-s", score_dir, pairs_path, *funcs]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()}")
    out = {}
    for line in p.stdout.splitlines():
        name, *kv = line.split()
        out[name] = dict(x.split("=", 1) for x in kv)
    return out, p.stderr.strip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the pair counts")
    ap.add_argument("--quick", action="store_true", help=f"scale {QUICK_SCALE} (about 40 s on 2 cores)")
    ap.add_argument("--reps", type=int, default=1, help="repetitions per function, best time kept")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--lib-dir", default=None, help="folder of libparasail.so (LD_LIBRARY_PATH of the child)")
    ap.add_argument("--bin", default=str(ROOT / ".whl" / "parasail_peer"))
    ap.add_argument("--workloads", default=",".join(w[0] for w in WORKLOADS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--verify-pairs", type=int, default=2000)
    ap.add_argument("--verify-cells", type=float, default=2e8, help="cap on the cells the CPU twin checks")
    ap.add_argument("--seed", type=int, default=20261122)
    ap.add_argument("--timeout", type=float, default=None, help="seconds per C driver call")
    ap.add_argument("--mem-gb", type=float, default=None, help="memory for the trace tables (MemAvailable)")
    a = ap.parse_args(argv)
    scale = a.scale * (QUICK_SCALE if a.quick else 1.0)
    env = dict(os.environ)
    if a.lib_dir:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(x for x in (a.lib_dir, env.get("LD_LIBRARY_PATH")) if x)
    gen_pairs = load_gen_pairs()
    want = a.workloads.split(",")
    modes = a.modes.split(",")
    mem = a.mem_gb * 1e9 if a.mem_gb else (mem_available() or float("inf"))
    t_start = time.perf_counter()
    rows, notes, header = [], [], ""
    with tempfile.TemporaryDirectory(prefix="parasail_peer_") as tmp:
        for wi, (wname, m, n, k_full) in enumerate(WORKLOADS):
            if wname not in want:
                continue
            k = max(int(round(k_full * scale)), a.threads, 1)    # at least a pair per thread
            rng = np.random.default_rng([a.seed, wi])
            q, t = gen_pairs(rng, k, m, n)
            pairs_path = os.path.join(tmp, f"{wname}.pairs")
            write_pairs(pairs_path, q, t)
            nv = max(1, min(k, a.verify_pairs, int(a.verify_cells // (m * n))))
            trace_need = min(a.threads, k) * m * n * TRACE_BYTES_PER_CELL
            trace_ok = trace_need <= 0.75 * mem
            if not trace_ok:
                notes.append(f"{wname}: traceback skipped, {min(a.threads, k)} threads x {m} x {n} x "
                             f"{TRACE_BYTES_PER_CELL} B = {trace_need / 1e9:.1f} GB > 3/4 of {mem / 1e9:.1f} GB "
                             "(--mem-gb)")
            log(f"== {wname}: {k} pairs {m} x {n}, {k * m * n:.3g} cells, CPU twin checks the first {nv}")
            for mode in modes:
                pre = "parasail_" + MODES[mode] + "_"
                funcs = [(pre + f, False) for f in SCORE_FUNCS]
                funcs += [(pre + f, True) for f in TRACE_FUNCS] if trace_ok else []
                t0 = time.perf_counter()
                ours = pw.align_pairs(prefix(q, nv), prefix(t, nv), mode=mode, match=MATCH, mismatch=MISMATCH,
                                      gap_open=GAP_OPEN, gap_extend=GAP_EXTEND, traceback=False,
                                      device="cpu").score
                t_twin = time.perf_counter() - t0
                score_dir = os.path.join(tmp, f"{wname}_{mode}")
                os.makedirs(score_dir, exist_ok=True)
                res, header = run_peer(a, env, pairs_path, score_dir, [f for f, _ in funcs])
                scores = {f: np.fromfile(os.path.join(score_dir, f + ".i32"), "<i4")
                          for f, _ in funcs if "error" not in res.get(f, {"error": 1})}
                consensus = np.median(np.stack(list(scores.values())), axis=0) if scores else None
                for f, tb in funcs:
                    r = res.get(f, {"error": "no output"})
                    row = dict(workload=wname, m=m, n=n, mode=mode, traceback=tb, function=f,
                               threads=a.threads, pairs=k)
                    if "error" in r:
                        row.update(error=r["error"], verified=False)
                        rows.append(row)
                        log(f"  {f:34s} {r['error']}")
                        continue
                    s = scores[f]
                    bad = int((s[:nv] != ours).sum())
                    row.update(cells=int(r["cells"]), threads=int(r["threads"]), seconds=float(r["seconds"]),
                               mean_seconds=float(r["mean_seconds"]), gcups=float(r["gcups"]),
                               checksum=int(r["checksum"]), saturated=int(r["saturated"]),
                               failed=int(r["failed"]), cigar_ops=int(r["cigar_ops"]),
                               maxrss_mb=float(r["maxrss_mb"]), isa=r["isa"], verify_pairs=nv,
                               verify_mismatch=bad, vs_consensus=int((s != consensus).sum()),
                               twin_s=t_twin)
                    row["verified"] = bad == 0 and row["saturated"] == 0 and row["failed"] == 0
                    rows.append(row)
                    log(f"  {f:34s} {row['gcups']:8.2f} GCUPS {row['seconds']:8.3f} s  twin-mismatch "
                        f"{bad}/{nv}  vs-consensus {row['vs_consensus']}  sat {row['saturated']}  "
                        f"rss {row['maxrss_mb']:.0f} MB")
    wall = time.perf_counter() - t_start
    best = {}
    for r in rows:
        key = (r["workload"], r["mode"], r["traceback"])
        if r["verified"] and (key not in best or r["gcups"] > best[key]["gcups"]):
            best[key] = r
    txt = table(rows, best, notes, header, a, scale, wall)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "parasail_peer.md"), "w") as fh:
        fh.write(txt + "\n")
    with open(os.path.join(a.out, "parasail_peer.json"), "w") as fh:
        json.dump(dict(cpu=cpu_name(), nproc=os.cpu_count(), threads=a.threads, scale=scale, reps=a.reps,
                       seed=a.seed, library=header, notes=notes, wall_s=wall, rows=rows,
                       best=[dict(workload=w, mode=mo, traceback=tb, function=r["function"], gcups=r["gcups"])
                             for (w, mo, tb), r in best.items()]), fh, indent=1)
    log(txt)
    return 0 if all(r["verified"] for r in best.values()) and len(best) == len(
        {(r["workload"], r["mode"], r["traceback"]) for r in rows}) else 1


def table(rows, best, notes, header, a, scale, wall):
    lines = [f"parasail CPU peer: {cpu_name()}, {os.cpu_count()} CPUs, {a.threads} threads, scale {scale:g}, "
             f"best of {a.reps}; {header.removeprefix('parasail_peer: ').split(';')[0]}", "",
             "| workload | mode | kind | function | threads | pairs | GCUPS | seconds | verified (twin) | "
             "vs consensus | peak RSS MB |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        kind = "traceback" if r["traceback"] else "score"
        if "error" in r:
            lines.append(f"| {r['workload']} | {r['mode']} | {kind} | {r['function']} | {r['threads']} | "
                         f"{r['pairs']} | - | - | error: {r['error']} | - | - |")
            continue
        ver = "yes" if r["verified"] else (f"no ({r['verify_mismatch']}/{r['verify_pairs']} differ, "
                                           f"{r['saturated']} saturated, {r['failed']} failed)")
        if r["verified"]:
            ver += f" ({r['verify_pairs']})"
        lines.append(f"| {r['workload']} | {r['mode']} | {kind} | {r['function']} | {r['threads']} | "
                     f"{r['pairs']} | {r['gcups']:.2f} | {r['seconds']:.3f} | {ver} | {r['vs_consensus']} | "
                     f"{r['maxrss_mb']:.0f} |")
    lines += ["", "Best verified function per workload, mode and kind:", "",
              "| workload | mode | kind | function | GCUPS |", "|---|---|---|---|---|"]
    for (w, mo, tb), r in best.items():
        lines.append(f"| {w} | {mo} | {'traceback' if tb else 'score'} | {r['function']} | {r['gcups']:.2f} |")
    lines += [""] + [f"note: {x}" for x in notes] + [f"wall {wall:.1f} s"]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
