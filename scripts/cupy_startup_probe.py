"""What CuPy's start-up costs on the GPU box (issue 6): the import, the CUDA context with a first kernel, and the
first comparison operator on a CuPy array (NumPy's ufunc override, which imports cupyx the first time)."""
import sys
import time

t0 = time.perf_counter()
import cupy as cp  # noqa: E402

t1 = time.perf_counter()
a = cp.arange(10)
cp.cuda.Device().synchronize()
t2 = time.perf_counter()
b = cp.greater(a, 0)
cp.cuda.Device().synchronize()
t3 = time.perf_counter()
had = "cupyx" in sys.modules
b = a > 0
cp.cuda.Device().synchronize()
t4 = time.perf_counter()
b = a > 1
t5 = time.perf_counter()
print(f"import cupy {t1 - t0:.3f} s; context + first kernel {t2 - t1:.3f} s; first cp.greater {t3 - t2:.3f} s "
      f"(cupyx imported: {had}); first `>` {t4 - t3:.3f} s (cupyx imported: {'cupyx' in sys.modules}); "
      f"second `>` {t5 - t4:.4f} s")
