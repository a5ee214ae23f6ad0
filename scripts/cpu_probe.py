#!/usr/bin/env python3
"""What kind of CPU a machine gives one thread and many: the same small loops here and on the GPU box, so
per-thread times of the CPU stages can be compared between machines (the 2-core VM vs the box).

Prints one line per probe (best of 5, seconds), then the machine's CPU quota and throttling counters:
  python scripts/cpu_probe.py [--threads 16]

- python: a pure-Python integer loop (the interpreter's speed: the pipeline's glue code)
- numba-int: a numba loop of integer mixing (core clock and pipeline)
- numba-alloc: a numba loop allocating and freeing small arrays (malloc + numba's reference counts, as the
  pairing/SAM kernels do per read)
- numba-rand: random reads from a 256 MB array (cache misses: the FM-index and reference lookups)
- copy: numpy copy of 512 MB (memory bandwidth)
Each numba probe runs once on 1 thread, then on --threads threads at once (nogil), to show scaling.
"""
from __future__ import annotations

import argparse
import os
import platform
import threading
import time

import numba as nb
import numpy as np


@nb.njit(nogil=True, cache=False)
def _mix(n):
    h = np.uint64(1469598103934665603)
    for i in range(n):
        h = (h ^ np.uint64(i)) * np.uint64(1099511628211)
        h ^= h >> np.uint64(29)
    return h


@nb.njit(nogil=True, cache=False)
def _alloc(n):
    s = 0
    for i in range(n):
        a = np.empty(8 + (i & 15), np.int64)
        a[0] = i
        b = a[:4]
        s += b[0]
    return s


@nb.njit(nogil=True, cache=False)
def _rand(arr, n, seed):
    x = np.uint64(seed)
    s = 0
    m = np.uint64(arr.shape[0] - 1)
    for _ in range(n):
        x = x * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
        s += arr[(x >> np.uint64(20)) & m]
    return s


def _py(n):
    s = 0
    for i in range(n):
        s = (s * 31 + i) & 0xFFFFFFFF
    return s


def best(fn, reps=5):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return min(t)


def threaded(fn, k):
    ths = [threading.Thread(target=fn) for _ in range(k)]
    t0 = time.perf_counter()
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    return time.perf_counter() - t0


def cgroup_lines():
    out = []
    for p in ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu.stat", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
              "/sys/fs/cgroup/cpu/cpu.stat"):
        try:
            with open(p) as fh:
                out.append(f"{p}: " + " | ".join(fh.read().split("\n")).strip(" |"))
        except OSError:
            pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name") and not model:
                    model = line.split(":", 1)[1].strip()
                if line.startswith("cpu MHz"):
                    model += f" @{float(line.split(':')[1]):.0f}MHz"
                    break
    except OSError:
        pass
    print(f"cpu: {model}; {os.cpu_count()} cpus; affinity {len(os.sched_getaffinity(0))}; {platform.python_version()}")
    arr = np.arange(1 << 25, dtype=np.int64)  # 256 MB
    n_mix, n_alloc, n_rand = 50_000_000, 3_000_000, 10_000_000
    _mix(10), _alloc(10), _rand(arr, 10, 1)
    rows = [("python", lambda: _py(3_000_000), None),
            ("numba-int", lambda: _mix(n_mix), lambda: _mix(n_mix)),
            ("numba-alloc", lambda: _alloc(n_alloc), lambda: _alloc(n_alloc)),
            ("numba-rand", lambda: _rand(arr, n_rand, 7), lambda: _rand(arr, n_rand, 7))]
    for name, fn, par in rows:
        one = best(fn)
        line = f"{name:12s} 1 thread {one:.4f} s"
        if par is not None and a.threads > 1:
            many = min(threaded(par, a.threads) for _ in range(3))
            line += f"; {a.threads} threads at once {many:.4f} s (x{one * a.threads / many:.2f} throughput)"
        print(line, flush=True)
    src = np.ones(1 << 26, np.int64)
    dst = np.empty_like(src)
    print(f"{'copy':12s} 512 MB {best(lambda: np.copyto(dst, src)):.4f} s")
    for line in cgroup_lines():
        print(line)


if __name__ == "__main__":
    main()
