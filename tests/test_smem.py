"""Backward-only double-step SMEM search (aligner/mem/smem.py) against two oracles:

1. a brute-force SMEM finder built on naive occurrence counting (the definition bwa's bwt_smem1
   implements: for every right end e the leftmost start b(e) with >= min_intv occurrences, kept when
   b(e) < b(e') for all e' > e), on random texts and mutated reads;
2. bwa itself: `bwa fastmap` prints exactly what bwt_smem1 returns (start, end, count, positions)
   for each call of the first seeding round, with any min_intv (-i). Skipped when bwa is absent.
"""
import shutil
import subprocess

import numpy as np
import pytest

from g3align.aligner.mem.smem import collect_intv, smem1
from g3align.index.fasta import pack_fasta_bytes
from g3align.index.fm import build_fm, fm_sa, fm_step1

ACGT = np.frombuffer(b"ACGT", np.uint8)


def _ref(rng, n):
    s = rng.integers(0, 4, n)
    unit = rng.integers(0, 4, 37)
    for _ in range(6):  # repeats so that counts > 1 occur
        p = int(rng.integers(0, n - 37))
        s[p:p + 37] = unit
    return s.astype(np.uint8)


def _count(fm, p):
    k, l = 0, fm.n + 1
    for c in p[::-1]:
        if c > 3:
            return 0
        k, l = fm_step1(fm, k, l, int(c))
    return l - k


def _brute(fm, q, x, mi):
    L = len(q)
    e = x + 1
    while e <= L and _count(fm, q[x:e]) >= mi:
        e += 1
    ret = e - 1
    if ret == x:
        return x + 1, None
    b = {}
    for e in range(x + 1, ret + 1):
        bb = x
        while bb - 1 >= 0 and _count(fm, q[bb - 1:e]) >= mi:
            bb -= 1
        b[e] = bb
    res = [(b[e], e, _count(fm, q[b[e]:e])) for e in range(ret, x, -1)
           if all(b[e] < b[e2] for e2 in range(e + 1, ret + 1))]
    return ret, sorted(res)


def _reads(rng, T, n, maxlen=70):
    for _ in range(n):
        L = int(rng.integers(2, maxlen))
        p = int(rng.integers(0, len(T) - L))
        q = T[p:p + L].copy()
        for _ in range(int(rng.integers(0, 4))):
            q[rng.integers(0, L)] = rng.integers(0, 4)
        if rng.random() < 0.2:
            q[rng.integers(0, L)] = 4
        yield q.astype(np.uint8)


def _rc(q):
    return np.where(q[::-1] < 4, 3 - q[::-1], 4).astype(np.uint8)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_smem1_bruteforce(seed):
    rng = np.random.default_rng(seed)
    pac = _ref(rng, int(rng.integers(300, 3000)))
    fm = build_fm(pac, sa_intv=4)
    T = np.concatenate([pac, 3 - pac[::-1]])
    buf = [np.zeros(256, np.int64) for _ in range(4)]
    checked = 0
    for q in _reads(rng, T, 300):
        x = int(rng.integers(0, len(q)))
        if q[x] > 3:
            continue
        mi = 1 if rng.random() < 0.5 else int(rng.integers(1, 12))
        ret, n = smem1(fm, q, _rc(q), len(q), x, mi, *buf, 0)
        bret, exp = _brute(fm, q, x, mi)
        if exp is None:
            continue
        got = sorted(zip(buf[0][:n].tolist(), buf[1][:n].tolist(), buf[3][:n].tolist()))
        assert (ret, got) == (bret, exp), (q.tolist(), x, mi)
        checked += 1
    assert checked > 100


def _fastmap(tmp_path, fa_bytes, reads, min_intv):
    fa = tmp_path / "ref.fa"
    fa.write_bytes(fa_bytes)
    subprocess.run(["bwa", "index", str(fa)], capture_output=True, check=True)
    fq = tmp_path / "q.fa"
    fq.write_text("".join(f">q{i}\n{ACGT[np.minimum(q, 3)].tobytes().decode() if q.size else ''}\n"
                          .replace("\n", "\n", 1) for i, q in enumerate(reads)))
    out = subprocess.run(["bwa", "fastmap", "-l", "1", "-w", "100000", "-i", str(min_intv), str(fa), str(fq)],
                         capture_output=True, check=True).stdout.decode()
    res, cur = [], None
    for ln in out.split("\n"):
        f = ln.split("\t")
        if f[0] == "SQ":
            cur = []
            res.append(cur)
        elif f[0] == "EM":
            cur.append((int(f[1]), int(f[2]), int(f[3]), sorted(f[4:])))
    return res


@pytest.mark.skipif(shutil.which("bwa") is None, reason="bwa not on PATH (CI installs it)")
@pytest.mark.parametrize("min_intv", [1, 3])
def test_smem_vs_bwa_fastmap(tmp_path, min_intv):
    rng = np.random.default_rng(7 + min_intv)
    pac = _ref(rng, 5000)
    fa_bytes = b">c1\n" + ACGT[pac[:2500]].tobytes() + b"\n>c2\n" + ACGT[pac[2500:]].tobytes() + b"\n"
    ref = pack_fasta_bytes(fa_bytes)
    fm = build_fm(ref.pac, sa_intv=8)
    T = np.concatenate([ref.pac, 3 - ref.pac[::-1]])
    reads = [np.minimum(q, 3).astype(np.uint8) for q in _reads(rng, T, 200, maxlen=120)]
    bwa = _fastmap(tmp_path, fa_bytes, reads, min_intv)
    names = ref.names
    l_pac = ref.l_pac
    buf = [np.zeros(512, np.int64) for _ in range(4)]
    for q, exp in zip(reads, bwa):
        got = []
        x = 0
        L = len(q)
        while x < L:  # bwa's smem iterator: x jumps to the returned end
            x, n = smem1(fm, q, _rc(q), L, x, min_intv, *buf, 0)
            for j in range(n):
                b, e, k, s = (int(buf[i][j]) for i in range(4))
                pos = []
                for r in range(k, k + s):
                    p = int(fm_sa(fm, r))
                    rev = p >= l_pac
                    if rev:
                        p = 2 * l_pac - 1 - p - (e - b - 1)
                    rid = int(np.searchsorted(ref.offsets, p, side="right") - 1)
                    pos.append(f"{names[rid]}:{'+-'[rev]}{p - ref.offsets[rid] + 1}")
                got.append((b, e, s, sorted(pos)))
        assert got == exp


def test_collect_intv_sorted_and_long_enough():
    rng = np.random.default_rng(5)
    pac = _ref(rng, 4000)
    fm = build_fm(pac)
    T = np.concatenate([pac, 3 - pac[::-1]])
    for q in _reads(rng, T, 50, maxlen=200):
        mb, me, mk, ms = collect_intv(fm, q, len(q), 19, 1.5, 10, 20)
        info = (mb << 32) | me
        assert np.all(np.diff(info) >= 0)
        assert np.all(me - mb >= 19)
