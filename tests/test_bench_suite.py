"""scripts/bench_suite.py: the record comparison, the read statistics and the table with its minimum ratios."""
import json

from conftest import load_script

bs = load_script("bench_suite")


def test_compare_counts_records_and_differences(tmp_path):
    a, b = tmp_path / "a.sam", tmp_path / "b.sam"
    a.write_bytes(b"@HD\tVN:1.6\n@PG\tID:g3align\nr1\t0\tc\t1\nr2\t16\tc\t5\n")
    b.write_bytes(b"@HD\tVN:1.6\n@PG\tID:bwa\nr1\t0\tc\t1\nr2\t16\tc\t6\nr3\t4\t*\t0\n")
    assert bs.compare(a, a) == (2, 2, 0)          # headers left out
    assert bs.compare(a, b) == (2, 3, 2)          # r2 differs, r3 has no counterpart


def test_fastq_stats_and_fasta_length(tmp_path):
    fq = tmp_path / "r.fq"
    fq.write_bytes(b"@a\nACGT\n+\nIIII\n@b\nAC\n+\nII\n")
    assert bs.fastq_stats(fq) == {"reads": 2, "bases": 6}
    fa = tmp_path / "ref.fa"
    fa.write_bytes(b">x\nACGTACGT\nAC\n>y\nGGG\n")
    assert bs.fasta_length(fa) == 13


def test_report_takes_the_latest_run_and_the_minimum_per_mode(tmp_path):
    def row(name, mode, peer, g3, same=True):
        return {"workload": name, "mode": mode, "peer_cmd": "bwa mem", "peer_s": peer, "g3_s": g3,
                "ratio": round(peer / g3, 2), "peer_rss_mib": 100, "g3_rss_mib": 300, "identical": same,
                "records_differing": 0 if same else 3, "g3_records": 10, "reads": 10, "depth": 1.0}
    rows = [row("a", "mem-pe", 10, 2), row("b", "mem-pe", 9, 3), row("a", "mem-pe", 12, 2),
            row("c", "mem-se", 4, 2, same=False)]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    text = bs.report(tmp_path)
    assert text.count("| a |") == 1 and "| 6.00x |" in text          # a's later run replaced its first
    assert "| mem-pe | 2 | 3.00x | 6.00x |" in text                  # minimum and median of a (6x) and b (3x)
    assert "no (3 of 10 records differ)" in text
    assert (tmp_path / "results.md").read_text() == text


def test_workloads_are_well_formed():
    modes = {w[0] for w in bs.WORKLOADS.values()}
    assert {"mem-pe", "mem-se", "sr", "map-low-depth", "map-high-depth"} <= modes
    assert len(bs.WORKLOADS) >= 8
    refs = {w[1] for w in bs.WORKLOADS.values()}
    assert len(refs) >= 3 and refs <= set(bs.REFS)
    for mode, _ref, files, peer, g3 in bs.WORKLOADS.values():
        for f in files:
            src = f.rsplit("_", 1)[0]
            assert src in bs.SIMS or src in bs.REAL, f
        assert peer.split()[0] == ("bwa" if mode.startswith("mem") else "minimap2")
        assert g3.split()[0] == ("mem" if mode.startswith("mem") else "map")
