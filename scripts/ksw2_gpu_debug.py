#!/usr/bin/env python3
"""Find ksw2 GPU jobs that hang or differ from the twin, each GPU run in a subprocess with a timeout.

  python scripts/ksw2_gpu_debug.py make OUT.npz            # here: cases of tests/test_ksw2_gpu + twin results
  python scripts/ksw2_gpu_debug.py run OUT.npz [--timeout S] [--max-leaves N]

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
    ez, cig, cig_off, n_cig = kg.extd2_batch_gpu(d["Q"], d["T"], jobs, d["P"])
    full_off = kg.cig_offsets(d["jobs"])
    bad = 0
    for k, j in enumerate(ids):
        want_c = d["cig"][full_off[j]:full_off[j] + d["n_cig"][j]]
        got_c = cig[cig_off[k]:cig_off[k] + n_cig[k]]
        if not (np.array_equal(ez[k], d["ez"][j]) and np.array_equal(got_c, want_c)):
            bad += 1
    sys.exit(3 if bad else 0)


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
            r = subprocess.run([sys.executable, __file__, "child", args.dump, f], timeout=t, capture_output=True,
                               text=True)
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
            print(f"  -> job {ids[0]}: {st}; qlen {j[1]} tlen {j[4]} w {j[6]} zdrop {j[7]} eb {j[8]} flag {j[9]} "
                  f"pset {list(d['P'][j[10]][:4])}", flush=True)
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
    r = sub.add_parser("run")
    r.add_argument("dump")
    r.add_argument("--timeout", type=float, default=25)
    r.add_argument("--max-leaves", type=int, default=4)
    a = ap.parse_args()
    cmds = {"make": lambda: make(a.dump), "child": lambda: child(a), "run": lambda: run(a)}
    cmds[a.cmd]()


if __name__ == "__main__":
    main()
