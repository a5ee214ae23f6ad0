"""Reference files -> their bytes, their records, and bwa's packed reference.

The one reader of reference files, for both index paths:

* :func:`read_ref_bytes` — a path (plain, gzip or bgzip) -> the file's bytes, with the errors each caller
  reports: bwa's path (``g3align index``, ``mem``) raises :class:`FastaFormatError` for gzip data that does not
  decompress and lets other OS errors through; minimap2's path (``map``, ``index -x``; ``read_mm_ref`` in
  :mod:`index.mmidx`) raises :class:`MMRefFormatError` for every failure.
* :func:`scan_records` — bytes -> every record's name, comment and sequence (one numba pass; each sequence byte
  goes through the caller's table: bwa's packer keeps the bytes, minimap2's path takes its ``seq_nt4`` codes).
  The record rules are kseq's, as bwa 0.7.17 and minimap2 2.24 read references: white space before the first
  header is skipped, the name is the header up to the first white-space byte and the comment the rest of the
  header line, empty lines are skipped, every other byte of a sequence line is a sequence byte, a trailing
  ``'\\r'`` is removed from a sequence line once the record's sequence is longer than one byte. FASTA only (a line
  starting with ``'@'`` or ``'+'`` inside a record is an error) or FASTA and FASTQ (``'@'`` also starts a record,
  ``'+'`` its quality, checked for length).
* :func:`pack_fasta_bytes` / :func:`read_fasta` — the records packed as bwa 0.7.17 ``bwa index`` stores them in
  ``.pac``/``.ann``/``.amb``:

  * ``ACGTacgt`` map to 0..3 (bwa's ``nst_nt4_table``), everything else is ambiguous;
  * ambiguous bases are recorded as *holes*: maximal runs of the same byte inside one contig
    (case-sensitive, so ``NNnn`` is two holes), like bwa's ``.amb``;
  * each ambiguous base is replaced by ``lrand48() & 3`` from a generator seeded once with
    ``srand48(11)``, one draw per ambiguous base in file order across all contigs.

  Stricter than bwa (which silently skips such input): text before the first header, FASTQ-like lines,
  empty names, duplicate names and a reference with no sequence raise :class:`FastaFormatError`.

minimap2's encoding of the same records (``seq_nt4_table``, empty contigs kept) is ``parse_mm_seqs`` in
:mod:`index.mmidx`.
"""

from __future__ import annotations

import gzip
import os
import zlib
from dataclasses import dataclass, field

import numpy as np

from g3align.jit import njit

__all__ = [
    "LRAND48_SEED",
    "NST_NT4",
    "SCAN_BEFORE_HEADER",
    "SCAN_FASTQ_LINE",
    "SCAN_NO_QUALITY",
    "SCAN_OK",
    "SCAN_QUALITY_LENGTH",
    "FastaFormatError",
    "MMRefFormatError",
    "RAW_BYTES",
    "Records",
    "Reference",
    "lrand48_seq",
    "pack_fasta_bytes",
    "read_fasta",
    "read_ref_bytes",
    "scan_records",
]

#: bwa's nst_nt4_table: only ACGTacgt are 0..3, every other byte is 4.
NST_NT4 = np.full(256, 4, dtype=np.uint8)
for _i, _ch in enumerate("ACGT"):
    NST_NT4[ord(_ch)] = _i
    NST_NT4[ord(_ch.lower())] = _i

#: seed bwa 0.7.17 passes to srand48() before packing the reference (bntseq.c).
LRAND48_SEED = 11

_RAND48_A = 0x5DEECE66D
_RAND48_C = 0xB
_RAND48_MASK = (1 << 48) - 1


class FastaFormatError(ValueError):
    """The reference FASTA cannot be used (message names the file and the record)."""


class MMRefFormatError(ValueError):
    """A sequence file cannot be read or parsed (message names the file); minimap2's path."""


