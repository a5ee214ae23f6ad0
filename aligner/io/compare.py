"""Per-read concordance of two SAM/BAM files (`g3align compare TEST GOLD`).

Input: two alignment files (SAM text, gzipped SAM, or BAM through pysam), each grouped by read name
(all records of a QNAME adjacent, as bwa mem and g3align write them; `samtools sort -n` or
`samtools collate` makes any file so). Output: a dict of counts (`compare_sam`) and a text table
(`format_report`).

A read is the key (QNAME, FLAG & 0xC0), i.e. a single-end read or one mate of a pair. In each file a
read must have exactly one primary record (neither 0x100 nor 0x800 set; an unmapped read's record is
its primary); reads with none or several are counted and left out of the field comparison. For the
reads present in both files, the primary records are compared field by field:

    mapped            the 0x4 bit
    FLAG              the whole flag
    RNAME+POS+strand  RNAME, POS and the 0x10 bit
    CIGAR, MAPQ, SEQ, QUAL
    NM AS XS MD SA XA tags (absent in one file and present in the other counts as different)
    RNEXT PNEXT TLEN MC   only over reads that are paired (0x1) in either file; '=' means RNAME
    n_secondary, n_supplementary   the number of 0x100 / 0x800 records of the read
    FLAG+RNAME+POS+CIGAR, RNAME+POS+strand+CIGAR   combined rows

PAF input (minimap2's and `g3align map`'s default output) is read as SAM-like records: QNAME,
FLAG (0x10 for '-', 0x100 for tp:A:S/i, 0x800 for a read's second and later tp:A:P lines, 0x4 for
an unmapped line), RNAME, POS = target start + 1, MAPQ, CIGAR from the `cg` tag ('*' without it),
SEQ/QUAL '*', and the PAF tags.  `tags` picks the tags compared (default NM AS XS MD SA XA; for
minimap2 output e.g. NM,ms,AS,nn,tp,cm,s1,s2,de,dv,rl,SA,cs).

Truth (`truth='wgsim'|'dwgsim'`): the true origin parsed from the read names. A mapped primary
alignment is correct when its contig is the true contig and
- wgsim (name `contig_left_right_..._idx`, left/right = 1-based outer ends of the fragment): a forward
  alignment's start, or a reverse alignment's end, lies within `tol` bp of `left`, resp. `right`
  (the start/end taken with or without the soft/hard clips, as samtools' wgsim_eval.pl does);
- dwgsim (name `contig_pos1_pos2_strand1_strand2_..._idx`, pos = 1-based leftmost base of each
  mate): the strand is the mate's true strand and the start (with or without clips) lies within
  `tol` bp of the mate's true position (mate 2 for 0x80 records, else mate 1).
"""
from __future__ import annotations

import argparse
import functools
import gzip
import io
import json
import re
import sys
from collections.abc import Iterator

PAIR_FIELDS = ("RNEXT", "PNEXT", "TLEN", "MC")
COMBINED = ("FLAG+RNAME+POS+CIGAR", "RNAME+POS+strand+CIGAR")
TAGS = ("NM", "AS", "XS", "MD", "SA", "XA")
FIELDS = ("mapped", "FLAG", "RNAME+POS+strand", "CIGAR", "MAPQ") + TAGS + PAIR_FIELDS + (
    "SEQ", "QUAL", "n_secondary", "n_supplementary") + COMBINED
MAPQ_STEPS = (0, 1, 10, 20, 30, 40, 50, 60)

_WGSIM = re.compile(r"^(.+)_(\d+)_(\d+)_\d+:\d+:\d+_\d+:\d+:\d+_[0-9a-fA-F]+(?:/[12])?$")
_DWGSIM = re.compile(r"^(.+)_(\d+)_(\d+)_([01])_([01])_[01]_[01]_\d+:\d+:\d+_\d+:\d+:\d+_[0-9a-fA-F]+"
                     r"(?:/[12])?$")
_CIGAR = re.compile(r"(\d+)([MIDNSHP=X])")


