"""SDUST masking (aligner/map/sdust.py, `map -T`): the regions equal minimap2 2.24's sdust.c on sequences with tandem
repeats, N runs and lowercase bases (tests/data/sdust_golden.npz: `sdust -t T` built from sdust.c with -D_SDUST_MAIN,
on golden_seqs()); `map -T` gives minimap2's output (live minimap2), on the CPU and on the GPU where there is one."""
import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from g3align.aligner.map.sdust import dust_minimizers, sdust

ROOT = Path(__file__).resolve().parent.parent
GOLD = Path(__file__).resolve().parent / "data" / "sdust_golden.npz"


def golden_seqs(n=300, seed=1):
    """Sequences of random stretches, tandem repeats of 1-5 bp units (10-200 bp), N runs and lowercase runs."""
    rng = np.random.default_rng(seed)
    seqs = []
    for _ in range(n):
        L = int(rng.integers(50, 3000))
        parts, tot = [], 0
        while tot < L:
            r = rng.random()
            if r < 0.3:
                u = "".join("ACGT"[x] for x in rng.integers(0, 4, int(rng.integers(1, 6))))
                p = (u * 200)[:int(rng.integers(10, 200))]
            elif r < 0.35:
                p = "N" * int(rng.integers(1, 5))
            else:
                p = "".join("ACGT"[x] for x in rng.integers(0, 4, int(rng.integers(5, 300))))
            if rng.random() < 0.1:
                p = p.lower()
            parts.append(p)
            tot += len(p)
        seqs.append("".join(parts)[:L])
    return seqs


def _codes(s):
    tab = np.full(256, 4, np.uint8)
    tab[np.frombuffer(b"ACGTacgt", np.uint8)] = [0, 1, 2, 3, 0, 1, 2, 3]
    return tab[np.frombuffer(s.encode(), np.uint8)]


@pytest.mark.parametrize("T", [10, 20, 35])
def test_sdust_regions_equal_sdust_c(T):
    g = np.load(GOLD)
    off, reg = g[f"off{T}"], g[f"reg{T}"]
    seqs = golden_seqs()
    assert len(reg) > 100
    for i, s in enumerate(seqs):
        c = np.concatenate([np.full(7, 4, np.uint8), _codes(s)])  # at an offset: regions are relative to st
        np.testing.assert_array_equal(sdust(c, 7, len(c), T, 64), reg[off[i]:off[i + 1]], err_msg=f"s{i} T={T}")


def test_dust_minimizers_drops_those_half_masked():
    """mm_dust_minier's rule against a direct count: a minimizer goes when more than half its span is in SDUST
    regions (golden_seqs, w 10, k 15; positions shifted as minimap2 leaves them)."""
    from g3align.aligner.map.seed import collect_minimizers
    kept = dropped = 0
    for s in golden_seqs()[:120]:
        c = _codes(s)
        mv = collect_minimizers(c, np.array([0, len(c)], np.int64), 10, 15, False)
        regs = sdust(c, 0, len(c), 20, 64).tolist()
        want = [m for m in mv if _masked(m, regs) <= int(m[0] & np.uint64(0xFF)) >> 1]
        out = mv.copy()
        n = dust_minimizers(out, 0, mv.shape[0], c, 0, len(c), 20)
        np.testing.assert_array_equal(out[:n], np.array(want, np.uint64).reshape(-1, 2))
        kept += n
        dropped += mv.shape[0] - n
    assert kept > 1000 and dropped > 100


def _masked(m, regs):
    q = int(m[1] & 0xFFFFFFFF) >> 1
    span = int(m[0] & 0xFF)
    s, e = q - span + 1, q + 1
    return sum(max(0, min(e, b) - max(s, a)) for a, b in regs)


def test_dust_minimizers_on_a_tandem_repeat():
    """A read with a 300 bp microsatellite: the minimizers inside it go, the others stay."""
    rng = np.random.default_rng(4)
    s = np.concatenate([rng.integers(0, 4, 400), np.tile([0, 1], 150), rng.integers(0, 4, 400)]).astype(np.uint8)
    from g3align.aligner.map.seed import collect_minimizers
    mv = collect_minimizers(s, np.array([0, len(s)], np.int64), 10, 15, False)
    n = dust_minimizers(mv.copy(), 0, mv.shape[0], s, 0, len(s), 20)
    pos = (mv[:, 1] & np.uint64(0xFFFFFFFF)) >> np.uint64(1)
    inside = ((pos >= 420) & (pos < 690)).sum()
    assert inside > 0 and n <= mv.shape[0] - inside


@pytest.mark.skipif(shutil.which("minimap2") is None, reason="minimap2 not installed")
@pytest.mark.parametrize("args", [["-x", "map-ont", "-T", "20"], ["-cx", "map-pb", "-T", "10", "--cs"]])
def test_map_T_identical_to_minimap2(tmp_path, args):
    """Reads of lambda with microsatellites spliced in: minimap2 -T changes the output, and g3align's equals it."""
    rng = np.random.default_rng(9)
    ref = "".join(ln.strip() for ln in gzip.open(ROOT / "data/lambda.fa.gz", "rt") if not ln.startswith(">"))
    fq = tmp_path / "r.fq"
    with open(fq, "w") as fh:
        for i in range(80):
            ln = int(rng.integers(800, 4000))
            p = int(rng.integers(0, len(ref) - ln))
            s = list(ref[p:p + ln])
            for _ in range(int(rng.integers(1, 4))):
                u = "".join("ACGT"[x] for x in rng.integers(0, 4, int(rng.integers(1, 4))))
                q = int(rng.integers(0, len(s)))
                s[q:q] = list((u * 100)[:int(rng.integers(40, 200))])
            for _ in range(len(s) // 40):
                s[int(rng.integers(0, len(s)))] = "ACGT"[int(rng.integers(0, 4))]
            r = "".join(s)
            fh.write(f"@r{i}\n{r}\n+\n{'I' * len(r)}\n")
    ref_fa = ROOT / "data/lambda.fa.gz"
    want = subprocess.run(["minimap2", *args, str(ref_fa), str(fq)], capture_output=True, check=True).stdout
    i = args.index("-T")
    plain = subprocess.run(["minimap2", *args[:i], *args[i + 2:], str(ref_fa), str(fq)], capture_output=True,
                           check=True).stdout
    assert want != plain
    devices = ["cpu"]
    from g3align.aligner.gpu.device import gpu_available
    if gpu_available():
        devices.append("gpu")
    for dev in devices:
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "map", "--device", dev, *args, str(ref_fa),
                            str(fq)], capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
        assert r.stdout == want, dev
