#!/usr/bin/env python3
"""A G3ALIGN_TRACE file (`g3align map` or `mem`) as text: every event in start order, then per stage the summed
time and the time at least one thread was in it (the union of its intervals: wall time the stage covered).

  python scripts/trace_timeline.py trace.json [--min-ms 5]

The union per stage is what the summed stage times of G3ALIGN_STAGES cannot show: with several parts in flight,
e.g. "extension (ksw2 batch)" summed over parts may exceed the wall time in which any part was in it.
"""
import argparse
import json


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
    ap.add_argument("--min-ms", type=float, default=5.0, help="leave out events shorter than this from the list")
    args = ap.parse_args(argv)
    ev = json.load(open(args.trace))
    print(f"{'start s':>8} {'end s':>8} {'ms':>8}  thread / stage")
    for s, th, a, b in sorted(ev, key=lambda e: e[2]):
        if (b - a) * 1000 >= args.min_ms:
            print(f"{a:8.3f} {b:8.3f} {1000 * (b - a):8.1f}  {th} / {s}")
    print()
    print(f"{'stage':<48} {'events':>6} {'sum s':>8} {'union s':>8}")
    by: dict = {}
    for s, th, a, b in ev:
        by.setdefault(s, []).append((a, b))
    for s, iv in sorted(by.items(), key=lambda kv: min(a for a, _ in kv[1])):
        print(f"{s:<48} {len(iv):>6} {sum(b - a for a, b in iv):8.3f} {union(iv):8.3f}")


if __name__ == "__main__":
    main()
