"""Tests for aligner/io/compare.py: per-read concordance of two SAM/BAM files."""
import gzip
import json
from pathlib import Path

import pysam
import pytest

from g3align.aligner.io.compare import (
    FIELDS,
    NotGroupedError,
    compare_sam,
    format_report,
    main,
    parse_truth,
    truth_check,
)

DATA = Path(__file__).resolve().parent.parent / "data"
HDR = "@SQ\tSN:chr1\tLN:10000\n@SQ\tSN:chr2\tLN:10000\n"


def rec(name, flag, rname="chr1", pos=100, mapq=60, cigar="10M", rnext="*", pnext=0, tlen=0,
        seq="ACGTACGTAC", qual="IIIIIIIIII", **tags):
    f = [name, str(flag), rname, str(pos), str(mapq), cigar, rnext, str(pnext), str(tlen), seq, qual]
    for k, v in tags.items():
        f.append(f"{k}:{'i' if isinstance(v, int) else 'Z'}:{v}")
    return "\t".join(f) + "\n"


def sam(tmp_path, name, records, header=HDR, gz=False):
    p = tmp_path / name
    text = header + "".join(records)
    p.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return str(p)


BASE = [
    rec("a", 0, NM=0, AS=10, XS=0, MD="10"),
    rec("b", 16, pos=500, NM=1, AS=8, XS=0, MD="5A4"),
    rec("c", 4, "*", 0, 0, "*"),
    rec("p", 99, pos=1000, rnext="=", pnext=1200, tlen=210, NM=0, MC="10M", AS=10),
    rec("p", 147, pos=1200, rnext="=", pnext=1000, tlen=-210, NM=0, MC="10M", AS=10),
]


def test_identical(tmp_path):
    a = sam(tmp_path, "a.sam", BASE)
    r = compare_sam(a, a)
    assert r["common"] == 5 and r["identical"] == 5
    for k in FIELDS:
        assert r["fields"][k]["diff"] == 0
    assert r["fields"]["TLEN"]["n"] == 2                     # pair fields: paired reads only
    assert r["fields"]["FLAG"]["n"] == 5
    assert r["mapped"] == {"both": 4, "test_only": 0, "gold_only": 0, "neither": 1}
    assert r["records"]["test"] == {"primary": 4, "unmapped": 1, "secondary": 0, "supplementary": 0}
    assert r["reads"]["gold"]["reads"] == 5
    json.dumps(r)


def test_field_differences(tmp_path):
    gold = sam(tmp_path, "g.sam", BASE)
    test = sam(tmp_path, "t.sam", [
        rec("a", 0, pos=101, NM=0, AS=10, XS=0, MD="10"),                    # POS
        rec("b", 16, pos=500, cigar="9M1S", NM=1, AS=8, MD="5A4"),            # CIGAR, XS missing
        rec("c", 0, pos=7, NM=0),                                            # mapped vs unmapped
        rec("p", 99, pos=1000, rnext="=", pnext=1200, tlen=211, NM=0, MC="10M", AS=10),   # TLEN
        rec("p", 147, pos=1200, mapq=3, rnext="chr1", pnext=1000, tlen=-210, NM=0, MC="10M", AS=10),
    ])
    r = compare_sam(test, gold, n_diff=10)
    f = r["fields"]
    assert r["common"] == 5 and r["identical"] == 0
    assert f["RNAME+POS+strand"]["diff"] == 2                # a, c
    assert f["CIGAR"]["diff"] == 2                           # b, c
    assert f["XS"]["diff"] == 1                              # b: missing vs present
    assert f["NM"]["diff"] == 1                              # c: present vs missing
    assert f["mapped"]["diff"] == 1 and f["FLAG"]["diff"] == 1
    assert f["TLEN"]["diff"] == 1 and f["TLEN"]["n"] == 2
    assert f["RNEXT"]["diff"] == 0                           # '=' equals the RNAME spelled out
    assert f["MAPQ"]["diff"] == 2                            # c (60 vs 0) and p/2
    assert f["FLAG+RNAME+POS+CIGAR"]["diff"] == 3
    assert f["RNAME+POS+strand+CIGAR"]["diff"] == 3
    assert r["mapped"] == {"both": 4, "test_only": 1, "gold_only": 0, "neither": 0}
    reads = {d["read"]: d["fields"] for d in r["diffs"]}
    assert reads["a"] == ["RNAME+POS+strand"]
    assert set(reads["b"]) == {"CIGAR", "XS"}
    assert reads["p/1"] == ["TLEN"]
    assert set(reads["p/2"]) == {"MAPQ"}
    assert "\tSEQ" not in r["diffs"][0]["test"] and "ACGTACGTAC" not in r["diffs"][0]["test"]
    text = format_report(r)
    assert "RNAME+POS+strand+CIGAR" in text and "first 5 differing reads" in text


