"""SAM header text (bwa mem 0.7.17's, plus an @HD line) and the output sink (SAM text or BAM).

Header order, as `bwa mem` prints it (bwa.c: bwa_print_sam_hdr), with our own @HD and @PG:

    @HD VN:1.5 SO:unsorted GO:query     (bwa prints no @HD; one given with -H replaces ours)
    @SQ SN:<name> LN:<len> [AH:*]       (one per contig; left out when -H supplies @SQ lines)
    <-H lines>                          (in the order given)
    @RG ...                             (-R, after bwa_escape)
    @PG ID:g3align PN:g3align VN:<version> CL:<command line>

`parse_rg` follows bwa_set_rg (bwa.c): the line must start with "@RG", must not hold literal tabs,
escapes (\\t \\n \\r \\\\) are expanded as bwa_escape does (a backslash before any other character drops
both), and it needs an "\\tID:" field of at most 255 characters.
"""
from __future__ import annotations

import errno
import os
import re
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import BinaryIO

HD_LINE = "@HD\tVN:1.5\tSO:unsorted\tGO:query"


def _version() -> str:
    try:
        from g3align import __version__
        return __version__
    except ImportError:                              # pragma: no cover
        return "unknown"


def bwa_escape(s: str) -> str:
    """bwa's escape expansion: \\t \\n \\r \\\\ become the character; a backslash followed by anything
    else (or by nothing) is dropped together with that character."""
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 1
            if i < n:
                e = s[i]
                if e == "t":
                    out.append("\t")
                elif e == "n":
                    out.append("\n")
                elif e == "r":
                    out.append("\r")
                elif e == "\\":
                    out.append("\\")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def parse_rg(s: str) -> tuple[str, str]:
    """Read-group argument (-R) -> (header line as bwa mem prints it, ID for the RG:Z: tag).

    Raises ValueError with a one-line message (bwa's reasons)."""
    if not s.startswith("@RG"):
        raise ValueError("the read group line does not start with @RG")
    if "\t" in s:
        raise ValueError("the read group line contains literal <tab> characters; write them as \\t")
    line = bwa_escape(s)
    p = line.find("\tID:")
    if p < 0:
        raise ValueError("no ID within the read group line")
    p += 4
    q = p
    while q < len(line) and line[q] not in "\t\n":
        q += 1
    if q - p + 1 > 256:
        raise ValueError("@RG:ID is longer than 255 characters")
    # bwa mem passes the escaped line through bwa_insert_header, which escapes it a second time
    # (visible only with doubled backslashes); the ID (RG:Z: of every record) comes from the first.
    return bwa_escape(line), line[p:q]


parse_rg_line = parse_rg        # the name aligner/cli/ imports


def parse_header_arg(arg: str) -> list[str]:
    """-H argument -> header lines: text starting with '@' (escapes expanded, so \\n separates lines),
    or else the name of a file whose lines starting with '@' are taken (escapes expanded), as bwa."""
    if arg.startswith("@"):
        texts = [arg]
    else:
        try:
            with open(arg, encoding="utf-8", errors="surrogateescape") as f:
                texts = [ln.rstrip("\n") for ln in f]
        except OSError as e:
            raise ValueError(f"cannot read the -H file {arg!r}: {e.strerror}") from None
    lines: list[str] = []
    for t in texts:
        if t.startswith("@"):
            lines.extend(bwa_escape(t).split("\n"))
    return lines


def pg_line(cmdline: str | Sequence[str] | None = None, version: str | None = None) -> str:
    """@PG line. `cmdline`: the argv list (joined by spaces, as bwa does) or a string; default sys.argv."""
    if cmdline is None:
        cmdline = sys.argv
    if not isinstance(cmdline, str):
        cmdline = " ".join(cmdline)
    cl = cmdline.replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return f"@PG\tID:g3align\tPN:g3align\tVN:{version or _version()}\tCL:{cl}"


