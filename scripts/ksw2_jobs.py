#!/usr/bin/env python3
"""The ksw2 jobs of `g3align map`'s staged alignment, dumped and benchmarked (issue 6).

  python scripts/ksw2_jobs.py dump -x map-pb REF READS OUT.npz [--max-reads N]
  python scripts/ksw2_jobs.py bench OUT_DIR A.npz [B.npz ...] [--grids 16,32,64,128,256] [--reps 3]

dump: plans the base alignment of the reads as `g3align map -c` does (MapAligner.batch_jobs: seeds,
chains, regions, then every left extension / gap fill / right extension minimap2 would align) and saves
the code buffer Q, the reference T (only the windows the jobs read; elsewhere 4), the jobs and P.

bench (needs a GPU): for every dump, kernels/ksw2.cu at each traceback grid (CUDA events around the
launches, inputs already on the GPU, best of --reps) and the CPU twin (numba, all cores, one run);
checks that every GPU result equals the twin's; writes OUT_DIR/ksw2_bench.md (cells = DP cells the kernel
computed, widened bands and the traceback's recomputation included; GCUPS = cells / kernel time).
--variants 'default;KSW2_MIN_BLOCKS=6;...': the kernel compiled with each set of defines (':' between
several, as aligner/map/gpu/ksw2.py's parse_defines reads them), every variant at every grid; a variant with
KSW2_PROFILE=1 also gets a table of the share of cycles in each phase of the kernel. --no-twin: no CPU twin (no
numba compilation on a fresh box); the results are checked against the first variant's at the first grid
instead.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def dump(args):
    from g3align.aligner.io.reads import read_all
    from g3align.aligner.map import options as MO
    from g3align.aligner.map.gpu import ksw2 as KG
    from g3align.aligner.map.pipeline import MapAligner
    from g3align.index import mmidx
    opt, _, _ = MO.parse_map_args(["-cx", args.x, args.ref, args.reads])
    idx = mmidx.build_mm_index(mmidx.read_mm_ref(args.ref), opt.k, opt.w, opt.is_hpc, opt.bucket_bits)
    MO.update_mid_occ(opt, idx.cal_max_occ)
    al = MapAligner(idx, opt, device="cpu", batch_seed=True)
    b = read_all(args.reads, trim_readno=False)
    if args.max_reads and b.n > args.max_reads:
        b = b.slice(0, args.max_reads)
    Q, jobs, P = al.batch_jobs(b, os.cpu_count() or 1)
    ref = idx.ref.ref_seq
    T = np.full(ref.shape[0], 4, np.uint8)
    for o, n in zip(jobs[:, KG.J_T_OFF], jobs[:, KG.J_T_LEN]):
        T[o:o + n] = ref[o:o + n]
    np.savez_compressed(args.out, Q=np.asarray(Q, np.uint8), T=T, jobs=jobs, P=P,
                        name=f"{os.path.basename(args.reads)} ({args.x}, {b.n} reads)")
    print(f"{args.out}: {jobs.shape[0]} jobs, query bases {int(jobs[:, KG.J_Q_LEN].sum()):,}")


# the phases of kernels/ksw2.cu's KSW2_PROFILE counters (KP_INIT .. KP_TB_WALK)
PHASES = ["init", "checkpoints", "fwd score row", "fwd cells", "fwd max/Z-drop", "tb restore", "tb score row",
          "tb cells", "tb walk"]


def bench(args):
    import cupy as cp

    from g3align.aligner.map.gpu import ksw2 as KG
    from g3align.kernels.loader import get_module
    grids = [int(g) for g in args.grids.split(",")]
    variants = [v.strip() for v in args.variants.split(";") if v.strip()]
    ref = "first variant" if args.no_twin else "twin"
    rows = [f"| jobs | variant | grid | GPU ms | cells | GCUPS | == {ref} |", "|---|---|---|---|---|---|---|"]
    twin_rows = ["| jobs | CPU twin s (numba, all cores) | cells (forward) |", "|---|---|---|"]
    prof_rows = ["| jobs | variant | grid | " + " | ".join(PHASES) + " |", "|---|---|---|" + "---|" * len(PHASES)]
    get_module("ksw2")
    for path in args.dumps:
        d = np.load(path)
        Q, T, jobs, P, name = d["Q"], d["T"], d["jobs"], d["P"], str(d["name"])
        Qd, Td = cp.asarray(Q), cp.asarray(T)
        want, t_cpu = None, None
        if not args.no_twin:
            t = time.perf_counter()
            want = KG.extd2_batch_cpu(Q, T, jobs, P)
            t_cpu = time.perf_counter() - t
        for var in variants:
            defs = KG.parse_defines(var)
            KG.extd2_batch_gpu(Qd, Td, jobs[:64], P, defines=defs)  # warm-up (and the module's compilation)
            prof = None
            if defs and "KSW2_PROFILE" in defs:  # the kernel's per-phase cycle counters (ksw2.cu KP_*)
                mod = get_module("ksw2", defs)
                prof = cp.ndarray((len(PHASES),), cp.uint64, mod.get_global("ksw2_prof"))  # KP_N
            for g in grids:
                best = None
                for _ in range(args.reps):
                    if prof is not None:
                        prof[:] = 0
                    st = {}
                    e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                    e0.record()
                    got = KG.extd2_batch_gpu(Qd, Td, jobs, P, grid=g, to_host=False, stats=st, defines=defs)
                    e1.record()
                    e1.synchronize()
                    ms = cp.cuda.get_elapsed_time(e0, e1)
                    best = ms if best is None else min(best, ms)
                res = (cp.asnumpy(got[0]), cp.asnumpy(got[1]), got[2], cp.asnumpy(got[3]))
                if want is None:  # --no-twin: the first variant's first result is the reference
                    want = res
                same = _same(res, want, jobs.shape[0])
                cells = st["cells"]
                rows.append(f"| {name}: {jobs.shape[0]:,} | {var} | {g} | {best:.1f} | {cells:,} | "
                            f"{cells / best / 1e6:.1f} | {'yes' if same else 'NO'} |")
                print(rows[-1], flush=True)
                if prof is not None:
                    c = cp.asnumpy(prof).astype(np.float64)
                    prof_rows.append(f"| {name} | {var} | {g} | " +
                                     " | ".join(f"{100 * x / max(c.sum(), 1):.1f}" for x in c) + " |")
                    print(prof_rows[-1], flush=True)
        twin_rows.append(f"| {name} | {'not run' if t_cpu is None else f'{t_cpu:.2f}'} | |")
    parts = ["## ksw2 jobs: kernels/ksw2.cu vs the CPU twin", "", *rows, "", *twin_rows, ""]
    if len(prof_rows) > 2:
        parts += ["## share of the warps' cycles per phase (KSW2_PROFILE), %", "", *prof_rows, ""]
    out = "\n".join(parts)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "ksw2_bench.md"), "w") as fh:
        fh.write(out)
    print(out)


def _same(got, want, n: int) -> bool:
    ez, cig, cig_off, n_cig = got
    if not (np.array_equal(ez, want[0]) and np.array_equal(n_cig, want[3])):
        return False
    for k in range(n):
        o = cig_off[k]
        if not np.array_equal(cig[o:o + n_cig[k]], want[1][o:o + n_cig[k]]):
            return False
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("-x", required=True)
    d.add_argument("ref")
    d.add_argument("reads")
    d.add_argument("out")
    d.add_argument("--max-reads", type=int, default=0)
    b = sub.add_parser("bench")
    b.add_argument("out_dir")
    b.add_argument("dumps", nargs="+")
    b.add_argument("--grids", default="16,32,64,128,256")
    b.add_argument("--reps", type=int, default=3)
    b.add_argument("--variants", default="default",
                   help="';'-separated kernel defines, e.g. 'default;KSW2_MIN_BLOCKS=6'")
    b.add_argument("--no-twin", action="store_true", help="skip the CPU twin; check against the first variant")
    args = ap.parse_args(argv)
    dump(args) if args.cmd == "dump" else bench(args)


if __name__ == "__main__":
    sys.exit(main())
