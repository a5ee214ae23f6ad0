"""bwa 0.7.17's five index files (`bwa index` output), written from a packed reference so that `bwa mem` runs on them,
and read (read_bwa_index: `g3align mem` on a prefix made by `bwa index`): PREFIX.pac (forward strand, 4 bases a
byte), .ann and .amb (contigs and ambiguity runs, as text), .bwt (the BWT of forward + reverse complement without
its '$', with occurrence counts every 128 bases) and .sa (every 32nd suffix array entry).

Rows of the BWT are numbered as bwa numbers them: row 0 is the suffix "$" (whose SA value is the text length n),
rows 1..n are the text's suffixes in order (divsufsort's SA shifted by one); `primary` is the row of the whole text,
whose BWT character is the '$' bwa leaves out.
"""
from __future__ import annotations

import os

import numpy as np
from numba import prange

from g3align.index.fasta import Reference, pack_2bit, read_bwa_amb, read_bwa_ann, read_bwa_pac
from g3align.index.fm import build_text, suffix_array
from g3align.jit import njit

BWA_SEED = 11         # bns->seed, written on .ann's first line
OCC_INTERVAL = 128    # bases between two occurrence-count entries of .bwt
SA_INTV = 32          # `bwa index`'s suffix array sampling


def write_bwa_index(prefix: str, ref: Reference) -> None:
    """PREFIX.{pac,ann,amb,bwt,sa} as `bwa index` writes them for the FASTA that `ref` was read from (its suffix
    array sorted here; `g3align index --bwa` writes them from its own build: write_bwa_rows)."""
    from g3align.index.fm import rows_from_sa
    T = build_text(ref.pac)
    write_bwa_rows(prefix, ref, rows_from_sa(T, suffix_array(T), 5))


def write_bwa_rows(prefix: str, ref: Reference, rows) -> None:
    """bwa's five files from the sorted rows of the index (sufsort.Rows: pair codes and SA samples every 32 rows or
    more often), as index/sufsort.py or fm.rows_from_sa give them."""
    if rows.shift > 5:
        raise ValueError("bwa's .sa needs the suffix array every 32 rows")
    write_pac(prefix, ref.pac)
    write_ann_amb(prefix, ref)
    n = int(rows.codes.shape[0]) - 1
    primary = int(rows.primary)
    l2, words = bwt_words(rows.codes, primary)
    head = np.array([primary, *l2[1:]], np.uint64).tobytes()
    with open(prefix + ".bwt", "wb") as f:
        f.write(head)
        words.astype("<u4", copy=False).tofile(f)
    with open(prefix + ".sa", "wb") as f:
        f.write(head)
        f.write(np.array([SA_INTV, n], np.uint64).tobytes())
        # rows 32, 64, ... (row 0 left out)
        np.ascontiguousarray(rows.samples[1 << (5 - rows.shift)::1 << (5 - rows.shift)], dtype="<u8").tofile(f)


def write_pac(prefix: str, pac: np.ndarray) -> None:
    """Forward strand, 4 bases a byte (the first in the high bits), then a 0 byte when l_pac % 4 == 0, then the
    byte l_pac % 4."""
    n = int(np.asarray(pac).size)
    body = pack_2bit(pac)
    tail = (b"\x00" if n % 4 == 0 else b"") + bytes([n % 4])
    with open(prefix + ".pac", "wb") as f:
        f.write(memoryview(body))
        f.write(tail)


def write_ann_amb(prefix: str, ref: Reference) -> None:
    """.ann: "l_pac n_seqs seed", then per contig "gi name anno" ("(null)" for no comment) and "offset len n_ambs";
    .amb: "l_pac n_seqs n_holes", then "offset len char" per run of one ambiguous character."""
    offs = np.asarray(ref.offsets, np.int64)
    n_ambs = np.bincount(np.searchsorted(offs, np.asarray(ref.hole_off, np.int64), side="right") - 1,
                         minlength=len(ref.names)) if len(ref.hole_off) else np.zeros(len(ref.names), np.int64)
    lines = [f"{ref.l_pac} {len(ref.names)} {BWA_SEED}\n"]
    for i, (name, com) in enumerate(zip(ref.names, ref.comments)):
        lines.append(f"0 {name} {com if com else '(null)'}\n")
        lines.append(f"{offs[i]} {offs[i + 1] - offs[i]} {n_ambs[i]}\n")
    with open(prefix + ".ann", "wb") as f:
        f.write("".join(lines).encode("latin-1"))
    amb = [f"{ref.l_pac} {len(ref.names)} {len(ref.hole_off)}\n".encode()]
    for o, ln, c in zip(ref.hole_off.tolist(), ref.hole_len.tolist(), ref.hole_chr.tolist()):
        amb.append(f"{o} {ln} ".encode() + bytes([c]) + b"\n")
    with open(prefix + ".amb", "wb") as f:
        f.write(b"".join(amb))


