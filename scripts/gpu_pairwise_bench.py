#!/usr/bin/env python3
"""Pairwise DP engine on the GPU box: GPU == CPU checks (byte for byte) and timings, one script.

Writes $OUT/pairwise_bench.md (table), $OUT/pairwise_bench.json and prints the table last.
  python scripts/gpu_pairwise_bench.py [--quick] [--stages check,b150,b1k,b10k,b1m,cpu]
GCUPS = DP cells (sum of m*n) / kernel time (CUDA events around the launches; host encoding,
transfers and CIGAR compaction are in the `wall` column).  parasail is not installed on the box;
the CPU peer is this engine's numba twin on all cores.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback as tbmod

import numpy as np

from g3align.aligner.pairwise import engine as pw

ROWS: list[dict] = []
FAILS: list[str] = []
TIM: dict = {}                    # timings of the last run_gpu call


def log(*a):
    print(*a, flush=True)


def csr(lengths):
    off = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=off[1:])
    return off


def gen_pairs(rng, k, m, n, sub=0.05, pn=0.005):
    """k related pairs of lengths m, n (target = mutated query, padded / cut), codes 0..4."""
    q = rng.integers(0, 4, k * m, dtype=np.uint8)
    qq = q.reshape(k, m)
    if n <= m:
        t = qq[:, :n].copy()
    else:
        t = np.concatenate([qq, rng.integers(0, 4, (k, n - m), dtype=np.uint8)], axis=1)
    mut = rng.random(t.shape) < sub
    t[mut] = rng.integers(0, 4, int(mut.sum()), dtype=np.uint8)
    if pn:
        q[rng.random(q.size) < pn] = 4
        t[rng.random(t.shape) < pn] = 4
    return (q, csr(np.full(k, m))), (t.reshape(-1).copy(), csr(np.full(k, n)))


def gen_mixed(rng, k, lens):
    """Pairs of mixed lengths incl. warp/strip boundaries, N runs, homopolymers, identical pairs."""
    qs, ts = [], []
    for _ in range(k):
        m, n = int(rng.choice(lens)), int(rng.choice(lens))
        kind = rng.integers(0, 5)
        if kind == 0:
            q = rng.integers(0, 5, m).astype(np.uint8)
            t = rng.integers(0, 5, n).astype(np.uint8)
        elif kind == 1:
            q = np.full(m, rng.integers(0, 4), np.uint8)
            t = np.full(n, rng.integers(0, 4), np.uint8)
        else:
            q = rng.integers(0, 4, m).astype(np.uint8)
            t = np.resize(q, n) if m else rng.integers(0, 4, n).astype(np.uint8)
            if kind == 3:
                t = t.copy()
                mut = rng.random(n) < 0.08
                t[mut] = rng.integers(0, 5, int(mut.sum()))
                if n > 10:
                    a = int(rng.integers(0, n - 5))
                    t = np.concatenate([t[:a], t[a + int(rng.integers(1, 5)):]])
                    b = int(rng.integers(0, t.size))
                    ins = rng.integers(0, 4, int(rng.integers(1, 6))).astype(np.uint8)
                    t = np.concatenate([t[:b], ins, t[b:]])
        qs.append(q)
        ts.append(t)
    qc = np.concatenate(qs) if qs else np.zeros(0, np.uint8)
    tc = np.concatenate(ts) if ts else np.zeros(0, np.uint8)
    return (qc, csr([x.size for x in qs])), (tc, csr([x.size for x in ts]))


def same(a, b):
    return all(np.array_equal(getattr(a, f), getattr(b, f))
               for f in ("score", "q_end", "t_end", "q_start", "t_start", "cigar", "cigar_off"))


def subset(qt, idx):
    c, off = qt
    parts = [c[off[i]:off[i + 1]] for i in idx]
    return (np.concatenate(parts) if parts else np.zeros(0, np.uint8), csr([p.size for p in parts]))


def run_gpu(q, t, mode, tb=False, config=None, go=6, ge=1, band=None, width=32, config16=None, tim=None,
            match=1, mismatch=4):
    tim = {} if tim is None else tim
    TIM.clear()
    t0 = time.perf_counter()
    r = pw.align_pairs(q, t, mode=mode, match=match, mismatch=mismatch, gap_open=go, gap_extend=ge,
                       traceback=tb, band=band, device="gpu", config=config, timings=tim, width=width,
                       config16=config16)
    TIM.update(tim)
    return r, tim.get("kernel_s", float("nan")), time.perf_counter() - t0


def record(name, cells, npairs, ks, wall, **kw):
    row = dict(bench=name, pairs=npairs, cells=cells, kernel_s=ks, wall_s=wall,
               gcups=cells / ks / 1e9 if ks == ks and ks > 0 else float("nan"), **kw)
    ROWS.append(row)
    log(f"  {name:42s} pairs={npairs:>9d} kernel={ks:8.4f}s wall={wall:7.2f}s "
        f"GCUPS={row['gcups']:9.1f} {kw}")


def check(name, ok):
    log(f"  [{'ok' if ok else 'FAIL'}] {name}")
    if not ok:
        FAILS.append(name)


def stage_check(rng, quick):
    log("== GPU == CPU checks")
    lens = [0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 150, 255, 256,
            257, 383, 384, 385, 511, 512, 513, 700, 1000]
    q, t = gen_mixed(rng, 150, lens)
    configs = [None, (1, 16), (1, 8), (4, 8), (8, 8), (32, 8), (16, 4), (2, 3)]
    for mode in ("global", "semiglobal", "local"):
        for tb in (False, True):
            c = pw.align_pairs(q, t, mode=mode, traceback=tb, device="cpu")
            for cfg in configs:
                if tb and cfg and cfg[1] > 8:
                    continue
                g, _, _ = run_gpu(q, t, mode, tb, cfg)
                check(f"{mode} affine tb={tb} cfg={cfg}", same(c, g))
        for go, ge, band in ((0, 2, None), (6, 1, 40), (3, 2, 5)):
            qq, tt = q, t
            if band is not None:   # keep pairs the band allows
                m, n = np.diff(q[1]), np.diff(t[1])
                keep = np.flatnonzero(np.abs(m - n) <= band) if mode == "global" else (
                    np.flatnonzero(m <= n + band) if mode == "semiglobal" else np.arange(m.size))
                qq, tt = subset(q, keep), subset(t, keep)
            for tb in (False, True):
                c = pw.align_pairs(qq, tt, mode=mode, gap_open=go, gap_extend=ge, band=band,
                                   traceback=tb, device="cpu")
                for cfg in (None, (8, 8)):
                    g, _, _ = run_gpu(qq, tt, mode, tb, cfg, go, ge, band)
                    check(f"{mode} go={go} ge={ge} band={band} tb={tb} cfg={cfg}", same(c, g))
    # chained kernel (regime 3) on a medium pair, few and many warps, vs the CPU twin
    import cupy as cp
    for mode in ("global", "semiglobal", "local"):
        for (m, n) in ((3000, 2500), (1200, 4000)):
            (qc, qo), (tc, to) = gen_pairs(rng, 1, m, n, sub=0.1)
            c = pw.align_pairs((qc, qo), (tc, to), mode=mode, device="cpu")
            for mw in (1, 4, 8, 64):
                s, i, j = pw._chain_one(cp, cp.asarray(qc), 0, m, cp.asarray(tc), 0, n,
                                        pw.MODES[mode], 1, 4, 6, 1, -1, max_warps=mw)
                check(f"chain {mode} {m}x{n} warps<={mw}",
                      (s, i, j) == (int(c.score[0]), int(c.q_end[0]), int(c.t_end[0])))


def stage_check16(rng, quick):
    """16-bit packed path == CPU twin: mixed lengths, all modes x gap models, every 16-bit config;
    pairs that would overflow int16 must be sent to the 32-bit kernel and still be exact."""
    log("== 16-bit path: GPU == CPU checks")
    lens = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 150, 255, 256,
            257, 383, 384, 385, 511, 512, 513, 700, 1000, 2100]
    q, t = gen_mixed(rng, 400, lens)
    configs = [None, (1, 16), (1, 32), (2, 8), (4, 16), (16, 16), (32, 8)]
    for mode in ("global", "semiglobal", "local"):
        for go, ge, mt, mm in ((6, 1, 1, 4), (0, 2, 1, 4), (5, 2, 2, 3), (11, 1, 3, 7)):
            c = pw.align_pairs(q, t, mode=mode, match=mt, mismatch=mm, gap_open=go, gap_extend=ge, device="cpu")
            for cfg in (configs if (go, ge) == (6, 1) else [None, (8, 8)]):
                tim: dict = {}
                g, _, _ = run_gpu(q, t, mode, False, None, go, ge, None, "auto", cfg, tim, mt, mm)
                check(f"16bit {mode} {mt}/{mm}/{go}/{ge} cfg16={cfg} (16-bit pairs {tim.get('pairs16')})",
                      same(c, g) and tim.get("pairs16", 0) > 0)
    # overflow: identical 1200 bp pairs with match 30 (score 36000 > 32767) must go 32-bit and be exact;
    # match 25 (30000) fits and goes 16-bit
    qq = ["ACGT" * 300] * 5 + ["A" * 150] * 3
    for mt, want16 in ((30, False), (25, True)):
        for mode in ("global", "semiglobal", "local"):
            tim = {}
            g = pw.align_pairs(qq, qq, mode=mode, match=mt, mismatch=4, device="gpu", timings=tim)
            c = pw.align_pairs(qq, qq, mode=mode, match=mt, mismatch=4, device="cpu")
            exp16 = 8 if want16 else 3        # the 150 bp pairs (score 4500) always fit
            check(f"overflow switch {mode} match={mt}: 16-bit pairs {tim.get('pairs16')} (want {exp16}), "
                  f"scores {g.score[:1]}", same(c, g) and tim.get("pairs16") == exp16
                  and int(g.score[0]) == mt * 1200)


def stage_checkgrid16(rng):
    """Gridded traceback with the 16-bit forward pass (pw_batch16_ck) == CPU twin: lengths 257..2100
    (above pw_tb16), N runs, homopolymers, indels, all modes x 4 scorings, default and small grids;
    pairs beyond int16 (match 30, 1200 bp identical) must keep the 32-bit forward and stay exact."""
    log("== gridded traceback, 16-bit forward: GPU == CPU checks")
    lens = [257, 300, 319, 320, 321, 383, 384, 385, 500, 511, 512, 513, 777, 1000, 1500, 2100]
    q, t = gen_mixed(rng, 300, lens)
    for mode in ("global", "semiglobal", "local"):
        for go, ge, mt, mm in ((6, 1, 1, 4), (0, 2, 1, 4), (5, 2, 2, 3), (11, 1, 3, 7)):
            c = pw.align_pairs(q, t, mode=mode, match=mt, mismatch=mm, gap_open=go, gap_extend=ge,
                               traceback=True, device="cpu")
            for grid in (None, (64, 16)):
                tim: dict = {}
                g = pw.align_pairs(q, t, mode=mode, match=mt, mismatch=mm, gap_open=go, gap_extend=ge,
                                   traceback=True, device="gpu", timings=tim, grid=grid)
                check(f"grid16 {mode} {mt}/{mm}/{go}/{ge} grid={grid} (16-bit fwd pairs {tim.get('pairs16_grid')})",
                      same(c, g) and tim.get("pairs16_grid", 0) > 0)
    qq = ["ACGT" * 300] * 5 + ["ACGTTGCA" * 40] * 4
    for mt in (30, 25):
        for mode in ("global", "semiglobal", "local"):
            tim = {}
            g = pw.align_pairs(qq, qq, mode=mode, match=mt, mismatch=4, traceback=True, device="gpu", timings=tim)
            c = pw.align_pairs(qq, qq, mode=mode, match=mt, mismatch=4, traceback=True, device="cpu")
            exp16 = 4 if mt == 30 else 9
            check(f"grid16 overflow switch {mode} match={mt}: 16-bit fwd pairs {tim.get('pairs16_grid')} "
                  f"(want {exp16})", same(c, g) and tim.get("pairs16_grid") == exp16)


def stage_checktb16(rng):
    """pw_tb16 == CPU twin (scores, ends, starts, CIGARs): lengths 1..256 with N bases, all modes x 4
    scorings, at the default TB16_SMEM and with the cap raised to 64 KB (R up to 8, n up to 256)."""
    log("== pw_tb16: GPU == CPU checks (traceback)")
    lens = [1, 2, 7, 31, 32, 130, 150, 159, 160, 225, 250, 256]       # R = 1, 5, 8 (few NVRTC builds)
    q, t = gen_mixed(rng, 400, lens)
    old = pw.TB16_SMEM
    for cap in (old, 64 << 10):
        pw.TB16_SMEM = cap
        try:
            for mode in ("global", "semiglobal", "local"):
                for go, ge, mt, mm in ((6, 1, 1, 4), (0, 2, 1, 4), (5, 2, 2, 3), (11, 1, 3, 7)):
                    c = pw.align_pairs(q, t, mode=mode, match=mt, mismatch=mm, gap_open=go, gap_extend=ge,
                                       traceback=True, device="cpu")
                    tim: dict = {}
                    g, _, _ = run_gpu(q, t, mode, True, None, go, ge, None, "auto", None, tim, mt, mm)
                    check(f"tb16 cap={cap >> 10}K {mode} {mt}/{mm}/{go}/{ge} (16-bit pairs {tim.get('pairs16')})",
                          same(c, g) and tim.get("pairs16", 0) > 0)
        finally:
            pw.TB16_SMEM = old


def stage_tbcap(rng):
    """pw_tb16 (cap raised to 64 KB) against the gridded path at 200 and 250 bp: where to put TB16_SMEM."""
    log("== pw_tb16 vs gridded traceback above the TB16_SMEM cap")
    old = pw.TB16_SMEM
    for L in (200, 250):
        bench_fixed(rng, f"{L}bp", 2_000_000, L, L, [], [None], width=32, check_n=500, modes=("local", "global"))
        pw.TB16_SMEM = 64 << 10
        try:
            bench_fixed(rng, f"{L}bp cap64K", 2_000_000, L, L, [], [None], width="auto", check_n=500,
                        modes=("local", "global"))
        finally:
            pw.TB16_SMEM = old


def stage_proftb16(rng):
    """Where pw_tb16's time goes: clock64 cycles of the forward pass and of the walk per pair group
    (TBPROF build), resident warps per SM, and kernel GCUPS of the same run."""
    import cupy as cp

    from g3align.kernels.loader import get_module
    log("== pw_tb16 profile: forward vs walk cycles per group")
    old = pw.TB16_SMEM
    pw.TB16_SMEM = 64 << 10
    try:
        for L, k in ((150, 1_000_000), (200, 500_000), (250, 400_000)):
            q, t = gen_pairs(rng, k, L, L)
            for mode in ("local", "global"):
                prof: list = []
                tim: dict = {}
                pw.align_pairs(subset(q, range(1000)), subset(t, range(1000)), mode=mode, traceback=True,
                               device="gpu", timings={}, tb16_prof=[])
                t0 = time.perf_counter()
                pw.align_pairs(q, t, mode=mode, traceback=True, device="gpu", timings=tim, tb16_prof=prof)
                wall = time.perf_counter() - t0
                pr = np.concatenate(prof)
                r = int(pw.tb16_rows(L))
                f = get_module("pairwise", dict(pw._defines(pw.MODES[mode], 1, 4, 6, 1, -1, True, 32, r),
                                                TBPROF=1)).get_function("pw_tb16")
                smem = L * (32 * r + 4)
                try:
                    occ = cp.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(f.kernel.ptr, 32, smem)
                except Exception as e:
                    occ = repr(e)
                fw, wk = pr[:, 0].mean(), pr[:, 1].mean()
                record(f"prof tb16 {L}bp {mode}", k * L * L, k, tim.get("kernel_s", float("nan")), wall,
                       fwd_cycles=round(float(fw)), walk_cycles=round(float(wk)),
                       walk_frac=round(float(wk / (fw + wk)), 3), warps_per_sm=occ, smem=smem,
                       fwd_cyc_per_step=round(float(fw / (L + 31)), 1))
    finally:
        pw.TB16_SMEM = old


def sweep16(rng, name, k, m, n, configs, modes=("local",)):
    """Score-only 16-bit config sweep (GCUPS of every config, checked on a sample)."""
    q, t = gen_pairs(rng, k, m, n)
    idx = rng.choice(k, min(k, 1000), replace=False)
    qs, ts = subset(q, idx), subset(t, idx)
    best = {}
    for mode in modes:
        cpu = pw.align_pairs(qs, ts, mode=mode, device="cpu")
        for cfg in configs:
            try:
                run_gpu(qs, ts, mode, width="auto", config16=cfg)
                tim: dict = {}
                r, ks, wall = run_gpu(q, t, mode, width="auto", config16=cfg, tim=tim)
                ok = all(np.array_equal(getattr(r, f)[idx], getattr(cpu, f)) for f in ("score", "q_end", "t_end"))
                check(f"{name} {mode} 16bit cfg16={cfg} sample == CPU", ok and tim.get("pairs16") == k)
                record(f"{name} {mode} score16 cfg16={cfg}", k * m * n, k, ks, wall, check=ok)
                g = k * m * n / ks / 1e9
                if ok and g > best.get(mode, (0, None))[0]:
                    best[mode] = (g, cfg)
            except Exception as e:
                FAILS.append(f"{name} {mode} cfg16={cfg}: {e!r}")
                log(tbmod.format_exc())
    log(f"  best 16-bit configs {name}: {best}")
    return best


def sweep_grid(rng, name, k, m, n, grids, modes=("local",)):
    """Traceback timings: gridded (BH, GW) sweep and the full direction matrix, checked on a sample."""
    q, t = gen_pairs(rng, k, m, n)
    idx = rng.choice(k, min(k, 500), replace=False)
    qs, ts = subset(q, idx), subset(t, idx)
    for mode in modes:
        cpu = pw.align_pairs(qs, ts, mode=mode, traceback=True, device="cpu")
        for grid in grids:
            meth = "full" if grid == "full" else "grid"
            kw = dict(tb_method=meth, grid=None if grid == "full" else grid)
            try:
                pw.align_pairs(qs, ts, mode=mode, traceback=True, device="gpu", **kw)
                tim: dict = {}
                t0 = time.perf_counter()
                r = pw.align_pairs(q, t, mode=mode, traceback=True, device="gpu", timings=tim, **kw)
                wall = time.perf_counter() - t0
                sub = pw.PairwiseResult(r.score[idx], r.q_end[idx], r.t_end[idx], r.q_start[idx],
                                        r.t_start[idx], *_sub_cigar(r, idx), "gpu")
                ok = same(cpu, sub)
                check(f"{name} {mode} tb {meth} grid={grid} sample == CPU", ok)
                record(f"{name} {mode} tb-{meth} grid={grid}", k * m * n, k, tim["kernel_s"], wall, check=ok,
                       **{k_: round(v_, 4) for k_, v_ in tim.items() if k_.startswith("grid_")})
                del r
            except Exception as e:
                FAILS.append(f"{name} {mode} grid={grid}: {e!r}")
                log(tbmod.format_exc())


def stage_final(rng):
    """The issue's workloads with the defaults (width auto: 16-bit paths where they provably fit),
    score only and with traceback, every run checked on a sample against the CPU twin; one 1 Mbp pair
    score only (regime 3 through pw_chain_batch) and with traceback in linear space."""
    log("== headline workloads (defaults)")
    all3 = ("local", "global", "semiglobal")
    bench_fixed(rng, "150bp", 10_000_000, 150, 150, [None], [None], modes=all3, width="auto")
    bench_fixed(rng, "1kb", 1_000_000, 1000, 1000, [None], [None], modes=all3, check_n=300, width="auto")
    bench_fixed(rng, "10kb", 10_000, 10000, 10000, [None], [None], modes=("local", "global"), check_n=4,
                width="auto")
    L = 1_000_000
    (qc, qo), (tc, to) = gen_pairs(rng, 1, L, L, sub=0.05)
    tc = np.concatenate([tc[:300_000], tc[300_020:600_000], rng.integers(0, 4, 35).astype(np.uint8), tc[600_000:]])
    to = csr([tc.size])
    for mode in ("local", "global"):
        for tb in (False, True):
            try:
                tim: dict = {}
                t0 = time.perf_counter()
                r = pw.align_pairs((qc, qo), (tc, to), mode=mode, traceback=tb, device="gpu", timings=tim)
                wall = time.perf_counter() - t0
                extra = {}
                if tb:
                    bad = pw.check_cigars(r, qc, qo, tc, to, pw.MODES[mode], 1, 4, 6, 1)
                    check(f"1 pair {L} {mode} tb: CIGAR re-scores to the score ({r.score[0]})", int(bad[0]) == 0)
                    extra = dict(forward_s=tim.get("huge_forward_s"), tb_s=tim.get("huge_tb_s"),
                                 grid=tim.get("huge_grid"), ck_GB=tim.get("huge_ck_bytes", 0) / 1e9)
                record(f"1 pair {L}x{tc.size} {mode} {'tb (linear space)' if tb else 'score'}", L * tc.size, 1,
                       tim["kernel_s"], wall, score=int(r.score[0]), q_end=int(r.q_end[0]), t_end=int(r.t_end[0]),
                       **extra)
            except Exception as e:
                FAILS.append(f"final 1 Mbp {mode} tb={tb}: {e!r}")
                log(tbmod.format_exc())


def stage_lintb(rng, quick):
    """Linear-space traceback: CPU grid == CPU full (20 kb), GPU chained == CPU (30 kb), 1 Mbp timings."""
    import cupy as cp
    log("== linear-space traceback")
    f = ("score", "q_end", "t_end", "q_start", "t_start", "cigar", "cigar_off")
    (qc, qo), (tc, to) = gen_pairs(rng, 1, 20000, 20000, sub=0.05)
    t0 = time.perf_counter()
    full = pw.align_pairs((qc, qo), (tc, to), mode="local", traceback=True, device="cpu", grid="full")
    t1 = time.perf_counter()
    grid = pw.align_pairs((qc, qo), (tc, to), mode="local", traceback=True, device="cpu", grid=(256, 256))
    t2 = time.perf_counter()
    check(f"CPU 20kb local: grid (256,256) == full matrix CIGAR ({t1 - t0:.1f}s / {t2 - t1:.1f}s, "
          f"{grid.cigar.size} runs)", all(np.array_equal(getattr(full, x), getattr(grid, x)) for x in f))
    for mode in ("local", "global", "semiglobal"):
        (qc, qo), (tc, to) = gen_pairs(rng, 1, 30000, 31000, sub=0.08)
        c = pw.align_pairs((qc, qo), (tc, to), mode=mode, traceback=True, device="cpu")
        for g in (None, (512, 777)):
            s, i, j, a, b, cg = pw._chain_one_tb(cp, cp.asarray(qc), 0, qc.size, cp.asarray(tc), 0, tc.size,
                                                 pw.MODES[mode], 1, 4, 6, 1, -1, grid=g)
            check(f"chain tb 30k x 31k {mode} grid={g} == CPU",
                  (s, i, j, a, b) == (c.score[0], c.q_end[0], c.t_end[0], c.q_start[0], c.t_start[0])
                  and np.array_equal(cg, c.cigar))
    for L in ((200_000,) if quick else (200_000, 1_000_000)):
        (qc, qo), (tc, to) = gen_pairs(rng, 1, L, L, sub=0.05)
        if L >= 1_000_000:     # a few indels so that the path leaves the diagonal
            tc = np.concatenate([tc[:300_000], tc[300_020:600_000], rng.integers(0, 4, 35).astype(np.uint8),
                                 tc[600_000:]])
            to = csr([tc.size])
        for mode in ("local", "global"):
            try:
                tim: dict = {}
                t0 = time.perf_counter()
                r = pw.align_pairs((qc, qo), (tc, to), mode=mode, traceback=True, device="gpu", timings=tim)
                wall = time.perf_counter() - t0
                bad = pw.check_cigars(r, qc, qo, tc, to, pw.MODES[mode], 1, 4, 6, 1)
                check(f"1 pair {L} {mode} tb: CIGAR re-scores to the score ({r.score[0]}, {r.cigar.size} runs)",
                      int(bad[0]) == 0)
                record(f"1 pair {L}x{tc.size} {mode} tb (linear space)", L * tc.size, 1, tim["kernel_s"], wall,
                       forward_s=tim.get("huge_forward_s"), tb_s=tim.get("huge_tb_s"), grid=tim.get("huge_grid"),
                       ck_GB=tim.get("huge_ck_bytes", 0) / 1e9, score=int(r.score[0]), runs=int(r.cigar.size))
            except Exception as e:
                FAILS.append(f"huge tb {L} {mode}: {e!r}")
                log(tbmod.format_exc())


def bench_fixed(rng, name, k, m, n, configs, tb_configs, modes=("local",), check_n=2000, width=32):
    q, t = gen_pairs(rng, k, m, n)
    cells = k * m * n
    idx = rng.choice(k, min(k, check_n), replace=False)
    qs, ts = subset(q, idx), subset(t, idx)
    for mode in modes:
        cpu = {tb: pw.align_pairs(qs, ts, mode=mode, traceback=tb, device="cpu") for tb in (False, True)}
        for tb, cfgs in ((False, configs), (True, tb_configs)):
            for cfg in cfgs:
                try:
                    w = width
                    run_gpu(qs, ts, mode, tb, cfg, width=w)               # compile + warm up
                    r, ks, wall = run_gpu(q, t, mode, tb, cfg, width=w)
                    sub = pw.PairwiseResult(r.score[idx], r.q_end[idx], r.t_end[idx], r.q_start[idx],
                                            r.t_start[idx], *_sub_cigar(r, idx), "gpu")
                    ok = same(cpu[tb], sub)
                    check(f"{name} {mode} tb={tb} cfg={cfg} sample of {idx.size} == CPU", ok)
                    kind = ("tb16" if w != 32 else "tb") if tb else ("score16" if w != 32 else "score32")
                    record(f"{name} {mode} {kind} cfg={cfg}", cells, k, ks, wall, check=ok,
                           **{k_: round(v_, 4) for k_, v_ in TIM.items() if k_.startswith("grid_")})
                    del r
                except Exception as e:
                    FAILS.append(f"{name} {mode} tb={tb} cfg={cfg}: {e!r}")
                    log(tbmod.format_exc())


def _sub_cigar(r, idx):
    parts = [r.cigar[r.cigar_off[i]:r.cigar_off[i + 1]] for i in idx]
    return (np.concatenate(parts) if parts else np.zeros(0, np.uint32)), csr([p.size for p in parts])


def stage_huge(rng, quick):
    import cupy as cp
    log("== one huge pair (pw_chain)")
    for L in ((200_000,) if quick else (200_000, 1_000_000)):
        (qc, qo), (tc, to) = gen_pairs(rng, 1, L, L, sub=0.05)
        for mode in ("local", "global"):
            try:
                qd, td = cp.asarray(qc), cp.asarray(tc)
                pw._chain_one(cp, qd, 0, 1000, td, 0, 1000, pw.MODES[mode], 1, 4, 6, 1, -1)
                cp.cuda.Device().synchronize()
                ev0, ev1 = cp.cuda.Event(), cp.cuda.Event()
                t0 = time.perf_counter()
                ev0.record()
                s, i, j = pw._chain_one(cp, qd, 0, L, td, 0, L, pw.MODES[mode], 1, 4, 6, 1, -1)
                ev1.record()
                ev1.synchronize()
                ks = cp.cuda.get_elapsed_time(ev0, ev1) / 1e3
                record(f"1 pair {L}x{L} {mode} score", L * L, 1, ks, time.perf_counter() - t0,
                       score=s, q_end=i, t_end=j)
            except Exception as e:
                FAILS.append(f"huge {L} {mode}: {e!r}")
                log(tbmod.format_exc())
    # a 30k x 30k pair checked against the CPU twin
    (qc, qo), (tc, to) = gen_pairs(rng, 1, 30000, 30000, sub=0.05)
    c = pw.align_pairs((qc, qo), (tc, to), mode="local", device="cpu")
    s, i, j = pw._chain_one(cp, cp.asarray(qc), 0, 30000, cp.asarray(tc), 0, 30000, 2, 1, 4, 6, 1, -1)
    check("chain 30k x 30k local == CPU", (s, i, j) == (int(c.score[0]), int(c.q_end[0]), int(c.t_end[0])))


BLONG_LIMIT_S = 300               # blong watchdog: a stuck chained kernel cannot be interrupted from Python
BLONG_STEP = ["start"]            # what blong is doing, for the watchdog's message


def _cpu_ref(q, t, mode, band):
    """CPU twin (run in a worker process: blong's references are computed beside the GPU work)."""
    return pw.align_pairs(q, t, mode=mode, band=band, device="cpu")


def _pairs_of(rng, dims):
    """CSR pairs of lengths dims = [(m, n, sub)]: target = mutated query (gen_pairs), sub None: unrelated."""
    qs, ts = [], []
    for m, n, sub in dims:
        if sub is None:
            qs.append(rng.integers(0, 4, m, dtype=np.uint8))
            ts.append(rng.integers(0, 4, n, dtype=np.uint8))
        else:
            (q, _), (t, _) = gen_pairs(rng, 1, m, n, sub=sub)
            qs.append(q)
            ts.append(t)
    return (np.concatenate(qs), csr([x.size for x in qs])), (np.concatenate(ts), csr([x.size for x in ts]))


def _long_run(q, t, mode, route, tim=None, **kw):
    """Score-only align_pairs on the GPU; route False: the previous routes, True: pw_chain_batch."""
    tim = {} if tim is None else tim
    t0 = time.perf_counter()
    r = pw.align_pairs(q, t, mode=mode, device="gpu", timings=tim, chain_batch=route, **kw)
    return r, tim.get("kernel_s", float("nan")), time.perf_counter() - t0


def _cb_direct(cp, q, t, mode, tim=None, plist=None, **kw):
    """pw._chain_batch on the pairs plist (default: all) of (q, t) -> (score, q_end, t_end)."""
    (qc, qo), (tc, to) = q, t
    plist = np.arange(qo.size - 1) if plist is None else np.asarray(plist)
    return pw._chain_batch(cp, cp.asarray(qc), qo, cp.asarray(tc), to, plist, pw.MODES[mode], 1, 4, 6, 1, -1,
                           timings=tim, **kw)


def stage_long(rng, quick):
    """Regime 2, long pairs (pw_chain_batch).  (a) GPU == CPU twin on 7 pairs of 12-41 kb, all modes and a
    band, through align_pairs (automatic route) and _chain_batch, default launch and small W and group
    sizes (ring wrap-around, reader waits, interleaved and pair-major orders); the CPU references
    run in worker processes beside the GPU work.  (b) Score-only timings, previous routes vs
    pw_chain_batch (each also checked equal on every pair): 10k x 10 kb, 200 x 30 kb, 64 x 50 kb,
    16 x 100 kb, pair-count sweeps at 20 kb (32-bit batch) and 10 kb (16-bit batch) with the crossover
    in warps per SM (the unit of LONG_FILL32 / LONG_FILL16), 5 kb probes (LONG_MIN_M), launch variants of
    _chain_batch; traceback of few long pairs, gridded batch vs _chain_one_tb one at a time."""
    import threading

    log("== long pairs (regime 2: pw_chain_batch)")

    def watchdog():
        log(f"  blong watchdog: {BLONG_LIMIT_S}s exceeded during '{BLONG_STEP[0]}' (a chained kernel hangs?); "
            f"failures so far: {FAILS}")
        os._exit(3)
    wd = threading.Timer(BLONG_LIMIT_S, watchdog)
    wd.daemon = True
    wd.start()
    try:
        _stage_long(rng, quick)
    finally:
        wd.cancel()


def _stage_long(rng, quick):
    import concurrent.futures as cf
    import multiprocessing as mp

    import cupy as cp
    T0 = time.perf_counter()
    nsm = cp.cuda.Device().attributes["MultiProcessorCount"]
    log(f"  LONG_MIN_M={pw.LONG_MIN_M} LONG_FILL32={pw.LONG_FILL32} LONG_FILL16={pw.LONG_FILL16} "
        f"CHAIN_GROUP_DIV={pw.CHAIN_GROUP_DIV} SMs={nsm}")

    # (a) checks: GPU results now, compared when the CPU references are in (after the timings)
    dims = [(20000, 20500, 0.06), (18000, 21000, 0.08), (21500, 19000, 0.05), (16500, 16000, 0.1),
            (12000, 12500, None), (40000, 40960, 0.06), (36000, 39000, 0.08)]
    q, t = _pairs_of(rng, dims)
    jobs = [("global", None), ("semiglobal", None), ("local", None), ("global", 3000)]
    pool, futs = None, {}
    try:
        pool = cf.ProcessPoolExecutor(len(jobs), mp_context=mp.get_context("spawn"))
        futs = {j: pool.submit(_cpu_ref, q, t, *j) for j in jobs}
    except Exception as e:
        log(f"  no worker processes ({e!r}): CPU references inline, after the timings")
    gpu: dict = {}
    for mode, band in jobs:
        BLONG_STEP[0] = f"check {mode} band={band}"
        log(f"  GPU side of the checks: {mode} band={band}")
        try:
            tim: dict = {}
            gpu[(mode, band, "auto")] = (pw.align_pairs(q, t, mode=mode, band=band, device="gpu", timings=tim),
                                         tim.get("pairs_chain_batch", 0))
            if band is None:                     # small W: the five shorter pairs (346 items)
                for mw, grp in ((None, None), (None, 1), (12, 1), (8, 3), (4, 4)):
                    tim = {}
                    pl = np.arange(7 if mw is None else 5)
                    r = _cb_direct(cp, q, t, mode, tim, pl, max_warps=mw, group=grp)
                    gpu[(mode, band, f"_chain_batch pairs={pl.size} W={tim['chain_batch_W']} "
                                     f"group={tim['chain_batch_group']}")] = (r, pl)
        except Exception as e:
            FAILS.append(f"blong check {mode} band={band}: {e!r}")
            log(tbmod.format_exc())

    # (b) timings.  Compile and warm up every kernel they use on small pairs first: pw_chain_batch (whose
    # module pw_chain shares), the 32-bit lane-group batch kernel (400 x 30000 does not fit int16) and
    # the 16-bit one (1000 x 1000); an underfilled batch kernel takes as long on two long pairs as on all.
    BLONG_STEP[0] = "warm-up"
    for dims, route in (([(8192, 8192, 0.05)] * 2, True), ([(400, 30000, 0.05)] * 2, False),
                        ([(1000, 1000, 0.05)] * 2, False)):
        try:
            _long_run(*_pairs_of(rng, dims), "local", route)
        except Exception as e:
            FAILS.append(f"blong warm-up {dims[0]} route={route}: {e!r}")
            log(tbmod.format_exc())

    def both(name, q, t, mode="local"):
        """Previous routes vs pw_chain_batch on one workload."""
        k = q[1].size - 1
        m, n = np.diff(q[1]), np.diff(t[1])
        cells = int(np.dot(m, n))
        auto = pw.chain_batch_pairs(m, n, np.arange(k), nsm, 1, 4, 6, 1, -1).size
        res = {}
        for route in (False, True):
            label = "pw_chain_batch" if route else "previous route"
            BLONG_STEP[0] = f"{name} {label}"
            try:
                tim: dict = {}
                r, ks, wall = _long_run(q, t, mode, route, tim)
                res[route] = (r, ks)
                record(f"{name} {mode} {label}", cells, k, ks, wall, auto_to_chain=auto,
                       pairs16=tim.get("pairs16"), W=tim.get("chain_batch_W"), group=tim.get("chain_batch_group"))
            except Exception as e:
                FAILS.append(f"blong {name} {label}: {e!r}")
                log(tbmod.format_exc())
        if len(res) < 2:
            return None
        check(f"{name}: pw_chain_batch == previous route on all {k} pairs", same(res[False][0], res[True][0]))
        return cells, res[False][1], res[True][1], res[True][0]

    log("  -- fixed workloads (score only, local)")
    keep = {}
    for name, k, L in (("10kb", 2000 if quick else 10_000, 10_000), ("30kb", 200, 30_000), ("50kb", 64, 50_000),
                       ("100kb", 16, 100_000)):
        q2, t2 = gen_pairs(rng, k, L, L)
        r = both(f"{k} x {name}", q2, t2)
        if name == "50kb" and r:
            keep = dict(q=q2, t=t2, ref=r[3], cells=r[0])
        del q2, t2

    summary = []

    def sweep(name, L, counts, lanes):
        q2, t2 = gen_pairs(rng, max(counts), L, L)
        rows = []
        for c in counts:
            r = both(f"{c} x {name}", subset(q2, range(c)), subset(t2, range(c)))
            if r:
                rows.append((c, c * lanes / 32 / nsm, r[0] / r[1] / 1e9, r[0] / r[2] / 1e9))
        log(f"  {name} sweep: pairs, batch-kernel warps/SM, GCUPS previous route, GCUPS pw_chain_batch")
        for c, w, a, b in rows:
            log(f"    {c:6d} {w:6.2f} {a:8.1f} {b:8.1f}  {'chain' if b > a else 'batch'}")
        wins = [w for c, w, a, b in rows if b > a]
        loses = [w for c, w, a, b in rows if b <= a]
        line = (f"{name}: pw_chain_batch faster up to {max(wins) if wins else 'never'} warps/SM, "
                f"previous route from {min(loses) if loses else 'never (all counts)'}")
        summary.append(line)
        log("  " + line)

    log("  -- pair-count sweeps (crossover for LONG_FILL32 / LONG_FILL16)")
    f = [1, 2, 4, 8] if quick else [1, 2, 4, 8, 16]
    sweep("20kb (32-bit batch, 16 lanes/pair)", 20_000, [x * nsm for x in f], 16)
    sweep("10kb (16-bit batch, 8 lanes/pair)", 10_000, [x * nsm for x in (2, 8, 32)], 8)
    old_min = pw.LONG_MIN_M
    pw.LONG_MIN_M = 4096                         # probe: would pw_chain_batch pay off below LONG_MIN_M?
    try:
        sweep("5kb (16-bit batch, 8 lanes/pair; LONG_MIN_M lowered to 4096 for the probe)", 5_000,
              [x * nsm for x in (4, 16)], 8)
    finally:
        pw.LONG_MIN_M = old_min

    if keep:
        log("  -- _chain_batch launch variants on 64 x 50 kb local")
        variants = [dict(), dict(group=1), dict(warps_per_sm=8), dict(warps_per_sm=16), dict(warps_per_sm=24),
                    dict(group=8), dict(group=64), dict(r=8)]
        for kw in variants:
            BLONG_STEP[0] = f"variant {kw}"
            try:
                tim = {}
                t0 = time.perf_counter()
                s, i, j = _cb_direct(cp, keep["q"], keep["t"], "local", tim, **kw)
                wall = time.perf_counter() - t0
                ref = keep["ref"]
                check(f"variant {kw} == pw_chain_batch default",
                      np.array_equal(s, ref.score) and np.array_equal(i, ref.q_end) and np.array_equal(j, ref.t_end))
                record(f"64 x 50kb local _chain_batch {kw}", keep["cells"], 64, tim["chain_batch_s"], wall,
                       W=tim["chain_batch_W"], group=tim["chain_batch_group"], items=tim["chain_batch_items"])
            except Exception as e:
                FAILS.append(f"blong variant {kw}: {e!r}")
                log(tbmod.format_exc())

    log("  -- traceback of few long pairs: gridded batch vs _chain_one_tb one pair at a time")
    for k in ((8,) if quick else (8, 48)):
        BLONG_STEP[0] = f"tb {k} x 30kb"
        try:
            q2, t2 = gen_pairs(rng, k, 30_000, 30_000)
            qw, tw = gen_pairs(rng, 2, 5000, 5000)
            pw.align_pairs(qw, tw, mode="local", traceback=True, device="gpu")          # compile, warm up
            m2, n2 = np.diff(q2[1]), np.diff(t2[1])
            cells = int(np.dot(m2, n2))
            tim = {}
            old_max = pw.TB_CHAIN_MAX
            pw.TB_CHAIN_MAX = -1                 # force the gridded batch route
            try:
                t0 = time.perf_counter()
                g = pw.align_pairs(q2, t2, mode="local", traceback=True, device="gpu", timings=tim)
                wall = time.perf_counter() - t0
            finally:
                pw.TB_CHAIN_MAX = old_max
            record(f"{k} x 30kb local tb gridded batch", cells, k, tim["kernel_s"], wall)
            tim = {}
            t0 = time.perf_counter()
            ga = pw.align_pairs(q2, t2, mode="local", traceback=True, device="gpu", timings=tim)
            wall = time.perf_counter() - t0
            record(f"{k} x 30kb local tb default route (TB_CHAIN_MAX={pw.TB_CHAIN_MAX})", cells, k,
                   tim["kernel_s"], wall)
            check(f"tb {k} x 30kb: default route == gridded batch", same(g, ga))
            qd, td = cp.asarray(q2[0]), cp.asarray(t2[0])
            pw._chain_one_tb(cp, cp.asarray(qw[0]), 0, int(qw[1][1]), cp.asarray(tw[0]), 0, int(tw[1][1]),
                             2, 1, 4, 6, 1, -1)
            tim1: dict = {}
            ok = True
            t0 = time.perf_counter()
            for p in range(k):
                s, i, j, a, b, cg = pw._chain_one_tb(cp, qd, int(q2[1][p]), int(m2[p]), td, int(t2[1][p]), int(n2[p]),
                                                     2, 1, 4, 6, 1, -1, timings=tim1)
                ok &= (s, i, j, a, b) == (g.score[p], g.q_end[p], g.t_end[p], g.q_start[p], g.t_start[p])
                ok &= np.array_equal(cg, g.cigar[g.cigar_off[p]:g.cigar_off[p + 1]])
            wall = time.perf_counter() - t0
            record(f"{k} x 30kb local tb _chain_one_tb x {k}", cells, k,
                   tim1["huge_forward_s"] + tim1["huge_tb_s"], wall, forward_s=round(tim1["huge_forward_s"], 4))
            check(f"tb {k} x 30kb: _chain_one_tb == gridded batch (scores, ends, starts, CIGARs)", bool(ok))
        except Exception as e:
            FAILS.append(f"blong tb {k} x 30kb: {e!r}")
            log(tbmod.format_exc())

    # (a) comparisons against the CPU twin
    BLONG_STEP[0] = "waiting for the CPU references"
    log(f"  CPU references ({time.perf_counter() - T0:.0f}s into the stage)")
    for job in jobs:
        mode, band = job
        try:
            c = (futs[job].result(timeout=max(30.0, BLONG_LIMIT_S - 20 - (time.perf_counter() - T0)))
                 if job in futs else _cpu_ref(q, t, mode, band))
        except Exception as e:
            FAILS.append(f"blong CPU reference {mode} band={band}: {e!r}")
            log(tbmod.format_exc())
            continue
        for (md, bd, var), (g, extra) in gpu.items():
            if (md, bd) != job:
                continue
            if isinstance(g, tuple):                 # _chain_batch on the pairs extra
                ok = (np.array_equal(g[0], c.score[extra]) and np.array_equal(g[1], c.q_end[extra])
                      and np.array_equal(g[2], c.t_end[extra]))
            else:
                ok = same(c, g) and (var != "auto" or extra == len(c))
            note = f" (pairs in pw_chain_batch: {extra} of {len(c)})" if var == "auto" else ""
            check(f"blong {mode} band={band} {var} == CPU twin{note}", ok)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)
    for line in summary:
        log("  blong crossover " + line)
    log(f"  blong stage {time.perf_counter() - T0:.0f}s")


