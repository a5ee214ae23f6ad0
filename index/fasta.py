"""Reference FASTA reading and bwa-compatible packing.

The packed reference reproduces what bwa 0.7.17 ``bwa index`` stores in ``.pac``/``.ann``/``.amb``:

* every byte of a sequence line is a base; ``ACGTacgt`` map to 0..3 (bwa's ``nst_nt4_table``),
  everything else is ambiguous;
* ambiguous bases are recorded as *holes*: maximal runs of the same byte inside one contig
  (case-sensitive, so ``NNnn`` is two holes), like bwa's ``.amb``;
* each ambiguous base is replaced by ``lrand48() & 3`` from a generator seeded once with
  ``srand48(11)``, one draw per ambiguous base in file order across all contigs;
* line handling follows bwa's kseq: empty lines are skipped, a trailing ``'\\r'`` is removed from a
  sequence line (kseq's rule: only when the record's sequence is longer than one byte), the name is
  the header up to the first whitespace byte and the comment is the rest of the header line.

Stricter than bwa (which silently skips such input): text before the first header, FASTQ-like lines,
empty names, duplicate names and a reference with no sequence raise :class:`FastaFormatError`.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field

import numpy as np

from g3align.jit import njit

__all__ = [
    "LRAND48_SEED",
    "NST_NT4",
    "FastaFormatError",
    "Reference",
    "lrand48_seq",
    "pack_fasta_bytes",
    "read_fasta",
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
# parser (numba state machine over the whole file)
# --------------------------------------------------------------------------------------------

# error codes of _parse
_OK = 0
_ERR_BEFORE_HEADER = 1
_ERR_FASTQ = 2


@njit(cache=True)
def _isspace(c):
    return c == 32 or (c >= 9 and c <= 13)


@njit(cache=True)
def _parse(data, out, rec):
    """Split FASTA bytes into headers and raw sequence bytes.

    ``out`` receives the concatenated raw sequence bytes; ``rec[i]`` = (name_s, name_e, com_s, com_e,
    seq_s, seq_e) for record i (offsets into data resp. out). Returns (n_rec, out_len, err, err_pos).
    """
    n = data.shape[0]
    pos = 0
    # leading part: only whitespace may precede the first header
    while pos < n and data[pos] != 62:  # '>'
        if not _isspace(data[pos]):
            return 0, 0, _ERR_BEFORE_HEADER, pos
        pos += 1
    nrec = 0
    olen = 0
    while pos < n:
        # here data[pos] == '>' at a line start
        pos += 1
        name_s = pos
        while pos < n and not _isspace(data[pos]):
            pos += 1
        name_e = pos
        if pos < n and data[pos] != 10:
            pos += 1
            com_s = pos
            while pos < n and data[pos] != 10:
                pos += 1
            com_e = pos
            # kseq's: one '\r' before the '\n' goes unless it is the whole comment (`mem -V` prints it as bwa)
            if com_e - com_s > 1 and data[com_e - 1] == 13:
                com_e -= 1
        else:
            com_s = pos
            com_e = pos
        if pos < n:
            pos += 1  # the '\n'
        seq_s = olen
        while pos < n:
            c = data[pos]
            if c == 62:  # next header
                break
            if c == 10:  # empty line
                pos += 1
                continue
            if c == 64 or c == 43:  # '@' / '+' : kseq would read FASTQ here
                return nrec, olen, _ERR_FASTQ, pos
            while pos < n and data[pos] != 10:
                out[olen] = data[pos]
                olen += 1
                pos += 1
            if pos < n:
                pos += 1
            # kseq: after each line, drop a trailing '\r' if the sequence is longer than 1 byte
            if olen - seq_s > 1 and out[olen - 1] == 13:
                olen -= 1
        rec[nrec, 0] = name_s
        rec[nrec, 1] = name_e
        rec[nrec, 2] = com_s
        rec[nrec, 3] = com_e
        rec[nrec, 4] = seq_s
        rec[nrec, 5] = olen
        nrec += 1
    return nrec, olen, _OK, 0


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


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":  # gzip or bgzip (multi-member gzip)
        try:
            with gzip.open(path, "rb") as fh:
                return fh.read()
        except (OSError, EOFError) as e:
            raise FastaFormatError(f"{path}: cannot decompress gzip data: {e}") from None
    with open(path, "rb") as fh:
        return fh.read()


def pack_fasta_bytes(data: bytes, path: str = "<bytes>") -> Reference:
    """Parse FASTA text and pack it bwa-compatibly (see the module docstring)."""
    arr = np.frombuffer(data, dtype=np.uint8)
    if arr.size == 0:
        raise FastaFormatError(f"{path}: empty file")
    n_gt = data.count(b">")
    if n_gt == 0:
        raise FastaFormatError(f"{path}: no '>' header line found (not a FASTA file?)")
    out = np.empty(arr.size, dtype=np.uint8)
    rec = np.empty((n_gt, 6), dtype=np.int64)
    nrec, olen, err, epos = _parse(arr, out, rec)
    if err == _ERR_BEFORE_HEADER:
        raise FastaFormatError(
            f"{path}: line {_line_of(arr, epos)}: sequence data before the first '>' header"
        )
    if err == _ERR_FASTQ:
        name = bytes(arr[rec[nrec - 1, 0]:rec[nrec - 1, 1]]).decode("utf-8", "surrogateescape") \
            if nrec else "?"
        raise FastaFormatError(
            f"{path}: line {_line_of(arr, epos)} (record '{name}'): line starts with '@' or '+' "
            "(FASTQ input is not supported for references)"
        )
    rec = rec[:nrec]
    names, comments = [], []
    seen = {}
    for i in range(nrec):
        nm = bytes(arr[rec[i, 0]:rec[i, 1]]).decode("utf-8", "surrogateescape")
        cm = bytes(arr[rec[i, 2]:rec[i, 3]]).decode("utf-8", "surrogateescape")
        if nm == "":
            raise FastaFormatError(f"{path}: record {i + 1} has an empty sequence name")
        if nm in seen:
            raise FastaFormatError(
                f"{path}: duplicate sequence name '{nm}' (records {seen[nm] + 1} and {i + 1})"
            )
        seen[nm] = i
        names.append(nm)
        comments.append(cm)
    if nrec == 0:
        raise FastaFormatError(f"{path}: no FASTA records")
    del arr
    offsets = np.empty(nrec + 1, dtype=np.int64)
    offsets[:nrec] = rec[:, 4]
    offsets[nrec] = olen
    if olen == 0:
        raise FastaFormatError(f"{path}: zero contigs with sequence (all {nrec} records are empty)")
    raw = out[:olen]
    nh = _count_holes(raw, offsets, NST_NT4)
    hole_off = np.empty(nh, dtype=np.int64)
    hole_len = np.empty(nh, dtype=np.int32)
    hole_chr = np.empty(nh, dtype=np.uint8)
    _pack(raw, offsets, NST_NT4, np.int64(LRAND48_SEED), hole_off, hole_len, hole_chr)
    pac = raw.copy() if olen < out.size else raw  # drop the unused tail of the buffer
    del out, raw
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
    data = _read_bytes(path)
    ref = pack_fasta_bytes(data, path)
    ref.src_path = os.path.abspath(path)
    ref.src_size = int(st.st_size)
    ref.src_mtime_ns = int(st.st_mtime_ns)
    return ref


def read_bwa_pac(prefix: str, l_pac: int | None = None) -> np.ndarray:
    """Decode bwa's ``PREFIX.pac`` (forward strand part) into one base code per byte (index/bwafmt.read_bwa_index,
    tests)."""
    raw = np.fromfile(prefix + ".pac", dtype=np.uint8)
    if l_pac is None:
        # last byte = l_pac % 4 where l_pac counted both strands when written by `bwa index`
        with open(prefix + ".ann") as fh:
            l_pac = int(fh.readline().split()[0])
    body = raw[: (l_pac + 3) // 4]
    codes = np.empty(body.size * 4, dtype=np.uint8)
    for k in range(4):
        codes[k::4] = (body >> (6 - 2 * k)) & 3
    return codes[:l_pac]


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