def bwt_words(codes: np.ndarray, primary: int) -> tuple[np.ndarray, np.ndarray]:
    """(L2[0..4], the uint32 words of .bwt after its header) from every row's pair code (fm.py; its low two bits
    are the BWT base, the primary row's '$' is left out): for every 128 bases of the BWT, the counts of A, C, G, T
    before them (4 uint64 as 8 uint32), then the bases, 16 a word, the first in the high bits; a last count entry
    at the end."""
    n = int(codes.shape[0]) - 1
    nblk = (n + OCC_INTERVAL - 1) // OCC_INTERVAL
    own = np.zeros((nblk + 1, 4), np.int64)
    _block_counts(codes, np.int64(primary), own)
    before = np.zeros((nblk + 1, 4), np.int64)
    np.cumsum(own[:nblk], axis=0, out=before[1:])
    out = np.empty(8 * (nblk + 1) + (n + 15) // 16, np.uint32)
    _bwt_body(codes, np.int64(primary), before, out)
    l2 = np.zeros(5, np.int64)
    l2[1:] = np.cumsum(before[nblk])
    return l2, out


@njit(cache=True, inline="always")
def _bwt_base(codes, primary, i):
    """Base i of the BWT without its '$' (row i, or row i + 1 from the primary row on)."""
    return codes[i + 1 if i >= primary else i] & 3


@njit(cache=True, parallel=True)
def _block_counts(codes, primary, own):
    n = codes.shape[0] - 1
    for b in prange(own.shape[0] - 1):
        for i in range(b * 128, min(n, (b + 1) * 128)):
            own[b, _bwt_base(codes, primary, i)] += 1


@njit(cache=True, parallel=True)
def _bwt_body(codes, primary, before, out):
    """.bwt's words: block b at 16 * b words (8 count words, then 8 words of 16 bases; the last block may have
    fewer), the final counts in the last 8 words."""
    n = codes.shape[0] - 1
    nblk = before.shape[0] - 1
    for b in prange(nblk + 1):
        base = b * 16 if b < nblk else out.shape[0] - 8
        for c in range(4):
            v = np.uint64(before[b, c])
            out[base + 2 * c] = np.uint32(v & np.uint64(0xFFFFFFFF))
            out[base + 2 * c + 1] = np.uint32(v >> np.uint64(32))
        nw = 0 if b == nblk else min(8, (n - b * 128 + 15) // 16)
        for j in range(nw):
            i0 = b * 128 + 16 * j
            w = np.uint32(0)
            for k in range(min(16, n - i0)):
                w |= np.uint32(_bwt_base(codes, primary, i0 + k)) << np.uint32(30 - 2 * k)
            out[base + 8 + j] = w


# ------------------------------------------------------------------------------------------------
# reading: `g3align mem` on a prefix made by `bwa index`
# ------------------------------------------------------------------------------------------------

BWA_FILES = ("amb", "ann", "bwt", "pac", "sa")


def has_bwa_index(prefix: str) -> bool:
    """Whether PREFIX.bwt exists (the other four files are checked when read)."""
    return os.path.exists(prefix + ".bwt")


def read_bwa_index(prefix: str, progress=None):
    """(Reference, FMIndex) from bwa's five index files, the double-step occurrence table built from the BWT in one
    pass (fm.fm_from_bwt) and bwa's suffix array samples kept as they are (every 32nd row). Truncated, mismatched
    or foreign files raise IndexFormatError naming the file."""
    from g3align.index.fm import fm_from_bwt
    from g3align.index.store import IndexFormatError

    for x in BWA_FILES:
        if not os.path.exists(f"{prefix}.{x}"):
            raise IndexFormatError(f"{prefix}.{x}: file not found (bwa's index needs PREFIX.amb, .ann, .bwt, .pac and"
                                   f" .sa; `bwa index` or `g3align index --bwa` writes them)")

    def bad(x, why):
        return IndexFormatError(f"{prefix}.{x}: {why} (rebuild it with `bwa index` or `g3align index --bwa`)")

    try:
        l_pac, names, comments, offs, lens = read_bwa_ann(prefix)
    except (ValueError, IndexError, UnicodeDecodeError):
        raise bad("ann", "not a bwa .ann file") from None
    try:
        l_amb, n_amb, hole_off, hole_len, hole_chr = read_bwa_amb(prefix)
    except (ValueError, IndexError, UnicodeDecodeError):
        raise bad("amb", "not a bwa .amb file") from None
    if l_pac < 1 or not names or l_amb != l_pac or n_amb != len(names):
        raise bad("amb", f"does not match .ann ({l_amb} bp in {n_amb} sequences, .ann: {l_pac} bp in {len(names)})")
    offsets = np.append(offs, l_pac)
    if offs[0] != 0 or (offs + lens != offsets[1:]).any():
        raise bad("ann", "sequence offsets and lengths do not add up")
    pac_size = (l_pac + 3) // 4 + (1 if l_pac % 4 == 0 else 0) + 1
    if os.path.getsize(prefix + ".pac") != pac_size:
        raise bad("pac", f"has {os.path.getsize(prefix + '.pac')} bytes, {pac_size} expected for {l_pac} bp")
    pac = read_bwa_pac(prefix, l_pac)
    n = 2 * l_pac
    head = _u64_head(prefix + ".bwt", 5)
    if head is None or int(head[4]) != n:
        raise bad("bwt", f"is not the BWT of this .ann's {l_pac} bp (truncated, or from another build?)")
    primary = int(head[0])
    nblk = (n + OCC_INTERVAL - 1) // OCC_INTERVAL
    n_words = 8 * (nblk + 1) + (n + 15) // 16
    if os.path.getsize(prefix + ".bwt") != 40 + 4 * n_words or not 0 < primary <= n:
        raise bad("bwt", "is truncated or damaged (size or primary row)")
    words = np.memmap(prefix + ".bwt", dtype="<u4", mode="r", offset=40, shape=(n_words,))
    final = np.asarray(words[-8:]).view("<u8").astype(np.int64)
    if (np.cumsum(final) != head[1:].astype(np.int64)).any():
        raise bad("bwt", "base counts disagree with its header")
    sa_head = _u64_head(prefix + ".sa", 7)
    if sa_head is None or (sa_head[:5] != head).any() or int(sa_head[6]) != n:
        raise bad("sa", "does not belong to the .bwt beside it")
    intv = int(sa_head[5])
    if intv < 1 or intv & (intv - 1):
        raise bad("sa", f"sampling interval {intv} is not a power of two")
    n_sa = n // intv
    if os.path.getsize(prefix + ".sa") != 56 + 8 * n_sa:
        raise bad("sa", "is truncated or damaged")
    B = np.empty(n + 1, np.uint8)
    _unpack_bwt(words, np.int64(n), np.int64(primary), B)
    del words
    sa = np.empty(n_sa + 1, np.uint64)
    sa[0] = n
    sa[1:] = np.fromfile(prefix + ".sa", dtype="<u8", count=n_sa, offset=56)
    if n_sa and int(sa[1:].max()) >= n:
        raise bad("sa", "holds positions beyond the text")
    try:
        fm = fm_from_bwt(B, primary, sa, intv.bit_length() - 1, int(pac[0]), progress=progress)
    except ValueError as e:
        raise bad("bwt", str(e)) from None
    ref = Reference(pac=pac, l_pac=l_pac, names=names, comments=["" if c == "(null)" else c for c in comments],
                    offsets=offsets, hole_off=hole_off, hole_len=hole_len, hole_chr=hole_chr,
                    extra={"bwa_prefix": prefix})
    return ref, fm


def _u64_head(path: str, k: int):
    h = np.fromfile(path, dtype="<u8", count=k)
    return h if h.size == k else None


@njit(cache=True, parallel=True)
def _unpack_bwt(words, n, primary, B):
    """B[0..n] from .bwt's words (after its header): every 128 bases 8 count words then 8 words of 16 bases (the
    first in the high bits); stored base i is row i, or row i + 1 from the primary row on; B[primary] = 4 ('$')."""
    for j in prange((n + 15) // 16):
        w = words[(j // 8) * 16 + 8 + (j % 8)]
        for k in range(16):
            i = j * 16 + k
            if i < n:
                B[i + 1 if i >= primary else i] = (w >> (30 - 2 * k)) & 3
    B[primary] = 4
