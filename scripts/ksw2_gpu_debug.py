#!/usr/bin/env python3
"""Find ksw2 GPU jobs that hang or differ from the twin, each GPU run in a subprocess with a timeout.

  python scripts/ksw2_gpu_debug.py make OUT.npz            # here: cases of tests/test_ksw2_gpu + twin results
  python scripts/ksw2_gpu_debug.py run OUT.npz [--timeout S] [--classes default|global] [--out DIR]

`run` launches extd2_batch_gpu on the whole batch; a batch that hangs (timeout), fails or differs is split in
halves until single jobs remain (at most --max-leaves reported). Prints one line per finding.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))


def make(path):
    from g3align.aligner import ksw2_gpu as kg
    from g3align.aligner.mm_types import KSW_EZ_GENERIC_SC
    from test_ksw2 import _load_vectors, parse_line, random_case
    from test_ksw2_gpu import d_cases, make_batch, want
    rng = np.random.default_rng(21)
    cases = d_cases([parse_line(inp) for inp, _ in _load_vectors()])
    while len(cases) < 700:
        c = random_case(rng, max_len=3000)
        if c[0] == "d" and not (c[1][7] & KSW_EZ_GENERIC_SC):
            cases.append(c)
    Q, T, jobs, P = make_batch(cases, rng)
    exp = want(cases)
    cig_off = kg.cig_offsets(jobs)
    ez = np.stack([e for e, _ in exp])
    n_cig = np.array([c.shape[0] for _, c in exp], np.int64)
    cig = np.zeros(int(cig_off[-1]), np.uint32)
    for k, (_, c) in enumerate(exp):
        cig[cig_off[k]:cig_off[k] + c.shape[0]] = c
    np.savez_compressed(path, Q=Q, T=T, jobs=jobs, P=P, ez=ez, n_cig=n_cig, cig=cig)
    print(f"{path}: {jobs.shape[0]} jobs")


def child(args):
    """Run the jobs `ids` of the dump on the GPU; exit 0 equal, 3 different."""
    from g3align.aligner import ksw2_gpu as kg
    d = np.load(args.dump)
    ids = np.load(args.ids)
    jobs = d["jobs"][ids]
    classes = () if args.classes == "global" else kg.SMEM_CLASSES
    defines = {k: 1 for k in args.defines.split(",") if k}
    ez, cig, cig_off, n_cig = kg.extd2_batch_gpu(d["Q"], d["T"], jobs, d["P"], classes=classes, defines=defines)
    full_off = kg.cig_offsets(d["jobs"])
    bad = 0
    for k, j in enumerate(ids):
        want_c = d["cig"][full_off[j]:full_off[j] + d["n_cig"][j]]
        got_c = cig[cig_off[k]:cig_off[k] + n_cig[k]]
        if not (np.array_equal(ez[k], d["ez"][j]) and np.array_equal(got_c, want_c)):
            bad += 1
    sys.exit(3 if bad else 0)


def scratch(args):
    """One launch over the jobs `ids` (comma list) from zeroed scratch, on the GPU (--host: the lock-step host
    build instead); saves scratch, ez, cig and n_cig to --out (to diff the two builds byte for byte)."""
    from g3align.aligner import ksw2_gpu as kg
    d = np.load(args.dump)
    ids = np.array([int(x) for x in args.ids.split(",")], np.int64)
    jobs = np.ascontiguousarray(d["jobs"][ids])
    (L,) = kg.launch_plan(jobs, kg.GRID)
    n = jobs.shape[0]
    cig_off = kg.cig_offsets(jobs)
    nw = L["n_warps"]
    if args.host:
        import ctypes
        import subprocess

        from test_ksw2_gpu import CU, SHIM
        src = os.path.join(tempfile.mkdtemp(), "s.cpp")
        open(src, "w").write(SHIM.replace("KERNEL_FILE", f'"{CU}"'))
        subprocess.run(["g++", "-O2", "-std=c++17", "-DKSW2_DIAG_TRACE", "-shared", "-fPIC", src, "-o", src + ".so"],
                       check=True)
        lib = ctypes.CDLL(src + ".so")
        sc = np.zeros(nw * L["warp_bytes"], np.uint8)
        ez = np.zeros((n, 10), np.int64)
        cig = np.zeros(int(cig_off[-1]), np.uint32)
        n_cig = np.zeros(n, np.int64)
        err = np.zeros(1, np.int32)
        ctr = np.zeros(1, np.uint64)
        P = np.ascontiguousarray(d["P"])
        Q, T = np.ascontiguousarray(d["Q"]), np.ascontiguousarray(d["T"])
        pp = lambda a: ctypes.c_void_p(a.ctypes.data)  # noqa: E731
        order = np.ascontiguousarray(L["order"])
        i64 = ctypes.c_int64
        tr = np.zeros(1 + 8 * 16, np.int64)
        lib.host_run(ctypes.c_longlong(nw), pp(Q), pp(T), pp(jobs), pp(order), i64(n), pp(P), ctypes.c_int(kg.GRID),
                     ctypes.c_int(L["sm_w"]), pp(sc), i64(L["warp_bytes"]), pp(ctr), pp(ez), pp(cig), pp(cig_off),
                     pp(n_cig), pp(err), pp(tr))
    else:
        import cupy as cp
        from g3align.kernels.loader import get_module
        kern = get_module("ksw2", {"KSW2_DIAG_TRACE": 1}).get_function("ksw_extd2_warp")
        trd = cp.zeros(1 + 8 * 16, cp.int64)
        scd = cp.zeros(nw * L["warp_bytes"], cp.uint8)
        ezd = cp.zeros((n, 10), cp.int64)
        cgd = cp.zeros(int(cig_off[-1]), cp.uint32)
        ncd = cp.zeros(n, cp.int64)
        errd = cp.zeros(1, cp.int32)
        ctr = cp.zeros(1, cp.uint64)
        smem = 4 * 11 * L["sm_w"]
        kern(((nw * 32 + 127) // 128,), (128,),
             (cp.asarray(d["Q"]), cp.asarray(d["T"]), cp.asarray(jobs), cp.asarray(L["order"]), np.int64(n),
              cp.asarray(d["P"]), np.int32(kg.GRID), np.int32(L["sm_w"]), scd, np.int64(L["warp_bytes"]),
              np.int64(nw), ctr, ezd, cgd, cp.asarray(cig_off), ncd, errd, trd), shared_mem=smem)
        cp.cuda.Device().synchronize()
        sc, ez, cig, n_cig, err, tr = (cp.asnumpy(x) for x in (scd, ezd, cgd, ncd, errd, trd))
    np.savez(args.out, scratch=sc, ez=ez, cig=cig, n_cig=n_cig, err=err, sm_w=L["sm_w"],
             warp_bytes=L["warp_bytes"], trace=tr[1:].reshape(8, 16))
    print(f"{args.out}: ez {ez.tolist()} n_cig {n_cig.tolist()} err {err.tolist()}")


def run(args):
    d = np.load(args.dump)
    n = d["jobs"].shape[0]
    found = []
    tmp = tempfile.mkdtemp()

    first = [True]

    def attempt(ids):
        f = os.path.join(tmp, "ids.npy")
        np.save(f, np.asarray(ids, np.int64))
        t = args.timeout * (4 if first[0] else 1)  # the first run compiles the module (NVRTC)
        first[0] = False
        try:
            r = subprocess.run([sys.executable, __file__, "child", args.dump, f, "--classes", args.classes],
                               timeout=t, capture_output=True, text=True)
        except subprocess.TimeoutExpired:
            return "hang"
        if r.returncode == 0:
            return "ok"
        if r.returncode == 3:
            return "differs"
        return "error: " + (r.stderr.strip().splitlines() or ["?"])[-1][:200]

    def bisect(ids, depth=0):
        if len(found) >= args.max_leaves:
            return
        st = attempt(ids)
        print(f"{'  ' * depth}{len(ids)} jobs [{ids[0]}..{ids[-1]}]: {st}", flush=True)
        if st == "ok":
            return
        if len(ids) == 1:
            j = d["jobs"][ids[0]]
            found.append((ids[0], st))
            from g3align.aligner import ksw2_gpu as kg
            g = kg.job_geometry(d["jobs"][ids[0]:ids[0] + 1])
            print(f"  -> job {ids[0]}: {st}; qlen {j[1]} tlen {j[4]} w {j[6]} zdrop {j[7]} eb {j[8]} flag {j[9]} "
                  f"pset {list(d['P'][j[10]][:4])} W {g['W'][0]} scratch {g['scratch'][0]}", flush=True)
            return
        h = len(ids) // 2
        bisect(ids[:h], depth + 1)
        bisect(ids[h:], depth + 1)

    bisect(list(range(n)))
    print(f"findings: {found}")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dump")
    c = sub.add_parser("child")
    c.add_argument("dump")
    c.add_argument("ids")
    c.add_argument("--classes", default="default")
    c.add_argument("--defines", default="")
    x = sub.add_parser("scratch")
    x.add_argument("dump")
    x.add_argument("ids")
    x.add_argument("out")
    x.add_argument("--host", action="store_true")
    r = sub.add_parser("run")
    r.add_argument("dump")
    r.add_argument("--timeout", type=float, default=25)
    r.add_argument("--classes", default="default")
    r.add_argument("--max-leaves", type=int, default=4)
    a = ap.parse_args()
    cmds = {"make": lambda: make(a.dump), "child": lambda: child(a), "run": lambda: run(a),
            "scratch": lambda: scratch(a)}
    cmds[a.cmd]()


if __name__ == "__main__":
    main()