class NotGroupedError(ValueError):
    """The records of one read are not adjacent in a file."""


# --------------------------------------------------------------------------------------------------
# Reading

def _open_lines(path: str) -> Iterator[str]:
    """SAM lines (header included) of a SAM / gzipped SAM / BAM file; '-' reads stdin."""
    raw = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
    try:
        fh = raw
        if raw.peek(2)[:2] == b"\x1f\x8b":
            fh = gzip.GzipFile(fileobj=raw, mode="rb")
            if fh.peek(4)[:4] == b"BAM\x01":
                if path == "-":
                    raise ValueError("compare: BAM on stdin is not supported; give a file name")
                fh.close()
                raw.close()
                yield from _bam_lines(path)
                return
        yield from io.TextIOWrapper(fh, encoding="utf-8", errors="surrogateescape", newline="\n")
    finally:
        if path != "-":
            raw.close()


def _bam_lines(path: str) -> Iterator[str]:
    import pysam
    with pysam.AlignmentFile(path, "rb", check_sq=False) as f:
        for seg in f.fetch(until_eof=True):
            yield seg.to_string()


def _paf_record(f: list[str], first_primary: bool) -> list[str]:
    """A PAF line as a SAM-like record (see the module docstring)."""
    tags = f[12:]
    tt = {t[:2]: t[5:] for t in tags}
    if f[4] == "*":
        return [f[0], "4", "*", "0", "0", "*", "*", "0", "0", "*", "*"] + tags
    flag = 0x10 if f[4] == "-" else 0
    if tt.get("tp") in ("S", "i"):
        flag |= 0x100
    elif not first_primary:
        flag |= 0x800
    return [f[0], str(flag), f[5], str(int(f[7]) + 1), f[11], tt.get("cg", "*"), "*", "0", "0", "*", "*"] + tags


def _groups(path: str) -> Iterator[tuple[str, list[list[str]]]]:
    """(QNAME, records split into fields) for each run of records with the same QNAME."""
    name = None
    recs: list[list[str]] = []
    for line in _open_lines(path):
        if not line or line[0] == "@":
            continue
        f = line.rstrip("\r\n").split("\t")
        if len(f) >= 12 and f[4] in ("+", "-", "*"):          # PAF
            f = _paf_record(f, f[0] != name or not any(int(r[1]) & 0x904 == 0 for r in recs))
        if len(f) < 11:
            if len(f) == 1 and not f[0]:
                continue
            raise ValueError(f"{path}: malformed SAM line (only {len(f)} fields): {line[:80]!r}")
        if f[0] != name:
            if recs:
                yield name, recs
            name, recs = f[0], []
        recs.append(f)
    if recs:
        yield name, recs


# --------------------------------------------------------------------------------------------------
# Per-read summary and truth

class _Read:
    """One read (a QNAME and mate bit) in one file."""
    __slots__ = ("n_prim", "n_sec", "n_supp", "prim")

    def __init__(self) -> None:
        self.prim: list[str] | None = None
        self.n_prim = self.n_sec = self.n_supp = 0


def _reads_of(recs: list[list[str]], stats: dict) -> dict[int, _Read]:
    out: dict[int, _Read] = {}
    for f in recs:
        flag = int(f[1])
        r = out.get(flag & 0xC0)
        if r is None:
            r = out[flag & 0xC0] = _Read()
        if flag & 0x100:
            r.n_sec += 1
            stats["secondary"] += 1
        elif flag & 0x800:
            r.n_supp += 1
            stats["supplementary"] += 1
        else:
            r.n_prim += 1
            r.prim = f
            stats["unmapped" if flag & 4 else "primary"] += 1
    return out


def _tags(f: list[str]) -> dict[str, str]:
    return {t[:2]: t[5:] for t in f[11:]}


def _key_str(qname: str, mate: int) -> str:
    return qname + ("/1" if mate == 0x40 else "/2" if mate == 0x80 else "")


