"""aligner/map/ksw2.py against minimap2 2.24's ksw2 SSE kernels.

Stored vectors (tests/data/ksw2_vectors.txt.gz, produced by the C harness scripts/ksw2_harness.c on
the original sources) are checked for exact equality of every ez field and the CIGAR.  When gcc and
the minimap2 sources (/tmp/mm2, or $MM2_SRC) are present, fresh random cases are also run through the
live harness.  `python tests/test_ksw2.py N [seed]` runs N random cases against the harness (the
large campaign); `python tests/test_ksw2.py --write-vectors` regenerates the stored vectors.
"""
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from g3align.aligner.map import ksw2
from g3align.aligner.map.types import (
    EZ_MAX,
    EZ_N,
    EZ_SCORE,
    KSW_EZ_APPROX_DROP,
    KSW_EZ_APPROX_MAX,
    KSW_EZ_EXTZ_ONLY,
    KSW_EZ_GENERIC_SC,
    KSW_EZ_REV_CIGAR,
    KSW_EZ_RIGHT,
    KSW_EZ_SCORE_ONLY,
)

HERE = Path(__file__).resolve().parent
VECTORS = HERE / "data" / "ksw2_vectors.txt.gz"
HARNESS_SRC = HERE.parent / "scripts" / "ksw2_harness.c"
MM2 = Path(os.environ.get("MM2_SRC", "/tmp/mm2"))

# (a, b, q, e, q2, e2): map-ont/map-pb, map-hifi, sr, asm5-like, asm20-like
PRESETS = [(2, 4, 4, 2, 24, 1), (1, 4, 6, 2, 26, 1), (2, 8, 12, 2, 24, 1), (1, 19, 39, 3, 81, 1), (1, 4, 6, 2, 26, 1)]
ALIGN_C_FLAGS = [
    KSW_EZ_EXTZ_ONLY | KSW_EZ_RIGHT | KSW_EZ_REV_CIGAR,  # left extension
    KSW_EZ_APPROX_MAX,  # gap filling, first pass
    0,  # gap filling, second pass
    KSW_EZ_EXTZ_ONLY,  # right extension, inversions
]
FLAG_BITS = [KSW_EZ_SCORE_ONLY, KSW_EZ_RIGHT, KSW_EZ_APPROX_MAX, KSW_EZ_APPROX_DROP, KSW_EZ_EXTZ_ONLY,
             KSW_EZ_REV_CIGAR]


# ----------------------------------------------------------------------------------------------
# random cases
# ----------------------------------------------------------------------------------------------
def _mutate(rng, s, sub, indel, n_rate):
    out = []
    i = 0
    n = len(s)
    while i < n:
        r = rng.random()
        if r < indel / 2:  # deletion (often of a homopolymer run)
            ln = 1 + int(rng.geometric(0.5)) - 1
            i += ln
            continue
        if r < indel:  # insertion
            ln = int(rng.geometric(0.4))
            base = s[i] if rng.random() < 0.6 else rng.integers(0, 4)
            out.extend([base] * ln)
        c = s[i]
        if rng.random() < sub:
            c = (c + rng.integers(1, 4)) % 4
        if rng.random() < n_rate:
            c = 4
        out.append(c)
        i += 1
    return np.array(out, np.uint8)


def _rand_seq(rng, n, homo):
    if n <= 0:
        return np.zeros(0, np.uint8)
    if not homo:
        return rng.integers(0, 4, n).astype(np.uint8)
    runs = []
    tot = 0
    while tot < n:
        ln = int(rng.geometric(0.3))
        runs.append(np.full(ln, rng.integers(0, 4), np.uint8))
        tot += ln
    return np.concatenate(runs)[:n]


