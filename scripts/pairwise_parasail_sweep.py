#!/usr/bin/env python3
"""Correctness sweep of the pairwise engine (issue 7): scores vs parasail, CIGAR audit, brute force.

  python scripts/pairwise_parasail_sweep.py [--pairs 100000] [--max-len 4000] [--procs 16]
         [--device auto|gpu|cpu] [--fasta genome.fa[.gz] ...] [--out DIR]

For every mode (global, semiglobal, local) x scoring (affine bwa 1/4/6/1, linear 1/4/0/2, affine
2/3/5/2) the same pairs go through ``align_pairs`` with traceback and without, and through parasail:
  * score == parasail's score for every pair with both sides non-empty (parasail refuses empty
    sequences; those are checked against the closed forms: global -(go + L*ge), semiglobal with an
    empty query 0, local 0).  Where the vectorised parasail function differs, the pair is re-run
    with parasail's scalar reference; a failure is a pair whose score differs from that reference;
  * every CIGAR is audited by ``pairwise.check_cigars`` (well formed, spans the reported start/end
    coordinates, covers what the mode requires, re-scores to the reported score);
  * the score-only run gives the same score / ends as the traceback run;
  * tiny pairs (<= 5 x 5) are checked against exhaustive enumeration of all alignments;
  * with --cpu-check N the first N pairs (length-capped) are also run on the CPU twin and compared
    field by field (GPU == CPU) when the engine ran on the GPU.

Semantics mapping (ours -> parasail): a gap of length L costs go + L*ge here and open + (L-1)*extend
in parasail, so parasail gets open = go + ge, extend = ge (linear: go = 0 -> open = extend = ge);
N (and IUPAC codes, which encode to N) scores -1 against everything: a custom 5-letter matrix
"ACGTN" with match / -mismatch on ACGT and -1 in the N row and column; modes: global -> nw,
semiglobal (whole query, free target ends) -> sg_dx (s1 = query, s2 = database = target), local -> sw.
The vectorised ``*_scan_sat`` functions are used (8 -> 16 -> 32 bit on saturation); a pair that
disagrees is re-run with parasail's scalar reference (``nw`` / ``sg_dx`` / ``sw``) and both reported.
(parasail 1.3.4's ``*_striped_sat`` and ``*_diag_sat`` disagree with its own scalar reference on
some pairs, striped when open == extend, i.e. our linear gaps; ``*_scan_sat`` agreed on every pair we
tried, see docs/BENCHMARKS.md.)

Pair classes (lengths 0..max_len, mixture skewed to short pairs): random unrelated, related (target =
query with substitutions / indels inside random flanks), real-derived (reads cut from the given
genomes, lambda phage always, with sequencing-like errors, against a window around their origin or a
random window), N-rich (N runs / scattered N / all-N), low complexity (homopolymers, short tandem
repeats), identical, one or both sides empty, tiny random.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from collections import Counter
from multiprocessing import Pool
from pathlib import Path

import numpy as np

from g3align.aligner.pairwise import engine as pw

ROOT = Path(__file__).resolve().parents[1]
SCORINGS = [  # (name, match, mismatch, gap_open, gap_extend)
    ("affine-1/4/6/1", 1, 4, 6, 1),
    ("linear-1/4/0/2", 1, 4, 0, 2),
    ("affine-2/3/5/2", 2, 3, 5, 2),
]
MODES = ("global", "semiglobal", "local")
CLASSES = ("random", "related", "real", "nrich", "lowcomplex", "identical", "empty", "tiny")
LETTERS = np.frombuffer(b"ACGTN", np.uint8)


# ---- pair generation ---------------------------------------------------------------------------

def read_genome(path) -> np.ndarray:
    op = gzip.open if str(path).endswith(".gz") else open
    with op(path, "rb") as fh:
        seq = b"".join(x.strip() for x in fh if not x.startswith(b">"))
    return pw.encode_seqs([seq.upper()])[0]


def draw_len(rng, max_len):
    u = rng.random()
    if u < 0.40:
        hi = min(150, max_len)
    elif u < 0.70:
        hi = min(600, max_len)
    elif u < 0.90:
        hi = min(1500, max_len)
    else:
        hi = max_len
    return int(rng.integers(0, hi + 1))


def mutate(rng, s, sub, indel):
    """Substitutions (to any of ACGTN, mostly ACGT) and short indels at rate sub / indel per base."""
    s = s.copy()
    if s.size == 0:
        return s
    k = rng.random(s.size) < sub
    s[k] = rng.choice(np.array([0, 1, 2, 3, 0, 1, 2, 3, 4], np.uint8), int(k.sum()))
    nind = rng.binomial(s.size, indel)
    parts = s
    for _ in range(nind):
        p = int(rng.integers(0, parts.size + 1))
        ln = int(rng.geometric(0.4))
        if rng.random() < 0.5:
            parts = np.concatenate([parts[:p], rng.integers(0, 4, ln).astype(np.uint8), parts[p:]])
        else:
            parts = np.concatenate([parts[:p], parts[p + ln:]])
    return parts


def rand_seq(rng, n):
    return rng.integers(0, 4, n).astype(np.uint8)


def gen_pair(rng, cls, max_len, genomes):
    m, n = draw_len(rng, max_len), draw_len(rng, max_len)
    if cls == "random":
        return rand_seq(rng, m), rand_seq(rng, n)
    if cls == "related":
        q = rand_seq(rng, m)
        core = mutate(rng, q, rng.choice([0.0, 0.01, 0.05, 0.15, 0.3]), rng.choice([0.0, 0.005, 0.02, 0.05]))
        a, b = int(rng.integers(0, 50)), int(rng.integers(0, 50))
        t = np.concatenate([rand_seq(rng, a), core, rand_seq(rng, b)])
        if rng.random() < 0.3:           # or the query is the longer side
            q, t = t, q
        return q, t
    if cls == "real":
        g = genomes[int(rng.integers(0, len(genomes)))]
        m = min(m, g.size // 3)
        a = int(rng.integers(0, max(1, g.size - m - 200)))
        q = mutate(rng, g[a:a + m], rng.choice([0.0, 0.002, 0.01, 0.05]), rng.choice([0.0, 0.001, 0.01]))
        if rng.random() < 0.8:            # window around the origin
            lo = max(0, a - int(rng.integers(0, 100)))
            t = g[lo:a + m + int(rng.integers(0, 100))].copy()
        else:                             # a random window of the genome
            b = int(rng.integers(0, max(1, g.size - n)))
            t = g[b:b + n].copy()
        if rng.random() < 0.2:
            q, t = t, q
        return q, t
    if cls == "nrich":
        q, t = rand_seq(rng, m), rand_seq(rng, n)
        if rng.random() < 0.5 and m:
            t = np.concatenate([rand_seq(rng, int(rng.integers(0, 30))), mutate(rng, q, 0.05, 0.01)])[:max(n, 1)]
        for s in (q, t):
            if s.size:
                s[rng.random(s.size) < rng.choice([0.01, 0.1, 0.5])] = 4
                if rng.random() < 0.5:
                    a = int(rng.integers(0, s.size))
                    s[a:a + int(rng.integers(1, 200))] = 4
        if rng.random() < 0.05:
            q[:] = 4
        return q, t
    if cls == "lowcomplex":
        def lc(k):
            unit = rand_seq(rng, int(rng.choice([1, 1, 2, 3, 4, 6])))
            s = np.resize(unit, k)
            return mutate(rng, s, rng.choice([0.0, 0.01, 0.05]), rng.choice([0.0, 0.01]))
        return lc(m), lc(n)
    if cls == "identical":
        q = rand_seq(rng, m)
        if rng.random() < 0.1 and m:
            q[rng.random(m) < 0.05] = 4
        return q, q.copy()
    if cls == "empty":
        k = int(rng.integers(0, 3))
        return (rand_seq(rng, 0) if k != 1 else rand_seq(rng, m)), (rand_seq(rng, 0) if k != 2 else rand_seq(rng, n))
    # tiny
    return (rng.integers(0, 5, int(rng.integers(0, 9))).astype(np.uint8),
            rng.integers(0, 5, int(rng.integers(0, 9))).astype(np.uint8))


def gen_pairs(rng, k, max_len, genomes):
    w = np.array([0.12, 0.22, 0.22, 0.12, 0.12, 0.06, 0.02, 0.12])
    cls = rng.choice(len(CLASSES), k, p=w / w.sum())
    qs, ts = [], []
    for c in cls:
        q, t = gen_pair(rng, CLASSES[c], max_len, genomes)
        qs.append(q[:max_len])
        ts.append(t[:max_len])
    return qs, ts, cls


def csr(parts):
    off = np.zeros(len(parts) + 1, np.int64)
    np.cumsum([p.size for p in parts], out=off[1:])
    codes = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return codes.astype(np.uint8), off


# ---- parasail (worker processes) ---------------------------------------------------------------

def _parasail_chunk(args):
    qs, ts, mode, match, mismatch, go, ge, scalar = args
    import parasail
    mat = parasail.matrix_create("ACGTN", match, -mismatch)
    for i in range(5):
        mat[4, i] = -1
        mat[i, 4] = -1
    if scalar:
        fn = {"global": parasail.nw, "semiglobal": parasail.sg_dx, "local": parasail.sw}[mode]
    else:
        fn = {"global": parasail.nw_scan_sat, "semiglobal": parasail.sg_dx_scan_sat,
              "local": parasail.sw_scan_sat}[mode]
    out = np.zeros(len(qs), np.int64)
    for k, (q, t) in enumerate(zip(qs, ts)):
        out[k] = fn(q, t, go + ge, ge, mat).score
    return out


def parasail_scores(pool, qstr, tstr, mode, match, mismatch, go, ge, scalar=False, chunk=500):
    jobs = [(qstr[a:a + chunk], tstr[a:a + chunk], mode, match, mismatch, go, ge, scalar)
            for a in range(0, len(qstr), chunk)]
    res = pool.map(_parasail_chunk, jobs) if pool else list(map(_parasail_chunk, jobs))
    return np.concatenate(res) if res else np.zeros(0, np.int64)


def closed_form(m, n, mode, go, ge):
    """Score of a pair with an empty side."""
    if mode == "local" or (mode == "semiglobal" and m == 0) or m + n == 0:
        return 0
    return -(go + (m + n) * ge)


# ---- exhaustive enumeration (tiny pairs) -------------------------------------------------------

def _sub(a, b, match, mismatch):
    if a == 4 or b == 4:
        return -1
    return match if a == b else -mismatch


def global_all(q, t, match, mismatch, go, ge):
    """Best score over every alignment (op string) of q and t; a gap run of length L costs go + L*ge."""
    best = None
    stack = [(0, 0, 0, 0)]      # i, j, previous op (0 none / M, 1 I, 2 D), score
    while stack:
        i, j, prev, s = stack.pop()
        if i == len(q) and j == len(t):
            best = s if best is None or s > best else best
            continue
        if i < len(q) and j < len(t):
            stack.append((i + 1, j + 1, 0, s + _sub(q[i], t[j], match, mismatch)))
        if i < len(q):
            stack.append((i + 1, j, 1, s - ge - (go if prev != 1 else 0)))
        if j < len(t):
            stack.append((i, j + 1, 2, s - ge - (go if prev != 2 else 0)))
    return best


def brute(q, t, mode, match, mismatch, go, ge):
    if mode == "global":
        return global_all(q, t, match, mismatch, go, ge)
    subs_t = [t[x:y] for x in range(len(t) + 1) for y in range(x, len(t) + 1)]
    if mode == "semiglobal":
        return max(global_all(q, tt, match, mismatch, go, ge) for tt in subs_t)
    subs_q = [q[x:y] for x in range(len(q) + 1) for y in range(x, len(q) + 1)]
    return max(0, max(global_all(qq, tt, match, mismatch, go, ge) for qq in subs_q for tt in subs_t))


def _brute_chunk(args):
    pairs, mode, match, mismatch, go, ge = args
    return [brute(list(q), list(t), mode, match, mismatch, go, ge) for q, t in pairs]


# ---- main ----------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--max-len", type=int, default=4000)
    ap.add_argument("--tiny", type=int, default=400, help="tiny pairs per mode x scoring for brute force")
    ap.add_argument("--procs", type=int, default=os.cpu_count())
    ap.add_argument("--device", default="auto")
    ap.add_argument("--cpu-check", type=int, default=0, help="first N pairs also on the CPU twin")
    ap.add_argument("--fasta", nargs="*", default=[])
    ap.add_argument("--seed", type=int, default=20261121)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    a = ap.parse_args(argv)
    t_start = time.perf_counter()
    rng = np.random.default_rng(a.seed)
    genomes = [read_genome(ROOT / "data" / "lambda.fa.gz")] + [read_genome(f) for f in a.fasta]
    genomes = [g[:5_000_000] for g in genomes]
    qs, ts, cls = gen_pairs(rng, a.pairs, a.max_len, genomes)
    qc, qoff = csr(qs)
    tc, toff = csr(ts)
    m, n = np.diff(qoff), np.diff(toff)
    cells = int((m * n).sum())
    qstr = [LETTERS[x].tobytes().decode() for x in qs]
    tstr = [LETTERS[x].tobytes().decode() for x in ts]
    nonempty = (m > 0) & (n > 0)
    ne_idx = np.flatnonzero(nonempty)
    tiny = [(rng.integers(0, 5, int(rng.integers(0, 6))).astype(np.uint8),
             rng.integers(0, 5, int(rng.integers(0, 6))).astype(np.uint8)) for _ in range(a.tiny)]
    tq, tqo = csr([x[0] for x in tiny])
    tt, tto = csr([x[1] for x in tiny])
    pool = Pool(a.procs) if a.procs > 1 else None
    report = dict(pairs=a.pairs, max_len=a.max_len, cells=cells, seed=a.seed, device=a.device,
                  classes={c: int((cls == k).sum()) for k, c in enumerate(CLASSES)},
                  nonempty_pairs=int(nonempty.sum()), length_max=int(max(m.max(), n.max())),
                  with_N=int(sum(1 for q, t in zip(qs, ts) if (q == 4).any() or (t == 4).any())),
                  fasta=[str(ROOT / "data" / "lambda.fa.gz")] + list(a.fasta), combos=[])
    print(json.dumps({k: v for k, v in report.items() if k != "combos"}), flush=True)
    total_bad = 0
    for sname, match, mismatch, go, ge in SCORINGS:
        for mode in MODES:
            md = pw.MODES[mode]
            row = dict(mode=mode, scoring=sname)
            t0 = time.perf_counter()
            ps = parasail_scores(pool, [qstr[i] for i in ne_idx], [tstr[i] for i in ne_idx],
                                 mode, match, mismatch, go, ge)
            row["parasail_s"] = time.perf_counter() - t0
            kw = dict(mode=mode, match=match, mismatch=mismatch, gap_open=go, gap_extend=ge, device=a.device)
            t0 = time.perf_counter()
            rt = pw.align_pairs((qc, qoff), (tc, toff), traceback=True, **kw)
            row["ours_tb_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            rs = pw.align_pairs((qc, qoff), (tc, toff), traceback=False, **kw)
            row["ours_score_s"] = time.perf_counter() - t0
            row["device"] = rt.device
            diff = np.flatnonzero(rt.score[ne_idx] != ps)
            row["vs_parasail_compared"] = int(ne_idx.size)
            row["vs_parasail_mismatch"] = int(diff.size)
            row["vs_parasail_final_mismatch"] = 0
            if diff.size:                 # recheck with parasail's scalar reference
                sub = ne_idx[diff[:5000]]
                ref = parasail_scores(pool, [qstr[i] for i in sub], [tstr[i] for i in sub], mode, match,
                                      mismatch, go, ge, scalar=True, chunk=20)
                row["mismatch_examples"] = [dict(pair=int(p), m=int(m[p]), n=int(n[p]), cls=CLASSES[cls[p]],
                                                 ours=int(rt.score[p]), parasail=int(ps[d]), parasail_ref=int(r))
                                            for p, d, r in zip(sub[:10], diff[:10], ref[:10])]
                row["mismatch_vs_scalar_ref"] = int((rt.score[sub] != ref).sum())
                # a pair counts as ours wrong unless parasail's scalar reference agrees with us
                row["vs_parasail_final_mismatch"] = row["mismatch_vs_scalar_ref"] + int(diff.size - sub.size)
            emp = np.flatnonzero(~nonempty)
            cf = np.array([closed_form(int(m[p]), int(n[p]), mode, go, ge) for p in emp], np.int64)
            row["empty_compared"] = int(emp.size)
            row["empty_mismatch"] = int((rt.score[emp] != cf).sum())
            bad = pw.check_cigars(rt, qc, qoff, tc, toff, md, match, mismatch, go, ge)
            row["cigars_audited"] = int(bad.size)
            row["cigar_bad"] = dict(Counter(int(x) for x in bad[bad != 0]))
            same = all(np.array_equal(getattr(rt, f), getattr(rs, f)) for f in ("score", "q_end", "t_end"))
            row["score_only_equals_tb"] = bool(same)
            if a.cpu_check and rt.device == "gpu":
                k = a.cpu_check
                keep = np.flatnonzero((m[:k] <= 1500) & (n[:k] <= 1500))
                sq = csr([qs[i] for i in keep])
                st = csr([ts[i] for i in keep])
                c = pw.align_pairs(sq, st, traceback=True, **{**kw, "device": "cpu"})
                g = pw.align_pairs(sq, st, traceback=True, **kw)
                row["gpu_eq_cpu_pairs"] = int(keep.size)
                row["gpu_eq_cpu"] = all(np.array_equal(getattr(c, f), getattr(g, f)) for f in
                                        ("score", "q_end", "t_end", "q_start", "t_start", "cigar", "cigar_off"))
            # brute force on tiny pairs
            t0 = time.perf_counter()
            chunks = [(tiny[x:x + 50], mode, match, mismatch, go, ge) for x in range(0, len(tiny), 50)]
            bres = (pool.map(_brute_chunk, chunks) if pool else list(map(_brute_chunk, chunks)))
            bscore = np.array([s for c in bres for s in c], np.int64)
            rb = pw.align_pairs((tq, tqo), (tt, tto), traceback=True, **kw)
            bbad = pw.check_cigars(rb, tq, tqo, tt, tto, md, match, mismatch, go, ge)
            row["brute_pairs"] = len(tiny)
            row["brute_mismatch"] = int((rb.score != bscore).sum())
            row["brute_cigar_bad"] = int((bbad != 0).sum())
            row["brute_s"] = time.perf_counter() - t0
            nbad = (row["vs_parasail_final_mismatch"] + row["empty_mismatch"] + int((bad != 0).sum())
                    + (0 if same else 1) + row["brute_mismatch"] + row["brute_cigar_bad"]
                    + (0 if row.get("gpu_eq_cpu", True) else 1))
            row["failures"] = nbad
            total_bad += nbad
            report["combos"].append(row)
            print(json.dumps(row), flush=True)
    report["total_failures"] = total_bad
    report["wall_s"] = time.perf_counter() - t_start
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "parasail_sweep.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    lines = [f"pairs {a.pairs} (non-empty {report['nonempty_pairs']}, with N {report['with_N']}), lengths 0.."
             f"{report['length_max']}, {cells:.3g} cells per combo, classes {report['classes']}", "",
             "| mode | scoring | vs parasail: differ / compared (scan_sat) | of those, differ from parasail's "
             "scalar reference | empty (mismatch / n) | CIGARs bad / audited | brute (mismatch / n) | "
             "score-only == tb | GPU == CPU | device |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in report["combos"]:
        gc = f"{r['gpu_eq_cpu']} ({r['gpu_eq_cpu_pairs']})" if "gpu_eq_cpu" in r else "-"
        lines.append(f"| {r['mode']} | {r['scoring']} | {r['vs_parasail_mismatch']} / {r['vs_parasail_compared']} | "
                     f"{r['vs_parasail_final_mismatch']} | "
                     f"{r['empty_mismatch']} / {r['empty_compared']} | {sum(r['cigar_bad'].values())} / "
                     f"{r['cigars_audited']} | {r['brute_mismatch']} / {r['brute_pairs']} | "
                     f"{r['score_only_equals_tb']} | {gc} | {r['device']} |")
    lines.append(f"\ntotal failures: {total_bad}; wall {report['wall_s']:.1f} s")
    txt = "\n".join(lines)
    with open(os.path.join(a.out, "parasail_sweep.md"), "w") as fh:
        fh.write(txt + "\n")
    print(txt, flush=True)
    if pool:
        pool.close()
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