def sam_header(names: Sequence[str], lengths: Sequence[int], rg_line: str | None = None,
               pg_cmdline: str | Sequence[str] | None = None, extra_hd: Iterable[str] | str | None = None,
               alt: Sequence[bool] | None = None, version: str | None = None,
               extra_lines: Iterable[str] | str | None = None) -> str:
    """The SAM header text (every line ends with '\\n').

    names/lengths: the contigs; rg_line: the @RG line from `parse_rg` (already escaped); pg_cmdline:
    see `pg_line`; extra_hd: header lines from -H (`parse_header_arg`), a list or one string with
    '\\n' between lines (`extra_lines` is another name for it); alt: per-contig ALT flag (adds AH:*, as
    bwa does for .alt contigs)."""
    if extra_hd is None:
        extra_hd = extra_lines
    if isinstance(extra_hd, str):
        extra = [ln for ln in extra_hd.split("\n") if ln]
    else:
        extra = [ln for ln in (extra_hd or []) if ln]
    hd = [ln for ln in extra if ln.startswith("@HD\t") or ln == "@HD"]
    extra = [ln for ln in extra if not (ln.startswith("@HD\t") or ln == "@HD")]
    out = [hd[0] if hd else HD_LINE]
    n_sq = sum(1 for ln in extra if ln.startswith("@SQ\t"))
    if n_sq == 0:
        for i, (nm, ln) in enumerate(zip(names, lengths)):
            out.append(f"@SQ\tSN:{nm}\tLN:{int(ln)}" + ("\tAH:*" if alt is not None and alt[i] else ""))
    elif n_sq != len(names):
        sys.stderr.write(f"[W::sam_header] {n_sq} @SQ lines provided with -H; {len(names)} sequences "
                         f"in the index. Continue anyway.\n")
    out.extend(extra)
    if rg_line:
        out.append(rg_line)
    out.append(pg_line(pg_cmdline, version))
    return "\n".join(out) + "\n"


def sort_mem_bytes(mem: str) -> int:
    """--sort-mem INT[K|M|G] in bytes; ValueError unless it is such a size of at least 1M (samtools sort's floor)."""
    m = re.fullmatch(r"([0-9]+)([KMG]?)", mem)
    if not m:
        raise ValueError(f"--sort-mem: expected INT[K|M|G], got '{mem}'")
    n = int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
    if n < 1 << 20:
        raise ValueError(f"--sort-mem: at least 1M (samtools sort's minimum), got '{mem}'")
    return n


def output_format(path: str) -> str:
    """sam, bam or cram from an output path's extension (stdout and anything else: sam)."""
    low = path.lower()
    return "bam" if low.endswith(".bam") else "cram" if low.endswith(".cram") else "sam"


