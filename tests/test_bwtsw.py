"""index/bwtsw.py: the blockwise CPU build (`g3align index -a bwtsw`) gives the FM-index divsufsort's suffix array
gives, field for field, for any block size (one block, two, hundreds), in both table layouts, and the same .g3i bytes
through the command line."""
import os
import subprocess
import sys

import numpy as np
import pytest

from g3align.index import bwtsw
from g3align.index.fm import build_fm

DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def _texts():
    rng = np.random.default_rng(5)
    out = [rng.integers(0, 4, L).astype(np.uint8) for L in (1, 2, 3, 5, 31, 32, 33, 64, 65, 127, 128, 129, 1000)]
    out.append(np.zeros(700, np.uint8))                                      # one long run: ties over every block
    out.append(np.tile(np.array([0, 1], np.uint8), 600))                     # period 2
    unit = rng.integers(0, 4, 37).astype(np.uint8)
    out.append(np.concatenate([rng.integers(0, 4, 300), np.tile(unit, 60), rng.integers(0, 4, 300)]).astype(np.uint8))
    dup = rng.integers(0, 4, 1500).astype(np.uint8)                          # exact copies, across blocks
    out.append(np.concatenate([dup, rng.integers(0, 4, 10), dup, dup[:1000]]).astype(np.uint8))
    pal = rng.integers(0, 4, 200).astype(np.uint8)                           # a reverse-complement palindrome
    out.append(np.concatenate([pal, 3 - pal[::-1]]).astype(np.uint8))
    return out


def _same_fm(a, b):
    for k in a._fields:
        x, y = getattr(a, k), getattr(b, k)
        assert np.array_equal(np.asarray(x), np.asarray(y)), k
        assert not isinstance(x, np.ndarray) or x.dtype == y.dtype, k


@pytest.mark.parametrize("block,first", [(1, 1), (3, 2), (64, 16), (1000, 7), (1 << 20, 1 << 20)])
def test_blockwise_equals_divsufsort(block, first):
    """Every field of the index (occurrence table, sampled SA, primary, C1/C2) is divsufsort's, whatever the blocks:
    a block of one suffix, blocks that double, one block for the whole text."""
    for pac in _texts():
        for intv in (1, 8, 32):
            want = build_fm(pac, sa_intv=intv)
            got = bwtsw.build_fm_blockwise(pac, intv.bit_length() - 1, block=block, first=first)
            _same_fm(want, got)


def test_blockwise_wide_layout_and_file_backed_table(tmp_path):
    """The superblock layout (forced at 2**9 rows) and the occurrence table in a file-backed map (unlinked at once:
    nothing is left in tmp_dir) give the same index."""
    rng = np.random.default_rng(9)
    pac = rng.integers(0, 4, 5000).astype(np.uint8)
    pac[1000:3000] = np.tile(pac[:50], 40)
    want = build_fm(pac, sa_intv=8, wide=9)
    got = bwtsw.build_fm_blockwise(pac, 3, wide=9, block=700, first=100, tmp_dir=str(tmp_path))
    assert isinstance(got.occ, np.memmap)
    _same_fm(want, got)
    assert os.listdir(tmp_path) == []


def test_block_too_large_for_its_keys():
    """A block whose keys and indices do not fit in 64 bits is refused with a one-line error."""
    key = np.array([1 << 62, 3, 0], np.uint64)
    with pytest.raises(ValueError, match="too large"):
        bwtsw._block_ranks(key)


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "g3align.aligner.cli", *args], capture_output=True, text=True,
                          cwd=cwd)


def test_cli_bwtsw_writes_the_same_index(tmp_path):
    """`g3align index -a bwtsw` (small blocks: many merges) writes the .g3i that `-a is` writes, byte for byte;
    -a bwtsw with --bwa, or -a with --device gpu, is a one-line error."""
    fa = os.path.join(DATA, "lambda.fa.gz")
    a, b = str(tmp_path / "is"), str(tmp_path / "sw")
    r = _cli("index", "--device", "cpu", "-a", "is", "-p", a, fa)
    assert r.returncode == 0, r.stderr
    r = _cli("index", "-a", "bwtsw", "-b", "4096", "-p", b, fa)
    assert r.returncode == 0, r.stderr
    assert "block by block" in r.stderr
    with open(a + ".g3i", "rb") as x, open(b + ".g3i", "rb") as y:
        assert x.read() == y.read()
    assert sorted(os.listdir(tmp_path)) == ["is.g3i", "sw.g3i"]
    r = _cli("index", "-a", "bwtsw", "--bwa", "-p", str(tmp_path / "c"), fa)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "-a bwtsw" in r.stderr
    r = _cli("index", "-a", "bwtsw", "--device", "gpu", "-p", str(tmp_path / "d"), fa)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "--device gpu" in r.stderr


def test_memory_needed_is_bounded():
    """The blockwise build's estimate for a 3.1 Gbp reference stays under 16 GB (divsufsort's is ~55 GB)."""
    from g3align.index.build import memory_needed
    assert bwtsw.memory_needed(3_130_000_000) < 16e9 < memory_needed(3_130_000_000, "cpu")


def test_auto_picks_the_blockwise_build_where_divsufsort_would_not_fit(tmp_path, monkeypatch, capsys):
    """-a auto (the default): on a machine whose memory divsufsort's build exceeds but the blockwise one does not
    (300 kB stands in for a genome too large), the blockwise build runs and writes the same index; where neither
    fits, the one-line error names the blockwise build's need; with -a is, it also says what -a bwtsw would need."""
    from g3align.index import build
    fa = os.path.join(DATA, "lambda.fa.gz")
    build.build_index(fa, str(tmp_path / "is"), algo="is", progress=False)
    monkeypatch.setattr(build, "_mem_total", lambda: 300_000)
    build.build_index(fa, str(tmp_path / "auto"), block=1024, progress=False)
    assert "block by block" in capsys.readouterr().err
    assert (tmp_path / "is.g3i").read_bytes() == (tmp_path / "auto.g3i").read_bytes()
    monkeypatch.setattr(build, "_mem_total", lambda: 10**5)
    with pytest.raises(ValueError, match=r"on the CPU needs at least 0\.2 MB of memory, this machine has 0\.1 MB"):
        build.build_index(fa, str(tmp_path / "x"), block=1024, progress=False)
    monkeypatch.setattr(build, "_mem_total", lambda: 300_000)
    with pytest.raises(ValueError, match=r"needs at least 0\.6 MB .*block by block \(-a bwtsw\) 0\.2 MB"):
        build.build_index(fa, str(tmp_path / "y"), algo="is", block=1024, progress=False)
