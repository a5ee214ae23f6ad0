"""FASTQ/FASTA input -> `ReadBatch` (struct of arrays), in batches of whole records.

Input: a path or '-' (stdin), plain text or gzip/bgzip (detected from the magic bytes, not the
name); FASTA or FASTQ (detected from the first character of the file). Output: an iterator of
`ReadBatch`es of about `chunk_size` bases each, read block by block, never the whole file at once.

Semantics follow bwa 0.7.17 (`bseq_read` in bwa.c and `kseq_read` in kseq.h), with stricter input
checks:
- name = header text up to the first whitespace (space, \\t, \\v, \\f, \\r); comment = the rest of the
  header line after that one character (bwa's `-C` prints it). A name ending in "/<digit>" (and
  longer than 2 characters) loses those 2 characters, as bwa's `trim_readno` does.
- sequence letters -> codes with bwa's `nst_nt4_table`: ACGTacgt -> 0..3; IUPAC ambiguity codes
  (RYKMSWBDHVN, either case), '.' and '-' -> 4. Every other byte is an error here (bwa would
  silently read it as N).
- a batch ends as soon as its base count reaches `chunk_size` *and* it holds an even number of reads
  (bwa's `size >= chunk_size && (n&1) == 0`, which keeps interleaved pairs together); paired files
  are read in lockstep and cut after whole pairs.
- FASTQ must be 4 lines per record (no multi-line FASTQ); FASTA sequences may span any number of
  lines, blank lines inside them are skipped. CRLF line ends are accepted everywhere; blank lines
  before the first record and after the last are ignored.

Errors raise `ReadFormatError`, one line naming the file and the 1-based record (and line) number.

Parsing works on blocks of complete records (`block_size` bytes at a time): numpy finds the newlines
and checks the record structure for the whole block, small numba loops copy the sequence (through a
256-entry translation table) and quality bytes, and the names and comments of a block are made by
one gather, one decode and one split. Python never loops over the characters of a record.
"""
from __future__ import annotations

import copy
import gzip
import io
import os
import queue
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from g3align.aligner import trace_event
from g3align.aligner.runtime.nbshare import unowned
from g3align.jit import njit

# --------------------------------------------------------------------------------------------------
# Base encoding (bwa's nst_nt4_table plus a "rejected" marker)

INVALID = 255
NT4 = np.full(256, INVALID, dtype=np.uint8)
for _i, _c in enumerate("ACGT"):
    NT4[ord(_c)] = NT4[ord(_c.lower())] = _i
for _c in "RYKMSWBDHVN":
    NT4[ord(_c)] = NT4[ord(_c.lower())] = 4
NT4[ord(".")] = NT4[ord("-")] = 4
del _i