@dataclass
class Reference:
    """A packed reference (forward strand only), bwa-compatible.

    ``pac``: uint8[l_pac], one base code 0..3 per byte (ambiguous bases already replaced by the
    lrand48 draws). Contig ``i`` occupies ``pac[offsets[i]:offsets[i+1]]``. Holes (runs of one
    ambiguous character) are ``hole_off`` (int64, position in pac), ``hole_len`` (int32) and
    ``hole_chr`` (uint8, the byte as it appeared in the FASTA).
    """

    pac: np.ndarray
    l_pac: int
    names: list
    comments: list
    offsets: np.ndarray
    hole_off: np.ndarray
    hole_len: np.ndarray
    hole_chr: np.ndarray
    src_path: str = ""
    src_size: int = -1
    src_mtime_ns: int = -1
    extra: dict = field(default_factory=dict)
    is_alt: np.ndarray | None = None  # uint8 per contig: listed in PREFIX.alt (set when an index is loaded)

    @property
    def n_contigs(self) -> int:
        return len(self.names)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def contig_of(self, pos) -> np.ndarray:
        """Contig index of forward-strand position(s) ``pos`` (0 <= pos < l_pac)."""
        return np.searchsorted(self.offsets, pos, side="right") - 1


# --------------------------------------------------------------------------------------------
# lrand48
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def _srand48(seed):
    return ((np.uint64(seed) & np.uint64(0xFFFFFFFF)) << np.uint64(16)) | np.uint64(0x330E)


@njit(cache=True)
def _lrand48_next(state):
    """Advance the 48-bit LCG; returns (new_state, lrand48 value)."""
    s = (state * np.uint64(_RAND48_A) + np.uint64(_RAND48_C)) & np.uint64(_RAND48_MASK)
    return s, np.int64(s >> np.uint64(17))


@njit(cache=True)
def _lrand48_fill(seed, n):
    out = np.empty(n, dtype=np.int64)
    s = _srand48(seed)
    for i in range(n):
        s, v = _lrand48_next(s)
        out[i] = v
    return out


def lrand48_seq(seed: int, n: int) -> np.ndarray:
    """The first ``n`` values of glibc ``lrand48()`` after ``srand48(seed)`` (int64 array)."""
    return _lrand48_fill(np.int64(seed), np.int64(n))


# --------------------------------------------------------------------------------------------
# reading a reference file
# --------------------------------------------------------------------------------------------

_GZIP_MAGIC = b"\x1f\x8b"  # gzip, and bgzip (a series of gzip members)


READ_PIECE = 64 << 20  # bytes a thread reads at a time of a large plain reference file (_read_pieces)


