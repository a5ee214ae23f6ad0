"""The minimizer index built on the GPU (index/mmgpu.py) against the CPU build, array for array: every map preset's
(k, w, HPC), sequences whose pieces must be sketched again (long homopolymers and tandem repeats beyond the
warm-up, slots that overflow), N runs, empty and short contigs, and map itself on an index built on the GPU."""
from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from g3align.index import mmgpu, mmidx

ROOT = Path(__file__).resolve().parent.parent
PRESETS = [(15, 10, False, 14), (19, 10, True, 14), (19, 19, True, 14), (21, 11, False, 14), (5, 3, True, 8),
           (11, 2, False, 20), (16, 10, False, 14), (6, 5, True, 10)]


def _hard_ref(seed=5):
    rng = np.random.default_rng(seed)
    rnd = lambda n: "".join(rng.choice(list("ACGT"), n))  # noqa: E731
    seqs = [rnd(9000) + "A" * 3000 + rnd(500) + "ACGT" * 900 + "N" * 30 + rnd(4000) + "CA" * 2500 + rnd(3000),
            "ACGTACGT" * 700 + rnd(100), rnd(50), "", "T" * 6000, rnd(12000) + "GATC" * 40 + rnd(2000),
            "N" * 5000, rnd(70000) + "N" * 2000 + rnd(3000) + "G" * 1500 + rnd(40000),
            rnd(3000) + "N" * 9000 + rnd(7) + "N" * 2500 + "ACGTTGCA" + "N" * 4000 + rnd(5000) + "N" * 3 + rnd(2)]
    return mmidx.mm_ref_from_strings(seqs)


def _lambda_ecoli():
    refs = [mmidx.read_mm_ref(str(ROOT / "data" / "lambda.fa.gz"))]
    ecoli = ROOT.parent / "shared" / "data" / "ref" / "ecoli_K12_MG1655.fa.gz"
    if ecoli.exists():
        refs.append(mmidx.read_mm_ref(str(ecoli)))
    return refs


