"""On-disk g3align index: one file ``PREFIX.g3i``.

Layout (all integers little-endian)::

    0   8  magic  b"G3AIDX\\r\\n"   (the CR/LF catch text-mode / line-ending mangling)
    8   4  uint32 format version (FORMAT_VERSION)
    12  4  uint32 crc32 of the JSON header
    16  8  uint64 length of the JSON header in bytes
    24  8  uint64 total file size
    32  .. JSON header (utf-8): parameters, reference names/comments, l_pac, source FASTA
           path/size/mtime, and an ``arrays`` table {name: {offset, dtype, shape, nbytes, crc32}}
    ..     arrays, each starting at a 64-byte aligned offset

The reference's bases are stored 4 a byte (``ref.pac2``: bwa's ``.pac`` body, the first base in the high bits) and
unpacked on load to the one-a-byte codes the aligner reads.

``load_index`` maps the arrays (copy-on-write mmap: writable, numba-friendly plain ndarrays) and by
default verifies every array's crc32. Any problem (missing, truncated, corrupt, wrong version, not
an index) raises :class:`IndexFormatError` with a one-line message naming the file.
"""

from __future__ import annotations

import functools
import json
import mmap
import os
import re
import struct
import zlib

import numpy as np

from g3align.index.fasta import Reference, pack_2bit, unpack_2bit
from g3align.index.fm import OCC_SHIFT, OCC_STRIDE, SUPER_SHIFT, FMIndex, occ_words, sa_words, wide_layout

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "IndexFormatError",
    "index_path",
    "load_index",
    "read_index_meta",
    "save_index",
    "source_changed",
]

MAGIC = b"G3AIDX\r\n"
FORMAT_VERSION = 3  # 2: one uint32 table layout at every size (superblocks from 2**32 rows), index/fm.py; 3: ref.pac2
_FIXED = struct.Struct("<8sIIQQ")  # magic, version, header crc, header length, file size
_ALIGN = 64

_REF_ARRAYS = ("offsets", "hole_off", "hole_len", "hole_chr")
_FM_ARRAYS = ("C1", "C2", "occ", "sa")
_FM_SCALARS = ("n", "l_pac", "primary", "row_sa1", "t0", "occ_shift", "occ_stride", "occ_wide", "sa_shift")


class IndexFormatError(ValueError):
    """A g3align index file is missing, truncated, corrupt, or of another format version."""


def index_path(prefix) -> str:
    return os.fspath(prefix) + ".g3i"


_CRC_POLY = 0xEDB88320  # CRC-32's polynomial, bit-reflected (the lowest bit is the highest power)
_CRC_BLOCK = 1 << 26      # bytes a thread checksums at a time


def _mulmod(a: int, b: int) -> int:
    """a * b modulo CRC-32's polynomial, both bit-reflected 32-bit polynomials (bit 31 is x**0)."""
    p = 0
    for k in range(32):
        if a & (1 << (31 - k)):
            p ^= b
        b = (b >> 1) ^ _CRC_POLY if b & 1 else b >> 1
    return p


@functools.cache
def _x_pow2() -> tuple:
    """x**(2**k) modulo the polynomial, k = 0..63: x**1, x**2, x**4, ... (made at the first combine, not at import)."""
    out = [1 << 30]
    for _ in range(1, 64):
        out.append(_mulmod(out[-1], out[-1]))
    return tuple(out)


def crc32_combine(crc1: int, crc2: int, len2: int) -> int:
    """The CRC-32 of A + B from crc1 = crc32(A), crc2 = crc32(B) and len2 = len(B): crc1 shifted past len2 zero
    bytes (times x**(8 * len2)), then xor crc2."""
    x_pow2 = _x_pow2()
    p, k, e = 1 << 31, 0, 8 * len2
    while e:
        if e & 1:
            p = _mulmod(x_pow2[k], p)
        e >>= 1
        k += 1
    return _mulmod(p, crc1) ^ crc2