def stage_cpu(rng, quick):
    log(f"== CPU twin (numba, {numba_threads()} threads)")
    for name, k, L in (("CPU 150bp", 100_000 if quick else 400_000, 150),
                       ("CPU 1kb", 3000 if quick else 10_000, 1000)):
        q, t = gen_pairs(rng, k, L, L)
        pw.align_pairs(subset(q, range(10)), subset(t, range(10)), mode="local", device="cpu")
        for tb in (False, True):
            t0 = time.perf_counter()
            pw.align_pairs(q, t, mode="local", traceback=tb, device="cpu")
            w = time.perf_counter() - t0
            record(f"{name} local {'tb' if tb else 'score'}", k * L * L, k, w, w)


def numba_threads():
    import numba
    return numba.get_num_threads()


def device_info():
    import cupy as cp
    p = cp.cuda.runtime.getDeviceProperties(0)
    info = dict(name=p["name"].decode() if isinstance(p["name"], bytes) else p["name"],
                sms=p["multiProcessorCount"], clock_khz=p.get("clockRate"))
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,driver_version", "--format=csv"],
            capture_output=True, text=True).stdout.strip()
    except Exception:
        pass
    return info


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--stages", default="check,b150,b1k,b10k,huge,cpu")
    ap.add_argument("--n150", type=int, default=None)
    ap.add_argument("--n1k", type=int, default=None)
    ap.add_argument("--n10k", type=int, default=None)
    a = ap.parse_args()
    out = os.environ.get("OUT", ".")
    rng = np.random.default_rng(2024)
    info = device_info()
    log(json.dumps(info))
    st = a.stages.split(",")
    T0 = time.perf_counter()
    try:
        if "check" in st:
            stage_check(rng, a.quick)
        if "check16" in st:
            stage_check16(rng, a.quick)
        if "sweep16" in st:
            log("== 16-bit config sweep")
            sweep16(rng, "150bp", 2_000_000, 150, 150, [(1, 16), (1, 24), (1, 32), (2, 16), (4, 16), (8, 16)],
                    modes=("local", "global"))
            sweep16(rng, "1kb", 200_000, 1000, 1000, [(1, 32), (4, 16), (8, 16), (16, 16), (16, 24), (32, 8),
                                                     (32, 16)])
        if "s16b" in st:
            log("== 16-bit 150 bp rows-per-thread sweep")
            sweep16(rng, "150bp", 2_000_000, 150, 150, [(1, 25), (1, 30), (1, 32)], modes=("local", "global"))
        if "b16" in st:
            log("== 16-bit timings (defaults)")
            bench_fixed(rng, "150bp", a.n150 or 10_000_000, 150, 150, [None], [], width="auto",
                        modes=("local", "global", "semiglobal"))
            bench_fixed(rng, "1kb", a.n1k or 1_000_000, 1000, 1000, [None], [], width="auto", check_n=300,
                        modes=("local", "global"))
            bench_fixed(rng, "10kb", a.n10k or 10_000, 10000, 10000, [None], [], width="auto", check_n=8)
        if "sweeptb" in st:
            log("== traceback grid sweep")
            sweep_grid(rng, "150bp", 1_000_000, 150, 150, ["full", (64, 16), (64, 32), (64, 64), (64, 150),
                                                          (128, 64)], modes=("local", "global"))
            sweep_grid(rng, "1kb", 100_000, 1000, 1000, ["full", (512, 64), (512, 128), (512, 256), (512, 512)])
        if "btb" in st:
            log("== traceback timings (defaults)")
            bench_fixed(rng, "150bp", a.n150 or 10_000_000, 150, 150, [], [None], modes=("local", "global"))
            bench_fixed(rng, "1kb", a.n1k or 1_000_000, 1000, 1000, [], [None], check_n=300)
        if "btb16" in st:
            log("== traceback timings, 16-bit shared-memory path for short pairs (defaults, width auto)")
            bench_fixed(rng, "150bp", a.n150 or 10_000_000, 150, 150, [], [None], width="auto",
                        modes=("local", "global", "semiglobal"))
            bench_fixed(rng, "250bp", 4_000_000, 250, 250, [], [None], width="auto", check_n=1000)
            bench_fixed(rng, "1kb", a.n1k or 1_000_000, 1000, 1000, [], [None], width="auto", check_n=300)
        if "final" in st:
            stage_final(rng)
        if "checkgrid16" in st:
            stage_checkgrid16(rng)
        if "proftb16" in st:
            stage_proftb16(rng)
        if "checktb16" in st:
            stage_checktb16(rng)
        if "btb16s" in st:
            log("== traceback timings, pw_tb16, 150 bp only (defaults, width auto)")
            bench_fixed(rng, "150bp", a.n150 or 10_000_000, 150, 150, [], [None], width="auto",
                        modes=("local", "global", "semiglobal"))
        if "tbcap" in st:
            stage_tbcap(rng)
        if "lintb" in st:
            stage_lintb(rng, a.quick)
        if "b150" in st:
            log("== 150 bp pairs")
            bench_fixed(rng, "150bp", a.n150 or (1_000_000 if a.quick else 10_000_000), 150, 150,
                        [None, (1, 32), (8, 19), (32, 5)] if a.quick else [None],
                        [None, (32, 5), (8, 8)] if a.quick else [None],
                        modes=("local", "global") if a.quick else ("local", "global", "semiglobal"))
        if "b1k" in st:
            log("== 1 kb pairs")
            bench_fixed(rng, "1kb", a.n1k or (100_000 if a.quick else 1_000_000), 1000, 1000,
                        [None, (1, 16), (16, 16), (8, 32)] if a.quick else [None],
                        [None, (16, 8)] if a.quick else [None], check_n=300)
        if "tbmid" in st:
            log("== traceback between 250 bp and 1 kb (defaults)")
            for L, k in ((300, 1_000_000), (500, 400_000), (700, 200_000), (1000, 100_000)):
                bench_fixed(rng, f"{L}bp", k, L, L, [], [None], width="auto", check_n=300,
                            modes=("local", "global"))
        if "tbgrid" in st:
            log("== gridded traceback (16-bit forward): (BH, GW) sweep between 250 bp and 1 kb")
            for L, k in ((300, 500_000), (500, 200_000), (700, 100_000)):
                grids = ([(64, 16), (64, 32), (64, 64), (128, 32), (128, 64), (64, 128)] if L < pw.INTRA_MIN_M else
                         [(256, 32), (256, 64), (256, 128), (256, 256), (512, 64), (512, 128)])
                sweep_grid(rng, f"{L}bp", k, L, L, grids)
        if "tb10k" in st:
            log("== 10 kb pairs with traceback")
            bench_fixed(rng, "10kb", a.n10k or 10_000, 10000, 10000, [], [None], check_n=4,
                        modes=("local", "global"))
        if "b10k" in st:
            log("== 10 kb pairs")
            bench_fixed(rng, "10kb", a.n10k or (2000 if a.quick else 10_000), 10000, 10000,
                        [None, (32, 16)] if a.quick else [None], [], check_n=8)
        if "huge" in st:
            stage_huge(rng, a.quick)
        if "blong" in st:
            stage_long(rng, a.quick)
        if "cpu" in st:
            stage_cpu(rng, a.quick)
    except Exception:
        FAILS.append("crash: " + tbmod.format_exc())
        log(tbmod.format_exc())
    total = time.perf_counter() - T0
    lines = [f"device: {info}", f"total script time {total:.1f}s", "",
             "| bench | pairs | cells | kernel s | wall s | GCUPS | notes |", "|---|---|---|---|---|---|---|"]
    for r in ROWS:
        extra = {k: v for k, v in r.items()
                 if k not in ("bench", "pairs", "cells", "kernel_s", "wall_s", "gcups")}
        lines.append(f"| {r['bench']} | {r['pairs']} | {r['cells']:.3g} | {r['kernel_s']:.4f} | "
                     f"{r['wall_s']:.2f} | {r['gcups']:.1f} | {extra} |")
    lines.append("")
    lines.append(f"FAILURES ({len(FAILS)}): " + "; ".join(FAILS[:30]))
    txt = "\n".join(lines)
    with open(os.path.join(out, "pairwise_bench.md"), "w") as fh:
        fh.write(txt + "\n")
    with open(os.path.join(out, "pairwise_bench.json"), "w") as fh:
        json.dump(dict(info=info, rows=ROWS, fails=FAILS), fh, indent=1, default=str)
    log(txt)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
