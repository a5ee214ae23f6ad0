#!/usr/bin/env python3
"""A G3ALIGN_TRACE file (`g3align map` or `mem`) as text: gpu_check.py's timeline (one row per thread and
stage), then per stage the summed time and the time at least one thread was in it (the union of its intervals:
the wall time the stage covered).

  python scripts/trace_timeline.py trace.json [--step 0.1]

The union per stage is what the summed stage times of G3ALIGN_STAGES cannot show: with several parts in flight,
e.g. "extension (ksw2 batch)" summed over parts may exceed the wall time in which any part was in it.
"""
import argparse
import json

from gpu_check import gantt  # scripts/gpu_check.py (this script's folder is on sys.path when run)


def union(iv):
    """Total length of the union of [a, b) intervals."""
    tot, end = 0.0, float("-inf")
    for a, b in sorted(iv):
        if b <= end:
            continue
        tot += b - max(a, end)
        end = b
    return tot


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--step", type=float, default=0.1, help="seconds per timeline column")
    args = ap.parse_args(argv)
    ev = json.load(open(args.trace))  # [stage, thread, t0, t1], seconds from the process start
    print(gantt(ev, 0.0, max((e[3] for e in ev), default=0.0), args.step))
    print()
    print(f"{'stage':<48} {'events':>6} {'sum s':>8} {'union s':>8}")
    by: dict = {}
    for s, _th, a, b in ev:
        by.setdefault(s, []).append((a, b))
    for s, iv in sorted(by.items(), key=lambda kv: min(a for a, _ in kv[1])):
        print(f"{s:<48} {len(iv):>6} {sum(b - a for a, b in iv):8.3f} {union(iv):8.3f}")


if __name__ == "__main__":
    main()
