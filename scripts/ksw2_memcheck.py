"""kernels/ksw2.cu under compute-sanitizer (GPU box): the GPU test's job set (stored minimap2 vectors plus
random pairs up to 3 kbp), compiled with -lineinfo so that memcheck names the source line of a bad access.
Usage: compute-sanitizer --tool memcheck python3 scripts/ksw2_memcheck.py [vectors|random|all] [cubin=PATH]
       [-NVRTC-OPTION ...] [KEY=VAL ...] (KEY=VAL: compile-time defines of the kernel, e.g. KSW2_IX64=1)"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import test_ksw2_gpu as t  # noqa: E402
from test_ksw2 import _load_vectors, parse_line, random_case  # noqa: E402

from g3align.aligner.map.gpu import ksw2 as kg  # noqa: E402
from g3align.aligner.map.types import KSW_EZ_GENERIC_SC  # noqa: E402
from g3align.kernels import loader  # noqa: E402

args = sys.argv[1:]
which = args.pop(0) if args and args[0] in ("vectors", "random", "all") else "all"
cubin = args.pop(0)[len("cubin="):] if args and args[0].startswith("cubin=") else None  # a module built by nvcc
extra = tuple(a for a in args if a.startswith("-"))  # more NVRTC options (e.g. -G)
defines = kg.parse_defines(":".join(a for a in args if not a.startswith("-")))
_orig = loader.get_module
if cubin:
    import cupy
    loader.get_module = lambda name, defines=None, options=(): cupy.RawModule(path=cubin)
else:
    loader.get_module = lambda name, defines=None, options=("-std=c++17",): _orig(
        name, defines, options + ("-lineinfo",) + extra)
vc = t.d_cases([parse_line(i) for i, _ in _load_vectors()])
rng = np.random.default_rng(21)
cases = list(vc) if which in ("vectors", "all") else []
n_rand = 0
while which in ("random", "all") and n_rand < 300:
    c = random_case(rng, max_len=3000)
    if c[0] == "d" and not (c[1][7] & KSW_EZ_GENERIC_SC):
        cases.append(c)
        n_rand += 1
batch = t.make_batch(cases, rng)
ez, cig, cig_off, n_cig = kg.extd2_batch_gpu(*batch, defines=defines)
print(len(cases), "jobs ran", which, defines, "ez sum", int(ez.sum()), "cigar words", int(n_cig.sum()))
