"""Throwaway device probe (session 22): numpy's import time on the box under OpenBLAS thread settings."""
import os, re, subprocess, sys, statistics
envs = [("default", {}), ("OB=1", {"OPENBLAS_NUM_THREADS": "1"}), ("OB=4", {"OPENBLAS_NUM_THREADS": "4"}),
        ("OMP=1", {"OMP_NUM_THREADS": "1"})]
res = {k: [] for k, _ in envs}
for r in range(5):
    for k, e in envs:
        env = dict(os.environ, **e)
        p = subprocess.run([sys.executable, "-X", "importtime", "-c", "import numpy"], env=env,
                           capture_output=True, text=True)
        for ln in p.stderr.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|\s*(\S+)$", ln)
            if m and m.group(3) == "numpy":
                res[k].append(int(m.group(2)) / 1000)
for k, v in res.items():
    print(f"numpy import ms {k:8s} median {statistics.median(v):7.1f}  {v}")
p = subprocess.run([sys.executable, "-X", "importtime", "-c", "import numpy"], capture_output=True, text=True)
rows = []
for ln in p.stderr.splitlines():
    m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)$", ln)
    if m:
        rows.append((int(m.group(1)), m.group(4)))
rows.sort(reverse=True)
print("top self us:", rows[:12])
print(subprocess.run([sys.executable, "-c", "import numpy; print(numpy.__version__, numpy.__file__); numpy.show_config()"],
                     capture_output=True, text=True).stdout[-1500:])
for k in ("py -c pass", "py -S -c pass"):
    ts = []
    import time
    for _ in range(5):
        t = time.perf_counter(); subprocess.run([sys.executable] + (["-S"] if "-S" in k else []) + ["-c", "pass"]); ts.append(time.perf_counter() - t)
    print(k, [round(x, 3) for x in ts])