def test_missing_duplicates_secondary(tmp_path):
    gold = sam(tmp_path, "g.sam", BASE + [rec("x", 0)])
    test = sam(tmp_path, "t.sam", [
        rec("a", 0, NM=0, AS=10, XS=0, MD="10"),
        rec("a", 256, pos=900),                              # an extra secondary
        rec("b", 16, pos=500, NM=1, AS=8, XS=0, MD="5A4"),
        rec("b", 2064, pos=800),                             # an extra supplementary
        rec("c", 4, "*", 0, 0, "*"),
        rec("c", 4, "*", 0, 0, "*"),                         # two primaries
        rec("p", 99, pos=1000, rnext="=", pnext=1200, tlen=210, NM=0, MC="10M", AS=10),
        rec("q", 0),                                         # not in gold
        rec("y", 256),                                       # secondary only: no primary
    ])
    r = compare_sam(test, gold)
    assert r["reads"]["test"]["missing"] == 2                # p/2 and x
    assert r["reads"]["gold"]["missing"] == 2                # q and y
    assert r["reads"]["test"]["multi_primary"] == 1
    assert r["reads"]["test"]["no_primary"] == 1
    assert r["common"] == 3                                  # a, b, p/1
    assert r["fields"]["n_secondary"]["diff"] == 1
    assert r["fields"]["n_supplementary"]["diff"] == 1
    assert r["records"]["test"]["secondary"] == 2 and r["records"]["test"]["supplementary"] == 1


def test_different_order_and_formats(tmp_path):
    gold = sam(tmp_path, "g.sam", BASE)
    order = [BASE[3], BASE[4], BASE[2], BASE[0], BASE[1]]
    test_gz = sam(tmp_path, "t.sam.gz", order, gz=True)
    r = compare_sam(test_gz, gold)
    assert r["identical"] == 5 and r["reads"]["test"]["missing"] == 0
    # BAM through pysam
    bam = str(tmp_path / "t.bam")
    hdr = pysam.AlignmentHeader.from_text(HDR)
    with pysam.AlignmentFile(bam, "wb", header=hdr) as f:
        for line in order:
            f.write(pysam.AlignedSegment.fromstring(line.rstrip("\n"), hdr))
    r = compare_sam(bam, gold)
    assert r["identical"] == 5


def test_not_grouped(tmp_path):
    gold = sam(tmp_path, "g.sam", BASE)
    test = sam(tmp_path, "t.sam", [BASE[3], BASE[0], BASE[4], BASE[1], BASE[2]])
    with pytest.raises(NotGroupedError, match="not adjacent"):
        compare_sam(test, gold)


def test_truth_wgsim():
    # wgsim: contig_left_right_..., left/right are the fragment's outer ends (1-based)
    n = "chr1_1001_1400_0:0:0_0:0:0_1f"
    assert parse_truth("wgsim", n) == ("chr1", 1001, 1400)
    assert parse_truth("wgsim", "chr_x_1_2_0:0:0_0:0:0_0") == ("chr_x", 1, 2)
    fwd = rec(n, 0, pos=1001, cigar="150M").split("\t")
    assert truth_check(fwd, "wgsim")
    assert truth_check(rec(n, 0, pos=1011, cigar="10S140M").split("\t"), "wgsim")   # clipped start
    assert not truth_check(rec(n, 0, pos=1030, cigar="150M").split("\t"), "wgsim")
    assert truth_check(rec(n, 16, pos=1251, cigar="150M").split("\t"), "wgsim")     # ends at 1400
    assert truth_check(rec(n, 16, pos=1251, cigar="140M10S").split("\t"), "wgsim")
    assert not truth_check(rec(n, 16, pos=1001, cigar="150M").split("\t"), "wgsim")  # wrong end
    assert not truth_check(rec(n, 0, "chr2", pos=1001, cigar="150M").split("\t"), "wgsim")
    assert truth_check(rec("oops", 0).split("\t"), "wgsim") is None


def test_truth_dwgsim():
    # dwgsim: contig_pos1_pos2_strand1_strand2_..., pos = leftmost base of each mate
    n = "chr1_23215_22718_1_0_0_0_0:0:0_0:0:0_0"
    assert parse_truth("dwgsim", n) == ("chr1", 23215, 22718, 1, 0)
    assert truth_check(rec(n, 16 | 0x40 | 1, pos=23215, cigar="50M").split("\t"), "dwgsim")
    assert not truth_check(rec(n, 0x40 | 1, pos=23215, cigar="50M").split("\t"), "dwgsim")  # strand
    assert truth_check(rec(n, 0x80 | 1, pos=22720, cigar="2S48M").split("\t"), "dwgsim")
    assert not truth_check(rec(n, 0x80 | 1, pos=23215, cigar="50M").split("\t"), "dwgsim")


