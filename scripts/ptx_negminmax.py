"""List the PTX shapes that CUDA 13.0's ptxas (sm_90) miscompiled in kernels/ksw2.cu's 32-bit build: an arithmetic
negation (neg.s32) feeding a min/max whose result feeds another min/max of the same kind. ptxas fuses such a chain
into one three-input VIMNMX3 and, in the case found, dropped the negation (docs/BENCHMARKS.md's git history). The PTX
is right, so this only points at candidates: check their SASS on the GPU box (`nvdisasm -g` of a `-lineinfo`
cubin) or run the kernel under compute-sanitizer (scripts/ksw2_memcheck.py). Needs nvcc, no GPU.

  python scripts/ptx_negminmax.py [NAME[:DEFINE=VALUE:...] ...]   (default: every kernels/*.cu; defines written as
  in scripts/ksw2_jobs.py --variants, e.g. ksw2:KSW2_IX64=1:KSW2_FUSED_S=1)
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
import tempfile

from g3align.aligner.map.gpu.ksw2 import parse_defines
from g3align.kernels.loader import define_lines, kernel_source

_NEG = re.compile(r"\s*neg\.s32\s+(%r\d+),")
_MM = re.compile(r"\s*(max|min)\.s32\s+(%r\d+),\s*(%r\d+),\s*(%r\d+);")
_LOC = re.compile(r"\s*\.loc\s+1\s+(\d+)")
_FUNC = re.compile(r"\s*(\.visible\s+|\.weak\s+)?\.(entry|func)\b")


def candidates(name: str, defines: dict | None = None) -> list[tuple[int, str]]:
    """(source line, text) of every neg -> min/max -> min/max chain in kernels/<name>.cu's PTX."""
    src = define_lines(defines) + kernel_source(name)
    with tempfile.TemporaryDirectory() as d:
        cu, ptx = os.path.join(d, f"{name}.cu"), os.path.join(d, f"{name}.ptx")
        open(cu, "w").write(src)
        r = subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-lineinfo", "-std=c++17", cu, "-o", ptx],
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{name}: nvcc failed: {r.stderr[-500:]}")
        lines = open(ptx).read().splitlines()
    negs, loc, out = set(), 0, set()
    for i, ln in enumerate(lines):
        if _FUNC.match(ln):  # registers are per function: a new function's %r numbers are new registers
            negs = set()
            continue
        m = _LOC.match(ln)
        if m:
            loc = int(m.group(1))
            continue
        m = _NEG.match(ln)
        if m:
            negs.add(m.group(1))
            continue
        m = _MM.match(ln)
        if m and (m.group(3) in negs or m.group(4) in negs):
            nxt = re.compile(rf"\s*{m.group(1)}\.s32\s+%r\d+,.*{re.escape(m.group(2))}(?!\d)")
            if any(nxt.match(x) for x in lines[i + 1:i + 12]):
                out.add(loc)
    text = src.splitlines()
    return [(n, text[n - 1].strip() if 0 < n <= len(text) else "") for n in sorted(out)]


def main(argv: list[str]) -> int:
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels")
    specs = argv or [os.path.basename(f)[:-3] for f in sorted(glob.glob(os.path.join(here, "*.cu")))]
    for spec in specs:
        name, _, defs = spec.partition(":")
        c = candidates(name, parse_defines(defs))
        print(f"{spec}: {len(c)} candidate line(s)")
        for n, t in c:
            print(f"  line {n} (of the source with its defines and headers inlined): {t[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
