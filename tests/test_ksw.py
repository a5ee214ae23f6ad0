"""Regression tests for g3align.aligner.mem.ksw (bwa 0.7.17 ksw.c / bwa_gen_cigar2).

Two kinds of checks, neither needing bwa at test time:

1. Brute force: tiny random inputs are aligned by textbook full-matrix
   dynamic programming written independently here (local Gotoh for
   ksw_align2; bwa's global recursion, where gaps open from the match state
   only, for ksw_global2) and the scores (plus te/qe/tb/qb for the local case)
   are compared; CIGARs returned by ksw_global2 / gen_cigar2 are re-scored.

2. Golden cases: tests/data/ksw_golden.npz holds ~330 cases whose expected
   outputs were produced by bwa 0.7.17's own C code: a throw-away harness
   (kept outside the repository) compiled bwa's ksw.c unchanged together with
   verbatim copies of bwa_gen_cigar2 / bns_get_seq / bwa_fill_scmat (pac
   packed 2 bits per base as bwa does), read random cases - random and
   mutated-copy pairs with substitutions, indels, N bases, homopolymers and
   dinucleotide repeats, lengths 0..320 (gen_cigar2: references up to 1200),
   w in {0,1,5,100,200,...}, zdrop in {0,30,100}, h0 in 1..150, bwa's default
   scoring and others including o_del != o_ins, o_ins = 0 and large
   mismatch penalties - and printed bwa's results.  Cases were picked from a
   12k pool to cover the tricky paths: score2 hits that depend on the SIMD
   query padding, o_ins = 0 (where bwa's lazy-F exit differs from plain DP),
   8-bit overflow (score 255), failed start search (tb = qb = -1), extension
   without a full-query hit (gscore = -1), z-drop, rejected / ungapped /
   reverse-strand gen_cigar2 calls and MD strings with deletions.  The same
   harness compared >= 100k random cases per routine with 0 mismatches.

   npz layout: kind (0 extend, 1 global, 2 align2, 3 gen_cigar2); params
   [a, b, o_del, e_del, o_ins, e_ins, w, end_bonus, zdrop, h0, xtra, rb, re];
   seq/seq_off (case i: query = seq[off[2i]:off[2i+1]], target or pac =
   seq[off[2i+1]:off[2i+2]]); out (extend: 6 values, align2: 7, global:
   score, gen_cigar2: score, NM); cigar/cigar_off, md/md_off (ASCII).
"""

import os

import numpy as np
import pytest

from g3align.aligner.mem import ksw

DATA = os.path.join(os.path.dirname(__file__), "data", "ksw_golden.npz")
NEG = -(1 << 30)


def _mat(a, b):
    return ksw.fill_scmat(a, b)


def test_fill_scmat():
    m = _mat(1, 4).reshape(5, 5)
    assert m.dtype == np.int8
    for i in range(5):
        for j in range(5):
            exp = -1 if (i == 4 or j == 4) else (1 if i == j else -4)
            assert m[i, j] == exp


# ---------------------------------------------------------------------------
# brute force references
# ---------------------------------------------------------------------------