def _read_pieces(fh):
    """A regular file of several READ_PIECE bytes read whole by threads, each a piece at its offset (os.preadv
    releases the GIL), into a uint8 array; None for a smaller or irregular file, or one whose size changed (the
    caller then reads it as a stream)."""
    try:
        size = os.fstat(fh.fileno()).st_size
    except OSError:
        return None
    if size < 2 * READ_PIECE or not hasattr(os, "preadv"):
        return None
    buf = np.empty(size, np.uint8)
    fd = fh.fileno()

    def piece(off):
        end = min(off + READ_PIECE, size)
        while off < end:
            n = os.preadv(fd, [memoryview(buf[off:end])], off)
            if n <= 0:
                return False
            off += n
        return True

    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max(1, min(len(os.sched_getaffinity(0)), size // READ_PIECE, 16))) as ex:
        ok = all(ex.map(piece, range(0, size, READ_PIECE)))
    if not ok or os.fstat(fd).st_size != size:
        fh.seek(0)
        return None
    return buf


def read_ref_bytes(path: str, minimap2: bool = False) -> bytes:
    """A reference file (plain, gzip or bgzip) -> its bytes, decompressed (a plain file of several READ_PIECE
    bytes as a uint8 array, read in pieces on threads: _read_pieces).

    Errors as the two callers report them. bwa's path (``minimap2=False``, :func:`read_fasta`): gzip data that
    does not decompress (a bad header, a corrupt deflate stream, an early end) raises :class:`FastaFormatError`
    ``"PATH: cannot decompress gzip data: ..."``; other errors (no such file, a directory) go to the caller as
    raised. minimap2's path (``minimap2=True``, ``mmidx.read_mm_ref``): a missing file raises
    :class:`MMRefFormatError` ``"PATH: file not found"``, every other OS, EOF or zlib error ``"PATH: cannot read:
    ..."``.
    """
    try:
        with open(path, "rb") as fh:
            magic = fh.read(2)
        if magic != _GZIP_MAGIC:
            with open(path, "rb") as fh:
                got = _read_pieces(fh)
                return got if got is not None else fh.read()
        try:
            with gzip.open(path, "rb") as fh:
                return fh.read()
        except (OSError, EOFError, zlib.error) as e:
            if minimap2:
                raise
            raise FastaFormatError(f"{path}: cannot decompress gzip data: {e}") from None
    except FileNotFoundError:
        if not minimap2:
            raise
        raise MMRefFormatError(f"{path}: file not found") from None
    except (OSError, EOFError, zlib.error) as e:
        if not minimap2:
            raise
        raise MMRefFormatError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from None


# --------------------------------------------------------------------------------------------
# records (numba state machine over the whole file)
# --------------------------------------------------------------------------------------------

# error codes of scan_records
SCAN_OK = 0
SCAN_BEFORE_HEADER = 1  # a byte other than white space before the first header (err_pos: that byte)
SCAN_FASTQ_LINE = 2  # FASTA only: a sequence line starts with '@' or '+' (err_pos: that byte)
SCAN_NO_QUALITY = 3  # FASTQ: the file ends on the '+' line (the record is counted)
SCAN_QUALITY_LENGTH = 4  # FASTQ: the quality is shorter or longer than the sequence (the record is counted)


@njit(cache=True, nogil=True)
def _isspace(c):
    return c == 32 or (c >= 9 and c <= 13)


@njit(cache=True, nogil=True)
def _header(data, pos, end, rec, i):
    """The header line whose header byte is data[pos], read up to end (kseq's rules): its name and comment offsets
    into row i of rec (grown when full; columns 0-3). Returns (the position after the line's '\n', rec)."""
    pos += 1
    name_s = pos
    while pos < end and not _isspace(data[pos]):
        pos += 1
    name_e = pos
    if pos < end and data[pos] != 10:
        pos += 1
        com_s = pos
        while pos < end and data[pos] != 10:
            pos += 1
        com_e = pos
        # kseq's: one '\r' before the '\n' goes unless it is the whole comment (`mem -V` prints it as bwa)
        if com_e - com_s > 1 and data[com_e - 1] == 13:
            com_e -= 1
    else:
        com_s = pos
        com_e = pos
    if pos < end:
        pos += 1  # the '\n'
    if i == rec.shape[0]:
        grown = np.empty((2 * i, rec.shape[1]), dtype=np.int64)
        grown[:i] = rec
        rec = grown
    rec[i, 0] = name_s
    rec[i, 1] = name_e
    rec[i, 2] = com_s
    rec[i, 3] = com_e
    return pos, rec


@njit(cache=True, nogil=True)
def _scan(data, fastq, table, seq):
    """Split the bytes into records (kseq's rules, see the module docstring).

    A record starts at a header byte, ``'>'`` (or, with ``fastq``, ``'@'``). ``seq`` receives ``table[b]`` for
    every sequence byte b of all records, concatenated. Returns (n_rec, seq_len, err, err_pos, rec) with
    ``rec[i]`` = (name_s, name_e, com_s, com_e, seq_s, seq_e) for record i < n_rec (offsets into data resp. seq;
    rows from n_rec on are unused). A header byte that ends the file makes a record with an empty name at
    ``len(data)``. At an error n_rec counts the records finished before it (a FASTQ quality error: including the
    record it is in).
    """
    rec = np.empty((64, 6), dtype=np.int64)
    n = data.shape[0]
    pos = 0
    # leading part: only white space may precede the first header
    while pos < n:
        c = data[pos]
        if c == 62 or (fastq and c == 64):  # '>' '@'
            break
        if not _isspace(c):
            return 0, 0, SCAN_BEFORE_HEADER, pos, rec
        pos += 1
    nrec = 0
    olen = 0
    while pos < n:
        # here data[pos] is a header byte at a line start
        pos, rec = _header(data, pos, n, rec, nrec)
        seq_s = olen
        while pos < n:
            c = data[pos]
            if c == 62:  # next header
                break
            if c == 10:  # empty line
                pos += 1
                continue
            if c == 64 or c == 43:  # '@' / '+': the next FASTQ record / this one's quality
                if not fastq:
                    return nrec, olen, SCAN_FASTQ_LINE, pos, rec
                break
            while pos < n and data[pos] != 10:
                seq[olen] = table[data[pos]]
                olen += 1
                pos += 1
            # kseq: after each line, drop a trailing '\r' if the sequence is longer than 1 byte
            if olen - seq_s > 1 and data[pos - 1] == 13:
                olen -= 1
            if pos < n:
                pos += 1
        rec[nrec, 4] = seq_s
        rec[nrec, 5] = olen
        nrec += 1
        if pos < n and data[pos] == 43:  # '+' (FASTQ only): the rest of its line, then the quality lines
            slen = olen - seq_s
            while pos < n and data[pos] != 10:
                pos += 1
            if pos >= n:
                return nrec, olen, SCAN_NO_QUALITY, pos, rec
            pos += 1
            qlen = 0
            while pos < n and qlen < slen:
                qst = pos
                while pos < n and data[pos] != 10:
                    pos += 1
                ql = pos - qst
                if ql > 0 and data[pos - 1] == 13 and qlen + ql > 1:
                    ql -= 1
                qlen += ql
                pos += 1
            if qlen != slen:
                return nrec, olen, SCAN_QUALITY_LENGTH, pos, rec
            # the next header: the next '>' or '@' byte
            while pos < n and data[pos] != 62 and data[pos] != 64:
                pos += 1
    return nrec, olen, SCAN_OK, 0, rec


@dataclass
class Records:
    """What :func:`scan_records` found in ``data``.

    Record i < n: name ``data[rec[i,0]:rec[i,1]]``, comment ``data[rec[i,2]:rec[i,3]]``, sequence
    ``seq[rec[i,4]:rec[i,5]]`` (line ends removed, each byte through the scan's table). ``seq`` is a buffer as long
    as the input; its first ``seq_len`` bytes are used. ``n``, ``err``, ``err_pos``: see :func:`_scan`.
    """

    data: bytes
    arr: np.ndarray  # data as uint8 (read-only)
    seq: np.ndarray
    rec: np.ndarray
    n: int
    seq_len: int
    err: int
    err_pos: int

    def _text(self, col, n):
        d = self.data  # bytes, or read_ref_bytes' uint8 array
        return [bytes(d[s:e]).decode("utf-8", "surrogateescape") for s, e in self.rec[:n, col:col + 2].tolist()]

    def names(self, n: int | None = None) -> list:
        """The names of the first ``n`` (default: all) records, as str (undecodable bytes kept as surrogates)."""
        return self._text(0, self.n if n is None else n)

    def comments(self, n: int | None = None) -> list:
        """The comments of the first ``n`` (default: all) records, as :meth:`names`."""
        return self._text(2, self.n if n is None else n)

    def offsets(self, n: int | None = None) -> np.ndarray:
        """int64[n+1]: record i's sequence is ``seq[off[i]:off[i+1]]`` (the first ``n`` records, default all)."""
        n = self.n if n is None else n
        off = np.empty(n + 1, dtype=np.int64)
        off[:n] = self.rec[:n, 4]
        off[n] = self.rec[n - 1, 5] if n else 0
        return off


#: the table that keeps every byte as it is (bwa's packer reads the sequence bytes themselves)
RAW_BYTES = np.arange(256, dtype=np.uint8)


def scan_records(data: bytes, fastq: bool = False, table: np.ndarray = RAW_BYTES) -> Records:
    """FASTA (``fastq=False``) or FASTA/FASTQ bytes -> :class:`Records`, each sequence byte b stored as
    ``table[b]`` (uint8[256]: the caller's encoding; default: the bytes as they are). Errors come back as
    ``Records.err`` (one of the ``SCAN_*`` codes), for the caller to word. Input of several SCAN_PIECE bytes is
    scanned in pieces on threads (_scan_parallel), with the same result."""
    arr = np.frombuffer(data, dtype=np.uint8)
    if arr.flags.writeable:  # (read_ref_bytes' array) read-only like the bytes of a small file: one compiled type
        arr = arr.view()
        arr.flags.writeable = False
    seq = np.empty(arr.size, dtype=np.uint8)
    got = _scan_parallel(arr, table, seq) if arr.size >= 2 * SCAN_PIECE else None
    nrec, olen, err, epos, rec = got if got is not None else _scan(arr, bool(fastq), table, seq)
    return Records(data=data, arr=arr, seq=seq, rec=rec, n=int(nrec), seq_len=int(olen), err=int(err),
                   err_pos=int(epos))


# The parallel scan: the text cut into pieces of about SCAN_PIECE bytes at line starts, each piece's header lines
# and sequence bytes counted on a thread, then its sequence bytes written at their place. A piece starts either at
# a header line or inside a record's sequence lines, so it can be read on its own as long as the text is plain
# FASTA: where a line starts with '@' or '+' (a FASTQ record, or the error of bwa's path) or a sequence line holds
# a '\r' (kseq drops one at a line's end only when the record already holds two bases, which a piece cannot see), the
# whole text is scanned by _scan. 3.1 GB of FASTA: 5.0 s by _scan, ~0.4 s on 16 threads (the GPU box).
SCAN_PIECE = 32 << 20


@njit(cache=True, nogil=True)
def _line_start(data, pos):
    """The first line start at or after pos (len(data) if there is none)."""
    n = data.shape[0]
    while 0 < pos < n and data[pos - 1] != 10:
        pos += 1
    return min(pos, n)


@njit(cache=True, nogil=True)
def _scan_piece(data, p0, p1, table, seq, out0, rec):
    """FASTA lines data[p0:p1) (p0 a line start, p1 a line start or the end): with out0 >= 0 their sequence bytes
    (through table) written to seq[out0:], else only counted; the header lines' (name_s, name_e, com_s, com_e,
    sequence bytes before the header) in rows of rec (grown as needed). Returns (headers, sequence bytes, rec, bad):
    bad 1 where a line starts with '@' or '+' or a sequence line holds a '\r' (_scan must read the text)."""
    pos = p0
    nh = 0
    o = 0
    while pos < p1:
        c = data[pos]
        if c == 62:  # a header line, as _scan reads it (its rules need nothing from before the line)
            pos, rec = _header(data, pos, p1, rec, nh)
            rec[nh, 4] = o
            nh += 1
            continue
        if c == 10:
            pos += 1
            continue
        if c == 64 or c == 43:
            return nh, o, rec, 1
        e = pos
        while e < p1 and data[e] != 10:
            e += 1
        if out0 >= 0:
            for i in range(pos, e):
                seq[out0 + o + i - pos] = table[data[i]]
        else:
            for i in range(pos, e):
                if data[i] == 13:
                    return nh, o, rec, 1
        o += e - pos
        pos = e + 1
    return nh, o, rec, 0


def _scan_parallel(arr, table, seq):
    """_scan's result for plain FASTA text, scanned in pieces on threads; None where _scan must read it (the
    text does not start with a '>' header after white space, or a piece found what it cannot judge alone)."""
    from concurrent.futures import ThreadPoolExecutor
    n = arr.size
    start = 0
    while start < n and start < 4096 and (arr[start] == 32 or 9 <= arr[start] <= 13):
        start += 1
    if start >= n or arr[start] != 62:
        return None
    cuts = [start]
    for k in range(1, max(1, (n - start) // SCAN_PIECE)):
        c = int(_line_start(arr, start + k * SCAN_PIECE))
        if c > cuts[-1] and c < n:
            cuts.append(c)
    cuts.append(n)
    spans = list(zip(cuts[:-1], cuts[1:]))
    with ThreadPoolExecutor(max(1, min(len(os.sched_getaffinity(0)), len(spans)))) as ex:
        counted = list(ex.map(lambda sp: _scan_piece(arr, sp[0], sp[1], table, seq, -1,
                                                     np.empty((16, 5), np.int64)), spans))
        if any(c[3] for c in counted):
            return None
        base = np.zeros(len(spans) + 1, np.int64)
        np.cumsum([c[1] for c in counted], out=base[1:])
        list(ex.map(lambda k: _scan_piece(arr, spans[k][0], spans[k][1], table, seq, int(base[k]),
                                          np.empty((16, 5), np.int64)), range(len(spans))))
    nrec = sum(c[0] for c in counted)
    rec = np.empty((max(nrec, 1), 6), np.int64)
    r = 0
    for k, (nh, _, rk, _) in enumerate(counted):
        rec[r:r + nh, :4] = rk[:nh, :4]
        rec[r:r + nh, 4] = rk[:nh, 4] + base[k]
        r += nh
    rec[:nrec - 1, 5] = rec[1:nrec, 4]
    if nrec:
        rec[nrec - 1, 5] = base[-1]
    return nrec, int(base[-1]), SCAN_OK, 0, rec


# --------------------------------------------------------------------------------------------
# bwa's packing
# --------------------------------------------------------------------------------------------


@njit(cache=True)
def _count_holes(raw, offsets, nt4):
    nh = 0
    for r in range(offsets.shape[0] - 1):
        for i in range(offsets[r], offsets[r + 1]):
            if nt4[raw[i]] >= 4 and (i == offsets[r] or raw[i] != raw[i - 1]):
                nh += 1
    return nh


@njit(cache=True)
def _pack(raw, offsets, nt4, seed, hole_off, hole_len, hole_chr):
    """In place: raw bytes -> base codes 0..3 with lrand48 draws for ambiguous bases; fills holes."""
    s = _srand48(seed)
    h = -1
    for r in range(offsets.shape[0] - 1):
        beg = offsets[r]
        prev = np.uint8(0)
        for i in range(beg, offsets[r + 1]):
            ch = raw[i]
            c = nt4[ch]
            if c >= 4:
                if i > beg and ch == prev:
                    hole_len[h] += 1
                else:
                    h += 1
                    hole_off[h] = i
                    hole_len[h] = 1
                    hole_chr[h] = ch
                s, v = _lrand48_next(s)
                raw[i] = np.uint8(v & 3)
            else:
                raw[i] = c
            prev = ch
    return h + 1


def _line_of(data: np.ndarray, pos: int) -> int:
    return int(np.count_nonzero(data[:pos] == 10)) + 1


def pack_fasta_bytes(data: bytes, path: str = "<bytes>") -> Reference:
    """Parse FASTA text and pack it bwa-compatibly (see the module docstring)."""
    if len(data) == 0:
        raise FastaFormatError(f"{path}: empty file")
    r = scan_records(data, fastq=False)
    nrec = r.n
    if (r.err == SCAN_BEFORE_HEADER or nrec == 0) and not np.any(r.arr == 62):
        raise FastaFormatError(f"{path}: no '>' header line found (not a FASTA file?)")
    if r.err == SCAN_BEFORE_HEADER:
        raise FastaFormatError(
            f"{path}: line {_line_of(r.arr, r.err_pos)}: sequence data before the first '>' header"
        )
    if r.err == SCAN_FASTQ_LINE:
        name = r.names(nrec + 1)[-1]  # the record the line is in: its header was read, the record not yet counted
        raise FastaFormatError(
            f"{path}: line {_line_of(r.arr, r.err_pos)} (record '{name}'): line starts with '@' or '+' "
            "(FASTQ input is not supported for references)"
        )
    names = r.names()
    comments = r.comments()
    seen = {}
    for i, nm in enumerate(names):
        if nm == "":
            raise FastaFormatError(f"{path}: record {i + 1} has an empty sequence name")
        if nm in seen:
            raise FastaFormatError(
                f"{path}: duplicate sequence name '{nm}' (records {seen[nm] + 1} and {i + 1})"
            )
        seen[nm] = i
    if nrec == 0:
        raise FastaFormatError(f"{path}: no FASTA records")
    offsets = r.offsets()
    olen = r.seq_len
    if olen == 0:
        raise FastaFormatError(f"{path}: zero contigs with sequence (all {nrec} records are empty)")
    out = r.seq
    del r
    raw = out[:olen]
    nh = _count_holes(raw, offsets, NST_NT4)
    hole_off = np.empty(nh, dtype=np.int64)
    hole_len = np.empty(nh, dtype=np.int32)
    hole_chr = np.empty(nh, dtype=np.uint8)
    _pack(raw, offsets, NST_NT4, np.int64(LRAND48_SEED), hole_off, hole_len, hole_chr)
    del raw
    out.resize(olen, refcheck=False)  # drop the unused tail of the buffer in place (realloc), not by a copy
    pac = out
    del out
    return Reference(
        pac=pac,
        l_pac=int(olen),
        names=names,
        comments=comments,
        offsets=offsets,
        hole_off=hole_off,
        hole_len=hole_len,
        hole_chr=hole_chr,
    )


def read_fasta(path) -> Reference:
    """Read a FASTA (plain, gzip or bgzip) file and pack it like bwa 0.7.17 ``bwa index``."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except OSError as e:
        raise FileNotFoundError(f"{path}: cannot open reference FASTA: {e.strerror}") from None
    data = read_ref_bytes(path)
    ref = pack_fasta_bytes(data, path)
    ref.src_path = os.path.abspath(path)
    ref.src_size = int(st.st_size)
    ref.src_mtime_ns = int(st.st_mtime_ns)
    return ref


def _pac_threads(n_bytes: int) -> int:
    return max(1, min(len(os.sched_getaffinity(0)), n_bytes >> 22))


def _byte_codes() -> np.ndarray:
    """Byte b of a 2-bit packed text -> its four codes as one little-endian uint32 (the first code in the
    high bits of b lands in the lowest byte)."""
    b = np.arange(256, dtype=np.uint32)
    return ((b >> 6) & 3) | (((b >> 4) & 3) << 8) | (((b >> 2) & 3) << 16) | ((b & 3) << 24)


_BYTE_CODES = _byte_codes()
_PACK_STEP = 1 << 22  # bytes of packed text per piece (the pieces run on threads: numpy releases the GIL)


def pack_2bit(codes: np.ndarray) -> np.ndarray:
    """Base codes 0..3, one a byte -> 4 a byte, the first in the high bits (bwa's .pac body; the last byte
    padded with code 0)."""
    codes = np.ascontiguousarray(codes, np.uint8)
    nb = (codes.size + 3) // 4
    body = np.empty(nb, np.uint8)

    def piece(i):
        j = min(i + _PACK_STEP, nb)
        c = codes[4 * i:4 * j]
        if c.size < 4 * (j - i):
            c = np.concatenate([c, np.zeros(4 * (j - i) - c.size, np.uint8)])
        v = c.view(np.uint32)
        body[i:j] = ((v & 3) << 6) | (((v >> 8) & 3) << 4) | (((v >> 16) & 3) << 2) | ((v >> 24) & 3)

    _pieces(piece, nb)
    return body


def unpack_2bit(body: np.ndarray, n: int) -> np.ndarray:
    """The first n codes of a 2-bit packed text (pack_2bit's inverse), one a byte."""
    body = np.ascontiguousarray(body, np.uint8)
    nb = (n + 3) // 4
    if body.size < nb:
        raise ValueError(f"{body.size} packed bytes hold fewer than {n} bases")
    out = np.empty(4 * nb, np.uint8)
    out32 = out.view(np.uint32)

    def piece(i):
        j = min(i + _PACK_STEP, nb)
        np.take(_BYTE_CODES, body[i:j], out=out32[i:j])

    _pieces(piece, nb)
    return out[:n]


def _pieces(fn, nb: int) -> None:
    starts = range(0, nb, _PACK_STEP)
    if len(starts) <= 1:
        for i in starts:
            fn(i)
        return
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(_pac_threads(nb)) as ex:
        list(ex.map(fn, starts))


def read_bwa_pac(prefix: str, l_pac: int | None = None) -> np.ndarray:
    """Decode bwa's ``PREFIX.pac`` (forward strand part) into one base code per byte (index/bwafmt.read_bwa_index,
    tests)."""
    raw = np.fromfile(prefix + ".pac", dtype=np.uint8)
    if l_pac is None:
        # last byte = l_pac % 4 where l_pac counted both strands when written by `bwa index`
        with open(prefix + ".ann") as fh:
            l_pac = int(fh.readline().split()[0])
    return unpack_2bit(raw[: (l_pac + 3) // 4], l_pac)


def read_bwa_amb(prefix: str):
    """Parse bwa's ``PREFIX.amb`` -> (l_pac, n_seqs, hole_off int64, hole_len int32, hole_chr uint8)."""
    with open(prefix + ".amb") as fh:
        l_pac, n_seqs, n_holes = (int(x) for x in fh.readline().split())
        off = np.empty(n_holes, dtype=np.int64)
        ln = np.empty(n_holes, dtype=np.int32)
        ch = np.empty(n_holes, dtype=np.uint8)
        for i in range(n_holes):
            a, b, c = fh.readline().split()
            off[i], ln[i], ch[i] = int(a), int(b), ord(c)
    return l_pac, n_seqs, off, ln, ch


def read_bwa_ann(prefix: str):
    """Parse bwa's ``PREFIX.ann`` -> (l_pac, names, comments, offsets, lengths)."""
    names, comments, offs, lens = [], [], [], []
    with open(prefix + ".ann") as fh:
        l_pac, n_seqs, _seed = (int(x) for x in fh.readline().split())
        for _ in range(n_seqs):
            line = fh.readline().rstrip("\n")
            parts = line.split(" ", 2)
            names.append(parts[1])
            comments.append(parts[2] if len(parts) > 2 else "")
            o, ln, _na = fh.readline().split()
            offs.append(int(o))
            lens.append(int(ln))
    return l_pac, names, comments, np.array(offs, dtype=np.int64), np.array(lens, dtype=np.int64)
