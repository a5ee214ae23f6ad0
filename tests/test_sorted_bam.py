"""`--sort`: a coordinate-sorted BAM and its index from `mem` and `map`, record for record what `samtools sort`
makes of the SAM the same run writes, in bounded memory (a tiny --sort-mem spills to temporary files, which are
removed)."""
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pysam
import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
G3 = [sys.executable, "-m", "g3align.aligner.cli"]
ENV = dict(os.environ, G3ALIGN_DETACH="0")


@pytest.fixture(scope="module")
def idx(tmp_path_factory):
    d = tmp_path_factory.mktemp("sortidx")
    subprocess.run([*G3, "index", "-p", str(d / "lam"), str(DATA / "lambda.fa.gz")], check=True, env=ENV,
                   capture_output=True)
    return d / "lam"


def _records(path):
    with pysam.AlignmentFile(str(path), "rb" if str(path).endswith(".bam") else "r", check_sq=False) as f:
        return [r.to_string() for r in f]


def _check(tmp_path, args, sam_args):
    bam = tmp_path / "out.bam"
    sam = tmp_path / "out.sam"
    r = subprocess.run([*G3, *args(bam)], capture_output=True, text=True, env=ENV, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    subprocess.run([*G3, *sam_args(sam)], check=True, capture_output=True, env=ENV, cwd=tmp_path)
    with pysam.AlignmentFile(str(bam), "rb") as f:
        assert f.header.to_dict()["HD"]["SO"] == "coordinate"
    assert (tmp_path / "out.bam.bai").exists()
    assert not [p for p in os.listdir(tmp_path) if ".g3tmp" in p]  # temporary files gone
    got = _records(bam)
    ref = tmp_path / "ref.bam"
    pysam.sort("-o", str(ref), str(sam))
    assert got == _records(ref)
    if shutil.which("samtools"):  # the system's samtools too, where there is one
        sys_bam = tmp_path / "sys.bam"
        subprocess.run(["samtools", "sort", "-o", str(sys_bam), str(sam)], check=True)
        assert got == _records(sys_bam)
    unsorted = _records(sam)
    assert sorted(got) == sorted(unsorted) and got != unsorted
    return got


def test_mem_pe_sorted_bam_spilling(idx, tmp_path):
    r1, r2 = str(DATA / "lambda_R1.fq.gz"), str(DATA / "lambda_R2.fq.gz")
    got = _check(tmp_path, lambda o: ["mem", "-t", "2", "--sort", "--sort-mem", "1M", "-o", str(o), str(idx), r1, r2],
                 lambda o: ["mem", "-t", "2", "-o", str(o), str(idx), r1, r2])
    assert len(got) >= 4000


def test_map_sorted_bam(tmp_path):
    lam, lr = str(DATA / "lambda.fa.gz"), str(DATA / "lambda_pbsim.fq.gz")
    _check(tmp_path, lambda o: ["map", "-ax", "map-pb", "--sort", "-o", str(o), lam, lr],
           lambda o: ["map", "-ax", "map-pb", "-o", str(o), lam, lr])


@pytest.mark.parametrize("args,msg", [
    (["mem", "--sort", "{idx}", "{r1}"], "-o FILE.bam"),
    (["mem", "--sort", "-o", "x.sam", "{idx}", "{r1}"], "-o FILE.bam"),
    (["mem", "--sort", "--sort-mem", "lots", "-o", "x.bam", "{idx}", "{r1}"], "--sort-mem"),
    (["mem", "--sort", "--sort-mem", "100K", "-o", "x.bam", "{idx}", "{r1}"], "at least 1M"),
    (["map", "--sort", "-x", "map-pb", "-o", "x.bam", "{lam}", "{r1}"], "-a"),
])
def test_sort_needs_a_bam(idx, tmp_path, args, msg):
    args = [a.format(idx=idx, r1=DATA / "lambda_R1.fq.gz", lam=DATA / "lambda.fa.gz") for a in args]
    r = subprocess.run([*G3, *args], capture_output=True, text=True, env=ENV, cwd=tmp_path)
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("[E::")]
    assert r.returncode == 1 and len(err) == 1 and msg in err[0] and "Traceback" not in r.stderr, r.stderr