class OutputSink:
    """Where SAM records go: SAM text to stdout or a file, or BAM through pysam.

    `write(data)` takes whole SAM lines (str, bytes or a memoryview of bytes, each ending in '\\n'), in output order;
    with `edit` (a function of such bytes to bytes, e.g. `mem -V`'s XR tags) each write goes through it first.
    The format is `fmt` ('sam', 'bam' or 'cram') or, when None, from the path's extension (output_format); CRAM needs
    `reference`, the reference FASTA (plain, or bgzip with its .fai and .gzi).

    `sort=True` (a BAM or CRAM path only): the records go as SAM text to `PATH.g3tmpPID.sam` and at close() are sorted
    by coordinate into PATH by samtools' own sort (pysam.sort: `-m sort_mem` per thread, spilling to
    `PATH.g3tmpPID.sort.*` files beyond it), which also writes `@HD SO:coordinate`; then PATH.bai / PATH.crai is
    written (pysam.index) and the temporary files are removed (by a stop too: aligner/runtime/stop.py)."""

    def __init__(self, path: str | None, header: str, fmt: str | None = None, threads: int = 1,
                 sort: bool = False, sort_mem: str = "768M", edit=None, reference: str | None = None):
        self._edit = edit  # whole SAM lines -> whole SAM lines, before they are written (None: as they are)
        self.path = path if path not in (None, "") else "-"
        if fmt is None:
            fmt = output_format(self.path)
        if fmt not in ("sam", "bam", "cram"):
            raise ValueError(f"unknown output format {fmt!r} (sam, bam or cram)")
        if fmt == "cram" and not reference:
            raise ValueError(f"{self.path}: CRAM output needs the reference FASTA, which was not found (index it from "
                             "a FASTA file that stays in place, or write SAM or BAM)")
        self._reference = reference
        self._sorted_to = None
        if sort:
            if fmt == "sam" or self.path == "-":
                raise ValueError("--sort writes a coordinate-sorted BAM or CRAM: give -o FILE.bam or FILE.cram")
            sort_mem_bytes(sort_mem)
            import os

            from g3align.aligner.runtime import stop
            self._sorted_to, self._sort_mem, self._threads = self.path, sort_mem, max(1, threads)
            self._sorted_fmt = fmt
            self._tmp = f"{self.path}.g3tmp{os.getpid()}"
            self.path, fmt = self._tmp + ".sam", "sam"
            stop.TEMP.update((self.path, self._tmp + ".sort.*"))
        self.fmt = fmt
        self._closed = False
        self._tail = b""                              # a partial line left by the last write (BAM)
        self._lock = threading.Lock()                 # one write at a time; a stop (abort) takes it for good
        if self.path == "-" and sys.stdout is None:
            raise OSError("cannot write to standard output: it is closed (give -o FILE)")
        if fmt == "sam":
            self._fh: BinaryIO
            self._own = self.path != "-"
            self._fh = open(self.path, "wb") if self._own else sys.stdout.buffer  # noqa: SIM115
            self._fh.write(header.encode("utf-8", "surrogateescape"))
        else:
            import pysam
            self._pysam = pysam
            self._hdr = pysam.AlignmentHeader.from_text(header)
            if fmt == "cram":
                self._bam = pysam.AlignmentFile(self.path, "wc", header=self._hdr, threads=max(1, threads),
                                                reference_filename=reference)
            else:
                self._bam = pysam.AlignmentFile(self.path, "wb", header=self._hdr, threads=max(1, threads))
        from g3align.aligner.runtime import stop
        stop.SINKS.append(self)

    def write(self, data: bytes | memoryview | str) -> None:
        with self._lock:
            self._write(data)

    def write_file(self, path: str, chunk: int = 1 << 26) -> None:
        """write() of a file's whole SAM lines: for SAM text with no edit the bytes go from file to file in the
        kernel (os.sendfile), else through write() in chunks of whole lines."""
        with self._lock, open(path, "rb") as src:
            if self.fmt == "sam" and self._edit is None and not self._closed:
                self._fh.flush()
                n = os.fstat(src.fileno()).st_size
                at = 0
                try:
                    while at < n:
                        sent = os.sendfile(self._fh.fileno(), src.fileno(), at, n - at)
                        if sent == 0:
                            break
                        at += sent
                except OSError as e:
                    if at or e.errno not in (errno.EINVAL, errno.ENOSYS):
                        raise
                if at == n:
                    return
                src.seek(at)
            tail = b""
            while True:
                b = src.read(chunk)
                if not b:
                    break
                b = tail + b
                cut = b.rfind(b"\n") + 1
                tail = b[cut:]
                self._write(b[:cut])
            if tail:
                self._write(tail)

    def abort(self, timeout: float) -> None:
        """On a stop (aligner/runtime/stop.py): wait up to `timeout` s for a write in progress, then flush what was
        written (whole records: each write is whole lines) and take no more. A BAM is closed (its EOF block)."""
        if not self._lock.acquire(timeout=timeout) or self._closed:
            return
        self._closed = True
        if self.fmt == "sam":
            self._fh.flush()
        else:
            self._bam.close()

    def _write(self, data) -> None:
        if self._closed:
            raise ValueError("write to a closed OutputSink")
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        if not data:
            return
        if self._edit is not None:
            data = self._edit(data)
        if self.fmt == "sam":
            self._fh.write(data)
            return
        data = self._tail + data
        lines = data.split(b"\n")
        self._tail = lines.pop()
        from_string = self._pysam.AlignedSegment.fromstring
        hdr, bam = self._hdr, self._bam
        for ln in lines:
            if ln:
                bam.write(from_string(ln.decode("utf-8", "surrogateescape"), hdr))

    write_sam_bytes = write         # the name aligner/mem/pipeline.py calls

    def flush(self) -> None:
        if self.fmt == "sam":
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        from g3align.aligner.runtime import stop
        if self in stop.SINKS:
            stop.SINKS.remove(self)
        if self._closed:
            return
        self._closed = True
        if self.fmt == "sam":
            if self._own:
                self._fh.close()
            else:
                self._fh.flush()
            if self._sorted_to is not None:
                self._sort()
        else:
            if self._tail:
                t, self._tail = self._tail, b""
                self._bam.write(self._pysam.AlignedSegment.fromstring(
                    t.decode("utf-8", "surrogateescape"), self._hdr))
            self._bam.close()

    def _sort(self) -> None:
        """The SAM text written so far, sorted by coordinate into the BAM asked for, and its index."""
        import glob
        import os

        import pysam

        from g3align.aligner.runtime import stop
        try:
            ref = ["--reference", self._reference] if self._sorted_fmt == "cram" else []
            pysam.sort("-@", str(self._threads), "-m", self._sort_mem, "-T", self._tmp + ".sort", "-O",
                       self._sorted_fmt, *ref, "-o", self._sorted_to, self.path)
            pysam.index(self._sorted_to)
        except pysam.SamtoolsError as e:
            why = str(e).split("stderr=", 1)[-1].strip(" '\"").replace("\\n", "\n").splitlines()
            raise OSError(f"sorting into {self._sorted_to}: {why[0] if why else e}")
        finally:
            for p in [self.path, *glob.glob(self._tmp + ".sort.*")]:
                try:
                    os.unlink(p)
                except OSError:
                    pass
            stop.TEMP.difference_update((self.path, self._tmp + ".sort.*"))

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["HD_LINE", "OutputSink", "bwa_escape", "parse_header_arg", "parse_rg", "parse_rg_line", "pg_line",
           "sam_header", "sort_mem_bytes"]