def _span(pos: int, cigar: str) -> tuple[int, int, int, int]:
    """(start, end, unclipped start, unclipped end), 1-based inclusive."""
    ops = _CIGAR.findall(cigar)
    rlen = sum(int(n) for n, op in ops if op in "MDN=X")
    lclip = rclip = 0
    for n, op in ops:
        if op not in "SH":
            break
        lclip += int(n)
    for n, op in reversed(ops):
        if op not in "SH":
            break
        rclip += int(n)
    end = pos + max(rlen, 1) - 1
    return pos, end, pos - lclip, end + rclip


@functools.lru_cache(maxsize=1024)
def parse_truth(scheme: str, qname: str) -> tuple | None:
    """The origin encoded in a simulated read's name: wgsim -> (contig, left, right); dwgsim ->
    (contig, pos1, pos2, strand1, strand2); None when the name does not follow the scheme."""
    if scheme == "wgsim":
        m = _WGSIM.match(qname)
        return None if m is None else (m.group(1), int(m.group(2)), int(m.group(3)))
    if scheme == "dwgsim":
        m = _DWGSIM.match(qname)
        return None if m is None else (m.group(1), int(m.group(2)), int(m.group(3)),
                                       int(m.group(4)), int(m.group(5)))
    raise ValueError(f"unknown truth scheme {scheme!r} (wgsim or dwgsim)")


def truth_check(f: list[str], scheme: str, tol: int = 20) -> bool | None:
    """Is the (mapped, primary) record `f` at its simulated origin? None: name not parsable."""
    flag = int(f[1])
    t = parse_truth(scheme, f[0])
    if t is None:
        return None
    if scheme == "wgsim":
        chrom, left, right = t
        if f[2] != chrom:
            return False
        s, e, us, ue = _span(int(f[3]), f[5])
        if flag & 0x10:
            return min(abs(right - ue), abs(right - e)) <= tol
        return min(abs(left - us), abs(left - s)) <= tol
    chrom = t[0]
    k = 1 if flag & 0x80 else 0
    pos, strand = t[1 + k], t[3 + k]
    if f[2] != chrom or bool(flag & 0x10) != bool(strand):
        return False
    s, e, us, ue = _span(int(f[3]), f[5])
    return min(abs(pos - us), abs(pos - s)) <= tol


class _Truth:
    def __init__(self, scheme: str, tol: int):
        self.scheme, self.tol = scheme, tol
        self.n = self.mapped = self.correct = self.unparsed = 0
        self.hist_mapped = [0] * 256                         # mapped reads by MAPQ
        self.hist_wrong = [0] * 256                          # wrongly placed reads by MAPQ

    def add(self, f: list[str]) -> None:
        self.n += 1
        if int(f[1]) & 4:
            return
        ok = truth_check(f, self.scheme, self.tol)
        if ok is None:
            self.unparsed += 1
            return
        self.mapped += 1
        self.correct += ok
        q = min(int(f[4]), 255)
        self.hist_mapped[q] += 1
        self.hist_wrong[q] += not ok

    def result(self) -> dict:
        return {"scheme": self.scheme, "tol": self.tol, "reads": self.n, "mapped": self.mapped,
                "correct": self.correct, "wrong": self.mapped - self.correct,
                "unmapped": self.n - self.mapped - self.unparsed, "unparsed": self.unparsed,
                "by_mapq": [[t, sum(self.hist_mapped[t:]), sum(self.hist_wrong[t:])] for t in MAPQ_STEPS]}


# --------------------------------------------------------------------------------------------------
# Comparison

