"""kernels/ksw2.cu (ksw_extd2 with a warp per job and gridded traceback) against its twin aligner/map/ksw2.py.

1. The kernel compiled as host C++ (kernels/warp.cuh's host build: a warp's 32 lanes in lock step, one
   warp after another) == ksw2.extd2 on every extd2 case of the stored minimap2 vectors (tests/data), the
   hand-picked shapes of test_ksw2 and random cases, for several traceback grids (1 anti-diagonal per block
   up to more than the whole matrix), with garbage in the scratch memory and jobs read through the
   reversed / complemented views of their buffers.
2. extd2_batch_cpu (the batch twin) == ksw2.extd2 per job.
   Every host test runs on the default build (four cells per lane), on the KSW2_SCALAR variant (one) and on
   KSW2_FUSED_S (scores made in the cell loop).
3. The kernel run by a warp of 32 real threads (kernels/warp.cuh's G3_THREAD_WARP build): every lane comes to
   every sync and shuffle from the same line (no branch that should be uniform is not), results == the twin.
4. nvcc: the file compiles for sm_90 without spills.
5. With CuPy and a GPU: extd2_batch_gpu == extd2_batch_cpu on the same cases, in one launch and in many
   (small scratch budget), and for the benchmark variants KSW2_SCALAR, KSW2_MIN_BLOCKS and KSW2_FUSED_S.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from test_ksw2 import _load_vectors, parse_line, random_case, tricky_cases

from g3align.aligner.map import ksw2
from g3align.aligner.map.gpu import ksw2 as kg
from g3align.aligner.map.types import KSW_EZ_GENERIC_SC

CU = Path(__file__).resolve().parent.parent / "kernels" / "ksw2.cu"

SHIM = r"""
#include <cstdint>
struct dim3h { unsigned x, y, z; };
static dim3h threadIdx, blockIdx, blockDim, gridDim;
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
static inline int atomicOr(int* p, int v) { int o = *p; *p |= v; return o; }
#include KERNEL_FILE
// one emulated warp after another (kernels/warp.cuh runs the 32 lanes of each in lock step)
extern "C" void host_run(long long n_warps, const u8* Q, const u8* T, const i64* jobs, const i64* geo,
    const i64* order, i64 n_job, const int* P, int G, u8* scratch, i64* ez, u32* cig, const i64* cig_off,
    i64* n_cig, int* err, i64* cells) {
  blockDim.x = 32; gridDim.x = (unsigned)n_warps;
  for (long long w = 0; w < n_warps; ++w) {
    blockIdx.x = (unsigned)w; threadIdx.x = 0;
    ksw_extd2_warp(Q, T, jobs, geo, order, n_job, P, G, scratch, ez, cig, cig_off, n_cig, err, cells);
  }
}
"""


@pytest.fixture(scope="module", params=[["-DKSW2_SCALAR"], [], ["-DKSW2_FUSED_S"], ["-DKSW2_IX64"]],
                ids=["scalar", "simd4", "fused_s", "ix64"])
def host(tmp_path_factory, request):
    """The host build of the kernel; simd4: the default (four cells per lane, byte-wise SIMD, 32-bit positions;
    the host build checks its arithmetic, not ptxas's code), scalar: the KSW2_SCALAR variant (one cell per lane),
    fused_s: KSW2_FUSED_S (scores made in the cell loop), ix64: KSW2_IX64 (64-bit positions)."""
    import shutil
    import subprocess
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    d = tmp_path_factory.mktemp("ksw2host")
    src = d / "shim.cpp"
    src.write_text(SHIM.replace("KERNEL_FILE", f'"{CU}"'))
    so = d / "libksw2host.so"
    r = subprocess.run(["g++", "-O2", "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wno-unknown-pragmas", *request.param,
                        str(src), "-o", str(so)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return ctypes.CDLL(str(so))


def _p(a):
    assert a.flags.c_contiguous
    return ctypes.c_void_p(a.ctypes.data)


def make_batch(cases, rng):
    """Cases (kind 'd', params, mat, q, t) -> (Q, T, jobs, P); each query / target is stored as is or
    through a reversed and/or complemented view, so that the job reads the original sequence."""
    bufs = {"q": [], "t": []}
    used = {"q": 0, "t": 0}
    fields = {"q": (kg.J_Q_OFF, kg.J_Q_LEN, kg.J_Q_MODE), "t": (kg.J_T_OFF, kg.J_T_LEN, kg.J_T_MODE)}
    rows, ps = [], []
    for k, (_, par, mat, q, t) in enumerate(cases):
        go, ge, go2, ge2, w, zd, eb, flag = par
        ps.append(kg.pset_row(go, ge, go2, ge2, np.asarray(mat, np.int8)))
        row = np.zeros(kg.J_NF, np.int64)
        for side, seq in (("q", q), ("t", t)):
            mode = int(rng.integers(0, 4))
            s = np.asarray(seq, np.uint8).copy()
            if mode & kg.MODE_COMP:  # stored complemented (N stays N): the job complements it back
                s = np.where(s < 4, 3 - s, 4).astype(np.uint8)
            if mode & kg.MODE_REV:
                s = s[::-1].copy()
            f_off, f_len, f_mode = fields[side]
            row[f_off], row[f_len], row[f_mode] = used[side], len(s), mode
            bufs[side].append(s)
            used[side] += len(s)
        row[kg.J_W], row[kg.J_ZDROP], row[kg.J_END_BONUS], row[kg.J_FLAG], row[kg.J_PSET] = w, zd, eb, flag, k
        rows.append(row)
    cat = lambda lst: np.concatenate(lst + [np.zeros(1, np.uint8)]).astype(np.uint8)  # noqa: E731
    return cat(bufs["q"]), cat(bufs["t"]), np.stack(rows), np.stack(ps)


def run_host(lib, Q, T, jobs, P, grid, rng, n_warps=None):
    n = jobs.shape[0]
    size, cw = kg.job_geometry(jobs, grid)
    geo = np.zeros((n, 3), np.int64)
    np.cumsum(size[:-1], out=geo[1:, 0])
    geo[:, 1:] = cw
    scratch = rng.integers(0, 256, max(16, int(size.sum())), dtype=np.uint8)  # garbage: the kernel initialises
    cig_off = kg.cig_offsets(jobs)
    ez = np.full((n, 10), -99, np.int64)
    cig = np.full(int(cig_off[-1]), 0xDEAD, np.uint32)
    n_cig = np.full(n, -1, np.int64)
    err = np.zeros(1, np.int32)
    order = rng.permutation(n).astype(np.int64)
    i64 = ctypes.c_int64
    lib.host_run(ctypes.c_longlong(n_warps or n), _p(Q), _p(T), _p(jobs), _p(geo), _p(order), i64(n), _p(P),
                 ctypes.c_int(grid), _p(scratch), _p(ez), _p(cig), _p(cig_off), _p(n_cig), _p(err), None)
    assert err[0] == 0
    return ez, cig, cig_off, n_cig


def want(cases):
    out = []
    for _, par, mat, q, t in cases:
        ez, c = ksw2.extd2(np.asarray(q, np.uint8), np.asarray(t, np.uint8), np.asarray(mat, np.int8), *par)
        out.append((ez, c))
    return out


def check(got, exp, cases):
    ez, cig, cig_off, n_cig = got
    bad = []
    for k, (e, c) in enumerate(exp):
        gc = cig[cig_off[k]:cig_off[k] + n_cig[k]]
        if not (np.array_equal(ez[k], e) and n_cig[k] == c.shape[0] and np.array_equal(gc, c)):
            bad.append(k)
    assert not bad, (f"{len(bad)} of {len(exp)} jobs differ; first: params {cases[bad[0]][1]} "
                     f"qlen {len(cases[bad[0]][3])} tlen {len(cases[bad[0]][4])}: ez {list(ez[bad[0]])} "
                     f"vs {list(exp[bad[0]][0])}")


def d_cases(lines):
    return [c for c in lines if c[0] == "d" and not (c[1][7] & KSW_EZ_GENERIC_SC)]


@pytest.fixture(scope="module")
def vector_cases():
    cases = d_cases([parse_line(inp) for inp, _ in _load_vectors()])
    assert len(cases) >= 300
    return cases


@pytest.mark.parametrize("grid", [64, 1, 7, 100000])
def test_host_kernel_stored_vectors(host, vector_cases, grid):
    rng = np.random.default_rng(grid)
    cases = vector_cases if grid == 64 else vector_cases[::3]
    check(run_host(host, *make_batch(cases, rng), grid, rng), want(cases), cases)


@pytest.mark.parametrize("grid", [64, 2, 16])
def test_host_kernel_tricky(host, grid):
    rng = np.random.default_rng(11)
    cases = d_cases(tricky_cases(rng))
    check(run_host(host, *make_batch(cases, rng), grid, rng), want(cases), cases)


@pytest.mark.parametrize("seed", range(3))
def test_host_kernel_random(host, seed):
    rng = np.random.default_rng(100 + seed)
    cases = []
    while len(cases) < 150:
        c = random_case(rng, max_len=700)
        if c[0] == "d" and not (c[1][7] & KSW_EZ_GENERIC_SC):
            cases.append(c)
    grid = int(rng.choice([3, 32, 64]))
    # fewer warps than jobs: each warp takes several (the kernel's grid-stride loop)
    check(run_host(host, *make_batch(cases, rng), grid, rng, n_warps=7), want(cases), cases)


def test_batch_twin(vector_cases):
    rng = np.random.default_rng(3)
    cases = vector_cases[::2]
    check(kg.extd2_batch_cpu(*make_batch(cases, rng)), want(cases), cases)


def test_geometry_bounds_hold_on_long_jobs(host):
    """Long pairs with narrow and wide bands (the widths job_geometry bounds are checked by the kernel)."""
    rng = np.random.default_rng(8)
    from test_ksw2 import _pair
    cases = []
    for n, w in [(1500, 30), (1200, 751), (900, -1), (2000, 5)]:
        q, t = _pair(rng, n)
        mat = [int(v) for v in ksw2.gen_simple_mat(5, 2, 4, 1)]
        for flag in (0x40 | 0x02 | 0x80, 0x08, 0, 0x40):
            cases.append(("d", [4, 2, 24, 1, w, 400, 10, flag], mat, q, t))
    check(run_host(host, *make_batch(cases, rng), 64, rng), want(cases), cases)


THREAD_SHIM = r"""
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
struct dim3h { unsigned x, y, z; };
static thread_local dim3h threadIdx;
static dim3h blockIdx, blockDim, gridDim;
static thread_local int g3_lane;
static long long g3_x[32];
static std::barrier<>* g3_bar;
static int g3_lines[32];
// every lane must reach each sync / shuffle from the same line; else report the lines and exit 17
static void g3_meet(int line) {
  g3_lines[g3_lane] = line;
  g3_bar->arrive_and_wait();
  for (int l = 1; l < 32; ++l)
    if (g3_lines[l] != g3_lines[0]) {
      if (g3_lane == 0) {
        std::fprintf(stderr, "warp divergence at lines:");
        for (int k = 0; k < 32; ++k) std::fprintf(stderr, " %d", g3_lines[k]);
        std::fprintf(stderr, "\n");
        std::fflush(stderr);
        std::_Exit(17);
      }
      break;
    }
  g3_bar->arrive_and_wait();
}
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
static inline int atomicOr(int* p, int v) { int o = *p; *p |= v; return o; }
#define G3_THREAD_WARP 1
#include KERNEL_FILE
extern "C" void host_run(long long n_warps, const u8* Q, const u8* T, const i64* jobs, const i64* geo,
    const i64* order, i64 n_job, const int* P, int G, u8* scratch, i64* ez, u32* cig, const i64* cig_off,
    i64* n_cig, int* err, i64* cells) {
  blockDim.x = 32; gridDim.x = (unsigned)n_warps;
  for (long long w = 0; w < n_warps; ++w) {
    blockIdx.x = (unsigned)w;
    std::barrier<> bar(32);
    g3_bar = &bar;
    std::vector<std::thread> th;
    for (int l = 0; l < 32; ++l)
      th.emplace_back([=]() {
        threadIdx.x = (unsigned)l;
        g3_lane = l;
        ksw_extd2_warp(Q, T, jobs, geo, order, n_job, P, G, scratch, ez, cig, cig_off, n_cig, err, cells);
      });
    for (auto& t : th) t.join();
  }
}
"""

_THREAD_CHILD = """
import ctypes, sys
import numpy as np
sys.path.insert(0, {tests!r})
import test_ksw2_gpu as t
from test_ksw2 import _load_vectors, parse_line
lib = ctypes.CDLL({so!r})
rng = np.random.default_rng(4)
cases = t.d_cases([parse_line(i) for i, _ in _load_vectors()])[::40]
t.check(t.run_host(lib, *t.make_batch(cases, rng), 16, rng, n_warps=3), t.want(cases), cases)
print(len(cases), "jobs equal")
"""


@pytest.mark.parametrize("flags", [["-DKSW2_SCALAR"], [], ["-DKSW2_FUSED_S"]], ids=["scalar", "simd4", "fused_s"])
def test_thread_warp_build_is_uniform_and_exact(tmp_path, flags):
    """The kernel run by 32 real threads per warp (a subprocess: a divergence ends it with exit 17)."""
    import shutil
    import subprocess
    import sys
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")
    src = tmp_path / "thread_shim.cpp"
    src.write_text(THREAD_SHIM.replace("KERNEL_FILE", f'"{CU}"'))
    so = tmp_path / "libksw2thread.so"
    r = subprocess.run(["g++", "-O1", "-std=c++20", "-pthread", "-shared", "-fPIC", "-Wall", "-Wno-unknown-pragmas",
                        *flags, str(src), "-o", str(so)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    child = _THREAD_CHILD.format(tests=str(Path(__file__).resolve().parent), so=str(so))
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "jobs equal" in r.stdout


@pytest.mark.parametrize("flags", [(), ("-DKSW2_SCALAR",), ("-DKSW2_FUSED_S",), ("-DKSW2_IX64",)],
                         ids=["default", "scalar", "fused_s", "ix64"])
def test_nvcc_compiles(nvcc_spill_free, flags):
    nvcc_spill_free(CU, ("ksw_extd2_warp",), flags)


def with_random_cases(vector_cases, rng, n):
    """The stored vectors plus n random extension jobs the GPU kernel takes (up to 3 kb)."""
    cases = list(vector_cases)
    while len(cases) < len(vector_cases) + n:
        c = random_case(rng, max_len=3000)
        if c[0] == "d" and not (c[1][7] & KSW_EZ_GENERIC_SC):
            cases.append(c)
    return cases


@pytest.mark.gpu
@pytest.mark.parametrize("budget,defines", [(2 << 30, None), (1 << 16, None), (2 << 30, {"KSW2_SCALAR": 1}),
                                            (2 << 30, {"KSW2_MIN_BLOCKS": 6}), (2 << 30, {"KSW2_FUSED_S": 1}),
                                            (2 << 30, {"KSW2_IX64": 1})])
def test_gpu_kernel_equals_twin(vector_cases, budget, defines):
    """The kernel (and its benchmark variants) == the twin, in one launch and in many."""
    rng = np.random.default_rng(21)
    cases = with_random_cases(vector_cases, rng, 300)
    batch = make_batch(cases, rng)
    got = kg.extd2_batch_gpu(*batch, scratch_bytes=budget, defines=defines)
    check(got, want(cases), cases)


@pytest.mark.gpu
@pytest.mark.parametrize("budget", [2 << 30, 1 << 16])
@pytest.mark.parametrize("gated", [False, True])
def test_gpu_packed_cigars_equal_twin(vector_cases, budget, gated):
    """compact=True (map's path): the CIGARs come back packed, in job order, with their offsets, and equal the
    twin's, in one launch and in many; with a gate (map's KSW2_AT_ONCE) held from the launches on, released at the
    end."""
    import threading
    rng = np.random.default_rng(22)
    cases = with_random_cases(vector_cases, rng, 200)
    batch = make_batch(cases, rng)
    lock = threading.Lock()
    extra = {"gate": lock} if gated else {}
    got = kg.extd2_batch_gpu(*batch, scratch_bytes=budget, compact=True, **extra)
    assert not lock.locked()
    ez, cig, cig_off, n_cig = got
    assert cig.shape[0] == int(n_cig.sum()) and np.array_equal(np.diff(cig_off), n_cig)
    check(got, want(cases), cases)


def test_default_builds_avoid_the_miscompiled_shape():
    """scripts/ptx_negminmax.py finds the PTX shape CUDA 13.0's ptxas miscompiled (a neg.s32 feeding two chained
    min/max, fused into one VIMNMX3 that dropped the negation) in the default (32-bit) build without its
    KSW2_OPAQUE barriers, and none in the builds g3align runs or benchmarks."""
    import shutil
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    from conftest import load_script
    mod = load_script("ptx_negminmax")
    for defines in (None, {"KSW2_SCALAR": 1}, {"KSW2_FUSED_S": 1}, {"KSW2_IX64": 1}):
        assert mod.candidates("ksw2", defines) == [], defines
    # the detector does find the shape: the 32-bit build without KSW2_OPAQUE's barriers (as in 932038d)
    src = CU.read_text()
    assert "#define KSW2_OPAQUE(v) asm" in src
    assert len(mod.candidates("ksw2", {"KSW2_NO_OPAQUE": 1})) >= 1  # (one in each H loop)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 5, 1023, 1024, 1025, 4097, 300_001])
def test_gpu_cig_offsets_equal_cumsum(n):
    """ksw_cig_offsets (the packed CIGARs' offsets, computed behind the launches) == its twin np.cumsum, for job
    counts below, at and above one run per thread of its block."""
    import cupy as cp

    from g3align.kernels.loader import get_module
    n_cig = np.random.default_rng(n).integers(0, 3000, n).astype(np.int64)
    out = cp.full(n + 1, -1, cp.int64)
    get_module("ksw2").get_function("ksw_cig_offsets")((1,), (1024,), (cp.asarray(n_cig), np.int64(n), out))
    want = np.zeros(n + 1, np.int64)
    np.cumsum(n_cig, out=want[1:])
    assert np.array_equal(cp.asnumpy(out), want)


def test_launch_plan_runs_and_offsets():
    """launch_plan: consecutive runs of the size order, each within the budget unless one job alone exceeds it,
    every job's offset the scratch of the jobs before it in its run."""
    rng = np.random.default_rng(5)
    size = rng.integers(16, 5000, 300).astype(np.int64) // 16 * 16
    size[7] = 50_000  # larger than the budget: alone in its launch
    order = np.argsort(-size, kind="stable").astype(np.int64)
    runs, offs = kg.launch_plan(size, order, 20_000)
    assert runs[0][:2] == (0, 1) and [r[1] for r in runs[:-1]] == [r[0] for r in runs[1:]] and runs[-1][1] == 300
    for start, end, nbytes in runs:
        ids = order[start:end]
        assert nbytes == int(size[ids].sum()) and (nbytes <= 20_000 or end - start == 1)
        assert np.array_equal(offs[ids], np.concatenate([[0], np.cumsum(size[ids])[:-1]]))
        if end < 300:  # the next job would not have fitted
            assert nbytes + int(size[order[end]]) > 20_000
