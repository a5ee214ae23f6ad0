"""`g3align mem` on a prefix made by `bwa index`: index/bwafmt.read_bwa_index builds the same FM-index (double-step
table, bwa's suffix array samples) as `g3align index` does from the FASTA, mem's output on it equals bwa mem's, and
damaged or mismatched files get a clear error naming the file."""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from test_index import _bwa_test_fasta, _random_fasta, _write

from g3align.index import bwafmt
from g3align.index import fasta as F
from g3align.index.fm import build_fm, build_text, fm_from_bwt, suffix_array
from g3align.index.store import IndexFormatError

HAVE_BWA = shutil.which("bwa") is not None
DATA = os.path.join(os.path.dirname(__file__), "..", "data")


def _same_fm(a, b):
    for k in a._fields:
        x, y = getattr(a, k), getattr(b, k)
        assert np.array_equal(x, y), k
        assert not isinstance(x, np.ndarray) or x.dtype == y.dtype, k


def _same_ref(a, b):
    for k in ("pac", "offsets", "hole_off", "hole_len", "hole_chr"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
    assert a.l_pac == b.l_pac and list(a.names) == list(b.names) and list(a.comments) == list(b.comments)


def _fastas(tmp_path):
    yield _bwa_test_fasta(tmp_path / "m.fa")
    for seed in (3, 4):
        yield _write(tmp_path / f"r{seed}.fa", _random_fasta(np.random.default_rng(seed)))
    lam = tmp_path / "lambda.fa"
    with gzip.open(os.path.join(DATA, "lambda.fa.gz"), "rb") as fi:
        lam.write_bytes(fi.read())
    yield str(lam)


def test_read_bwa_index_equals_build(tmp_path):
    """Files written by `g3align index --bwa`'s writer read back into the FM-index build_fm makes at bwa's sampling."""
    for fa in _fastas(tmp_path):
        ref = F.read_fasta(fa)
        prefix = fa + ".w"
        fm = build_fm(ref.pac, sa_intv=32, with_rows=lambda rows, p=prefix, r=ref: bwafmt.write_bwa_rows(p, r, rows))
        ref2, fm2 = bwafmt.read_bwa_index(prefix)
        _same_fm(fm, fm2)
        _same_ref(ref, ref2)


@pytest.mark.parametrize("wide", [False, True, 7])  # 7: superblocks of 128 rows
def test_fm_from_bwt_texts(wide):
    """fm_from_bwt on the BWT of short and repetitive texts equals build_fm (both table layouts)."""
    rng = np.random.default_rng(5)
    pacs = [rng.integers(0, 4, L).astype(np.uint8) for L in (1, 2, 3, 31, 32, 33, 64, 65, 200, 1000)]
    pacs += [np.zeros(40, np.uint8), np.tile(np.array([0, 3], np.uint8), 50), np.array([1, 2] * 40, np.uint8)]
    for pac in pacs:
        for intv in (1, 8, 32):
            fm = build_fm(pac, sa_intv=intv, wide=wide)
            T = build_text(pac)
            SA = suffix_array(T).astype(np.int64)
            n = T.size
            B = np.empty(n + 1, np.uint8)
            B[0] = T[n - 1]
            B[1:] = T[SA - 1]
            B[1:][SA == 0] = 4
            sa = np.concatenate([[n], SA[intv - 1::intv]])
            fm2 = fm_from_bwt(B, int(np.flatnonzero(B == 4)[0]), sa, intv.bit_length() - 1, int(pac[0]), wide=wide)
            _same_fm(fm, fm2)


@pytest.mark.skipif(not HAVE_BWA, reason="bwa not on PATH")
def test_read_index_made_by_bwa(tmp_path):
    for fa in _fastas(tmp_path):
        prefix = fa + ".b"
        subprocess.run(["bwa", "index", "-p", prefix, fa], check=True, capture_output=True)
        ref = F.read_fasta(fa)
        ref2, fm2 = bwafmt.read_bwa_index(prefix)
        _same_fm(build_fm(ref.pac, sa_intv=32), fm2)
        _same_ref(ref, ref2)


def _bwa_files(tmp_path):
    prefix = str(tmp_path / "x")
    bwafmt.write_bwa_index(prefix, F.read_fasta(_bwa_test_fasta(tmp_path / "x.fa")))
    return prefix


def test_read_bwa_index_errors(tmp_path):
    prefix = _bwa_files(tmp_path)
    (tmp_path / "o").mkdir()
    other = str(tmp_path / "o" / "y")
    fa2 = _write(tmp_path / "o" / "y.fa", _random_fasta(np.random.default_rng(11)))
    bwafmt.write_bwa_index(other, F.read_fasta(fa2))
    cases = {
        "missing": lambda: os.remove(prefix + ".sa"),
        "truncated bwt": lambda: os.truncate(prefix + ".bwt", os.path.getsize(prefix + ".bwt") - 4),
        "truncated sa": lambda: os.truncate(prefix + ".sa", os.path.getsize(prefix + ".sa") - 8),
        "truncated pac": lambda: os.truncate(prefix + ".pac", 10),
        "other sa": lambda: shutil.copy(other + ".sa", prefix + ".sa"),
        "garbage ann": lambda: open(prefix + ".ann", "w").write("hello\n"),
        "garbage bwt": lambda: open(prefix + ".bwt", "r+b").write(b"\xff" * 40),
    }
    want = {"missing": ".sa: file not found", "truncated bwt": ".bwt: is truncated", "truncated sa": ".sa: is trunc",
            "truncated pac": ".pac: has 10 bytes", "other sa": ".sa: does not belong", "garbage ann": ".ann: not a bwa",
            "garbage bwt": ".bwt: is not the BWT"}
    keep = {x: open(f"{prefix}.{x}", "rb").read() for x in bwafmt.BWA_FILES}
    for name, damage in cases.items():
        damage()
        with pytest.raises(IndexFormatError, match=want[name].replace(".", r"\.")):
            bwafmt.read_bwa_index(prefix)
        for x, b in keep.items():
            open(f"{prefix}.{x}", "wb").write(b)
    bwafmt.read_bwa_index(prefix)  # restored


def _mem(args):
    env = dict(os.environ, G3ALIGN_DETACH="0")
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", *args], capture_output=True, env=env)
    assert r.returncode == 0, r.stderr.decode()
    return [x for x in r.stdout.split(b"\n") if x and not x.startswith(b"@PG")], r.stderr.decode()


def test_mem_on_bwa_prefix(tmp_path):
    """mem on a prefix holding only bwa's five files: the same SAM as on g3align's own index of the FASTA (and as
    bwa mem's, when bwa is here), paired-end; a prefix with neither index is a one-line error."""
    lam = tmp_path / "lambda.fa"
    with gzip.open(os.path.join(DATA, "lambda.fa.gz"), "rb") as fi:
        lam.write_bytes(fi.read())
    reads = [os.path.join(DATA, f"lambda_R{i}.fq.gz") for i in (1, 2)]
    subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "index", str(lam)], check=True, capture_output=True)
    own, _ = _mem([str(lam), *reads])
    prefix = str(tmp_path / "bwaonly")
    if HAVE_BWA:
        subprocess.run(["bwa", "index", "-p", prefix, str(lam)], check=True, capture_output=True)
    else:
        bwafmt.write_bwa_index(prefix, F.read_fasta(str(lam)))
    got, err = _mem([prefix, *reads])
    assert got == own and len(got) > 100
    if HAVE_BWA:
        r = subprocess.run(["bwa", "mem", prefix, *reads], capture_output=True, check=True)
        body = [x for x in r.stdout.split(b"\n") if x and not x.startswith(b"@")]
        assert [x for x in got if not x.startswith(b"@")] == body  # (g3align writes an @HD line, bwa does not)
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "mem", str(tmp_path / "none"), reads[0]],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "index file not found" in r.stderr and "Traceback" not in r.stderr