def test_gz_reads_sorted(idx, tmp_path):
    """Single-end: the header's @HD line keeps VN and gets SO:coordinate; every read has its record."""
    bam = tmp_path / "se.bam"
    subprocess.run([*G3, "mem", "--sort", "-o", str(bam), str(idx), str(DATA / "lambda_R1.fq.gz")], check=True,
                   env=ENV, capture_output=True)
    hd = pysam.AlignmentFile(str(bam), "rb").header.to_dict()["HD"]
    assert hd["SO"] == "coordinate" and "VN" in hd
    assert gzip.decompress((DATA / "lambda_R1.fq.gz").read_bytes()).count(b"\n+") == len(_records(bam))


def _fields(path, ref, no_md=False):
    """Every record's fields and tags (CRAM decoding may give tags back in another order; it also adds an MD tag to
    records written without one, which no_md leaves out)."""
    mode = "rc" if str(path).endswith(".cram") else "rb" if str(path).endswith(".bam") else "r"
    with pysam.AlignmentFile(str(path), mode, reference_filename=str(ref), check_sq=False) as f:
        return [(r.query_name, r.flag, r.reference_name, r.reference_start, r.mapping_quality, r.cigarstring,
                 r.next_reference_name, r.next_reference_start, r.template_length, r.query_sequence,
                 pysam.qualities_to_qualitystring(r.query_qualities) if r.query_qualities is not None else None,
                 sorted(t for t in r.get_tags() if not (no_md and t[0] == "MD"))) for r in f]


def test_cram_output(idx, tmp_path):
    """-o FILE.cram (mem: against the FASTA the index was built from; map: the FASTA given) holds the SAM output's
    records; --sort -o FILE.cram is coordinate-sorted with a .crai; without its FASTA a CRAM is a one-line error."""
    ref = DATA / "lambda.fa.gz"
    r1, r2 = str(DATA / "lambda_R1.fq.gz"), str(DATA / "lambda_R2.fq.gz")
    runs = {"mem": ["mem", "-t", "2", str(idx), r1, r2],
            "map": ["map", "-t", "2", "-ax", "map-pb", str(ref), str(DATA / "lambda_pbsim.fq.gz")]}
    for name, args in runs.items():
        sam, cram, srt = tmp_path / f"{name}.sam", tmp_path / f"{name}.cram", tmp_path / f"{name}.sorted.cram"
        subprocess.run([*G3, *args[:1], "-o", str(sam), *args[1:]], check=True, capture_output=True, env=ENV)
        subprocess.run([*G3, *args[:1], "-o", str(cram), *args[1:]], check=True, capture_output=True, env=ENV)
        r = subprocess.run([*G3, *args[:1], "--sort", "-o", str(srt), *args[1:]], capture_output=True, text=True,
                           env=ENV)
        assert r.returncode == 0, r.stderr
        no_md = name == "map"  # map writes no MD tag here
        want = _fields(sam, ref, no_md)
        assert len(want) > 40 and _fields(cram, ref, no_md) == want
        assert (tmp_path / f"{name}.sorted.cram.crai").exists()
        got = _fields(srt, ref, no_md)
        assert sorted(got, key=repr) == sorted(want, key=repr) and got != want
        assert [(g[2], g[3]) for g in got if g[2]] == sorted((g[2], g[3]) for g in got if g[2])
    fa = tmp_path / "gone.fa"
    fa.write_bytes(gzip.decompress(ref.read_bytes()))
    subprocess.run([*G3, "index", "-p", str(tmp_path / "gone"), str(fa)], check=True, capture_output=True, env=ENV)
    fa.unlink()
    r = subprocess.run([*G3, "mem", "-o", str(tmp_path / "x.cram"), str(tmp_path / "gone"), r1], capture_output=True,
                       text=True, env=ENV)
    assert r.returncode != 0 and "Traceback" not in r.stderr and "CRAM output needs the reference FASTA" in r.stderr