def test_truth_counts(tmp_path):
    n1 = "chr1_1001_1400_0:0:0_0:0:0_0"
    n2 = "chr1_5001_5400_0:0:0_0:0:0_1"
    gold = sam(tmp_path, "g.sam", [rec(n1, 0, pos=1001, cigar="10M"), rec(n2, 0, pos=5001, mapq=30),
                                   rec("junk", 0)])
    test = sam(tmp_path, "t.sam", [rec(n1, 0, pos=3000, mapq=5), rec(n2, 4, "*", 0, 0, "*"),
                                   rec("junk", 0)])
    r = compare_sam(test, gold, truth="wgsim")
    t, g = r["truth"]["test"], r["truth"]["gold"]
    assert (t["reads"], t["mapped"], t["correct"], t["wrong"], t["unmapped"], t["unparsed"]) == (3, 1, 0, 1, 1, 1)
    assert (g["mapped"], g["correct"], g["wrong"]) == (2, 2, 0)
    assert {q: (m, w) for q, m, w in t["by_mapq"]}[1] == (1, 1)
    assert {q: (m, w) for q, m, w in t["by_mapq"]}[10] == (0, 0)
    assert {q: (m, w) for q, m, w in g["by_mapq"]}[40] == (1, 0)
    assert "accuracy from read names" in format_report(r)


def test_main_json_and_text(tmp_path, capsys):
    a = sam(tmp_path, "a.sam", BASE)
    assert main([a, a, "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["identical"] == 5
    assert main([a, a, "--diff", "3"]) == 0
    assert "reads compared: 5" in capsys.readouterr().out
    assert main([a, str(tmp_path / "nope.sam")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("[E::g3align] compare:") and "nope.sam" in err


def test_strict_exit_status(tmp_path, capsys):
    """--strict (make demo's check): 0 only when every read is in both files and the same in every field."""
    a = sam(tmp_path, "a.sam", BASE)
    assert main([a, a, "--strict"]) == 0
    b = sam(tmp_path, "b.sam", [BASE[0].replace("\t60\t", "\t59\t")] + BASE[1:])
    assert main([b, a]) == 0
    assert main([b, a, "--strict"]) == 2
    c = sam(tmp_path, "c.sam", BASE[1:])
    assert main([c, a, "--strict"]) == 2
    assert "differ (--strict)" in capsys.readouterr().err


def test_cli_help_is_compares_own():
    """`g3align compare --help` prints the comparator's options (click used to answer with a pointer to itself)."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "g3align.aligner.cli", "compare", "--help"], capture_output=True,
                       text=True)
    assert r.returncode == 0 and "--strict" in r.stdout and "--truth" in r.stdout, r.stdout + r.stderr


def test_golden_self_and_se_vs_pe():
    pe = str(DATA / "golden" / "lambda_pe.bwa.sam.gz")
    se = str(DATA / "golden" / "lambda_se.bwa.sam.gz")
    r = compare_sam(pe, pe, truth="wgsim")
    assert r["common"] == 4000 and r["identical"] == 4000
    assert r["truth"]["gold"]["correct"] >= 3990
    r = compare_sam(se, pe)
    assert r["common"] == 0 and r["reads"]["test"]["missing"] == 4000 and r["reads"]["gold"]["missing"] == 2000


def paf(name, strand="+", tname="chr1", ts=100, mapq=60, tp="P", cg="10M", qlen=10):
    return "\t".join([name, str(qlen), "0", "10", strand, tname, "10000", str(ts), str(ts + 10), "10", "10",
                      str(mapq), f"tp:A:{tp}", "cm:i:3", f"cg:Z:{cg}"]) + "\n"


def test_paf_records_are_compared_like_sam(tmp_path):
    gold = [paf("a"), paf("a", ts=5000, tp="P"), paf("a", ts=7000, tp="S"), paf("b", "-", ts=300)]
    test = [paf("a"), paf("a", ts=5000, tp="P"), paf("b", "-", ts=301, cg="9M1D")]
    g = tmp_path / "gold.paf"
    t = tmp_path / "test.paf"
    g.write_text("".join(gold))
    t.write_text("".join(test))
    res = compare_sam(str(t), str(g), tags=("tp", "cm"))
    assert res["common"] == 2
    assert res["records"]["gold"] == {"primary": 2, "unmapped": 0, "secondary": 1, "supplementary": 1}
    f = res["fields"]
    assert f["RNAME+POS+strand"]["same"] == 1 and f["CIGAR"]["same"] == 1
    assert f["n_secondary"]["same"] == 1 and f["n_supplementary"]["same"] == 2
    assert f["tp"]["same"] == 2 and "NM" not in f