DEFAULT_CHUNK_SIZE = 10_000_000      # bwa mem: opt->chunk_size * n_threads, overridden by -K
PART_BASES = 10_000_000              # read_pair_batch_parts: bases per part of a -K batch
DEFAULT_BLOCK_SIZE = 1 << 22         # bytes read (and parsed) at a time
PARSE_THREADS = min(8, max(2, (os.cpu_count() or 1) // 2))  # FASTQ blocks parsed at once (all open files)
PARSE_AHEAD = 2 * PARSE_THREADS      # blocks in flight per file
INTERLEAVE_SPLIT = 4                 # threads that copy a pair piece's bases and qualities into mate order
# mem, single-end: output does not depend on the batch size (only paired-end insert statistics are per -K
# batch), so the staged (GPU) path cuts single-end input into batches of at most this many bases: parsing the
# next one overlaps aligning this one, and GPU memory per batch stays bounded
SE_STAGED_CHUNK = 10_000_000
# map's reader (set here, not in mmpipeline, so the CLI starts it before importing the mapping modules): each -K
# batch is read as parts of about MAP_PART_BASES bases; parts never change map's output. (A smaller first part,
# 5 or 10 Mbp, for an earlier GPU start was slower on chr20 pbsim CLR: 4.93-5.26 s vs 4.52-4.77 s.)
MAP_PART_BASES = 20_000_000
# parts map's reader thread parses ahead of the mapping. With 2 it stopped after three parts of the chr20 CLR set
# during the start-up, and the first wave's fourth part came ~0.1 s after mapping began
MAP_READ_AHEAD = 4


def se_chunk_for(staged: bool, chunk: int) -> int:
    """mem's single-end batch size for -K `chunk`: SE_STAGED_CHUNK at most on the staged path (the GPU's); here,
    not in pipeline.py, so the CLI's reader can start before that module is imported (pipeline.se_chunk)."""
    return min(chunk, SE_STAGED_CHUNK) if staged else chunk

_POOL: list = []
_POOL_LOCK = threading.Lock()


def _lazy_pool(slot: list, workers: int, prefix: str) -> ThreadPoolExecutor:
    """The thread pool kept in `slot` (a one-item list), made at the first call."""
    with _POOL_LOCK:
        if not slot:
            slot.append(ThreadPoolExecutor(workers, thread_name_prefix=prefix))
        return slot[0]


def _parse_pool() -> ThreadPoolExecutor:
    return _lazy_pool(_POOL, PARSE_THREADS, "g3align-parse")

_NL, _CR, _AT, _GT, _PLUS = 10, 13, ord("@"), ord(">"), ord("+")


class ReadFormatError(ValueError):
    """Malformed read input; the message is one line naming the file and the record."""


# --------------------------------------------------------------------------------------------------
# The batch

@dataclass
class ReadBatch:
    """A batch of reads as struct-of-arrays.

    Read i has bases `seq[seq_off[i]:seq_off[i+1]]` (codes 0..4) and, when `has_qual`, the raw ASCII
    qualities `qual[seq_off[i]:seq_off[i+1]]` (phred+33, as in the file). For FASTA `qual` is empty.
    `first_id` is the 0-based index of read 0 in the whole input (bwa numbers reads this way for the
    per-read hash that breaks ties); for pair batches see `read_pair_batches` / `interleave`.

    Names and comments are kept as bytes + offsets when the parser made them (name_buf / com_buf: what the
    aligners' kernels read); `names` / `comments` make Python strings of them on first use only (given as
    None then): mem never needs them, and making them cost its reader more than parsing the records.
    """
    _names: list[str] | None         # read names as strings, or None: made from name_buf on first use
    _comments: list[str] | None      # comments (the header after the name), or None: from com_buf
    seq: np.ndarray                  # uint8 codes 0..4, all reads concatenated
    seq_off: np.ndarray              # int64[n+1]
    qual: np.ndarray                 # uint8 raw ASCII, same offsets; empty when not has_qual
    has_qual: bool
    first_id: int = 0
    raw: np.ndarray | None = None    # uint8 sequence letters as in the file (same offsets), if kept
    # the names again as bytes + offsets (read i: name_buf[name_off[i]:name_off[i+1]]), if the parser made
    # them: the aligners' kernels read names this way (name_csr)
    name_buf: np.ndarray | None = None
    name_off: np.ndarray | None = None
    com_buf: np.ndarray | None = None    # the comments the same way (com_off), if the parser made them
    com_off: np.ndarray | None = None

    @property
    def names(self) -> list[str]:
        if self._names is None:
            self._names = csr_strings(self.name_buf, self.name_off)
        return self._names

    @property
    def comments(self) -> list[str]:
        if self._comments is None:
            self._comments = csr_strings(self.com_buf, self.com_off)
        return self._comments

    def name_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """(uint8 bytes, int64 offsets starting at 0) of the read names."""
        if self.name_buf is not None:
            return self.name_buf, self.name_off
        return bytes_csr(self.names)

    def comment_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """(uint8 bytes, int64 offsets starting at 0) of the comments."""
        if self.com_buf is not None:
            return self.com_buf, self.com_off
        return bytes_csr(self.comments)

    def same_names(self, other: ReadBatch) -> bool:
        """Whether both batches hold the same names in the same order (bytes compared, no strings made)."""
        (b1, o1), (b2, o2) = self.name_csr(), other.name_csr()
        return np.array_equal(o1, o2) and np.array_equal(b1, b2)

    @property
    def n(self) -> int:
        return self.seq_off.shape[0] - 1

    def __len__(self) -> int:
        return self.n

    @property
    def bases(self) -> int:
        """Total number of bases."""
        return int(self.seq_off[-1] - self.seq_off[0])

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.seq_off)

    def read_seq(self, i: int) -> np.ndarray:
        return self.seq[self.seq_off[i] - self.seq_off[0]:self.seq_off[i + 1] - self.seq_off[0]]

    def read_qual(self, i: int) -> np.ndarray | None:
        if not self.has_qual:
            return None
        return self.qual[self.seq_off[i] - self.seq_off[0]:self.seq_off[i + 1] - self.seq_off[0]]

    def seq_str(self, i: int) -> str:
        """Sequence of read i as bwa prints it (codes -> ACGTN)."""
        return _CODES2ACGTN[self.read_seq(i)].tobytes().decode("ascii")

    def slice(self, i: int, j: int) -> ReadBatch:
        """Reads [i, j) as a new batch (arrays are views; offsets rebased to start at 0)."""
        a, b = int(self.seq_off[i] - self.seq_off[0]), int(self.seq_off[j] - self.seq_off[0])
        off = self.seq_off[i:j + 1] - self.seq_off[i]
        nb_, no = _csr_slice(self.name_buf, self.name_off, i, j)
        cb, co = _csr_slice(self.com_buf, self.com_off, i, j)
        return ReadBatch(None if self._names is None else self._names[i:j],
                         None if self._comments is None else self._comments[i:j], self.seq[a:b], off,
                         self.qual[a:b] if self.has_qual else self.qual[:0], self.has_qual,
                         self.first_id + i, None if self.raw is None else self.raw[a:b], nb_, no, cb, co)

    def take(self, idx: np.ndarray, first_id: int) -> ReadBatch:
        """The reads at indices `idx` (in that order) as a new batch numbered from `first_id` (copies)."""
        idx = np.asarray(idx, np.int64)
        base = self.seq_off[0]
        seq, off = _csr_take(self.seq, self.seq_off - base, idx)
        qual = _csr_take(self.qual, self.seq_off - base, idx)[0] if self.has_qual else self.qual[:0]
        raw = None if self.raw is None else _csr_take(self.raw, self.seq_off - base, idx)[0]
        nb_, no = (None, None) if self.name_buf is None else _csr_take(self.name_buf, self.name_off, idx)
        cb, co = (None, None) if self.com_buf is None else _csr_take(self.com_buf, self.com_off, idx)
        il = idx.tolist() if self._names is not None or self._comments is not None else []
        return ReadBatch(None if self._names is None else [self._names[i] for i in il],
                         None if self._comments is None else [self._comments[i] for i in il], seq, off, qual,
                         self.has_qual, first_id, raw, nb_, no, cb, co)

    @staticmethod
    def empty(has_qual: bool = True, first_id: int = 0) -> ReadBatch:
        return ReadBatch([], [], np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(0, np.uint8),
                         has_qual, first_id, np.zeros(0, np.uint8))

    @staticmethod
    def concat(parts: list[ReadBatch]) -> ReadBatch:
        """Concatenate consecutive batches; `first_id` is the first part's."""
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return ReadBatch.empty()
        offs = [np.zeros(1, np.int64)]
        base = 0
        for p in parts:
            offs.append(p.seq_off[1:] - p.seq_off[0] + base)
            base += p.bases
        names = comments = None  # strings only when some part has no bytes + offsets of them
        if any(p.name_buf is None for p in parts):
            names = [x for p in parts for x in p.names]
        if any(p.com_buf is None for p in parts):
            comments = [x for p in parts for x in p.comments]
        has_qual = all(p.has_qual for p in parts)
        seq = np.concatenate([p.seq for p in parts])
        qual = np.concatenate([p.qual for p in parts]) if has_qual else np.zeros(0, np.uint8)
        raw = np.concatenate([p.raw for p in parts]) if all(p.raw is not None for p in parts) else None
        nb_, no = _csr_concat([(p.name_buf, p.name_off) for p in parts])
        cb, co = _csr_concat([(p.com_buf, p.com_off) for p in parts])
        return ReadBatch(names, comments, seq, np.concatenate(offs), qual, has_qual, parts[0].first_id, raw, nb_,
                         no, cb, co)


def _csr_slice(buf, off, i, j):
    """Items [i, j) of bytes + offsets (offsets rebased to 0); (None, None) for none."""
    if buf is None:
        return None, None
    return buf[int(off[i]):int(off[j])], off[i:j + 1] - off[i]


def _csr_take(buf, off, idx):
    """Items `idx` of bytes + offsets (from 0), in that order: (bytes, offsets from 0)."""
    starts = off[idx]
    lens = off[idx + 1] - starts
    out_off = np.zeros(idx.shape[0] + 1, np.int64)
    np.cumsum(lens, out=out_off[1:])
    out = np.empty(int(out_off[-1]), buf.dtype)
    gather_bytes(buf, starts, lens, out_off, out, -1)
    return out, out_off


def _csr_concat(csrs):
    """Bytes + offsets of consecutive item lists concatenated; (None, None) when any is missing."""
    if any(b is None for b, _ in csrs):
        return None, None
    off = np.zeros(sum(o.shape[0] - 1 for _, o in csrs) + 1, np.int64)
    np.cumsum(np.concatenate([np.diff(o) for _, o in csrs]), out=off[1:])
    return np.concatenate([b for b, _ in csrs]), off


_CODES2ACGTN = np.frombuffer(b"ACGTN", dtype=np.uint8)


def interleave(b1: ReadBatch, b2: ReadBatch) -> ReadBatch:
    """Mates of two equal-sized batches in bwa's order r1[0], r2[0], r1[1], ...

    `first_id` becomes 2 * b1.first_id, bwa's read numbering for paired input."""
    if b1.n != b2.n:
        raise ValueError(f"interleave: batches differ in size ({b1.n} vs {b2.n})")
    has_qual = b1.has_qual and b2.has_qual
    (n1, no1), (n2, no2) = b1.name_csr(), b2.name_csr()
    (c1, co1), (c2, co2) = b1.comment_csr(), b2.comment_csr()
    off = _interleave_off(b1.seq_off, b2.seq_off)
    seq = np.empty(int(off[-1]), np.uint8)
    qual = np.empty(int(off[-1]) if has_qual else 0, np.uint8)
    jobs = [(seq, b1.seq, b2.seq)] + ([(qual, b1.qual, b2.qual)] if has_qual else [])
    n = b1.n
    k = max(1, min(INTERLEAVE_SPLIT, n // 4096))  # bases and qualities copied in k slices at once
    cuts = [n * i // k for i in range(k + 1)]
    tasks = [(out, off, a1, b1.seq_off, a2, b2.seq_off, cuts[i], cuts[i + 1]) for out, a1, a2 in jobs
             for i in range(k)]
    if INTERLEAVE_SPLIT > 1:
        futs = [_interleave_pool().submit(_interleave_into, *t) for t in tasks[1:]]
        tasks = tasks[:1]
    else:
        futs = []
    for t in tasks:
        _interleave_into(*t)
    for f in futs:
        f.result()
    nb_, no = _interleave_csr1(n1, no1, n2, no2)
    cb, co = _interleave_csr1(c1, co1, c2, co2)
    return ReadBatch(None, None, seq, off, qual, has_qual, 2 * b1.first_id, None, nb_, no, cb, co)


def _interleave_pool() -> ThreadPoolExecutor:
    return _lazy_pool(_IPOOL, INTERLEAVE_SPLIT - 1, "g3align-interleave")


_IPOOL: list = []


@njit(cache=True, nogil=True)
def _interleave_off(o1, o2):
    """Offsets (from 0) of two CSRs' n items each, interleaved: o1's item 0, o2's item 0, o1's item 1, ..."""
    n = o1.shape[0] - 1
    off = np.empty(2 * n + 1, np.int64)
    off[0] = 0
    for i in range(n):
        off[2 * i + 1] = off[2 * i] + o1[i + 1] - o1[i]
        off[2 * i + 2] = off[2 * i + 1] + o2[i + 1] - o2[i]
    return off


@njit(cache=True, nogil=True)
def _interleave_into(out, off, a1, o1, a2, o2, i0, i1):
    """Items i0..i1-1 of two CSRs (offsets may start anywhere) into out at the interleaved offsets `off`
    (_interleave_off). Threads may fill disjoint item ranges of the same `out` at once."""
    out, off, a1, o1, a2, o2 = unowned((out, off, a1, o1, a2, o2))
    b1, b2 = o1[0], o2[0]
    for i in range(i0, i1):
        _copy(out, off[2 * i], a1, o1[i] - b1, o1[i + 1] - o1[i])
        _copy(out, off[2 * i + 1], a2, o2[i] - b2, o2[i + 1] - o2[i])


@njit(cache=True, nogil=True)
def _interleave_csr1(a1, o1, a2, o2):
    """Items of two CSRs of n items each interleaved a1[0], a2[0], a1[1], ...: (bytes, offsets from 0)."""
    off = _interleave_off(o1, o2)
    out = np.empty(off[-1], np.uint8)
    _interleave_into(out, off, a1, o1, a2, o2, 0, o1.shape[0] - 1)
    return out, off


@njit(cache=True, inline="always")
def _copy(dst, d, src, s, n):
    dst[d:d + n] = src[s:s + n]  # a memmove (a byte loop is 3x slower: not vectorised)


def csr_strings(buf: np.ndarray, off: np.ndarray) -> list[str]:
    """Bytes + offsets (starting at 0) -> the items as Python strings (bytes_csr's inverse)."""
    return _strings(buf, np.ascontiguousarray(off[:-1]), np.diff(off))


def bytes_csr(strings) -> tuple[np.ndarray, np.ndarray]:
    """list[str] (one line each: read names, comments) -> (uint8 bytes, int64 offsets), with one join and
    one encode for the whole list instead of a Python loop over the reads."""
    n = len(strings)
    off = np.zeros(n + 1, np.int64)
    if n == 0:
        return np.zeros(0, np.uint8), off
    arr = np.frombuffer("\n".join(strings).encode("utf-8", "surrogateescape"), np.uint8)
    nl = np.flatnonzero(arr == 10)
    if nl.shape[0] != n - 1:
        raise ValueError("a read name or comment holds a line break")
    ends = np.append(nl, arr.shape[0])
    np.cumsum(ends - np.concatenate([[0], nl + 1]), out=off[1:])
    return np.delete(arr, nl), off


@njit(cache=True, nogil=True)
def _gather_codes(arr, starts, lens, off, table, out):
    """out[off[i]:off[i]+lens[i]] = table[arr[starts[i]:starts[i]+lens[i]]]; returns the index in `out`
    of the first byte that `table` maps to INVALID, or -1."""
    bad = -1
    for i in range(len(starts)):
        s = starts[i]
        o = off[i]
        hi = 0
        for k in range(lens[i]):  # no branch in the loop: the rare invalid byte is looked for afterwards
            c = table[arr[s + k]]
            out[o + k] = c
            hi |= c
        if hi == 255 and bad < 0:
            for k in range(lens[i]):
                if out[o + k] == 255:
                    bad = o + k
                    break
    return bad


@njit(cache=True, nogil=True)
def gather_bytes(arr, starts, lens, off, out, sep):
    """Copy arr[starts[i]:starts[i]+lens[i]] to out[off[i]:...]; when sep >= 0 a byte `sep` follows
    each piece (then off must leave room for it)."""
    for i in range(len(starts)):
        s = starts[i]
        o = off[i]
        n = lens[i]
        out[o:o + n] = arr[s:s + n]
        if sep >= 0:
            out[o + n] = sep


@njit(cache=True, nogil=True)
def _fastq_block(arr, nl, table, space, digit, trim, keep_raw):
    """_Parser.fastq's whole work on a block of 4-line records in one nogil call (the numpy path is ~30 calls,
    each a wait for the GIL on a busy box): (ok, off, codes, qual, raw, name_buf, name_off, com_buf, com_off).
    ok is False, with empty arrays, when a record is malformed or holds an invalid base: the caller then parses
    the block the numpy way, which finds and reports the error. One pass: the outputs are views of buffers
    sized for the whole block (a record's bases and qualities together are at most its bytes)."""
    n = nl.shape[0] // 4
    z8 = np.empty(0, np.uint8)
    z64 = np.zeros(1, np.int64)
    bad = (False, z64, z8, z8, z8, z8, z64, z8, z64)
    m = arr.shape[0]
    off = np.zeros(n + 1, np.int64)
    noff = np.zeros(n + 1, np.int64)
    coff = np.zeros(n + 1, np.int64)
    codes_o = np.empty(m // 2 + 1, np.uint8)
    qual_o = np.empty(m // 2 + 1, np.uint8)
    raw_o = np.empty(m // 2 + 1 if keep_raw else 0, np.uint8)
    nbuf_o = np.empty(m, np.uint8)
    cbuf_o = np.empty(m, np.uint8)
    a, nl, table, space, digit, codes, qual, raw, nbuf, cbuf = unowned(
        (arr, nl, table, space, digit, codes_o, qual_o, raw_o, nbuf_o, cbuf_o))
    hi = 0
    for i in range(n):
        hs, he = _line_bound(a, nl, 4 * i)
        ss, se = _line_bound(a, nl, 4 * i + 1)
        ps, _ = _line_bound(a, nl, 4 * i + 2)
        qs, qe = _line_bound(a, nl, 4 * i + 3)
        ln = se - ss
        if a[hs] != 64 or a[ps] != 43 or ln != qe - qs:
            return bad
        o = off[i]
        for k in range(ln):
            c = table[a[ss + k]]
            codes[o + k] = c
            hi |= c
        qual[o:o + ln] = a[qs:qs + ln]
        if keep_raw:
            raw[o:o + ln] = a[ss:ss + ln]
        off[i + 1] = o + ln
        ne = he
        for j in range(hs + 1, he):
            if space[a[j]]:
                ne = j
                break
        nlen = ne - hs - 1
        if trim and nlen > 2 and a[ne - 2] == 47 and digit[a[ne - 1]]:
            nlen -= 2
        o = noff[i]
        nbuf[o:o + nlen] = a[hs + 1:hs + 1 + nlen]
        noff[i + 1] = o + nlen
        cs = min(ne + 1, he)
        o = coff[i]
        cbuf[o:o + he - cs] = a[cs:he]
        coff[i + 1] = o + he - cs
    if hi == 255:
        return bad
    t = off[n]
    return (True, off, codes_o[:t], qual_o[:t], raw_o[:t if keep_raw else 0], nbuf_o[:noff[n]], noff,
            cbuf_o[:coff[n]], coff)


@njit(cache=True, nogil=True)
def _fasta_block(arr, table, space, digit, trim, keep_raw):
    """_Parser.fasta's whole work on a block of complete FASTA records (arr[0] == '>') in one nogil call:
    (ok, off, codes, raw, name_buf, name_off, com_buf, com_off, lines). A record starts at a '>' that begins a
    line; its sequence is every byte of the following lines but the line ends ('\n', or '\r\n'); lines: the
    block's line count as _Parser.fasta counts them. ok is False, with empty arrays, when a base is invalid:
    the caller then parses the block the Python way, which finds and reports the error."""
    m = arr.shape[0]
    z8 = np.empty(0, np.uint8)
    z64 = np.zeros(1, np.int64)
    n = 1
    nl = 0
    for i in range(m):
        if arr[i] == 10:
            nl += 1
            if i + 1 < m and arr[i + 1] == 62:
                n += 1
    lines = nl + (0 if m and arr[m - 1] == 10 else 1)
    bad = (False, z64, z8, z8, z8, z64, z8, z64, lines)
    off = np.zeros(n + 1, np.int64)
    noff = np.zeros(n + 1, np.int64)
    coff = np.zeros(n + 1, np.int64)
    codes = np.empty(m, np.uint8)
    raw = np.empty(m if keep_raw else 0, np.uint8)
    nbuf = np.empty(m, np.uint8)
    cbuf = np.empty(m, np.uint8)
    hi = 0
    p = 0
    o = 0
    for r in range(n):
        hs = p + 1                                   # the header line, after '>'
        e = hs
        while e < m and arr[e] != 10:
            e += 1
        he = e - 1 if e > hs and e < m and arr[e - 1] == 13 else e
        ne = he
        for j in range(hs, he):
            if space[arr[j]]:
                ne = j
                break
        nlen = ne - hs
        if trim and nlen > 2 and arr[ne - 2] == 47 and digit[arr[ne - 1]]:
            nlen -= 2
        q = noff[r]
        for j in range(nlen):
            nbuf[q + j] = arr[hs + j]
        noff[r + 1] = q + nlen
        cs = min(ne + 1, he)
        q = coff[r]
        for j in range(he - cs):
            cbuf[q + j] = arr[cs + j]
        coff[r + 1] = q + he - cs
        p = e + 1                                    # the sequence lines, up to a line that starts with '>'
        while p < m and arr[p] != 62:
            le = p
            while le < m and arr[le] != 10:
                le += 1
            nxt = le + 1
            if le > p and le < m and arr[le - 1] == 13:   # (a '\r' at the very end stays: the Python path's)
                le -= 1
            for k in range(p, le):
                v = table[arr[k]]
                codes[o] = v
                hi |= v
                o += 1
            if keep_raw:
                raw[o - (le - p):o] = arr[p:le]
            p = nxt
        off[r + 1] = o
    if hi == 255:
        return bad
    t = off[n]
    return (True, off, codes[:t], raw[:t if keep_raw else 0], nbuf[:noff[n]], noff, cbuf[:coff[n]], coff, lines)


@njit(cache=True, inline="always")
def _line_bound(arr, nl, k):
    """(start, end) of line k ending at the newline nl[k] (end exclusive, a trailing '\\r' dropped)."""
    s = nl[k - 1] + 1 if k > 0 else 0
    e = nl[k]
    if e > s and arr[e - 1] == 13:
        e -= 1
    return s, e


@njit(cache=True, nogil=True)
def frag_offsets(buf, off):
    """minimap2's fragments of a batch (fragment mode: -x sr, --frag=yes) from its names (bytes + offsets from 0):
    runs of consecutive records whose names agree once a trailing /DIGIT is left out (of names of 3 or more
    characters, mm_qname_same). Returns the first record of each fragment and the number of records last."""
    n = off.shape[0] - 1
    out = np.empty(n + 1, np.int64)
    k = 0
    for i in range(n):
        if i == 0:
            out[k] = 0
            k += 1
            continue
        a, b, c = off[i - 1], off[i], off[i + 1]
        la, lb = b - a, c - b
        if la >= 3 and buf[b - 2] == 47 and 48 <= buf[b - 1] <= 57:
            la -= 2
        if lb >= 3 and buf[c - 2] == 47 and 48 <= buf[c - 1] <= 57:
            lb -= 2
        same = la == lb
        if same:
            for j in range(la):
                if buf[a + j] != buf[b + j]:
                    same = False
                    break
        if not same:
            out[k] = i
            k += 1
    out[k] = n
    return out[:k + 1].copy()


@njit(cache=True, nogil=True)
def smart_pairs(buf, off):
    """bwa's smart pairing (`-p`, bseq_classify) of one batch's names (bytes + offsets from 0): 1 where a read is
    one of a pair, 0 where single. Scanning in order, a read named as the read before it pairs with it unless
    that one is already paired with the read before it; no strings are made of the names."""
    n = off.shape[0] - 1
    out = np.zeros(n, np.uint8)
    i = 1
    while i < n:
        a, b, c = off[i - 1], off[i], off[i + 1]
        same = b - a == c - b
        if same:
            for j in range(b - a):
                if buf[a + j] != buf[b + j]:
                    same = False
                    break
        if same:
            out[i - 1] = 1
            out[i] = 1
            i += 2
        else:
            i += 1
    return out


@njit(cache=True, nogil=True)
def _newlines(arr):
    """Positions of the newline bytes of arr (np.flatnonzero(arr == 10) without holding the GIL: the reader
    thread finds a 4 MB block's lines while the pipeline's threads need the GIL)."""
    n = 0
    for i in range(arr.shape[0]):
        n += arr[i] == 10
    out = np.empty(n, np.int64)
    k = 0
    for i in range(arr.shape[0]):
        if arr[i] == 10:
            out[k] = i
            k += 1
    return out


@njit(cache=True, nogil=True)
def _first_space(arr, hs, he, space):
    """Position of the first whitespace byte in each line arr[hs[i]:he[i]] (he[i] if none)."""
    ne = he.copy()
    for i in range(len(hs)):
        for j in range(hs[i], he[i]):
            if space[arr[j]]:
                ne[i] = j
                break
    return ne


def _gather_csr(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The byte ranges arr[starts[i]:starts[i] + lens[i]] as (bytes, offsets starting at 0)."""
    off = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    buf = np.empty(int(off[-1]), np.uint8)
    gather_bytes(arr, starts, lens, off, buf, -1)
    return buf, off


def _strings(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> list[str]:
    """The byte ranges as Python strings (one gather, one decode, one split)."""
    n = len(starts)
    if n == 0:
        return []
    off = np.zeros(n + 1, np.int64)
    np.cumsum(lens + 1, out=off[1:])
    out = np.empty(int(off[-1]), np.uint8)
    gather_bytes(arr, starts, lens, off, out, _NL)
    res = out.tobytes().decode("utf-8", "surrogateescape").split("\n")
    res.pop()
    return res


_SPACE = np.zeros(256, np.bool_)                 # isspace() of the C locale: kseq's KS_SEP_SPACE
for _c in b" \t\n\x0b\x0c\r":
    _SPACE[_c] = True
_DIGIT = np.zeros(256, np.bool_)
_DIGIT[ord("0"):ord("9") + 1] = True


# --------------------------------------------------------------------------------------------------
# Opening files

def display_path(path: str) -> str:
    """A path as error messages name it (`-`: <stdin>)."""
    return "<stdin>" if path == "-" else str(path)


def open_input(path: str) -> BinaryIO:
    """Binary stream of the decompressed content of `path` ('-' = stdin); gzip/bgzip by magic bytes."""
    if path == "-":
        if sys.stdin is None:
            raise ReadFormatError("<stdin>: cannot read standard input: it is closed")
        raw = sys.stdin.buffer
        if not hasattr(raw, "peek"):
            raw = io.BufferedReader(raw)
    else:
        raw = open(path, "rb")  # noqa: SIM115 (returned to the caller, who closes it)
    if raw.peek(2)[:2] != b"\x1f\x8b":
        return raw
    if path == "-":
        return _GzipUpToTheCut(gzip.GzipFile(fileobj=raw, mode="rb"))   # handles bgzip's many members
    raw.close()
    return _GzipUpToTheCut(gzip.open(path, "rb"))      # owns (and closes) the file


class _GzipUpToTheCut:
    """A gzip stream whose read() gives what it decompressed before a cut or a corrupt block, and raises the
    error at the next read: the records before the cut are parsed, and the error names the last of them."""

    def __init__(self, fh):
        self._fh, self._err = fh, None

    def read(self, n: int = -1) -> bytes:
        if self._err is not None:
            raise self._err
        out = bytearray()
        try:
            while n < 0 or len(out) < n:
                b = self._fh.read1(1 << 20 if n < 0 else min(1 << 20, n - len(out)))
                if not b:
                    break
                out += b
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            if not out:
                raise
            self._err = e
        return bytes(out)

    def close(self) -> None:
        self._fh.close()

    def __getattr__(self, k):
        return getattr(self._fh, k)


# --------------------------------------------------------------------------------------------------
# Record parsers (one block of complete records each)

def _line_bounds(arr: np.ndarray, nl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive, trailing '\\r' dropped) of each line ended by a newline in `nl`."""
    starts = np.empty(len(nl), np.int64)
    if len(nl):
        starts[0] = 0
        starts[1:] = nl[:-1] + 1
    ends = nl.astype(np.int64)
    if len(nl):
        cr = (ends > starts) & (arr[np.maximum(ends - 1, 0)] == _CR)
        ends = ends - cr
    return starts, ends


def _char(b: int) -> str:
    return repr(chr(b)) if 32 <= b < 127 else f"byte 0x{b:02X}"


class _Parser:
    """Per-file parsing state: display name, records and lines consumed so far."""

    def __init__(self, path: str, trim_readno: bool, keep_raw: bool = True):
        self.path = display_path(path)
        self.trim_readno = trim_readno
        self.keep_raw = keep_raw
        self.n_rec = 0        # records parsed so far
        self.n_line = 0       # lines consumed so far

    def error(self, rec: int, line: int | None, what: str) -> ReadFormatError:
        where = f"record {rec}" + (f" (line {line})" if line is not None else "")
        return ReadFormatError(f"{self.path}: {where}: {what}")

    def _encode(self, raw: np.ndarray, off: np.ndarray, line_of) -> np.ndarray:
        """Sequence letters -> codes, rejecting invalid characters."""
        codes = NT4.take(raw)
        if len(codes) and codes.max() == INVALID:
            k = int(np.argmax(codes == INVALID))
            self._invalid(codes, off, k, line_of, lambda i, pos: int(raw[k]))
        return codes

    # -- FASTQ --------------------------------------------------------------------------------
    def fastq(self, buf: bytes, arr: np.ndarray, nl: np.ndarray) -> ReadBatch:
        """Parse the 4-line records whose lines end at the newlines `nl` (len(nl) % 4 == 0)."""
        n = len(nl) // 4
        # well-formed blocks in one nogil call; any error: the numpy steps below find and report it
        ok, off, codes, qual, raw, nbuf, noff, cbuf, coff = _fastq_block(arr, nl, NT4, _SPACE, _DIGIT,
                                                                          self.trim_readno, self.keep_raw)
        if ok:
            batch = ReadBatch(None, None, codes, off, qual, True, self.n_rec, raw if self.keep_raw else None,
                              nbuf, noff, cbuf, coff)
            self.n_rec += n
            self.n_line += len(nl)
            return batch
        starts, ends = _line_bounds(arr, nl)
        hs, he = starts[0::4], ends[0::4]
        ss, se = starts[1::4], ends[1::4]
        ps = starts[2::4]
        qs, qe = starts[3::4], ends[3::4]
        slen, qlen = se - ss, qe - qs
        off = np.zeros(n + 1, np.int64)
        np.cumsum(slen, out=off[1:])
        line0 = self.n_line

        bad_struct = (arr[hs] != _AT) | (arr[ps] != _PLUS) | (slen != qlen)
        first_bad = int(np.argmax(bad_struct)) if bad_struct.any() else n
        codes = np.empty(int(off[-1]), np.uint8)
        bad = _gather_codes(arr, ss, slen, off, NT4, codes)
        # invalid characters count only in the records before the first structural error
        if 0 <= bad < off[first_bad]:
            self._invalid(codes, off, bad, lambda i, k: line0 + 4 * i + 2,
                          lambda i, k: int(arr[ss[i] + k]))
        if first_bad < n:
            i = first_bad
            rec, ln = self.n_rec + i + 1, line0 + 4 * i + 1
            if arr[hs[i]] != _AT:
                found = "an empty line" if hs[i] == he[i] else f"{_char(int(arr[hs[i]]))}"
                raise self.error(rec, ln, f"expected a FASTQ header starting with '@', found {found}")
            if 0 <= bad < off[first_bad + 1]:
                self._invalid(codes, off, bad, lambda i, k: ln + 1, lambda i, k: int(arr[ss[i] + k]))
            if arr[ps[i]] != _PLUS:
                raise self.error(rec, ln + 2, "missing '+' line after the sequence (multi-line FASTQ "
                                 "is not supported)")
            raise self.error(rec, ln + 3, f"sequence and quality lengths differ ({int(slen[i])} vs "
                             f"{int(qlen[i])})")
        qual = np.empty(int(off[-1]), np.uint8)
        gather_bytes(arr, qs, qlen, off, qual, -1)
        raw = None
        if self.keep_raw:
            raw = np.empty(int(off[-1]), np.uint8)
            gather_bytes(arr, ss, slen, off, raw, -1)
        nbuf, noff, cbuf, coff = self._split_headers(arr, hs + 1, he)
        batch = ReadBatch(None, None, codes, off, qual, True, self.n_rec, raw, nbuf, noff, cbuf, coff)
        self.n_rec += n
        self.n_line += len(nl)
        return batch

    def _split_headers(self, arr: np.ndarray, hs: np.ndarray, he: np.ndarray):
        """Names and comments of the header lines arr[hs:he] (leading '@'/'>' excluded), as kseq
        splits them: the name ends at the first whitespace, the comment is the rest of the line.
        Returns (name bytes, name offsets, comment bytes, comment offsets)."""
        ne = _first_space(arr, hs, he, _SPACE)
        cs = np.minimum(ne + 1, he)
        nlen = ne - hs
        if self.trim_readno:
            t = nlen > 2
            t[t] = (arr[ne[t] - 2] == ord("/")) & _DIGIT[arr[ne[t] - 1]]
            nlen = nlen - 2 * t
        return _gather_csr(arr, hs, nlen) + _gather_csr(arr, cs, he - cs)

    def _invalid(self, codes, off, k, line_of, byte_of):
        i = int(np.searchsorted(off, k, side="right")) - 1
        pos = k - int(off[i])
        raise self.error(self.n_rec + i + 1, line_of(i, pos),
                         f"invalid character {_char(byte_of(i, pos))} in sequence at position {pos + 1}")

    # -- FASTA --------------------------------------------------------------------------------
    def fasta_kernel(self, buf: bytes, parsed=None) -> ReadBatch | None:
        """A block parsed by _fasta_block (or its result `parsed`, made beforehand on the parse pool) as a
        batch numbered from here on; None when the block holds an invalid base (fasta() then reports it)."""
        ok, off, codes, raw, nbuf, noff, cbuf, coff, lines = parsed if parsed is not None else _fasta_block(
            np.frombuffer(buf, np.uint8), NT4, _SPACE, _DIGIT, self.trim_readno, self.keep_raw)
        if not ok:
            return None
        batch = ReadBatch(None, None, codes, off, np.zeros(0, np.uint8), False, self.n_rec,
                          raw if self.keep_raw else None, nbuf, noff, cbuf, coff)
        self.n_rec += off.shape[0] - 1
        self.n_line += lines
        return batch

    def fasta(self, buf: bytes) -> ReadBatch:
        """Parse a block of complete FASTA records; `buf` starts with '>'."""
        batch = self.fasta_kernel(buf)  # well-formed blocks in one call; an invalid base: the steps below report it
        if batch is not None:
            return batch
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        recs = buf[1:].split(b"\n>")
        heads, seqs = [], []
        for r in recs:
            h, _, s = r.partition(b"\n")
            heads.append(h)
            seqs.append(s.replace(b"\n", b""))
        n = len(recs)
        lens = np.fromiter(map(len, seqs), dtype=np.int64, count=n)
        off = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=off[1:])
        raw = np.frombuffer(b"".join(seqs), dtype=np.uint8)

        def line_of(i: int, k: int) -> int:      # only on the error path
            pos = 1 + sum(len(r) + 2 for r in recs[:i])
            body = recs[i].partition(b"\n")[2]
            # find the line holding the k-th sequence letter of record i (blank lines are skipped)
            seen = 0
            ln = self.n_line + buf.count(b"\n", 0, pos) + 2
            for line in body.split(b"\n"):
                if seen + len(line) > k:
                    return ln
                seen += len(line)
                ln += 1
            return ln

        codes = self._encode(raw, off, line_of)
        blob = np.frombuffer(b"\n".join(heads) + b"\n", dtype=np.uint8)
        he = np.flatnonzero(blob == _NL)
        hs = np.zeros(n, np.int64)
        hs[1:] = he[:-1] + 1
        nbuf, noff, cbuf, coff = self._split_headers(blob, hs, he)
        batch = ReadBatch(None, None, codes, off, np.zeros(0, np.uint8), False, self.n_rec, raw, nbuf, noff, cbuf,
                          coff)
        self.n_rec += n
        self.n_line += buf.count(b"\n") + (0 if buf.endswith(b"\n") else 1)
        return batch


# --------------------------------------------------------------------------------------------------
# Block reader: whole records, block by block

def iter_pieces(path: str, block_size: int = DEFAULT_BLOCK_SIZE, trim_readno: bool = True,
                keep_raw: bool = True) -> Iterator[ReadBatch]:
    """Parse `path` into consecutive `ReadBatch` pieces of whole records (sizes follow the blocks
    read, not -K); `first_id` of each piece is the index of its first record in the file. keep_raw False:
    FASTQ pieces leave out `raw` (the letters as in the file; `g3align mem` prints bases from the codes)."""
    block_size = max(1, int(block_size))
    p = _Parser(path, trim_readno, keep_raw)
    fh = None
    try:
        fh = open_input(path)
        yield from _pieces(fh, p, block_size)
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        raise ReadFormatError(f"{p.path}: truncated or corrupt gzip data after record {p.n_rec} "
                              f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'no detail'})"
                              ) from None
    finally:
        if fh is not None and path != "-":
            fh.close()


def _pieces(fh: BinaryIO, p: _Parser, block_size: int) -> Iterator[ReadBatch]:
    carry = b""
    # skip blank lines before the first record; the first character decides the format
    while True:
        data = fh.read(block_size)
        if not data:
            return                                   # empty file: no records
        carry += data
        stripped = carry.lstrip(b"\r\n")
        p.n_line += carry.count(b"\n", 0, len(carry) - len(stripped))
        carry = stripped
        if carry:
            break
    first = carry[0]
    if first == _AT:
        yield from _fastq_pieces(fh, p, carry, block_size)
    elif first == _GT:
        yield from _fasta_pieces(fh, p, carry, block_size)
    else:
        raise p.error(1, p.n_line + 1, f"expected a header starting with '@' (FASTQ) or '>' (FASTA), "
                      f"found {_char(first)}")


def _read_or_cut(fh: BinaryIO, n: int) -> tuple[bytes, BaseException | None]:
    """(data, None), or (b"", the error) at a gzip cut or corrupt block (the caller parses what it holds first)."""
    try:
        return fh.read(n), None
    except (EOFError, zlib.error, gzip.BadGzipFile) as e:
        return b"", e


def _fastq_pieces(fh: BinaryIO, p: _Parser, carry: bytes, block_size: int) -> Iterator[ReadBatch]:
    """Blocks of whole records are parsed on the parse pool (up to PARSE_AHEAD at a time; the parsing
    kernels release the GIL) and yielded in file order; a block's error is raised when its turn comes."""
    pending: deque = deque()
    err = None
    while True:
        data, err = _read_or_cut(fh, block_size)
        if not data and err is None:
            break
        carry += data
        arr = np.frombuffer(carry, dtype=np.uint8)
        nl = _newlines(arr)
        # hold back blank lines at the end of what we have: they may be the file's trailing blank
        # lines (not a record) or the empty sequence/quality lines of a zero-length read.
        t = len(carry.rstrip(b"\r\n"))
        nl = nl[:int(np.searchsorted(nl, t)) + 1]
        n_full = (len(nl) // 4) * 4
        if n_full:
            cut = int(nl[n_full - 1]) + 1
            q = copy.copy(p)  # the block's parser state; p moves on to the next block at once
            p.n_rec += n_full // 4
            p.n_line += n_full
            pending.append(_parse_pool().submit(q.fastq, carry, arr, nl[:n_full]))
            carry = carry[cut:]
        while pending and (len(pending) > PARSE_AHEAD or pending[0].done()):
            yield pending.popleft().result()
        if err is not None:  # a cut or a corrupt block: the whole records before it first, then the error
            while pending:
                yield pending.popleft().result()
            raise err
    while pending:
        yield pending.popleft().result()
    # end of file: keep only the trailing blank lines that complete the last record
    lines = carry.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()                                  # the last line's newline (it may lack one)
    k = 0
    while k < len(lines) and lines[len(lines) - 1 - k] in (b"", b"\r"):
        k += 1
    m = len(lines) - k
    if m == 0:
        return
    lines = lines[:m + min((-m) % 4, k)]
    if len(lines) % 4 == 3 and lines[-2] in (b"", b"\r") and lines[-1].startswith(b"+"):
        lines.append(b"")                            # a zero-length read ends with its '+' line
    carry = b"\n".join(lines) + b"\n"
    arr = np.frombuffer(carry, dtype=np.uint8)
    nl = np.flatnonzero(arr == _NL)
    n_full = (len(nl) // 4) * 4
    if n_full:
        yield p.fastq(carry, arr, nl[:n_full])
    lines = lines[n_full:]
    if not lines:
        return
    rec, ln = p.n_rec + 1, p.n_line + 1
    head = lines[0].rstrip(b"\r")
    if not head.startswith(b"@"):
        found = "an empty line" if not head else _char(head[0])
        raise p.error(rec, ln, f"expected a FASTQ header starting with '@', found {found}")
    what = ["header", "sequence", "'+'"][len(lines) - 1]
    raise p.error(rec, ln, f"truncated file: the record ends after its {what} line "
                  f"({len(lines)} of 4 lines)")


def _fasta_pieces(fh: BinaryIO, p: _Parser, carry: bytes, block_size: int) -> Iterator[ReadBatch]:
    """Blocks of whole records parsed by _fasta_block on the parse pool (nogil; up to PARSE_AHEAD at a time) and
    numbered in file order as they are yielded; a block with an invalid base is parsed again in its turn the
    Python way, which reports it with its record and line. The reader itself only finds block ends."""
    pending: deque = deque()                         # (block, future of its _fasta_block result)

    def parse(block: bytes):
        return _fasta_block(np.frombuffer(block, np.uint8), NT4, _SPACE, _DIGIT, p.trim_readno, p.keep_raw)

    def take():
        block, fut = pending.popleft()
        batch = p.fasta_kernel(block, fut.result())
        return batch if batch is not None else p.fasta(block)

    chunks = [carry]                                 # the unparsed tail, as a list (no quadratic +=)
    last = carry[-1:]
    while True:
        data, err = _read_or_cut(fh, block_size)
        if not data and err is None:
            break
        i = data.rfind(b"\n>")                     # the last record start in data, or one at its very start
        j = i + 1 if i >= 0 else (0 if last == b"\n" and data[:1] == b">" else -1)
        if data:
            last = data[-1:]
        if j < 0:
            chunks.append(data)
        else:
            block = b"".join([*chunks, memoryview(data)[:j]])   # records before the last header are complete
            chunks = [data[j:]]
            pending.append((block, _parse_pool().submit(parse, block)))
        while pending and (len(pending) > PARSE_AHEAD or pending[0][1].done()):
            yield take()
        if err is not None:  # a cut or a corrupt block: the whole records before it first, then the error
            while pending:
                yield take()
            raise err
    while pending:
        yield take()
    block = b"".join(chunks).rstrip(b"\r\n")       # blank lines after the last record do not count
    if block:
        yield p.fasta(block)


# --------------------------------------------------------------------------------------------------
# Batches of about K bases (bwa -K)

def _cut(cum: np.ndarray, p: int, chunk_size: int, step: int) -> int:
    """End of the batch that starts at read p: the smallest q > p with (q - p) % step == 0 and
    cum[q] - cum[p] >= chunk_size; -1 when the reads buffered so far do not reach it."""
    q = int(np.searchsorted(cum, cum[p] + chunk_size, side="left"))
    q = max(q, p + 1)
    r = (q - p) % step
    if r:
        q += step - r
    return q if q < len(cum) else -1


def _batches_from(pieces: Iterator[ReadBatch], chunk_size: int, step: int, lens_of
                  ) -> Iterator[ReadBatch]:
    """Re-cut a stream of pieces into bwa -K batches (`step` = reads that must stay together)."""
    pending: list[ReadBatch] = []
    n_bases = 0
    for piece in pieces:
        pending.append(piece)
        n_bases += piece.bases
        if n_bases < chunk_size:
            continue
        cat = ReadBatch.concat(pending)
        cum = np.zeros(cat.n + 1, np.int64)
        np.cumsum(lens_of(cat), out=cum[1:])
        p = 0
        while True:
            q = _cut(cum, p, chunk_size, step)
            if q < 0:
                break
            yield cat.slice(p, q)
            p = q
        rest = cat.slice(p, cat.n)
        pending, n_bases = ([rest], int(cum[-1] - cum[p])) if rest.n else ([], 0)
    if pending:
        cat = ReadBatch.concat(pending)
        if cat.n:
            yield cat


def read_batches(path: str, chunk_size: int = DEFAULT_CHUNK_SIZE, block_size: int = DEFAULT_BLOCK_SIZE,
                 trim_readno: bool = True, keep_raw: bool = True) -> Iterator[ReadBatch]:
    """Batches of whole records of one file (single-end, or interleaved pairs for `-p`), cut as bwa's
    bseq_read does: a batch ends once it holds >= chunk_size bases and an even number of reads."""
    yield from _batches_from(iter_pieces(path, block_size, trim_readno, keep_raw), chunk_size, 2,
                             lambda b: b.lengths)


def _pair_pieces(path1: str, path2: str, block_size: int, trim_readno: bool, keep_raw: bool = True,
                 check_names: bool = True) -> Iterator[ReadBatch]:
    """Lockstep pieces of two files, as *interleaved* batches (r1, r2, r1, r2, ...). Mates must be named alike
    (check_names; map's fragment mode leaves it to the fragments: minimap2 maps differently named mates as two
    single reads); files of different lengths are an error naming the shorter."""
    # each file is parsed in its own thread (the parsing kernels release the GIL), a few pieces ahead
    it1 = prefetch(iter_pieces(path1, block_size, trim_readno, keep_raw))
    it2 = prefetch(iter_pieces(path2, block_size, trim_readno, keep_raw))
    q1: list[ReadBatch] = []
    q2: list[ReadBatch] = []
    n1 = n2 = 0
    done1 = done2 = False
    n_pairs = 0
    while True:
        if not done1 and n1 <= n2:
            b = next(it1, None)
            if b is None:
                done1 = True
            else:
                q1.append(b)
                n1 += b.n
        if not done2 and n2 <= n1:
            b = next(it2, None)
            if b is None:
                done2 = True
            else:
                q2.append(b)
                n2 += b.n
        # the pairs both files hold, piece by piece: the heads of the two queues, no concatenation (a copy of
        # both files' bytes); a piece that ends first leaves the rest of the other's as a view
        while q1 and q2:
            h1, h2 = q1[0], q2[0]
            m = min(h1.n, h2.n)
            b1, b2 = (h1, h2) if h1.n == h2.n else (h1.slice(0, m), h2.slice(0, m))
            b1.first_id = b2.first_id = n_pairs
            if check_names and not b1.same_names(b2):
                k = next(i for i, (x, y) in enumerate(zip(b1.names, b2.names)) if x != y)
                raise ReadFormatError(f"{display_path(path1)}, {display_path(path2)}: record {n_pairs + k + 1}: "
                                      f"mate names differ ('{b1.names[k]}' vs '{b2.names[k]}')")
            if m:
                yield interleave(b1, b2)
            n_pairs += m
            for q, h in ((q1, h1), (q2, h2)):
                if h.n > m:
                    q[0] = h.slice(m, h.n)
                else:
                    q.pop(0)
            n1, n2 = n1 - m, n2 - m
        if (done1 and n1 == 0) or (done2 and n2 == 0):
            break
    rest1 = n1 > 0 or (not done1 and next(it1, None) is not None)
    rest2 = n2 > 0 or (not done2 and next(it2, None) is not None)
    if rest1:
        raise ReadFormatError(f"{display_path(path2)}: ends after record {n_pairs} while {display_path(path1)} has "
                              f"more records (the 2nd file has fewer sequences)")
    elif rest2:
        raise ReadFormatError(f"{display_path(path1)}: ends after record {n_pairs} while {display_path(path2)} has "
                              f"more records (the 1st file has fewer sequences)")


def read_pair_batches(path1: str, path2: str, chunk_size: int = DEFAULT_CHUNK_SIZE,
                      block_size: int = DEFAULT_BLOCK_SIZE, trim_readno: bool = True
                      ) -> Iterator[ReadBatch]:
    """Two files in lockstep, as interleaved batches (read 2i = mate 1 and 2i+1 = mate 2 of pair i),
    exactly bwa's in-memory order for `bwa mem ref R1 R2`. A batch ends after the first pair that
    brings it to >= chunk_size bases; `first_id` counts reads (2 * index of the first pair).
    Use `deinterleave` for the two mates as separate batches."""
    yield from _batches_from(_pair_pieces(path1, path2, block_size, trim_readno), chunk_size, 2,
                             lambda b: b.lengths)


def _batch_parts_from(pieces: Iterator[ReadBatch], chunk_size: int, step: int, lens_of, part_bases: int
                      ) -> Iterator[tuple[ReadBatch, bool]]:
    """As _batches_from, but each -K batch arrives as consecutive parts of about `part_bases` bases
    (multiples of `step` reads): yields (part, end_of_batch). The parts of one batch concatenate to
    exactly the batch _batches_from yields (same cut rule), so a consumer can start on a batch before
    it is completely read."""
    pending: list[ReadBatch] = []
    n_pend = 0
    done_bases = 0   # bases / reads of the current batch already yielded
    done_reads = 0
    for piece in pieces:
        pending.append(piece)
        n_pend += piece.bases
        while pending:
            if done_bases + n_pend >= chunk_size:  # the batch may end inside the pending reads
                cat = ReadBatch.concat(pending)
                cum = np.zeros(cat.n + 1, np.int64)
                np.cumsum(lens_of(cat), out=cum[1:])
                # _batches_from's cut, continued after the parts already yielded: they hold a multiple of
                # `step` reads and fewer than chunk_size bases
                q = _cut(cum, 0, chunk_size - done_bases, step)
                if q >= 0:
                    yield cat.slice(0, q), True
                    rest = cat.slice(q, cat.n)
                    pending, n_pend = ([rest], rest.bases) if rest.n else ([], 0)
                    done_bases = done_reads = 0
                    continue
                pending = [cat]
            if n_pend >= part_bases:
                cat = ReadBatch.concat(pending)
                m = cat.n - cat.n % step
                if m:
                    part = cat.slice(0, m)
                    yield part, False
                    done_bases += part.bases
                    done_reads += m
                    rest = cat.slice(m, cat.n)
                    pending, n_pend = ([rest], rest.bases) if rest.n else ([], 0)
            break
    cat = ReadBatch.concat(pending) if pending else None
    if (cat is not None and cat.n) or done_reads:
        yield (cat if cat is not None else ReadBatch.empty()), True


def read_batch_parts(path: str, chunk_size: int = DEFAULT_CHUNK_SIZE, part_bases: int = PART_BASES,
                     block_size: int = DEFAULT_BLOCK_SIZE, trim_readno: bool = True, keep_raw: bool = True
                     ) -> Iterator[tuple[ReadBatch, bool]]:
    """read_batches' -K batches of one file as (part, end_of_batch) pairs of parts of about part_bases bases."""
    yield from _batch_parts_from(iter_pieces(path, block_size, trim_readno, keep_raw), chunk_size, 2,
                                 lambda b: b.lengths, part_bases)


def read_pair_batch_parts(path1: str, path2: str, chunk_size: int = DEFAULT_CHUNK_SIZE, part_bases: int = PART_BASES,
                          block_size: int = DEFAULT_BLOCK_SIZE, trim_readno: bool = True, keep_raw: bool = True,
                          check_names: bool = True) -> Iterator[tuple[ReadBatch, bool]]:
    """read_pair_batches' -K batches as (part, end_of_batch) pairs of parts of about part_bases bases."""
    # the pairs interleaved on a thread of their own, the parts cut on the caller's: each is a good part of the
    # reader's work, which runs beside the whole GPU pipeline
    yield from _batch_parts_from(prefetch(_pair_pieces(path1, path2, block_size, trim_readno, keep_raw, check_names),
                                          depth=4, name="g3align-pairs"), chunk_size, 2,
                                 lambda b: b.lengths, part_bases)


def deinterleave(b: ReadBatch) -> tuple[ReadBatch, ReadBatch]:
    """Split an interleaved batch into (mate-1 batch, mate-2 batch); first_id = pair index."""
    if b.n % 2:
        raise ValueError("deinterleave: odd number of reads")
    seq_off = b.seq_off - b.seq_off[0]
    out = []
    for k in (0, 1):
        seq, off = _csr_every_other((b.seq, seq_off), k)
        qual = _csr_every_other((b.qual, seq_off), k)[0] if b.has_qual else b.qual[:0]
        nb_, no = _csr_every_other(b.name_csr(), k)
        cb, co = _csr_every_other(b.comment_csr(), k)
        out.append(ReadBatch(None, None, seq, off, qual, b.has_qual, b.first_id // 2, None, nb_, no, cb, co))
    return out[0], out[1]


def _csr_every_other(csr, k):
    """Items k, k + 2, k + 4, ... of bytes + offsets."""
    buf, off = csr
    return _gather_csr(buf, np.ascontiguousarray(off[k:-1:2]), np.ascontiguousarray(np.diff(off)[k::2]))


def read_all(path: str, trim_readno: bool = True) -> ReadBatch:
    """The whole file as one batch (tests, small inputs)."""
    parts = list(iter_pieces(path, trim_readno=trim_readno))
    return ReadBatch.concat(parts) if parts else ReadBatch.empty()


__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "NT4",
    "ReadBatch",
    "ReadFormatError",
    "deinterleave",
    "interleave",
    "iter_pieces",
    "open_input",
    "read_all",
    "read_batch_parts",
    "read_batches",
    "read_pair_batches",
]


class Prefetched:
    """An iterator whose producer thread runs from construction (prefetch_now): `g3align mem` starts
    parsing the reads before it loads the index and starts CUDA, so the first batch is ready when the
    aligner is. prefetch() hands such an iterator back unchanged. close() stops the producer."""

    def __init__(self, batches, depth: int, name: str):
        self._stop = threading.Event()
        self._it = _prefetch(batches, depth, name, self._stop)
        next(self._it)  # runs the generator up to its first yield: the thread is started

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._it)

    def close(self):
        self._stop.set()
        self._it.close()

    def __del__(self):
        self._stop.set()


def prefetch_now(batches, depth: int = 2, name: str = "g3align-reader") -> Prefetched:
    """prefetch(), with the producer thread started now rather than at the first next()."""
    return Prefetched(batches, depth, name)


def prefetch(batches, depth: int = 2, name: str = "g3align-reader"):
    """Iterate `batches` in a background thread, up to `depth` items ahead, so reading and parsing the
    next batch overlaps aligning the current one. An exception of the producer (e.g. ReadFormatError)
    is raised here at the point of the stream where it happened; items are never reordered."""
    if isinstance(batches, Prefetched):
        return batches
    return _lazy(batches, depth, name)


def _lazy(batches, depth, name):
    """prefetch's thread starts at the consumer's first next(), as a generator's body does."""
    it = _prefetch(batches, depth, name, threading.Event())
    next(it)
    yield from it


def _prefetch(batches, depth, name, stop):
    """The producer thread and its consumer: yields None once the thread is started, then the items."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    end = object()

    def produce():
        try:
            it = iter(batches)
            while True:
                t = time.perf_counter()
                b = next(it, end)
                if name in ("g3align-reader", "g3align-pairs", "g3align-batches"):  # the readers' items, traced
                    trace_event("next item", t, time.perf_counter())
                if b is end:
                    break
                while not stop.is_set():
                    try:
                        q.put((b, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((end, None))
        except BaseException as e:  # handed to the consumer
            q.put((end, e))

    th = threading.Thread(target=produce, name=name, daemon=True)
    th.start()
    yield None
    try:
        while True:
            b, err = q.get()
            if b is end:
                if err is not None:
                    raise err
                return
            yield b
    finally:
        stop.set()


def base_ranges(seq_off: np.ndarray, n: int, parts: int) -> list[tuple[int, int]]:
    """Up to `parts` contiguous ranges [a, b) of reads 0..n with about equal bases (seq_off: the reads' n+1 offsets),
    for the thread pools' tasks; how reads are cut into ranges never changes the output."""
    parts = min(n, parts)
    if parts <= 1:
        return [(0, n)]
    cuts = np.searchsorted(seq_off, np.linspace(seq_off[0], seq_off[-1], parts + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