class _Comparer:
    def __init__(self, truth: str | None, tol: int, n_diff: int, tags: tuple[str, ...] = TAGS):
        self.tags = tuple(tags)
        self.fields = [k for k in FIELDS if k not in TAGS]
        self.fields[5:5] = list(self.tags)
        self.same = dict.fromkeys(self.fields, 0)
        self.n = dict.fromkeys(self.fields, 0)
        self.mapped = {"both": 0, "test_only": 0, "gold_only": 0, "neither": 0}
        self.counts = {s: {"reads": 0, "no_primary": 0, "multi_primary": 0, "missing": 0}
                       for s in ("test", "gold")}
        self.records = {s: {"primary": 0, "unmapped": 0, "secondary": 0, "supplementary": 0}
                        for s in ("test", "gold")}
        self.n_common = self.n_identical = 0
        self.n_fast = self.n_fast_paired = 0       # reads with identical records, counted at the end
        self.truth = {s: _Truth(truth, tol) for s in ("test", "gold")} if truth else None
        self.n_diff = n_diff
        self.diffs: list[dict] = []

    def _valid(self, side: str, r: _Read | None) -> bool:
        if r is None:
            self.counts[side]["missing"] += 1
            return False
        self.counts[side]["reads"] += 1
        if r.n_prim != 1:
            self.counts[side]["no_primary" if r.n_prim == 0 else "multi_primary"] += 1
            return False
        if self.truth:
            self.truth[side].add(r.prim)
        return True

    def add(self, qname: str, test: list[list[str]] | None, gold: list[list[str]] | None) -> None:
        rt = _reads_of(test, self.records["test"]) if test else {}
        rg = _reads_of(gold, self.records["gold"]) if gold else {}
        for mate in sorted(set(rt) | set(rg)):
            a, b = rt.get(mate), rg.get(mate)
            ok_a, ok_b = self._valid("test", a), self._valid("gold", b)
            if ok_a and ok_b:
                self._compare(_key_str(qname, mate), a, b)

    def _compare(self, key: str, a: _Read, b: _Read) -> None:
        self.n_common += 1
        fa, fb = a.prim, b.prim
        ga, gb = int(fa[1]), int(fb[1])
        if fa == fb and a.n_sec == b.n_sec and a.n_supp == b.n_supp:
            # identical records (the common case): every field is the same
            self.n_fast += 1
            self.n_fast_paired += ga & 1
            self.mapped["neither" if ga & 4 else "both"] += 1
            return
        ta, tb = _tags(fa), _tags(fb)
        ma, mb = not ga & 4, not gb & 4
        self.mapped["both" if ma and mb else "test_only" if ma else "gold_only" if mb else "neither"] += 1
        pos_a = (fa[2], fa[3], ga & 0x10)
        pos_b = (fb[2], fb[3], gb & 0x10)
        eq = {
            "mapped": ma == mb,
            "FLAG": ga == gb,
            "RNAME+POS+strand": pos_a == pos_b,
            "CIGAR": fa[5] == fb[5],
            "MAPQ": fa[4] == fb[4],
            "SEQ": fa[9] == fb[9],
            "QUAL": fa[10] == fb[10],
            "n_secondary": a.n_sec == b.n_sec,
            "n_supplementary": a.n_supp == b.n_supp,
        }
        for t in self.tags:
            eq[t] = ta.get(t) == tb.get(t)
        if (ga | gb) & 1:
            eq["RNEXT"] = (fa[2] if fa[6] == "=" else fa[6]) == (fb[2] if fb[6] == "=" else fb[6])
            eq["PNEXT"] = fa[7] == fb[7]
            eq["TLEN"] = fa[8] == fb[8]
            eq["MC"] = ta.get("MC") == tb.get("MC")
        eq["FLAG+RNAME+POS+CIGAR"] = eq["FLAG"] and eq["RNAME+POS+strand"] and eq["CIGAR"]
        eq["RNAME+POS+strand+CIGAR"] = eq["RNAME+POS+strand"] and eq["CIGAR"]
        all_same = True
        for k, v in eq.items():
            self.n[k] += 1
            self.same[k] += v
            all_same = all_same and v
        self.n_identical += all_same
        if not all_same and len(self.diffs) < self.n_diff:
            bad = [k for k, v in eq.items() if not v and k not in COMBINED]
            self.diffs.append({"read": key, "fields": bad, "test": _short(fa, a), "gold": _short(fb, b)})

    def result(self, test_path: str, gold_path: str) -> dict:
        fields = {}
        for k in self.fields:
            extra = self.n_fast_paired if k in PAIR_FIELDS else self.n_fast
            n, same = self.n[k] + extra, self.same[k] + extra
            fields[k] = {"n": n, "same": same, "diff": n - same, "frac_same": same / n if n else None}
        res = {"test": str(test_path), "gold": str(gold_path), "common": self.n_common,
               "identical": self.n_identical + self.n_fast, "reads": self.counts, "records": self.records,
               "mapped": self.mapped, "fields": fields, "diffs": self.diffs}
        if self.truth:
            res["truth"] = {s: t.result() for s, t in self.truth.items()}
        return res


