#!/usr/bin/env python3
"""A G3ALIGN_TRACE file (`g3align map` or `mem`) as text: gpu_check.py's timeline (one row per thread and
stage), then per stage the summed time and the time at least one thread was in it (the union of its intervals:
the wall time the stage covered).

  python scripts/trace_timeline.py trace.json [--step 0.1]

With the trace's CPU samples beside it (trace.json.cpu, written by the CLI's G3ALIGN_TRACE), also the cores each
thread group used per column (0-9, then a-g for 10-16; a thread spinning on a GPU wait shows here, not in a lap).

The union per stage is what the summed stage times of G3ALIGN_STAGES cannot show: with several parts in flight,
e.g. "extension (ksw2 batch)" summed over parts may exceed the wall time in which any part was in it.
"""
import argparse
import json
import os
import re


def union(iv):
    """Total length of the union of [a, b) intervals."""
    tot, end = 0.0, float("-inf")
    for a, b in sorted(iv):
        if b <= end:
            continue
        tot += b - max(a, end)
        end = b
    return tot


def group(name: str) -> str:
    """Thread group of a thread name: pool workers and numbered stage threads together."""
    if name.startswith("tid-"):
        return "other (numba / CUDA / unnamed)"
    return re.sub(r"(_\d+)+$", "", re.sub(r"-\d+_\d+$", "", name))


def cpu_rows(samples, step: float, t_end: float):
    """Per thread group: cores used per `step` column and CPU seconds in all, from [t, {thread: cpu s}]."""
    ncol = int(t_end / step) + 1
    rows: dict = {}
    for (t0, r0), (t1, r1) in zip(samples, samples[1:]):
        for name, c in r1.items():
            d = c - r0.get(name, 0.0)
            if d <= 0:
                continue
            g = rows.setdefault(group(name), [0.0] * ncol)
            # spread the sample's CPU over the columns it covers
            c0, c1 = int(t0 / step), int(t1 / step)
            for col in range(c0, min(c1, ncol - 1) + 1):
                a, e = max(t0, col * step), min(t1, (col + 1) * step)
                if e > a:
                    g[col] += d * (e - a) / (t1 - t0)
    digits = "0123456789abcdefg"
    out = []
    for name, g in sorted(rows.items(), key=lambda kv: -sum(kv[1])):
        line = "".join(digits[min(16, int(round(x / step)))] if x > 0.005 else "." for x in g)
        out.append(f"{name[:40]:<40} {sum(g):6.2f} s |{line}|")
    return out


def cpu_lines(trace_path: str, step: float) -> list:
    """cpu_rows of the CPU samples beside a trace (TRACE.cpu), or [] when there are none."""
    if not os.path.exists(trace_path + ".cpu"):
        return []
    samples = json.load(open(trace_path + ".cpu"))
    return cpu_rows(samples, step, samples[-1][0]) if len(samples) > 1 else []


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--step", type=float, default=0.1, help="seconds per timeline column")
    args = ap.parse_args(argv)
    from gpu_check import gantt  # scripts/gpu_check.py (this script's folder is on sys.path when run)
    ev = json.load(open(args.trace))  # [stage, thread, t0, t1], seconds from the process start
    print(gantt(ev, 0.0, max((e[3] for e in ev), default=0.0), args.step))
    print()
    print(f"{'stage':<48} {'events':>6} {'sum s':>8} {'union s':>8}")
    by: dict = {}
    for s, _th, a, b in ev:
        by.setdefault(s, []).append((a, b))
    for s, iv in sorted(by.items(), key=lambda kv: min(a for a, _ in kv[1])):
        print(f"{s:<48} {len(iv):>6} {sum(b - a for a, b in iv):8.3f} {union(iv):8.3f}")
    gpu = [(a, b) for s, _th, a, b in ev if s.startswith("gpu ")]  # G3ALIGN_KTIME's launches (loader)
    if gpu:
        print(f"{'any GPU kernel (G3ALIGN_KTIME launches)':<48} {len(gpu):>6} {sum(b - a for a, b in gpu):8.3f} "
              f"{union(gpu):8.3f}   first {min(a for a, _ in gpu):.3f} s, last {max(b for _, b in gpu):.3f} s")
    lines = cpu_lines(args.trace, args.step)
    if lines:
        print()
        print(f"{'cores per thread group (CPU s in all)':<49} |{'x' + str(args.step) + ' s'}")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
