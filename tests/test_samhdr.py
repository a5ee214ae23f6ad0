"""Tests for aligner/io/sam.py: header text as bwa mem prints it, -R/-H parsing, the output sink."""
import gzip
import shutil
import subprocess
from pathlib import Path

import pysam
import pytest

from g3align.aligner.io.sam import (
    HD_LINE,
    OutputSink,
    bwa_escape,
    parse_header_arg,
    parse_rg,
    pg_line,
    sam_header,
)

DATA = Path(__file__).resolve().parent.parent / "data"


def test_bwa_escape():
    assert bwa_escape(r"a\tb\nc\rd\\e") == "a\tb\nc\rd\\e"
    assert bwa_escape(r"x\qy") == "xy"           # unknown escape: both characters dropped
    assert bwa_escape("end\\") == "end"
    assert bwa_escape("plain") == "plain"


def test_parse_rg():
    line, rid = parse_rg(r"@RG\tID:grp1\tSM:s\tPL:ILLUMINA")
    assert line == "@RG\tID:grp1\tSM:s\tPL:ILLUMINA" and rid == "grp1"
    assert parse_rg(r"@RG\tSM:s\tID:z")[1] == "z"
    # bwa mem escapes the header line twice, the ID once
    assert parse_rg(r"@RG\tID:x\\qy\tSM:z") == ("@RG\tID:xy\tSM:z", "x\\qy")


@pytest.mark.parametrize("arg,why", [
    (r"RG\tID:x", "does not start with @RG"),
    ("@RG\tID:x", "literal <tab>"),
    (r"@RG\tSM:x", "no ID"),
    (r"@RGID:x", "no ID"),
    ("@RG\\tID:" + "a" * 256, "longer than 255"),
])
def test_parse_rg_errors(arg, why):
    with pytest.raises(ValueError, match=why) as e:
        parse_rg(arg)
    assert "\n" not in str(e.value)


def test_parse_rg_id_255_ok():
    assert len(parse_rg("@RG\\tID:" + "a" * 255)[1]) == 255


def test_parse_header_arg(tmp_path):
    assert parse_header_arg(r"@CO\tfoo\n@CO\tbar") == ["@CO\tfoo", "@CO\tbar"]
    f = tmp_path / "h.txt"
    f.write_text("@CO\tone\nnot a header\n@CO\\ttwo\n")
    assert parse_header_arg(str(f)) == ["@CO\tone", "@CO\ttwo"]
    with pytest.raises(ValueError, match="cannot read"):
        parse_header_arg(str(tmp_path / "missing"))


def test_header_order_and_content():
    rg, _ = parse_rg(r"@RG\tID:x\tSM:y")
    h = sam_header(["chr1", "chr2"], [100, 2000], rg_line=rg, pg_cmdline=["g3align", "mem", "-t", "2"],
                   extra_hd=["@CO\tfoo"], alt=[False, True], version="9.9")
    assert h == ("@HD\tVN:1.5\tSO:unsorted\tGO:query\n"
                 "@SQ\tSN:chr1\tLN:100\n"
                 "@SQ\tSN:chr2\tLN:2000\tAH:*\n"
                 "@CO\tfoo\n"
                 "@RG\tID:x\tSM:y\n"
                 "@PG\tID:g3align\tPN:g3align\tVN:9.9\tCL:g3align mem -t 2\n")


def test_header_hd_and_sq_from_H(capsys):
    h = sam_header(["c"], [5], extra_hd="@HD\tVN:1.6\tSO:queryname\n@SQ\tSN:other\tLN:9", pg_cmdline="x")
    lines = h.splitlines()
    assert lines[0] == "@HD\tVN:1.6\tSO:queryname"             # the user's @HD replaces ours
    assert lines[1] == "@SQ\tSN:other\tLN:9"                    # -H @SQ lines replace ours
    assert sum(ln.startswith("@HD") for ln in lines) == 1
    assert "1 @SQ lines provided with -H; 1 sequences" not in capsys.readouterr().err
    sam_header(["a", "b"], [5, 6], extra_hd=["@SQ\tSN:a\tLN:5"], pg_cmdline="x")
    assert "1 @SQ lines provided with -H; 2 sequences" in capsys.readouterr().err


def test_pg_line_escapes_tabs():
    assert pg_line(["g3align", "mem", "-R", "@RG\tID:x"], version="1") == \
        "@PG\tID:g3align\tPN:g3align\tVN:1\tCL:g3align mem -R @RG\\tID:x"
    assert pg_line("a b", version="1").endswith("CL:a b")


def test_sq_lines_match_bwa_golden():
    with gzip.open(DATA / "golden" / "lambda_se.bwa.sam.gz", "rt") as f:
        sq = [ln for ln in f if ln.startswith("@SQ")]
    h = sam_header(["NC_001416.1"], [48502], pg_cmdline="x")
    assert [ln + "\n" for ln in h.splitlines() if ln.startswith("@SQ")] == sq
    assert h.startswith(HD_LINE + "\n")