def _short(f: list[str], r: _Read) -> str:
    """A record without SEQ/QUAL, with the read's secondary/supplementary counts."""
    s = "\t".join(f[:9] + f[11:])
    if r.n_sec or r.n_supp:
        s += f"\t[+{r.n_sec} secondary, +{r.n_supp} supplementary]"
    return s


def compare_sam(test_path: str, gold_path: str, truth: str | None = None, tol: int = 20,
                n_diff: int = 0, tags: tuple[str, ...] = TAGS) -> dict:
    """Compare two SAM/BAM files read by read (see the module docstring); returns a JSON-able dict:

    test, gold: the paths; common: reads with one primary record in both files; identical: those
    equal in every compared field; reads[side]: reads (keys) seen, no_primary, multi_primary,
    missing (present only in the other file); records[side]: primary (mapped), unmapped,
    secondary, supplementary record counts; mapped: both/test_only/gold_only/neither over common
    reads; fields[name]: n, same, diff, frac_same; diffs: the first `n_diff` differing reads
    ({read, fields, test, gold}); truth[side] when `truth` is given: reads, mapped, correct, wrong,
    unmapped, unparsed, by_mapq [[min MAPQ, mapped, wrong], ...].
    """
    if truth is not None and truth not in ("wgsim", "dwgsim"):
        raise ValueError(f"unknown truth scheme {truth!r} (wgsim or dwgsim)")
    cmp = _Comparer(truth, tol, n_diff, tags)
    it = {"test": _groups(test_path), "gold": _groups(gold_path)}
    path = {"test": test_path, "gold": gold_path}
    pending: dict[str, dict[str, list]] = {"test": {}, "gold": {}}
    done: dict[str, set] = {"test": set(), "gold": set()}
    live = {"test": True, "gold": True}
    other = {"test": "gold", "gold": "test"}
    # Merge the two streams: a read waits in `pending` only until the other file reaches it, so
    # files in the same order need almost no memory.
    while live["test"] or live["gold"]:
        for side in ("test", "gold"):
            if not live[side]:
                continue
            g = next(it[side], None)
            if g is None:
                live[side] = False
                continue
            q, recs = g
            if q in done[side] or q in pending[side]:
                raise NotGroupedError(f"{path[side]}: the records of read {q!r} are not adjacent; "
                                      f"group both files by name first (samtools collate or sort -n)")
            o = other[side]
            if q in pending[o]:
                orecs = pending[o].pop(q)
                t, gd = (recs, orecs) if side == "test" else (orecs, recs)
                cmp.add(q, t, gd)
                done["test"].add(q)
                done["gold"].add(q)
            else:
                pending[side][q] = recs
    for q, recs in pending["test"].items():
        cmp.add(q, recs, None)
    for q, recs in pending["gold"].items():
        cmp.add(q, None, recs)
    return cmp.result(test_path, gold_path)


# --------------------------------------------------------------------------------------------------
# Report

def _pct(a: int, n: int) -> str:
    return f"{100.0 * a / n:.3f}%" if n else "-"


