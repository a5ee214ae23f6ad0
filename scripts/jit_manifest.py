"""Write g3align/jit_manifest.json: the compiled kernels each command needs, for `jit.precompile`.

Runs `g3align warmup`'s plan (its synthetic data, its runs, in its waves) with an empty cache and
G3ALIGN_JIT_RECORD set, one record file per run, and groups what the runs compiled by job: index, mem-se-DEV,
mem-pe-DEV, map-DEV, align-DEV. An entry's time is the longest it took in any run (its first compile: later runs
load it). The jobs of a device not run here (gpu on a machine without one) are kept from the existing manifest.

    python scripts/jit_manifest.py [--device cpu|gpu|auto] [-t THREADS] [-o g3align/jit_manifest.json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from g3align import jit
from g3align.aligner.cli import warmup_plan as warmup


def job_of(args: list[str]) -> str:
    cmd = args[0]
    if cmd == "index":
        return "index"
    dev = args[args.index("--device") + 1]
    if cmd == "mem":
        reads = [a for a in args[1:] if a.endswith((".fq", ".fq.gz"))]
        return f"mem-{'pe' if len(reads) == 2 else 'se'}-{dev}"
    return f"{cmd}-{dev}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    ap.add_argument("-t", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("-o", default=str(Path(jit.__file__).with_name("jit_manifest.json")))
    a = ap.parse_args()
    devices = warmup._devices(a.device)
    work = Path(tempfile.mkdtemp(prefix="g3align-manifest-"))
    p = warmup.make_data(work)
    cache = work / "cache"
    env = dict(os.environ, G3ALIGN_CACHE_DIR=str(cache), G3ALIGN_COMPILE_NOTE="0", G3ALIGN_PRECOMPILE="0",
               G3ALIGN_DETACH="0", CUPY_CACHE_DIR=str(cache / "cupy"), G3ALIGN_TUNE=warmup.run_tune(os.environ))
    runs = []

    def one(k_args):
        k, args = k_args
        rec = work / f"rec{k}.jsonl"
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", *args], cwd=work,
                           env=dict(env, G3ALIGN_JIT_RECORD=str(rec)), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise SystemExit(f"g3align {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-500:]}")
        print(f"{time.perf_counter() - t:6.1f} s  {job_of(args):12s} {' '.join(map(os.path.basename, args))}",
              file=sys.stderr, flush=True)
        return args, rec

    k = 0
    for wave in warmup.plan(p, devices):
        with ThreadPoolExecutor(max(1, a.t)) as ex:
            runs += list(ex.map(one, [(k + i, w) for i, w in enumerate(wave)]))
        k += len(wave)

    took, jobs = {}, {}
    for args, rec in runs:
        if not rec.exists():
            continue
        for line in rec.read_text().splitlines():
            e = json.loads(line)
            if "<locals>" in e.get("f", ""):
                continue
            key = jit.entry_key(e)
            took[key] = max(took.get(key, 0.0), e["s"])
            jobs.setdefault(job_of(args), {})[key] = e
    out = {}
    try:
        old = json.loads(Path(a.o).read_text()).get("jobs", {})
        out = {j: v for j, v in old.items() if not any(j.endswith(f"-{d}") for d in devices) and j != "index"}
    except (OSError, ValueError):
        pass
    for j, es in jobs.items():
        out[j] = sorted(({**e, "s": took[key]} for key, e in es.items()), key=lambda e: -e["s"])
    doc = {"about": "the kernels each g3align command compiles (scripts/jit_manifest.py; used by g3align.jit."
                    "precompile)", "jobs": dict(sorted(out.items()))}
    Path(a.o).write_text(json.dumps(doc, indent=0) + "\n")
    for j, es in sorted(out.items()):
        print(f"{j:12s} {len(es):4d} kernels, {sum(e['s'] for e in es):7.1f} s compiled one after another, "
              f"longest {es[0]['s'] if es else 0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
