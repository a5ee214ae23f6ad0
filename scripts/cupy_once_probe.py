#!/usr/bin/env python3
"""Probe of loader.cupy_compile_once on the GPU box: CuPy's compiler internals it relies on, where the NVRTC
version text is kept, and whether a fresh process reads it back (one elementwise kernel, twice).

  python scripts/cupy_once_probe.py
"""
from __future__ import annotations

import os
import subprocess
import sys
import time


def child():
    import cupy
    from cupy.cuda import compiler
    from g3align.kernels import loader
    calls = []
    pre = compiler._preprocess

    def counted(*a, **kw):
        calls.append(a[0] if a else kw.get("source"))
        return pre(*a, **kw)
    compiler._preprocess = counted
    loader.cupy_compile_once()
    t = time.perf_counter()
    x = cupy.arange(10, dtype=cupy.int64)
    cupy.cuda.runtime.deviceSynchronize()
    y = cupy.add(x, 7, dtype=cupy.int64)
    int(y[-1])
    print(f"  empty-program passes: {sum(c == '' for c in calls)}, first kernels {time.perf_counter() - t:.3f} s")


def main():
    if len(sys.argv) > 1:
        return child()
    import cupy
    from cupy.cuda import compiler
    print("cupy", cupy.__version__, "CUPY_CACHE_DIR", os.environ.get("CUPY_CACHE_DIR"))
    for k in ("_compile_module_with_cache", "_preprocess", "get_cache_dir", "_empty_file_preprocess_cache"):
        print(f"  compiler.{k}: {hasattr(compiler, k)}")
    from g3align.kernels.loader import cupy_cache_dir
    d = cupy_cache_dir(compiler)
    print("  cache dir", d, "writable", os.access(d, os.W_OK))
    for run in (1, 2):
        print(f"process {run}:")
        subprocess.run([sys.executable, __file__, "child"], check=False)
    print("  files:", [f for f in os.listdir(d) if f.startswith("g3align")])


if __name__ == "__main__":
    sys.exit(main())