def _local_ref(q, t, mat, od, ed, oi, ei):
    """Textbook Gotoh local alignment; returns the full H matrix (t rows)."""
    n, m = len(t), len(q)
    q = q.tolist()
    mat = mat.tolist()
    H = [[0] * (m + 1) for _ in range(n + 1)]
    E = [[NEG] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        row = mat[int(t[i - 1]) * 5:int(t[i - 1]) * 5 + 5]
        Hp, Hc, Ep, Ec = H[i - 1], H[i], E[i - 1], E[i]
        f = NEG
        for j in range(1, m + 1):
            Ec[j] = max(Hp[j] - od - ed, Ep[j] - ed)
            f = max(Hc[j - 1] - oi - ei, f - ei)
            Hc[j] = max(0, Hp[j - 1] + row[q[j - 1]], Ec[j], f)
    return np.array(H, np.int64).reshape(n + 1, m + 1)[1:, 1:]


def _first_max(H):
    """bwa's end point: first target row reaching the maximum, then the
    smallest query column holding it in that row."""
    best = int(H.max()) if H.size else 0
    if best <= 0:
        return 0, -1
    rows = np.nonzero(H.max(axis=1) == best)[0]
    te = int(rows[0])
    qe = int(np.nonzero(H[te] == best)[0][0])
    return best, te, qe


def _global_ref(q, t, mat, od, ed, oi, ei):
    """bwa's global recursion without band: M(i,j) = H(i-1,j-1)+s,
    H = max(M, E, F), gaps open from M only; leading gaps scored o+e*len."""
    n, m = len(t), len(q)
    q = q.tolist()
    mat = mat.tolist()
    H = [[NEG] * (m + 1) for _ in range(n + 1)]
    M = [[NEG] * (m + 1) for _ in range(n + 1)]
    E = [[NEG] * (m + 1) for _ in range(n + 1)]  # E[i][j]: vertical gap entering cell i,j
    H[0][0] = 0
    for j in range(1, m + 1):
        H[0][j] = -(oi + ei * j)
    for i in range(1, n + 1):
        H[i][0] = -(od + ed * i)
    for i in range(1, n + 1):
        f = NEG
        for j in range(1, m + 1):
            M[i][j] = H[i - 1][j - 1] + mat[int(t[i - 1]) * 5 + q[j - 1]]
            if i > 1:
                E[i][j] = max(M[i - 1][j] - od - ed, E[i - 1][j] - ed)
            if j > 1:
                f = max(M[i][j - 1] - oi - ei, f - ei)
            H[i][j] = max(M[i][j], E[i][j], f)
    return H[n][m]


def _rescore(cigar, q, t, mat, od, ed, oi, ei):
    x = y = 0
    sc = 0
    for c in cigar:
        op, ln = int(c) & 0xF, int(c) >> 4
        if op == 0:
            for k in range(ln):
                sc += mat[t[y + k] * 5 + q[x + k]]
            x += ln
            y += ln
        elif op == 1:
            sc -= oi + ei * ln
            x += ln
        else:
            sc -= od + ed * ln
            y += ln
    assert x == len(q) and y == len(t)
    return sc


def _rand_pair(rng, maxlen):
    q = rng.integers(0, 5 if rng.random() < 0.3 else 4, rng.integers(0, maxlen + 1)).astype(np.uint8)
    if rng.random() < 0.5 and len(q):
        t = q.copy()
        for _ in range(rng.integers(0, 3)):
            k = rng.integers(0, len(t) + 1)
            r = rng.random()
            if r < 0.4 and len(t):
                t[min(k, len(t) - 1)] = rng.integers(0, 4)
            elif r < 0.7:
                t = np.insert(t, k, rng.integers(0, 4, rng.integers(1, 3)))
            else:
                t = np.delete(t, np.arange(k, min(k + 2, len(t))))
        t = t.astype(np.uint8)
    else:
        t = rng.integers(0, 4, rng.integers(0, maxlen + 1)).astype(np.uint8)
    return q, t


SCORINGS = [(1, 4, 6, 1, 6, 1), (1, 4, 5, 2, 7, 1), (2, 5, 3, 2, 4, 1), (1, 9, 1, 1, 1, 1), (3, 2, 2, 1, 3, 2)]


def test_local_bruteforce():
    rng = np.random.default_rng(11)
    for it in range(300):
        a, b, od, ed, oi, ei = SCORINGS[it % len(SCORINGS)]
        mat = _mat(a, b)
        q, t = _rand_pair(rng, 20)
        H = _local_ref(q, t, mat, od, ed, oi, ei)
        ref = _first_max(H)
        for xtra in (ksw.KSW_XSTART, ksw.KSW_XSTART | ksw.KSW_XBYTE):
            sc, te, qe, sc2, te2, tb, qb = ksw.ksw_align2(len(q), q, len(t), t, 5, mat, od, ed, oi, ei, xtra)
            assert sc == ref[0]
            if sc > 0:
                assert (te, qe) == ref[1:]
                # start: bwa re-aligns the reversed prefixes; the alignment
                # [tb..te] x [qb..qe] must score sc
                assert 0 <= tb <= te and 0 <= qb <= qe
                sub = _local_ref(q[qb:qe + 1][::-1], t[tb:te + 1][::-1], mat, od, ed, oi, ei)
                assert sub[-1, -1] == sc
            assert sc2 == -1 and te2 == -1


def test_global_bruteforce():
    rng = np.random.default_rng(12)
    for it in range(400):
        a, b, od, ed, oi, ei = SCORINGS[it % len(SCORINGS)]
        mat = _mat(a, b)
        q, t = _rand_pair(rng, 12)
        w = max(len(q), len(t)) + int(rng.integers(0, 3))
        sc, cig = ksw.ksw_global2(len(q), q, len(t), t, 5, mat, od, ed, oi, ei, w)
        assert sc == _global_ref(q, t, mat, od, ed, oi, ei)
        if len(q) and len(t):
            assert _rescore(cig, q, t, mat, od, ed, oi, ei) == sc


def test_gen_cigar2_consistency():
    """CIGAR re-scores to the score; NM/MD agree with the alignment."""
    rng = np.random.default_rng(13)
    mat = _mat(1, 4)
    for it in range(200):
        lp = int(rng.integers(30, 200))
        pac = rng.integers(0, 4, lp).astype(np.uint8)
        L = int(rng.integers(1, 30))
        beg = int(rng.integers(0, lp - L))
        rev = it % 2 == 1
        fwd = pac[beg:beg + L]
        q = fwd.copy()
        if rng.random() < 0.5:
            q[rng.integers(0, L)] = rng.integers(0, 5)
        if rng.random() < 0.5:
            k = int(rng.integers(0, len(q)))
            q = np.delete(q, k) if rng.random() < 0.5 and len(q) > 1 else np.insert(q, k, 1)
        q = q.astype(np.uint8)
        if rev:
            rb, re = 2 * lp - (beg + L), 2 * lp - beg
            query = np.where(q[::-1] < 4, 3 - q[::-1], 4).astype(np.uint8)
        else:
            rb, re = beg, beg + L
            query = q
        sc, cig, nm, md = ksw.gen_cigar2(mat, 6, 1, 6, 1, 100, lp, pac, len(query), query, rb, re)
        assert _rescore(cig, q, fwd, mat, 6, 1, 6, 1) == sc
        # rebuild MD/NM independently from the forward-strand alignment
        x = y = u = 0
        exp = ""
        nmx = 0
        for k, c in enumerate(cig):
            op, ln = int(c) & 0xF, int(c) >> 4
            if op == 0:
                for j in range(ln):
                    if q[x + j] != fwd[y + j]:
                        exp += f"{u}{'ACGT'[fwd[y + j]]}"
                        u = 0
                        nmx += 1
                    else:
                        u += 1
                x += ln
                y += ln
            elif op == 1:
                x += ln
                nmx += ln
            else:
                if 0 < k < len(cig) - 1:
                    exp += f"{u}^" + "".join("ACGT"[v] for v in fwd[y:y + ln])
                    u = 0
                    nmx += ln
                y += ln
        exp += str(u)
        assert bytes(md).decode() == exp
        assert nm == nmx


def test_gen_cigar2_reject():
    mat = _mat(1, 4)
    pac = np.zeros(50, np.uint8)
    q = np.zeros(6, np.uint8)
    for rb, re in [(47, 53), (10, 10), (-3, 3), (95, 101)]:
        _sc, cig, nm, md = ksw.gen_cigar2(mat, 6, 1, 6, 1, 10, 50, pac, 6, q, rb, re)
        assert len(cig) == 0 and nm == -1 and len(md) == 0


# ---------------------------------------------------------------------------
# golden cases from bwa's C code
# ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def golden():
    return dict(np.load(DATA))


def test_golden(golden):
    g = golden
    kinds, P, seq, off, out = g["kind"], g["params"], g["seq"], g["seq_off"], g["out"]
    cig, coff, md, moff = g["cigar"], g["cigar_off"], g["md"], g["md_off"]
    assert len(kinds) >= 300
    bad = []
    for i in range(len(kinds)):
        a, b, od, ed, oi, ei, w, eb, zd, h0, xtra, rb, re = (int(v) for v in P[i])
        q = seq[off[2 * i]:off[2 * i + 1]]
        t = seq[off[2 * i + 1]:off[2 * i + 2]]
        mat = _mat(a, b)
        k = kinds[i]
        if k == 0:
            got = tuple(ksw.ksw_extend2(len(q), q, len(t), t, 5, mat, od, ed, oi, ei, w, eb, zd, h0))
            exp = tuple(int(v) for v in out[i, :6])
        elif k == 1:
            sc, c = ksw.ksw_global2(len(q), q, len(t), t, 5, mat, od, ed, oi, ei, w)
            got = (int(sc), c.tolist())
            exp = (int(out[i, 0]), cig[coff[i]:coff[i + 1]].tolist())
        elif k == 2:
            got = tuple(ksw.ksw_align2(len(q), q, len(t), t, 5, mat, od, ed, oi, ei, xtra))
            exp = tuple(int(v) for v in out[i, :7])
        else:
            sc, c, nm, m = ksw.gen_cigar2(mat, od, ed, oi, ei, w, len(t), t, len(q), q, rb, re)
            got = (int(sc), int(nm), c.tolist(), bytes(m))
            exp = (int(out[i, 0]), int(out[i, 1]), cig[coff[i]:coff[i + 1]].tolist(),
                   bytes(md[moff[i]:moff[i + 1]]))
        if got != exp:
            bad.append((i, int(k), got, exp))
    assert not bad, bad[:5]
