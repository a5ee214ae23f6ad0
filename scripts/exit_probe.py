"""What leaving a CUDA process costs (GPU box): a child imports CuPy, takes DEV_GB of device memory and PIN_MB of
pinned host memory (CuPy's pools, as the aligners do), prints its clock and leaves with os._exit; the parent
times from that line to the child's reaping. With FREE=1 the child first frees the pinned pool itself (timed).

    python3 scripts/exit_probe.py [--out DIR]
"""
import argparse
import os
import subprocess
import sys
import time

CHILD = r"""
import os, sys, time
import cupy as cp
dev_gb, pin_mb, free, chunk_mb = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
keep = []
if dev_gb:
    d = cp.empty(int(dev_gb * (1 << 30)), cp.uint8); d.fill(1); keep.append(d)
import numpy as np
left = pin_mb
while left > 0:
    m = min(chunk_mb, left)
    h = np.frombuffer(cp.cuda.alloc_pinned_memory(m << 20), np.uint8, m << 20); h[::4096] = 1; keep.append(h)
    left -= m
cp.cuda.runtime.deviceSynchronize()
t = time.time()
if free:
    keep = [k for k in keep if not isinstance(k, np.ndarray)]
    cp.get_default_pinned_memory_pool().free_all_blocks()
tf = time.time() - t
print(repr((time.time(), tf)), flush=True)
os._exit(0)
"""


def one(dev_gb, pin_mb, free=0, chunk_mb=64):
    t0 = time.time()
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(dev_gb), str(pin_mb), str(free), str(chunk_mb)],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    p.wait()
    t_end = time.time()
    t_leave, t_free = eval(line)
    return t_end - t_leave, t_free, t_end - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    rows = ["| device GB | pinned MB (64-MB blocks) | free pinned first | exit s | free s | child wall s |",
            "|---|---|---|---|---|---|"]
    for dev, pin, free in [(0, 0, 0), (0, 0, 0), (4, 0, 0), (0, 512, 0), (0, 2048, 0), (0, 4096, 0),
                           (4, 2048, 0), (0, 2048, 1), (0, 4096, 1)]:
        ex, fr, wall = one(dev, pin, free)
        rows.append(f"| {dev} | {pin} | {free} | {ex:.3f} | {fr:.3f} | {wall:.2f} |")
        print(rows[-1], flush=True)
    with open(os.path.join(a.out, "exit_probe.md"), "w") as fh:
        fh.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