def format_report(res: dict) -> str:
    """The comparison as a text table."""
    out = [f"test: {res['test']}", f"gold: {res['gold']}", ""]
    rd, rc = res["reads"], res["records"]
    out.append(f"{'':24}{'test':>12}{'gold':>12}")
    for k in ("reads", "missing", "no_primary", "multi_primary"):
        label = {"missing": "reads missing here", "no_primary": "reads without primary",
                 "multi_primary": "reads with >1 primary"}.get(k, k)
        out.append(f"{label:24}{rd['test'][k]:>12}{rd['gold'][k]:>12}")
    for k in ("primary", "unmapped", "secondary", "supplementary"):
        out.append(f"{k + ' records':24}{rc['test'][k]:>12}{rc['gold'][k]:>12}")
    n = res["common"]
    m = res["mapped"]
    out.append("")
    out.append(f"reads compared: {n}, identical in every field: {res['identical']} "
               f"({_pct(res['identical'], n)})")
    out.append(f"mapped in both {m['both']}, only test {m['test_only']}, only gold {m['gold_only']}, "
               f"neither {m['neither']}")
    out.append("")
    out.append(f"{'field':26}{'same':>10}{'diff':>10}{'of':>10}{'same %':>10}")
    for k, v in res["fields"].items():
        if v["n"] == 0 and k in PAIR_FIELDS:
            continue
        out.append(f"{k:26}{v['same']:>10}{v['diff']:>10}{v['n']:>10}{_pct(v['same'], v['n']):>10}")
    if "truth" in res:
        t0 = res["truth"]["test"]
        out += ["", f"accuracy from read names ({t0['scheme']}, within {t0['tol']} bp)",
                f"{'':24}{'test':>12}{'gold':>12}"]
        for k in ("reads", "mapped", "correct", "wrong", "unmapped", "unparsed"):
            out.append(f"{k:24}{res['truth']['test'][k]:>12}{res['truth']['gold'][k]:>12}")
        out.append(f"{'MAPQ>=  mapped/wrong':24}{'test':>12}{'gold':>12}")
        for (q, ma, wa), (_, mb, wb) in zip(res["truth"]["test"]["by_mapq"], res["truth"]["gold"]["by_mapq"]):
            out.append(f"{q:>7}{'':17}{f'{ma}/{wa}':>12}{f'{mb}/{wb}':>12}")
    if res["diffs"]:
        out += ["", f"first {len(res['diffs'])} differing reads:"]
        for d in res["diffs"]:
            out.append(f"{d['read']}  differs in: {' '.join(d['fields'])}")
            out.append(f"  test  {d['test']}")
            out.append(f"  gold  {d['gold']}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """`g3align compare TEST GOLD [--truth wgsim|dwgsim] [--tol N] [--diff N] [--tags T,..] [--json]`."""
    ap = argparse.ArgumentParser(prog="g3align compare", description="Per-read concordance of two "
                                 "SAM/BAM/PAF files (TEST against GOLD), grouped by read name.")
    ap.add_argument("test")
    ap.add_argument("gold")
    ap.add_argument("--truth", choices=("wgsim", "dwgsim"), help="also score accuracy from read names")
    ap.add_argument("--tol", type=int, default=20, help="truth: allowed distance in bp [20]")
    ap.add_argument("--diff", type=int, default=0, metavar="N", help="show the first N differing reads")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--strict", action="store_true",
                    help="exit 2 unless every read is in both files, with one primary, the same in every field")
    ap.add_argument("--tags", default=",".join(TAGS), help="comma-separated tags to compare [%(default)s]")
    a = ap.parse_args(argv)
    try:
        tags = tuple(t for t in a.tags.split(",") if t)
        res = compare_sam(a.test, a.gold, truth=a.truth, tol=a.tol, n_diff=a.diff, tags=tags)
    except OSError as e:
        sys.stderr.write(f"[E::g3align] compare: {e.filename or ''}: {e.strerror or e}\n")
        return 1
    except ValueError as e:
        sys.stderr.write(f"[E::g3align] compare: {e}\n")
        return 1
    sys.stdout.write(json.dumps(res, indent=1) + "\n" if a.json else format_report(res))
    if a.strict and (any(v["diff"] for v in res["fields"].values())
                     or any(c[k] for c in res["reads"].values() for k in ("missing", "no_primary", "multi_primary"))):
        sys.stderr.write("g3align compare: the files differ (--strict)\n")
        return 2
    return 0


if __name__ == "__main__":                           # pragma: no cover
    sys.exit(main())
