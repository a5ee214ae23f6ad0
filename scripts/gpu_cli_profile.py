#!/usr/bin/env python3
"""Where the time of `g3align mem` goes end to end through the CLI (issue 4), on the GPU box:

  python scripts/gpu_cli_profile.py --fasta .devdata/human_GRCh37_chr20.fa.gz --pairs 1000000 \
      --bwa .devdata/bwa --out $OUT [--py-spy PATH] [--variants 'PREP_WORKERS=2;...']

Builds the index in-process and saves it as the CLI's PREFIX.g3i, simulates the pairs (gpu_check's
reference_and_reads), warms the numba and CuPy kernel caches with one small CLI run, then times fresh
`g3align mem --device gpu` processes (SAM to a file, as `> out.sam`) beside `bwa mem -t N` on the same
FASTQ, in this order: bwa PE, g3align PE, g3align PE per variant (G3ALIGN_TUNE), g3align PE again, g3align
SE (with 'se:' variants: SE per such variant, SE again), bwa SE. Every g3align run records G3ALIGN_TRACE:
the start-up steps (imports, CUDA, index load, index to the GPU), the kernel-module loads and every stage lap,
drawn as a timeline per run (OUT/cli_trace_*.txt).
Checks each g3align SAM body against the first PE / SE run's (variants must not change the output) and
against bwa's. Writes OUT/cli_profile.md.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_check import body, gantt, reference_and_reads  # noqa: E402

from g3align.index.store import save_index  # noqa: E402


def log(*a):
    print(*a, flush=True)


def variant_env(v: str) -> dict:
    """A variant's environment: 'env:NAME=VALUE[,NAME=VALUE]' sets those variables, anything else is a
    G3ALIGN_TUNE value."""
    if v.startswith("env:"):
        return dict(kv.split("=", 1) for kv in v[4:].split(","))
    return {"G3ALIGN_TUNE": v}


def run_cli(args, out_path, env_extra, trace_path, py_spy=None, spy_out=None, gil=False):
    env = dict(os.environ, G3ALIGN_TRACE=trace_path)
    env.update(env_extra)  # a variant may set G3ALIGN_TRACE too ('env:G3ALIGN_TRACE=': untraced)
    cmd = [sys.executable, "-m", "g3align.aligner.cli", "mem", *args]
    if py_spy:
        # all-thread run: --native, CuPy's, the CUDA driver's and the interpreter's frames too (a GPU wait, a GIL
        # wait; py-spy then pauses the process for each sample: 100 a second); the --gil run samples only the GIL's
        # holder, without pausing it
        mode = ["--gil", "--nonblocking", "-r", "200"] if gil else ["--native", "-r", "100"]
        cmd = [py_spy, "record", "--threads", "-f", "raw", "-o", spy_out, *mode, "--"] + cmd
    smi = None
    if shutil.which("nvidia-smi"):  # the GPU's busy share every 50 ms beside the run (gpu_busy_row)
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,utilization.gpu", "--format=csv,noheader,nounits",
                                "-lms", "50"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    t, ru = time.time(), cpu_children()
    with open(out_path, "wb") as fh:
        p = subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE, env=env)
    t_end = time.time()
    wall = t_end - t
    CPU[out_path] = cpu_children() - ru
    err = p.stderr.decode()
    leave = [ln.split() for ln in err.splitlines() if ln.startswith("[trace] leaving at ")]
    if leave:  # the CLI's last line before os._exit: what the kernel's teardown of the process took after it
        EXIT[out_path] = t_end - float(leave[-1][3].rstrip(";"))
        if "cpu" in leave[-1]:  # the CLI's own CPU seconds: a detached worker (cli._detach) is not reaped here
            CPU[out_path] = max(CPU[out_path], float(leave[-1][leave[-1].index("cpu") + 1]))
    if smi is not None:
        smi.terminate()
        GPU_UTIL[out_path] = (t, smi.communicate()[0])
    if p.returncode:
        log(err[-3000:])
        raise SystemExit(f"g3align failed: {cmd}")
    return wall, err


WALLS: dict = {}  # (mode, setting) -> wall times of its runs
EXIT: dict = {}  # output path -> seconds from the CLI's last line to its exit (the parent's, when detached)
CPU: dict = {}  # output path -> the run's user + sys CPU seconds
GPU_UTIL: dict = {}  # output path -> (run start, nvidia-smi's "timestamp, utilization %" lines)


def gpu_busy_row(start: float, text: str, step: float = 0.1, t_end: float = 0.0) -> str:
    """nvidia-smi's utilization samples (percent of the last period with a kernel running) as a timeline row of
    tenths (0-9, '*' for 100 %) per `step` column from the run's start (sub-second wall clock of the samples)."""
    import datetime
    pts = []
    for ln in text.splitlines():
        ts, _, u = ln.partition(",")
        try:
            pts.append((datetime.datetime.strptime(ts.strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp() - start,
                        float(u)))
        except ValueError:
            continue
    ncol = int(max([t_end] + [x for x, _ in pts]) / step) + 1
    cols: list = [[] for _ in range(ncol)]
    for x, u in pts:
        if x >= 0:
            cols[int(x / step)].append(u)
    cells = "".join("." if not c else ("*" if sum(c) / len(c) >= 99.5 else str(int(sum(c) / len(c) // 10)))
                    for c in cols)
    return f"{'GPU busy (nvidia-smi, tenths)':<48} |{cells}|"


def cpu_children() -> float:
    """User + system CPU seconds of the waited-for children so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def summary(trace):
    """Start-up steps, module loads, first stage lap and last event end, from one G3ALIGN_TRACE file."""
    ev = json.load(open(trace))
    steps = [(s, b - a) for s, th, a, b in ev if s.startswith("start-up")]
    mods = sum(b - a for s, th, a, b in ev if s.startswith("module "))
    laps = [e for e in ev if not e[0].startswith(("start-up", "module "))]
    first = min((a for _, _, a, _ in laps), default=float("nan"))
    last = max((b for _, _, _, b in laps), default=float("nan"))
    return ev, steps, mods, first, last


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fasta", required=True)
    ap.add_argument("--pairs", type=int, default=1000000)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--out", default=".")
    ap.add_argument("--bwa", default=None)
    ap.add_argument("--py-spy", default=None)
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--variants", default="",
                    help="';'-separated G3ALIGN_TUNE values, one PE run each ('se:VALUE': one SE run; "
                         "'env:NAME=VALUE,...': environment variables instead)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="the default and variant runs this many times, interleaved (medians reported)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = "/tmp/g3work"
    bwa_idx = []

    def start_bwa_index(fa):
        if a.bwa:
            bwa_idx.append(subprocess.Popen([a.bwa, "index", fa], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL))
    fa, ref, fm, f1, f2, dt = reference_and_reads(a.fasta, a.pairs, work, start_bwa_index)
    prefix = os.path.join(work, "cli_idx")
    save_index(prefix, ref, fm)
    del ref, fm
    rows = [("FM-index build (chr20, in-process)", f"{dt:.1f} s", "")]
    # warm-up: numba's on-disk cache and CuPy's kernel cache filled by one small run (not timed)
    w1, w2 = os.path.join(work, "w1.fq"), os.path.join(work, "w2.fq")
    for src, dst in ((f1, w1), (f2, w2)):
        with open(src, "rb") as fi, open(dst, "wb") as fo:
            fo.writelines(fi.readline() for _ in range(4 * 20000))
    th = ["-t", str(a.threads), "--device", a.device]
    t = time.time()
    run_cli([*th, prefix, w1, w2], os.path.join(work, "w.sam"), {}, os.path.join(work, "w.json"))
    run_cli([*th, prefix, w1], os.path.join(work, "w.sam"), {}, os.path.join(work, "w.json"))
    for v in filter(None, a.variants.split(";")):  # each variant once: code it alone calls is compiled here
        se = v.startswith("se:")
        run_cli([*th, prefix, w1, *([] if se else [w2])], os.path.join(work, "w.sam"),
                variant_env(v[3:] if se else v), os.path.join(work, "w.json"))
    rows.append(("warm-up CLI runs (20k pairs PE + SE, each variant; compiles caches)", f"{time.time() - t:.1f} s", ""))
    if bwa_idx:
        bwa_idx[0].wait()
    bwa = {}

    def run_bwa(mode, files):
        out = os.path.join(work, f"bwa_{mode}.sam")
        os.sync()  # as before every timed run: no earlier run's dirty pages written back during this one
        t, ru = time.time(), cpu_children()
        with open(out, "wb") as fh:
            subprocess.run([a.bwa, "mem", "-t", str(a.threads), fa, *files], stdout=fh, stderr=subprocess.DEVNULL,
                           check=True)
        bwa[mode] = time.time() - t
        rows.append((f"bwa mem -t {a.threads} {mode.upper()} (SAM to a file)", f"{bwa[mode]:.2f} s",
                     f"{a.pairs * len(files) / bwa[mode]:,.0f} reads/s; CPU {cpu_children() - ru:.1f} s"))
        return out

    gold = {}
    if a.bwa:
        gold["pe"] = run_bwa("pe", [f1, f2])
    first = {}
    # a variant 'se:NAME=VALUE' is a single-end run, the others paired-end
    vs = [(v[3:], "se") if v.startswith("se:") else (v, "pe") for v in filter(None, a.variants.split(";"))]

    def variants(mode, tag=""):
        return [(mode, v + tag, variant_env(v)) for v, m in vs if m == mode]

    def later_rounds(mode):  # A/B on a noisy box: the default and the variants again, interleaved
        return [run for r in range(2, a.repeat + 1)
                for run in [(mode, f"default (round {r})", {})] + variants(mode, f" (round {r})")]
    runs = [("pe", "default", {})] + variants("pe") + [("pe", "default (again)", {})] + later_rounds("pe")
    runs += [("se", "default", {})]
    if variants("se"):
        runs += variants("se") + [("se", "default (again)", {})] + later_rounds("se")
    if a.py_spy:
        # all threads' stacks, then only the thread holding the GIL (its samples' share of the run: how busy the
        # GIL is)
        # (not detached: py-spy samples the process it started)
        runs += [("pe", "default under py-spy", {"G3ALIGN_DETACH": "0"}),
                 ("pe", "default under py-spy --gil", {"G3ALIGN_DETACH": "0"})]
    for k, (mode, name, env) in enumerate(runs):
        files = [f1, f2] if mode == "pe" else [f1]
        out = os.path.join(work, f"g3_{k}.sam")
        tr = os.path.join(a.out, f"cli_trace_{k}.json")
        spy = os.path.join(a.out, f"cli_pyspy_{k}.txt") if "py-spy" in name else None
        # every timed run (bwa's too) starts with no dirty pages: each run writes ~0.7 GB of SAM, and earlier runs'
        # files were all kept; in two runs on 2026-11-26 without the sync the SAM writer ended 0.46 and 0.69 s after the
        # last pairing, against 0.06-0.15 s in the others
        os.sync()
        wall, err = run_cli([*th, prefix, *files], out, env, tr, a.py_spy if spy else None, spy, "--gil" in name)
        proc = [ln for ln in err.splitlines() if "[M::main] Processed" in ln]
        if env.get("G3ALIGN_TRACE") == "":  # an untraced run (variant 'env:G3ALIGN_TRACE='): its wall only
            ev, steps, mods, t_first, t_last, g = [], [], 0.0, float("nan"), float("nan"), "(not traced)"
            CPU[out] = float("nan")  # a detached worker's CPU time is in its trace line only
        else:
            ev, steps, mods, t_first, t_last = summary(tr)
            from trace_timeline import cpu_lines
            g = gantt([tuple(e) for e in ev], 0.0, max(e[3] for e in ev))
            rows_cpu = cpu_lines(tr, 0.1)  # cores per thread group (the CLI's CPU sampler)
            if rows_cpu:
                g += "\ncores per thread group (CPU s in all), x0.1 s\n" + "\n".join(rows_cpu)
            if out in GPU_UTIL:
                g += "\n" + gpu_busy_row(*GPU_UTIL[out], 0.1, t_last)
            if os.path.exists(tr + ".kernels"):  # G3ALIGN_KTIME=1: GPU time of each kernel (CUDA events)
                kt = json.load(open(tr + ".kernels"))
                g += "\nkernel GPU time (CUDA events around each launch): " + "; ".join(
                    f"{k} {v[1]:.0f} ms / {v[0]}" for k, v in sorted(kt.items(), key=lambda x: -x[1][1]))
                g += f"; all {sum(v[1] for v in kt.values()):.0f} ms"
        open(os.path.join(a.out, f"cli_trace_{k}.txt"), "w").write(f"{mode} {name}\n{g}\n")
        log(f"== {mode} {name}: wall {wall:.2f} s; {proc}\n{g}")
        with open(out, "rb") as fh:  # py-spy writes its own "py-spy> ..." lines to the same stdout
            sam = [ln for ln in body(fh.read()) if not ln.startswith(b"py-spy>")]
        same = ""
        if mode in first:
            same = "SAM identical to the first run" if sam == first[mode] else "SAM DIFFERENT from the first run"
            os.remove(out)  # compared: only each mode's first SAM stays on disk
        else:
            first[mode] = sam
        n = a.pairs * len(files)
        ratio = f"; {bwa[mode] / wall:.2f}x bwa" if mode in bwa else ""
        rows.append((f"g3align mem CLI {mode.upper()} {name}: wall",
                     f"{wall:.2f} s", f"{n / wall:,.0f} reads/s{ratio}; CPU {CPU[out]:.1f} s; {same}"))
        WALLS.setdefault((mode, name.split(" (")[0]), []).append(wall)
        rows.append((f"  start-up steps ({', '.join(f'{s[10:]} {d:.2f}' for s, d in steps)}); module loads "
                     f"{mods:.2f} s; first stage lap at {t_first:.2f} s, last ends at {t_last:.2f} s"
                     + (f"; exit {EXIT[out]:.2f} s after the last line" if out in EXIT else ""), "", ""))
        if spy:
            from gpu_pe_profile import summarise
            md = "cli_pyspy_gil.md" if "--gil" in name else "cli_pyspy.md"
            open(os.path.join(a.out, md), "w").write(summarise(spy, wall, 200 if "--gil" in name else 100))
    if a.bwa:
        gold["se"] = run_bwa("se", [f1])
        for mode in ("pe", "se"):
            with open(gold[mode], "rb") as fh:
                theirs = body(fh.read())
            ident = sum(x == y for x, y in zip(first[mode], theirs))
            rows.append((f"records identical to bwa ({mode.upper()})", f"{ident}/{len(theirs)}",
                         f"{100.0 * ident / max(1, len(theirs)):.3f} %"))
    if a.repeat > 1:  # medians per setting over the interleaved rounds
        for (mode, name), ws in WALLS.items():
            med = statistics.median(ws)
            ratio = f"; {bwa[mode] / med:.2f}x bwa" if mode in bwa else ""
            rows.append((f"median {mode.upper()} {name} ({len(ws)} runs: {', '.join(f'{w:.2f}' for w in ws)})",
                         f"{med:.2f} s", ratio.lstrip("; ")))
    md = ["| measurement | value | rate |", "|---|---|---|"] + [f"| {x} | {y} | {z} |" for x, y, z in rows]
    open(os.path.join(a.out, "cli_profile.md"), "w").write("\n".join(md) + "\n")
    log("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
