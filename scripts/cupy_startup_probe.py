"""What CuPy's start-up costs on the GPU box (issue 6): the import, the CUDA context with a first kernel, and which
array operation first imports cupyx.scipy.special (NumPy's ufunc override imports it), each in a fresh process.

  python scripts/cupy_startup_probe.py            # every operation, one subprocess each
"""
import subprocess
import sys

OPS = ["a * 2", "a // 3", "a - a", "-a", "cp.greater(a, 0)", "a > 0", "cp.where(m, a, 0)", "cp.cumsum(a)",
       "cp.argsort(a)", "cp.nonzero(m)", "int(a[-1])", "cp.asnumpy(a)", "import cupyx.scipy.special"]
CHILD = """
import sys, time
t0 = time.perf_counter()
import cupy as cp
t1 = time.perf_counter()
a = cp.arange(10, dtype=cp.int64)
m = cp.ones(10, dtype=cp.bool_)
cp.cuda.Device().synchronize()
t2 = time.perf_counter()
had = 'cupyx.scipy.special' in sys.modules
{op}
cp.cuda.Device().synchronize()
t3 = time.perf_counter()
print(f"{{t1 - t0:.3f}} {{t2 - t1:.3f}} {{t3 - t2:.3f}} {{had}} {{'cupyx.scipy.special' in sys.modules}}")
"""


def main():
    print("| operation | import cupy s | context + arrays s | operation s | special before | special after |")
    print("|---|---|---|---|---|---|")
    for op in OPS:
        r = subprocess.run([sys.executable, "-c", CHILD.format(op=op)], capture_output=True, text=True)
        cols = r.stdout.split() if r.returncode == 0 else ["error", r.stderr.strip().splitlines()[-1][:60], "", "", ""]
        print(f"| `{op}` | " + " | ".join(cols) + " |", flush=True)


if __name__ == "__main__":
    main()