def _crc(arr: np.ndarray) -> int:
    """zlib.crc32 of the array's bytes; large arrays in blocks on all cores (zlib releases the GIL), combined."""
    mv = memoryview(np.ascontiguousarray(arr)).cast("B")
    if len(mv) <= 2 * _CRC_BLOCK:
        return zlib.crc32(mv) & 0xFFFFFFFF
    from concurrent.futures import ThreadPoolExecutor
    starts = range(0, len(mv), _CRC_BLOCK)
    with ThreadPoolExecutor(max(1, min(len(starts), len(os.sched_getaffinity(0))))) as ex:
        parts = list(ex.map(lambda i: zlib.crc32(mv[i:i + _CRC_BLOCK]), starts))
    crc = parts[0]
    for i, c in zip(starts[1:], parts[1:]):
        crc = crc32_combine(crc, c, min(_CRC_BLOCK, len(mv) - i))
    return crc & 0xFFFFFFFF


def save_index(prefix, ref: Reference, fm: FMIndex) -> str:
    """Write ``PREFIX.g3i`` atomically (via a temporary file). Returns the path."""
    path = index_path(prefix)
    arrays = {"ref.pac2": pack_2bit(ref.pac[:ref.l_pac])}  # the bases 4 a byte
    for k in _REF_ARRAYS:
        arrays["ref." + k] = np.ascontiguousarray(getattr(ref, k))
    for k in _FM_ARRAYS:
        arrays["fm." + k] = np.ascontiguousarray(getattr(fm, k))
    table = {}
    for name, a in arrays.items():
        table[name] = {"dtype": a.dtype.str, "shape": list(a.shape), "nbytes": int(a.nbytes),
                       "crc32": _crc(a), "offset": 0}
    meta = {
        "format": "g3align-index",
        "version": FORMAT_VERSION,
        "params": {
            "sa_intv": 1 << int(fm.sa_shift),
            "occ_intv": 1 << int(fm.occ_shift),
            "lrand48_seed": 11,
        },
        "fm": {k: int(getattr(fm, k)) for k in _FM_SCALARS},
        "ref": {
            "l_pac": int(ref.l_pac),
            "names": list(ref.names),
            "comments": list(ref.comments),
        },
        "source": {"path": ref.src_path, "size": int(ref.src_size), "mtime_ns": int(ref.src_mtime_ns)},
        "arrays": table,
    }

    # two passes: offsets depend on the header length, which depends on the offsets' digits
    def layout(hlen):
        off = _FIXED.size + hlen
        for name in arrays:
            off = (off + _ALIGN - 1) // _ALIGN * _ALIGN
            table[name]["offset"] = off
            off += table[name]["nbytes"]
        return off

    hlen = len(json.dumps(meta).encode("utf-8", "surrogateescape")) + 256
    for _ in range(4):
        total = layout(hlen)
        meta["file_size"] = total
        hdr = json.dumps(meta).encode("utf-8", "surrogateescape")
        if len(hdr) <= hlen:
            break
        hlen = len(hdr) + 256
    hdr = hdr + b" " * (hlen - len(hdr))
    tmp = f"{path}.tmp{os.getpid()}"
    from g3align.aligner.runtime import stop
    stop.TEMP.add(tmp)  # removed if the run is stopped while writing
    try:
        with open(tmp, "wb") as fh:
            fh.write(_FIXED.pack(MAGIC, FORMAT_VERSION, zlib.crc32(hdr) & 0xFFFFFFFF, hlen, total))
            fh.write(hdr)
            for name, a in arrays.items():
                off = table[name]["offset"]
                pos = fh.tell()
                if off > pos:
                    fh.write(b"\0" * (off - pos))
                mv = memoryview(a).cast("B") if a.nbytes else b""
                fh.write(mv)
            assert fh.tell() == total
        os.replace(tmp, path)
    finally:
        stop.TEMP.discard(tmp)
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _read_header(path: str):
    if not os.path.exists(path):
        raise IndexFormatError(f"{path}: index file not found (run `g3align index` first; `mem` also reads the "
                               f"files of `bwa index` under the same prefix)")
    try:
        fh = open(path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as e:
        raise IndexFormatError(f"{path}: cannot open index file: {e.strerror}") from None
    with fh:
        fixed = fh.read(_FIXED.size)
        if len(fixed) < _FIXED.size:
            raise IndexFormatError(f"{path}: not a g3align index (file too short, truncated?)")
        magic, version, hcrc, hlen, fsize = _FIXED.unpack(fixed)
        if magic != MAGIC:
            raise IndexFormatError(f"{path}: not a g3align index (bad magic)")
        if version != FORMAT_VERSION:
            raise IndexFormatError(
                f"{path}: index format version {version} is not supported (this g3align reads version "
                f"{FORMAT_VERSION}); rebuild it with `g3align index`"
            )
        actual = os.fstat(fh.fileno()).st_size
        if actual != fsize:
            raise IndexFormatError(
                f"{path}: index file is truncated or damaged (size {actual} bytes, expected {fsize})"
            )
        if hlen > fsize:
            raise IndexFormatError(f"{path}: index header is corrupt (bad header length)")
        hdr = fh.read(hlen)
    if len(hdr) != hlen or (zlib.crc32(hdr) & 0xFFFFFFFF) != hcrc:
        raise IndexFormatError(f"{path}: index header is corrupt (checksum mismatch)")
    try:
        meta = json.loads(hdr.decode("utf-8", "surrogateescape"))
        _ = meta["arrays"], meta["fm"], meta["ref"], meta["params"]
    except (ValueError, KeyError) as e:
        raise IndexFormatError(f"{path}: index header is corrupt ({e})") from None
    return meta, fsize


def read_index_meta(prefix) -> dict:
    """The JSON header of ``PREFIX.g3i`` (parameters, names, source FASTA info) without the arrays."""
    return _read_header(index_path(prefix))[0]


def source_changed(meta: dict, fasta_path) -> bool:
    """True if ``fasta_path`` differs in size or mtime from the FASTA the index was built from."""
    try:
        st = os.stat(fasta_path)
    except OSError:
        return True
    src = meta.get("source", {})
    return int(src.get("size", -1)) != st.st_size or int(src.get("mtime_ns", -1)) != st.st_mtime_ns


def load_index(prefix, verify: bool = True, use_mmap: bool = True):
    """Load ``PREFIX.g3i`` -> ``(Reference, FMIndex)``.

    ``verify``: check every array's crc32 (default; roughly 0.1 s per 100 MB). ``use_mmap``: map the
    file copy-on-write instead of reading it into memory.
    """
    path = index_path(prefix)
    meta, fsize = _read_header(path)
    arrays = {}
    with open(path, "rb") as fh:
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY) if use_mmap else None
        for name, d in meta["arrays"].items():
            try:
                dt = np.dtype(d["dtype"])
                shape = tuple(int(x) for x in d["shape"])
                off, nb = int(d["offset"]), int(d["nbytes"])
                cnt = int(np.prod(shape)) if shape else 1
            except (TypeError, ValueError, KeyError) as e:
                raise IndexFormatError(f"{path}: index header is corrupt (array {name}: {e})") from None
            if off < 0 or off + nb > fsize or cnt * dt.itemsize != nb:
                raise IndexFormatError(f"{path}: index header is corrupt (array {name} out of range)")
            if use_mmap:
                a = np.frombuffer(buf, dtype=dt, count=cnt, offset=off) if cnt else np.empty(0, dt)
            else:
                fh.seek(off)
                a = np.fromfile(fh, dtype=dt, count=cnt)
                if a.size != cnt:
                    raise IndexFormatError(f"{path}: index file is truncated (array {name})")
            a = a.reshape(shape)
            if verify and _crc(a) != int(d["crc32"]):
                raise IndexFormatError(f"{path}: index is corrupt (checksum mismatch in array {name})")
            arrays[name] = a
    try:
        r = meta["ref"]
        src = meta.get("source", {})
        l_pac = int(r["l_pac"])
        if l_pac < 0 or arrays["ref.pac2"].shape != ((l_pac + 3) // 4,):
            raise IndexFormatError(f"{path}: index is inconsistent (reference and FM-index sizes disagree)")
        ref = Reference(
            pac=unpack_2bit(arrays["ref.pac2"], l_pac),
            l_pac=l_pac,
            names=list(r["names"]),
            comments=list(r["comments"]),
            offsets=arrays["ref.offsets"],
            hole_off=arrays["ref.hole_off"],
            hole_len=arrays["ref.hole_len"],
            hole_chr=arrays["ref.hole_chr"],
            src_path=str(src.get("path", "")),
            src_size=int(src.get("size", -1)),
            src_mtime_ns=int(src.get("mtime_ns", -1)),
            extra={"meta": meta, "index_path": path},
        )
        f = meta["fm"]
        fm = FMIndex(
            **{k: int(f[k]) for k in _FM_SCALARS},
            **{k: arrays["fm." + k] for k in _FM_ARRAYS},
        )
    except (KeyError, TypeError, ValueError) as e:
        raise IndexFormatError(f"{path}: index header is corrupt (missing {e})") from None
    if not _consistent(ref, fm):
        raise IndexFormatError(f"{path}: index is inconsistent (reference and FM-index sizes disagree)")
    return ref, fm


def load_mem_index(prefix):
    """``(Reference, FMIndex)`` for `g3align mem`: PREFIX.g3i when it exists, else the five files `bwa index` made
    under PREFIX (index/bwafmt.read_bwa_index: the double-step table built from bwa's BWT as it loads)."""
    from g3align.index import bwafmt

    if not os.path.exists(index_path(prefix)) and bwafmt.has_bwa_index(prefix):
        ref, fm = bwafmt.read_bwa_index(prefix)
    else:
        ref, fm = load_index(prefix)
    ref.is_alt = read_alt(prefix + ".alt", ref.names)
    return ref, fm


def read_alt(path, names):
    """The ALT flags (uint8 per contig) of PREFIX.alt, read as bwa's bns_restore does: the first word (up to a tab,
    CR or newline) of each line not starting with '@' names an ALT contig; names not in the index are skipped, and
    so is a last word that the end of the file ends. No file: None."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise IndexFormatError(f"{path}: cannot read ({e.strerror})") from None
    index = {}
    for i, nm in enumerate(names):
        index.setdefault(nm, i)  # bwa's hash keeps the first of equal names
    flags = np.zeros(len(names), np.uint8)
    lines = data.split(b"\n")
    if not re.search(rb"[\t\r]", lines[-1]):
        lines.pop()  # bwa looks at a word when a tab, CR or newline ends it: not at the end of the file
    for line in lines:
        word = re.split(rb"[\t\r]", line, maxsplit=1)[0]
        if word.startswith(b"@"):
            continue
        i = index.get(word.decode("utf-8", "surrogateescape"))
        if i is not None:
            flags[i] = 1
    return flags


def _consistent(ref: Reference, fm: FMIndex) -> bool:
    """Sizes that the numba query code relies on (it does no bounds checking)."""
    n = fm.n
    if fm.occ_shift != OCC_SHIFT or not (0 <= fm.sa_shift < 32):
        return False
    if not (fm.occ_wide == 0 or OCC_SHIFT < fm.occ_wide <= SUPER_SHIFT) or (wide_layout(n) and not fm.occ_wide):
        return False
    return (
        ref.pac.shape[0] == ref.l_pac
        and n == 2 * ref.l_pac
        and ref.offsets.shape[0] == len(ref.names) + 1
        and len(ref.comments) == len(ref.names)
        and ref.hole_off.shape == ref.hole_len.shape == ref.hole_chr.shape
        and fm.occ_stride == OCC_STRIDE
        and fm.occ.dtype == np.uint32
        and fm.sa.dtype == np.uint32
        and fm.occ.shape[0] == occ_words(n, fm.occ_wide)
        and fm.sa.shape[0] == sa_words(n, fm.sa_shift, fm.occ_wide)
        and fm.C1.shape[0] == 6
        and fm.C2.shape[0] == 17
        and 1 <= fm.primary <= n
        and 1 <= fm.row_sa1 <= n
        and 0 <= fm.t0 <= 3
    )
