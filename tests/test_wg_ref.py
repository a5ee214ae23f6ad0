"""scripts/wg_ref.py: the whole-genome stand-in generator, at a tiny size from the bundled lambda reference."""
import sys
from pathlib import Path

import numpy as np
from conftest import load_script

wg = load_script("wg_ref")
sys.modules.setdefault("wg_ref", wg)  # the worker processes (fork) find build_chrom by its module's name
LAMBDA = str(Path(__file__).resolve().parent.parent / "data" / "lambda.fa.gz")


def _contigs(fa: Path) -> dict:
    out, name = {}, None
    for line in fa.read_text().splitlines():
        if line.startswith(">"):
            name = line[1:]
            out[name] = []
        else:
            assert len(line) <= 60
            out[name].append(line)
    return {k: "".join(v) for k, v in out.items()}


def test_layout_and_same_bytes_for_any_job_count(tmp_path):
    args = ["--size", "600000", "--alts", "3", "--seed", "7", "--sources", LAMBDA]
    wg.main(["--out", str(tmp_path / "a"), "--jobs", "2", *args])
    wg.main(["--out", str(tmp_path / "b"), "--jobs", "1", *args])
    a = (tmp_path / "a" / "wg.fa").read_bytes()
    assert a == (tmp_path / "b" / "wg.fa").read_bytes()
    c = _contigs(tmp_path / "a" / "wg.fa")
    names = list(c)
    assert names[:25] == wg.NAMES + ["chrM"] and len(names) == 28
    alts = (tmp_path / "a" / "wg.fa.alt").read_text().split()
    assert alts == names[25:] and all("_alt" in n for n in alts)
    lens = np.array([len(c[n]) for n in wg.NAMES])
    assert abs(lens.sum() - 600000) < 600000 * 0.01 + 25 * 20000   # GRCh38's shares, each at least 20 kb
    assert lens.argmax() == 0                                       # chr1 the longest
    assert set("".join(c.values())) <= set("ACGTN")
    for n in wg.NAMES:                                              # telomere-like N runs at both ends
        assert c[n][:1000] == "N" * 1000 and c[n][-1000:] == "N" * 1000


def test_mutate_rates_and_revcomp():
    rng = np.random.default_rng(3)
    a = wg.ACGT[rng.integers(0, 4, 200_000)]
    m = wg.mutate(np.random.default_rng(5), a, 0.0)
    assert np.array_equal(m, a)
    b = wg.mutate(np.random.default_rng(5), a, 0.05)
    assert abs(b.size - a.size) < 0.005 * a.size                    # indels at d / 10, half of them insertions
    assert bytes(wg.revcomp(np.frombuffer(b"AACGTN", np.uint8))) == b"NACGTT"