def _same(a, b):
    for name in ("bkt_off", "keys", "key_off", "pos"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name


class _NumpyXp:
    """numpy in CuPy's clothes, for mmgpu.build_on's host logic without a GPU."""

    def __getattr__(self, name):
        return getattr(np, name)

    @staticmethod
    def asnumpy(a):
        return np.asarray(a)

    @staticmethod
    def argsort(a):
        return np.argsort(a, kind="stable")


class _TwinModule:
    """kernels/mmsketch.cu's mm_ref_pieces and mm_compact as their CPU twins (mmidx._sketch_pieces, a copy)."""

    def __init__(self, k, w, hpc, ref_seq):
        self.k, self.w, self.hpc, self.seq = k, w, hpc, ref_seq

    def get_function(self, name):
        def ref_pieces(grid, block, args):
            seq, off, pc, n, cap_off, slot, cnt, S0, S1, sw = args
            mmidx._sketch_pieces(self.seq, off, self.w, self.k, self.hpc, pc, cap_off, slot, cnt, S0, S1)

        def compact(grid, block, args):
            slot, base, cap, count, off, n, out = args
            for p in range(int(n)):
                if count[p] <= cap[p]:
                    out[off[p]:off[p] + count[p]] = slot[base[p]:base[p] + count[p]]
        return {"mm_ref_pieces": ref_pieces, "mm_compact": compact}[name]


@pytest.mark.parametrize("k,w,hpc,b", PRESETS)
def test_build_logic_with_twins(monkeypatch, k, w, hpc, b):
    """mmgpu's host side (pieces, the check of each piece's start state, the pieces sketched again, compaction,
    the grouping by two stable sorts) with numpy and the kernels' twins: the CPU build's arrays."""
    for ref in (_hard_ref(), mmidx.mm_ref_from_strings([])):
        want = mmidx.build_mm_index(ref, k, w, hpc, b)
        for piece, warm in ((mmgpu.PIECE, mmgpu.WARM), (997, 40), (4096, 300)):
            monkeypatch.setattr(mmgpu, "PIECE", piece)
            monkeypatch.setattr(mmgpu, "WARM", warm)
            stats = {}
            host, dev = mmgpu.build_on(_NumpyXp(), _TwinModule(k, w, hpc, ref.ref_seq), ref.ref_seq, ref.ref_off,
                                       k, w, hpc, want.b, stats)
            for name, x in zip(("bkt_off", "keys", "key_off", "pos"), host):
                y = getattr(want, name)
                assert x.dtype == y.dtype and np.array_equal(x, y), (name, piece, warm)
            if ref.n_seq and piece == 997:
                assert stats["redone"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("k,w,hpc,b", PRESETS)
def test_gpu_index_equals_cpu(monkeypatch, k, w, hpc, b):
    """Default pieces, then pieces and warm-ups so small that many pieces are sketched again."""
    redone = []
    real = mmgpu._sketch

    def counted(*a):
        stats = {}
        out = real(*a[:-1], stats)
        redone.append(stats.get("redone", 0))
        return out
    monkeypatch.setattr(mmgpu, "_sketch", counted)
    for ref in [_hard_ref()] + _lambda_ecoli():
        want = mmidx.build_mm_index(ref, k, w, hpc, b)
        for piece, warm in ((mmgpu.PIECE, mmgpu.WARM), (997, 40), (4096, 300)):
            monkeypatch.setattr(mmgpu, "PIECE", piece)
            monkeypatch.setattr(mmgpu, "WARM", warm)
            got = mmidx.build_mm_index(ref, k, w, hpc, b, device="gpu")
            _same(got, want)
            dev = got.extra["device"]
            for name, d in zip(("bkt_off", "keys", "key_off", "pos"), dev):
                assert np.array_equal(d.get(), getattr(want, name)), name
    assert max(redone) > 0  # the small pieces of the hard reference: some sketched again on the CPU


@pytest.mark.gpu
def test_gpu_index_no_minimizers_and_low_memory(monkeypatch):
    ref = mmidx.mm_ref_from_strings(["", "ACG", "N" * 100])
    _same(mmidx.build_mm_index(ref, 15, 10, False, device="gpu"), mmidx.build_mm_index(ref, 15, 10, False))
    notes = []
    monkeypatch.setattr(mmgpu, "need", lambda n, w: 1 << 62)
    ref = _hard_ref()
    got = mmidx.build_mm_index(ref, 15, 10, False, device="gpu", log=notes.append)
    _same(got, mmidx.build_mm_index(ref, 15, 10, False))
    assert "device" not in got.extra and len(notes) == 1 and "building it on the CPU" in notes[0]


@pytest.mark.gpu
def test_map_with_gpu_index_equals_golden(tmp_path):
    """`g3align map` on the GPU builds its index there (its arrays: test_gpu_index_equals_cpu); the output is
    minimap2's golden file."""
    out = tmp_path / "gpu.sam"
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "map", "-ax", "map-pb", "--device", "gpu",
                        "-o", str(out), str(ROOT / "data" / "lambda.fa.gz"), str(ROOT / "data" / "lambda_pbsim.fq.gz")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    gold = tmp_path / "gold.sam"
    gold.write_bytes(gzip.decompress((ROOT / "data" / "golden" / "lambda_pbsim.mm2.sam.gz").read_bytes()))
    c = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "compare", "--strict", str(out), str(gold)],
                       capture_output=True, text=True)
    assert c.returncode == 0, c.stdout + c.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("align", [[], ["--gpu-align"]])
@pytest.mark.parametrize("renamed", [0, 4, 40])
def test_map_sr_two_files_on_the_gpu_equals_cpu(tmp_path, renamed, align):
    """-ax sr on two files in lockstep: the fragments of two reads map on the CPU threads (with --gpu-align, their
    base alignment as one batch of ksw2 jobs on the GPU: _map_frags_staged) and the GPU set-up waits for a part
    that needs it; with every mate renamed (renamed=4) each record is a fragment of its own, so the parts take the
    GPU path after all (set up then); with every tenth renamed, parts mix both. Either way the records are the CPU
    run's."""
    r1, r2 = ROOT / "data" / "lambda_R1.fq.gz", ROOT / "data" / "lambda_R2.fq.gz"
    if renamed:
        lines = gzip.decompress(r2.read_bytes()).decode().splitlines(keepends=True)
        for i in range(0, len(lines), renamed):
            lines[i] = "@x" + lines[i][1:]
        r2 = tmp_path / "r2.fq"
        r2.write_text("".join(lines))
    outs = []
    for dev in ("gpu", "cpu"):
        out = tmp_path / f"{dev}.sam"
        r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "map", "-ax", "sr", "-t", "4", "--device",
                            dev, *(align if dev == "gpu" else []), "-o", str(out), str(ROOT / "data" / "lambda.fa.gz"),
                            str(r1), str(r2)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs.append([ln for ln in out.read_text().splitlines() if not ln.startswith("@PG")])
    assert outs[0] == outs[1] and len(outs[0]) > 1000
