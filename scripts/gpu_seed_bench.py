#!/usr/bin/env python3
"""GPU seeding (issue 4) on the GPU box: GPU == CPU twin check and timings, one script.

  python scripts/gpu_seed_bench.py [--fasta .devdata/human_GRCh37_chr20.fa.gz] [--reads 1000000] [--out DIR]

Builds the FM-index of the FASTA (index/fm.py, pydivsufsort), simulates reads with numpy (uniform
positions on both strands, reference N kept as N, 0.2% substitutions, fixed seed), then:
  * collect_intv: CPU batch twin (numba prange, all cores) vs GPU (kernels/smem.cu), byte-for-byte
    comparison of every CSR array over all reads; timings: CPU twin, GPU kernel (CUDA events), GPU
    device-resident call (kernel + overflow re-runs + scan + compaction) and end-to-end (reads H2D,
    intervals D2H);
  * occurrence-block visits per read (instrumented build) and the achieved visit rate;
  * seed positions (make_seeds sampling, max_occ 500, rid filter): CPU twin vs GPU, equality + timings.
Writes OUT/gpu_seed_bench.json and OUT/gpu_seed_bench.md and prints the table last.
Box setup (no pip there): see docs/BENCHMARKS.md, its git history (the GPU seeding notes).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from g3align.aligner.mem.gpu import smem as sg
from g3align.aligner.mem.options import MemOpt
from g3align.index.fasta import read_fasta
from g3align.index.fm import build_fm

RES: dict = {}


def log(*a):
    print(*a, flush=True)


def simulate(pac, hole_off, hole_len, n, L, sub, seed):
    """n reads of length L: uniform start, strand 50/50, reference N runs as code 4, substitutions."""
    rng = np.random.default_rng(seed)
    ref = pac.copy()
    for o, ln in zip(hole_off, hole_len):
        ref[o:o + ln] = 4
    pos = rng.integers(0, len(ref) - L + 1, n)
    idx = pos[:, None] + np.arange(L)[None, :]
    r = ref[idx]
    rev = rng.random(n) < 0.5
    rr = r[rev, ::-1]
    r[rev] = np.where(rr < 4, 3 - rr, 4)
    m = (rng.random(r.shape) < sub) & (r < 4)
    r[m] = (r[m] + rng.integers(1, 4, int(m.sum()))) % 4
    seq = np.ascontiguousarray(r.reshape(-1), np.uint8)
    off = np.arange(n + 1, dtype=np.int64) * L
    return seq, off


def best(f, rep):
    ts = []
    out = None
    for _ in range(rep):
        t = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--fasta", default=".devdata/human_GRCh37_chr20.fa.gz")
    ap.add_argument("--reads", type=int, default=1_000_000)
    ap.add_argument("--len", type=int, default=150)
    ap.add_argument("--sub", type=float, default=0.002)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--rep", type=int, default=3)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args(argv)
    import cupy as cp
    import numba

    dev = cp.cuda.runtime.getDeviceProperties(0)
    RES["device"] = dev["name"].decode()
    RES["sm"] = dev["multiProcessorCount"]
    RES["numba_threads"] = numba.get_num_threads()
    RES["cupy"] = cp.__version__
    log(f"device {RES['device']} ({RES['sm']} SMs), numba threads {RES['numba_threads']}, cupy {cp.__version__}")

    t = time.perf_counter()
    ref = read_fasta(a.fasta)
    fm = build_fm(ref.pac, sa_intv=8)
    RES["index_build_s"] = time.perf_counter() - t
    RES["l_pac"] = int(ref.l_pac)
    log(f"index: l_pac {ref.l_pac}, n {fm.n}, built in {RES['index_build_s']:.1f} s")
    seq, seq_off = simulate(ref.pac, ref.hole_off, ref.hole_len, a.reads, a.len, a.sub, a.seed)
    n = a.reads
    RES["reads"] = n
    RES["read_len"] = a.len
    opt = MemOpt().to_numba()

    # --- warm-up (JIT / NVRTC) ---
    w = slice(0, 2001 * a.len)
    sg.collect_intv_batch_cpu(fm, seq[w], seq_off[:2001], opt)
    fd = sg.fm_to_device(fm)
    sg.collect_intv_batch_gpu(fd, seq[w], seq_off[:2001], opt)
    sg.collect_intv_batch_gpu(fd, seq[w], seq_off[:2001], opt, count_lookups=True)
    RES["gpu_index_bytes"] = int(fd.occ.nbytes + fd.sa.nbytes)

    # --- CPU twin ---
    t_cpu, want = best(lambda: sg.collect_intv_batch_cpu(fm, seq, seq_off, opt), max(1, a.rep - 1))
    RES["cpu_collect_s"] = t_cpu
    n_intv = int(want[4][-1])
    RES["intervals"] = n_intv
    log(f"CPU twin collect_intv: {t_cpu:.2f} s, {n / t_cpu:,.0f} reads/s, {n_intv} intervals")

    # --- GPU: device-resident and end-to-end ---
    seq_d, off_d = cp.asarray(seq), cp.asarray(seq_off)
    cp.cuda.Device().synchronize()
    rows = []
    for block in (64, 128, 256):
        st: dict = {}
        ts = []
        for _ in range(a.rep):
            cp.cuda.Device().synchronize()
            t = time.perf_counter()
            sg.collect_intv_batch_gpu(fd, seq_d, off_d, opt, block=block, stats=st)
            cp.cuda.Device().synchronize()
            ts.append(time.perf_counter() - t)
        rows.append((block, float(np.median(ts)), st["collect_kernel_ms"] / 1e3, st["rerun_reads"]))
        log(f"GPU block {block}: call {rows[-1][1] * 1e3:.1f} ms, first kernel {rows[-1][2] * 1e3:.1f} ms, "
            f"re-run reads {st['rerun_reads']}")
    block, t_gpu, t_kern, n_rerun = min(rows, key=lambda r: r[1])
    RES["gpu_block_rows"] = rows
    RES.update(gpu_block=block, gpu_call_s=t_gpu, gpu_kernel_s=t_kern, rerun_reads=n_rerun)

    def e2e():
        return sg.collect_intv_batch_gpu(fd, seq, seq_off, opt, block=block, to_host=True)

    t_e2e, got = best(e2e, a.rep)
    RES["gpu_e2e_s"] = t_e2e
    same = all(x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y) for x, y in zip(want, got))
    RES["collect_equal"] = bool(same)
    RES["collect_checked_reads"] = n
    log(f"GPU == CPU (all {n} reads, mb/me/mk/ms/off): {same}")
    if not same:
        for name, x, y in zip(("mb", "me", "mk", "ms", "off"), want, got):
            if x.shape != y.shape or not np.array_equal(x, y):
                log(f"  {name} differs: shapes {x.shape} {y.shape}")

    # --- occurrence-block visits ---
    st = {}
    sg.collect_intv_batch_gpu(fd, seq_d, off_d, opt, block=block, stats=st, count_lookups=True)
    look = st["occ_lookups"]
    RES["occ_lookups"] = look
    RES["lookups_per_read"] = look / n
    RES["lookup_rate_per_s"] = look / t_kern
    log(f"occurrence-block visits: {look / n:.0f} per read, {look / t_kern / 1e9:.2f} G/s in the kernel")

    # --- seed positions ---
    mb, me, mk, ms, off = want
    t_scpu, sw = best(lambda: sg.seed_pos_batch_cpu(fm, ref.offsets, mb, me, mk, ms, off, opt.max_occ),
                      max(1, a.rep - 1))
    dint = [cp.asarray(x) for x in want]
    cp.cuda.Device().synchronize()

    def sgpu():
        r = sg.seed_pos_batch_gpu(fd, ref.offsets, *dint, opt.max_occ)
        cp.cuda.Device().synchronize()
        return r

    sgpu()
    t_sgpu, _ = best(sgpu, a.rep)
    sgot = sg.seed_pos_batch_gpu(fd, ref.offsets, *dint, opt.max_occ, to_host=True)
    s_same = all(x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(sw, sgot))
    ug = sg.seed_pos_batch_gpu(fd, ref.offsets, *dint, opt.max_occ, filter_rid=False, to_host=True)
    uc = sg.seed_pos_batch_cpu(fm, ref.offsets, mb, me, mk, ms, off, opt.max_occ, filter_rid=False)
    s_same = s_same and all(np.array_equal(x, y) for x, y in zip(uc, ug))
    n_seeds = int(sw[4][-1])
    RES.update(seeds=n_seeds, seed_cpu_s=t_scpu, seed_gpu_s=t_sgpu, seed_equal=bool(s_same))
    log(f"seed positions: {n_seeds} seeds, CPU {t_scpu:.3f} s, GPU {t_sgpu * 1e3:.1f} ms, equal {s_same}")
    RES["gpu_pool_used_bytes"] = int(cp.get_default_memory_pool().total_bytes())

    # --- table ---
    ok = RES["collect_equal"] and RES["seed_equal"]
    lines = [
        f"device: {RES['device']}; reads: {n} x {a.len} bp (chr20, 0.2% subst.); CPU twin: numba, "
        f"{RES['numba_threads']} threads; GPU == CPU byte for byte: {'yes' if ok else 'NO'}",
        "",
        "| stage | time | reads/s | vs CPU twin |",
        "|---|---|---|---|",
        f"| collect_intv, CPU twin | {t_cpu:.2f} s | {n / t_cpu:,.0f} | 1.0x |",
        f"| collect_intv, GPU kernel (block {block}) | {t_kern * 1e3:.1f} ms | {n / t_kern:,.0f} | "
        f"{t_cpu / t_kern:.1f}x |",
        f"| collect_intv, GPU call, device-resident | {t_gpu * 1e3:.1f} ms | {n / t_gpu:,.0f} | {t_cpu / t_gpu:.1f}x |",
        f"| collect_intv, GPU end-to-end (H2D+D2H) | {t_e2e * 1e3:.1f} ms | {n / t_e2e:,.0f} | {t_cpu / t_e2e:.1f}x |",
        f"| seed positions ({n_seeds:,} seeds), CPU twin | {t_scpu:.3f} s | {n / t_scpu:,.0f} | 1.0x |",
        f"| seed positions, GPU (device-resident) | {t_sgpu * 1e3:.1f} ms | {n / t_sgpu:,.0f} | "
        f"{t_scpu / t_sgpu:.1f}x |",
        "",
        f"occurrence-block visits: {look / n:.0f} per read ({look:,} total), "
        f"{look / t_kern / 1e9:.2f} G visits/s in the kernel; intervals {n_intv:,}; "
        f"slot re-runs {n_rerun}; GPU index {RES['gpu_index_bytes'] / 2**20:.0f} MiB; "
        f"pool {RES['gpu_pool_used_bytes'] / 2**30:.2f} GiB",
    ]
    table = "\n".join(lines)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "gpu_seed_bench.json"), "w") as f:
        json.dump(RES, f, indent=1)
    with open(os.path.join(a.out, "gpu_seed_bench.md"), "w") as f:
        f.write(table + "\n")
    log("\n" + table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