@pytest.mark.skipif(shutil.which("bwa") is None, reason="bwa not installed")
def test_header_like_bwa_mem(tmp_path):
    ref = tmp_path / "r.fa"
    ref.write_text(">c1 desc\nACGTACGTACGTTTGACCA\n>c2\nGGGGGCCCCCAAAAATTTTT\n")
    subprocess.run(["bwa", "index", str(ref)], check=True, capture_output=True)
    fq = tmp_path / "q.fq"
    fq.write_text("@r\nACGT\n+\nIIII\n")
    arg = r"@RG\tID:x\\qy\tSM:z"
    out = subprocess.run(["bwa", "mem", "-R", arg, "-H", r"@CO\tc1\n@CO\tc2", str(ref), str(fq)],
                         check=True, capture_output=True, text=True).stdout
    theirs = [ln for ln in out.splitlines() if ln.startswith("@") and not ln.startswith("@PG")]
    ours = sam_header(["c1", "c2"], [19, 20], rg_line=parse_rg(arg)[0],
                      extra_hd=parse_header_arg(r"@CO\tc1\n@CO\tc2"), pg_cmdline="x").splitlines()
    assert ours[0] == HD_LINE and ours[-1].startswith("@PG\tID:g3align")
    assert ours[1:-1] == theirs
    assert "RG:Z:x\\qy" in out                                  # the ID as parse_rg returns it


REC = ("r1\t0\tchr1\t5\t60\t4M\t*\t0\t0\tACGT\tIIII\tNM:i:0\n"
       "r2\t16\tchr1\t9\t0\t2S2M\t*\t0\t0\tACGT\t*\tAS:i:2\tXA:Z:chr1,+1,4M,0;\n"
       "r3\t4\t*\t0\t0\t*\t*\t0\t0\tNNNN\t####\n")


def test_sink_sam_file(tmp_path):
    h = sam_header(["chr1"], [100], pg_cmdline="t")
    p = tmp_path / "o.sam"
    with OutputSink(str(p), h) as o:
        o.write(REC[:30])
        o.write(REC[30:].encode())
    assert p.read_text() == h + REC


def test_sink_sam_stdout(capfdbinary):
    h = sam_header(["chr1"], [100], pg_cmdline="t")
    with OutputSink(None, h) as o:
        o.write(REC)
    assert capfdbinary.readouterr().out == (h + REC).encode()


@pytest.mark.parametrize("threads", [1, 2])
def test_sink_bam(tmp_path, threads):
    h = sam_header(["chr1"], [100], rg_line=parse_rg(r"@RG\tID:g")[0], pg_cmdline="t")
    p = tmp_path / "o.bam"
    with OutputSink(str(p), h, threads=threads) as o:
        for k in range(0, len(REC), 7):                  # lines split across writes
            o.write(REC[k:k + 7])
    with pysam.AlignmentFile(str(p), "rb") as f:
        assert str(f.header) == h
        got = [r.to_string() for r in f]
    assert "\n".join(got) + "\n" == REC


@pytest.mark.parametrize("fmt", ["sam", "bam"])
def test_sink_write_file(tmp_path, capfdbinary, fmt):
    """write_file (the sharded runs' units): SAM text copied file to file in the kernel, to a file and to stdout;
    BAM through whole lines read in chunks smaller than a line."""
    h = sam_header(["chr1"], [100], rg_line=parse_rg(r"@RG\tID:g")[0], pg_cmdline="t")
    src = tmp_path / "unit.sam"
    src.write_text(REC * 3)
    empty = tmp_path / "empty.sam"
    empty.write_bytes(b"")
    p = tmp_path / f"o.{fmt}"
    for path in (str(p), None) if fmt == "sam" else (str(p),):
        with OutputSink(path, h) as o:
            o.write(REC)
            o.write_file(str(src), chunk=7)
            o.write_file(str(empty))
            o.write(REC)
    if fmt == "sam":
        assert p.read_text() == h + REC * 5
        assert capfdbinary.readouterr().out == (h + REC * 5).encode()
    else:
        with pysam.AlignmentFile(str(p), "rb") as f:
            got = [r.to_string() for r in f]
        assert "\n".join(got) + "\n" == REC * 5


def test_sink_bad_format(tmp_path):
    with pytest.raises(ValueError, match="unknown output format"):
        OutputSink(str(tmp_path / "x"), "@HD\tVN:1.5\n", fmt="vcf")
    with pytest.raises(ValueError, match="CRAM output needs the reference FASTA"):
        OutputSink(str(tmp_path / "x.cram"), "@HD\tVN:1.5\n")