def _pair(rng, n):
    t = _rand_seq(rng, n, rng.random() < 0.3)
    if rng.random() < 0.05:
        t[rng.random(n) < 0.05] = 4
    mode = rng.random()
    if mode < 0.12:  # unrelated
        q = _rand_seq(rng, int(max(0, n + rng.integers(-n // 4 - 2, n // 4 + 3))), rng.random() < 0.3)
    elif mode < 0.25:  # related then diverged (Z-drop territory)
        cut = int(rng.integers(0, n + 1))
        q = np.concatenate([_mutate(rng, t[:cut], 0.05, 0.03, 0.0), _rand_seq(rng, n - cut, False)])
    elif mode < 0.32:  # one long gap
        q = _mutate(rng, t, 0.02, 0.02, 0.0)
        if len(q) > 4:
            a = int(rng.integers(0, len(q)))
            b = min(len(q), a + int(rng.integers(1, max(2, len(q) // 3))))
            q = np.concatenate([q[:a], q[b:]]) if rng.random() < 0.5 else \
                np.concatenate([q[:a], _rand_seq(rng, b - a, False), q[a:]])
    else:
        q = _mutate(rng, t, rng.choice([0.0, 0.01, 0.05, 0.15, 0.3]), rng.choice([0.0, 0.01, 0.05, 0.12]),
                    rng.choice([0.0, 0.0, 0.01, 0.1]))
    if rng.random() < 0.5:
        q, t = t, q
    return q, t


def random_case(rng, max_len=2000):
    """One random (kind, params, qseq, tseq); params as harness ints."""
    kind = rng.choice(["d", "d", "d", "z", "z", "l"])
    x = rng.random()
    if x < 0.35:
        n = int(rng.integers(0, 40))
    elif x < 0.75:
        n = int(rng.integers(0, 300))
    elif x < 0.995:
        n = int(rng.integers(0, max_len + 1))
    else:
        n = int(rng.integers(2000, 20001))
    q, t = _pair(rng, n)
    if rng.random() < 0.03:  # an empty side
        if rng.random() < 0.5:
            q = q[:0]
        else:
            t = t[:0]
    if rng.random() < 0.85:
        a, b, go, ge, go2, ge2 = PRESETS[int(rng.integers(len(PRESETS)))]
    else:
        a, b = int(rng.integers(1, 4)), int(rng.integers(1, 10))
        go, ge = int(rng.integers(0, 14)), int(rng.integers(1, 4))
        go2, ge2 = int(rng.integers(go, 40)), int(rng.integers(1, ge + 1))
        if rng.random() < 0.1:  # second model cheaper: the kernel swaps them
            go, ge, go2, ge2 = go2, ge2, go, ge
        if rng.random() < 0.15:  # large penalties: 8-bit offsets wrap
            go, ge = int(rng.integers(20, 64)), int(rng.integers(2, 12))
            go2, ge2 = int(rng.integers(go, 90)), int(rng.integers(1, ge + 1))
            b = int(rng.integers(1, 2 * (go + ge) + 1))
    sc_ambi = int(rng.choice([1, 1, 1, 0, 2]))
    mat = [int(v) for v in ksw2.gen_simple_mat(5, a, b, sc_ambi)]
    if kind == "l":
        return kind, [go, ge], mat, q, t
    big = max(len(q), len(t)) > 2500
    w = int(rng.choice([-1, int(rng.integers(0, 40)), int(rng.integers(40, 1200))]))
    if big and (w < 0 or w > 600):
        w = int(rng.integers(0, 600))
    zdrop = int(rng.choice([-1, 100, 400, int(rng.integers(0, 60))]))
    eb = int(rng.choice([-1, 0, 10]))
    if rng.random() < 0.6:
        flag = int(rng.choice(ALIGN_C_FLAGS))
    else:
        flag = 0
        for bit in FLAG_BITS:
            if rng.random() < 0.4:
                flag |= bit
    if rng.random() < 0.03:
        flag |= KSW_EZ_GENERIC_SC
    if kind == "z":
        if rng.random() < 0.5:
            go2, ge2 = go, ge
        return kind, [go, ge, w, zdrop, eb, flag], mat, q, t
    return kind, [go, ge, go2, ge2, w, zdrop, eb, flag], mat, q, t


def case_line(case):
    kind, par, mat, q, t = case
    qs = "".join("01234"[c] for c in q) or "-"
    ts = "".join("01234"[c] for c in t) or "-"
    return f"{kind} {len(q)} {len(t)} {' '.join(map(str, par))} {' '.join(map(str, mat))} {qs} {ts}"


def parse_line(line):
    f = line.split()
    kind, qlen, tlen = f[0], int(f[1]), int(f[2])
    npar = {"d": 8, "z": 6, "l": 2}[kind]
    par = [int(v) for v in f[3:3 + npar]]
    mat = [int(v) for v in f[3 + npar:28 + npar]]
    q = np.array([int(c) for c in f[28 + npar][:qlen]], np.uint8)
    t = np.array([int(c) for c in f[29 + npar][:tlen]], np.uint8)
    return kind, par, mat, q, t


def run_ours(case):
    """Our result in the harness' output format (without the SSE2 marker)."""
    kind, par, mat, q, t = case
    m = np.array(mat, np.int8)
    if kind == "l":
        sc, qe, te = ksw2.ll_i16(q, t, m, par[0], par[1])
        return f"{sc} {qe} {te}"
    if kind == "d":
        ez, cig = ksw2.extd2(q, t, m, *par)
    else:
        ez, cig = ksw2.extz2(q, t, m, *par)
    assert ez.shape[0] == EZ_N
    return " ".join(str(int(v)) for v in ez) + f" {len(cig)}" + "".join(f" {int(c)}" for c in cig)


def harness_line_fields(line):
    """Harness output -> (ours-comparable string, sse2_differs)."""
    line = line.strip()
    diff = line.endswith("!")
    if diff:
        line = line[:-1].strip()
    return line, diff


# ----------------------------------------------------------------------------------------------
# the C oracle
# ----------------------------------------------------------------------------------------------
def build_harness(workdir):
    """Compile the harness against the minimap2 sources; returns its path or None."""
    gcc = shutil.which("gcc")
    if gcc is None or not (MM2 / "ksw2_extd2_sse.c").exists() or not HARNESS_SRC.exists():
        return None
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    inc = ["-I", str(MM2), "-DHAVE_KALLOC"]
    objs = []
    jobs = [("extd2_41", "ksw2_extd2_sse.c", ["-msse4.1", "-DKSW_CPU_DISPATCH"]),
            ("extd2_2", "ksw2_extd2_sse.c", ["-msse2", "-mno-sse4.1", "-DKSW_CPU_DISPATCH", "-DKSW_SSE2_ONLY"]),
            ("extz2_41", "ksw2_extz2_sse.c", ["-msse4.1", "-DKSW_CPU_DISPATCH"]),
            ("extz2_2", "ksw2_extz2_sse.c", ["-msse2", "-mno-sse4.1", "-DKSW_CPU_DISPATCH", "-DKSW_SSE2_ONLY"]),
            ("ll", "ksw2_ll_sse.c", ["-msse2"]), ("kalloc", "kalloc.c", [])]
    try:
        for name, src, opts in jobs:
            o = workdir / f"{name}.o"
            subprocess.run([gcc, "-O2", "-c", *opts, *inc, str(MM2 / src), "-o", str(o)], check=True,
                           capture_output=True)
            objs.append(str(o))
        exe = workdir / "ksw2_harness"
        subprocess.run([gcc, "-O2", *inc, str(HARNESS_SRC), *objs, "-o", str(exe)], check=True, capture_output=True)
    except (subprocess.CalledProcessError, OSError):
        return None
    return exe


def run_harness(exe, lines):
    res = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    out = res.stdout.splitlines()
    assert len(out) == len(lines)
    return out


def campaign(n, seed, exe, max_len=2000, batch=2000, verbose=True):
    """n random cases against the harness; returns (compared, mismatches, sse2_diffs, bad_lines)."""
    rng = np.random.default_rng(seed)
    done = bad = sse2 = 0
    bad_lines = []
    while done < n:
        k = min(batch, n - done)
        cases = [random_case(rng, max_len) for _ in range(k)]
        lines = [case_line(c) for c in cases]
        outs = run_harness(exe, lines)
        for c, ln, o in zip(cases, lines, outs):
            want, d = harness_line_fields(o)
            sse2 += d
            if run_ours(c) != want:
                bad += 1
                if len(bad_lines) < 20:
                    bad_lines.append(ln)
        done += k
        if verbose:
            print(f"{done} cases, {bad} mismatches, {sse2} SSE2/SSE4.1 differences", flush=True)
    return done, bad, sse2, bad_lines


# ----------------------------------------------------------------------------------------------
# tests
# ----------------------------------------------------------------------------------------------
def _load_vectors():
    if not VECTORS.exists():
        return []
    with gzip.open(VECTORS, "rt") as fh:
        lines = fh.read().splitlines()
    return [(lines[i], lines[i + 1]) for i in range(0, len(lines) - 1, 2)]


def test_stored_vectors():
    vec = _load_vectors()
    assert len(vec) >= 1000
    bad = []
    for inp, want in vec:
        if run_ours(parse_line(inp)) != harness_line_fields(want)[0]:
            bad.append(inp[:200])
    assert not bad, f"{len(bad)} of {len(vec)} differ; first: {bad[0]}"


def test_gen_simple_mat():
    m = ksw2.gen_simple_mat(5, 2, 4, 1)
    want = np.array([[2, -4, -4, -4, -1], [-4, 2, -4, -4, -1], [-4, -4, 2, -4, -1], [-4, -4, -4, 2, -1],
                     [-1, -1, -1, -1, -1]], np.int8).ravel()
    assert m.dtype == np.int8 and np.array_equal(m, want)
    assert np.array_equal(ksw2.gen_simple_mat(5, -2, -4, -1), want)


def test_simple_alignments():
    mat = ksw2.gen_simple_mat(5, 2, 4, 1)
    s = np.array([0, 1, 2, 3, 0, 1, 2, 3, 3, 2, 1, 0], np.uint8)
    ez, cig = ksw2.extd2(s, s, mat, 4, 2, 24, 1, -1, 400, -1, 0)
    assert ez[EZ_SCORE] == 24 and ez[EZ_MAX] == 24 and list(cig) == [12 << 4]
    q = np.concatenate([s[:6], s[8:]])
    ez, cig = ksw2.extz2(q, s, mat, 4, 2, -1, 400, -1, 0)
    assert list(cig) == [6 << 4, 2 << 4 | 2, 4 << 4] and ez[EZ_SCORE] == 20 - 8
    ez, cig = ksw2.extd2(q[:0], s, mat, 4, 2, 24, 1, -1, 400, -1, 0)
    assert len(cig) == 0 and ez[EZ_SCORE] == -0x40000000
    sc, qe, te = ksw2.ll_i16(s, s, mat, 4, 2)
    assert (sc, qe, te) == (24, 11, 11)


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    exe = build_harness(tmp_path_factory.mktemp("ksw2h"))
    if exe is None:
        pytest.skip("gcc or minimap2 sources not available")
    return exe


def test_live_harness(harness):
    n, bad, _, lines = campaign(300, int.from_bytes(os.urandom(4), "little"), harness, max_len=400,
                                verbose=False)
    assert n == 300 and bad == 0, lines[:3]


def tricky_cases(rng):
    """Hand-picked shapes: empty/1-base sides, all-N, homopolymers, band narrower than the length
    difference, w=0, zdrop=0, swapped gap models, q==q2 in extd2, the early exit for huge
    mismatch penalties, generic scoring, large penalties (8-bit offsets wrap) and a few long pairs."""
    out = []
    mats = [[int(v) for v in ksw2.gen_simple_mat(5, a, b, sa)] for a, b, sa in
            [(2, 4, 1), (1, 4, 1), (2, 8, 1), (2, 4, 0), (1, 19, 1), (2, 40, 1)]]
    gaps = [(4, 2, 24, 1), (6, 2, 26, 1), (12, 2, 24, 1), (24, 1, 4, 2), (4, 2, 4, 2), (39, 3, 81, 1), (0, 1, 5, 1),
            (60, 10, 80, 2), (2, 1, 2, 1)]
    seqs = []
    for n1, n2 in [(0, 5), (5, 0), (1, 1), (1, 7), (7, 1), (16, 16), (17, 15), (31, 33), (64, 3), (3, 64)]:
        seqs.append((rng.integers(0, 4, n1).astype(np.uint8), rng.integers(0, 4, n2).astype(np.uint8)))
    seqs.append((np.full(40, 4, np.uint8), np.full(35, 4, np.uint8)))
    seqs.append((np.full(50, 2, np.uint8), np.full(41, 2, np.uint8)))
    seqs.append((np.array([0, 1] * 30, np.uint8), np.array([0, 1] * 27, np.uint8)))
    seqs.append((np.array([0, 0, 1, 1, 2, 2, 3, 3] * 8, np.uint8), np.array([0, 1, 2, 3] * 17, np.uint8)))
    for _ in range(8):
        seqs.append(_pair(rng, int(rng.integers(20, 200))))
    for q, t in seqs:
        for _ in range(6):
            mat = mats[int(rng.integers(len(mats)))]
            go, ge, go2, ge2 = gaps[int(rng.integers(len(gaps)))]
            w = int(rng.choice([-1, 0, 1, 2, 5, 16, 100]))
            zd = int(rng.choice([-1, 0, 5, 100, 400]))
            eb = int(rng.choice([-1, 0, 10, 1000]))
            flag = int(rng.choice(ALIGN_C_FLAGS + [KSW_EZ_SCORE_ONLY, KSW_EZ_APPROX_MAX | KSW_EZ_APPROX_DROP,
                                                   KSW_EZ_RIGHT, KSW_EZ_GENERIC_SC, KSW_EZ_APPROX_MAX | KSW_EZ_RIGHT]))
            out.append(("d", [go, ge, go2, ge2, w, zd, eb, flag], mat, q, t))
            out.append(("z", [go, ge, w, zd, eb, flag], mat, q, t))
            out.append(("l", [go, ge], mat, q, t))
    for n, w in [(3000, 100), (2500, 40), (4000, 300)]:
        q, t = _pair(rng, n)
        mat = mats[0]
        for flag in ALIGN_C_FLAGS:
            out.append(("d", [4, 2, 24, 1, w, 400, -1, flag], mat, q, t))
            out.append(("z", [4, 2, w, 400, -1, flag], mat, q, t))
    return out


def write_vectors(exe, n_random=3000, seed=20240611):
    """Stored vectors: align.c-like random cases of moderate size plus a few hand-picked shapes."""
    rng = np.random.default_rng(seed)
    cases = [random_case(rng, max_len=600) for _ in range(n_random)]
    cases = [c for c in cases if len(c[3]) * len(c[4]) <= 600 * 600]
    extra_lines = []
    extra_path = HERE / "data" / "ksw2_extra_cases.txt"
    if extra_path.exists():
        extra_lines = [ln for ln in extra_path.read_text().splitlines() if ln.strip()]
    cases += tricky_cases(rng)
    lines = [case_line(c) for c in cases] + extra_lines
    outs = run_harness(exe, lines)
    with gzip.open(VECTORS, "wt", compresslevel=9) as fh:
        for ln, o in zip(lines, outs):
            fh.write(ln + "\n" + o + "\n")
    return len(lines)


if __name__ == "__main__":
    exe = build_harness("/tmp/ksw2_harness_build")
    if exe is None:
        sys.exit("no gcc / minimap2 sources")
    if sys.argv[1:2] == ["--write-vectors"]:
        print(write_vectors(exe), "vectors written")
    else:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
        seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
        done, bad, sse2, bl = campaign(n, seed, exe)
        for ln in bl[:5]:
            print("BAD", ln[:300])
        print(f"TOTAL {done} compared, {bad} mismatches, {sse2} SSE2-vs-SSE4.1 differences")
