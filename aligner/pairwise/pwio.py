"""The pairwise engine's inputs and outputs: sequences in every form a caller has them -> CSR codes on the
device that will align them, 2-bit packing, and CIGAR compaction.

Input forms (each side of ``align_pairs``, see aligner/pairwise/engine.py for the codes):
  * a list of ``str``: read in place by one parallel kernel when every item is a compact ASCII str
    (``str_list_codes``, CPython); any other list of ``str`` (or of ``bytes``) is joined by ``'\\n'``
    into one text, then translated to codes and checked where the alignment runs (``pw_encode_text`` on
    the GPU, ``encode_text`` on the CPU), which also names a bad character by sequence and position;
  * ``(codes, offsets)`` with codes uint8 0..4 and CSR offsets int64[n+1], as numpy or CuPy arrays
    (CuPy codes stay on the GPU: no host round trip);
  * ``Packed2``: 2-bit packed bases (4 a byte, no N) with offsets counted in bases (``pack2``).
GPU kernels: kernels/pwio.cu; each has its CPU twin here (same name without ``pw_``).
"""
from __future__ import annotations

import ctypes
import sys
import threading
from dataclasses import dataclass

import numpy as np
from llvmlite import ir
from numba import prange, types
from numba.extending import intrinsic

from g3align.jit import njit

_LUT = np.full(256, 255, np.uint8)      # (not reads.NT4: '.' and '-' are errors here, as they always were)
for _c, _v in zip("ACGT", range(4)):
    _LUT[ord(_c)] = _v
    _LUT[ord(_c.lower())] = _v
for _c in "NRYKMSWBDHV":
    _LUT[ord(_c)] = 4
    _LUT[ord(_c.lower())] = 4


@dataclass
class Packed2:
    """2-bit packed sequences: base j of the concatenation is bits 2*(j & 3) of data[j >> 2] (A C G T = 0..3,
    no N); ``off``: int64[n+1] CSR offsets in bases. ``data`` may be a numpy or a CuPy array."""
    data: object
    off: np.ndarray

    def __len__(self) -> int:
        return self.off.size - 1


def pack2(codes, off) -> Packed2:
    """(codes 0..3, offsets) -> Packed2 (numpy). Raises ValueError for an N (code 4): 2 bits hold A C G T only."""
    codes = np.ascontiguousarray(codes, np.uint8)
    off = np.ascontiguousarray(off, np.int64)
    if codes.size and codes.max() > 3:
        raise ValueError("2-bit packing holds A, C, G, T only (codes 0..3); keep sequences with N as codes")
    out = np.zeros((codes.size + 3) // 4, np.uint8)
    _pack2(codes, out)
    return Packed2(out, off)


@njit(cache=True, parallel=True)
def _pack2(codes, out):
    n = codes.size
    for b in prange(out.size):
        v = 0
        for k in range(4):
            j = 4 * b + k
            if j < n:
                v |= codes[j] << (2 * k)
        out[b] = v


@njit(cache=True, parallel=True)
def unpack2(packed, shift, n, codes):
    """CPU twin of pw_unpack2: codes[i] = base shift + i of packed."""
    for i in prange(n):
        j = shift + i
        codes[i] = (packed[j >> 2] >> (2 * (j & 3))) & 3


@njit(cache=True, parallel=True)
def encode_text(text, off, codes, lut):
    """CPU twin of pw_encode_text: sequence k is text[off[k] + k : off[k + 1] + k] (one separator after each);
    returns the smallest text position of an invalid character, or text.size."""
    nseq = off.size - 1
    firsts = np.full(nseq, text.size, np.int64)
    for k in prange(nseq):
        a = off[k]
        s = a + k
        for i in range(off[k + 1] - a):
            c = lut[text[s + i]]
            codes[a + i] = c
            if c == 255 and firsts[k] == text.size:
                firsts[k] = s + i
    return firsts.min() if nseq else text.size


@njit(cache=True)
def gather_runs(src, src_off, cnt, dst_off, dst):
    """CPU twin of pw_gather_runs (cnt_stride 1)."""
    for p in range(cnt.size):
        a = src_off[p]
        b = dst_off[p]
        for k in range(cnt[p]):
            dst[b + k] = src[a + k]


def csr(lengths) -> np.ndarray:
    off = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=off[1:])
    return off


def _is_cupy(x) -> bool:
    return type(x).__module__.startswith("cupy")


# A list of str read in place (CPython): the list's item pointers and each str's characters are read by one
# parallel kernel, with no Python call per sequence (on the H100 box, joining 1M strings of 150 bp took ~150 ms
# a side; reading both sides in place and uploading them, 50-63 ms). It relies on CPython's object layout (list
# items at +24; a str's length at +16, state bits at +32, ASCII characters right after the header), so a probe
# checks it on first use against Python's own answers, and any str that is not a compact ASCII str (kind,
# subclass) sends the whole list the joined-text way.
_LIST_ITEMS, _STR_LEN, _STR_STATE = 24, 16, 32


@intrinsic
def _peek_i64(typingctx, addr):
    def codegen(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.IntType(64).as_pointer()))
    return types.int64(types.int64), codegen


@intrinsic
def _peek_u8(typingctx, addr):
    def codegen(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.IntType(8).as_pointer()))
    return types.uint8(types.int64), codegen


@intrinsic
def _peek_u32(typingctx, addr):
    def codegen(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.IntType(32).as_pointer()))
    return types.uint32(types.int64), codegen


@njit(cache=True, parallel=True)
def _str_lengths(items, n, str_type, lens):
    """lens[i] = length of item i of the list whose item pointers start at address `items`; returns the count of
    items that are not compact ASCII str objects of type `str_type` (their length is left 0)."""
    bad = np.zeros(n, np.int64)
    for i in prange(n):
        o = _peek_i64(items + 8 * i)
        lens[i] = 0
        if _peek_i64(o + 8) != str_type:             # (every object has its type there; only a str's state)
            bad[i] = 1
            continue
        st = _peek_u32(o + _STR_STATE)
        if ((st >> 2) & 7) != 1 or ((st >> 5) & 1) == 0 or ((st >> 6) & 1) == 0:
            bad[i] = 1
        else:
            lens[i] = _peek_i64(o + _STR_LEN)
    return bad.sum()


@njit(cache=True, parallel=True)
def _str_codes(items, off, data, lut, codes):
    """codes[off[i]:off[i + 1]] = lut of the characters of str item i (data: their offset in the object);
    returns the smallest (code position, item) of an invalid character, or (codes.size, -1)."""
    n = off.size - 1
    first = np.full(n, codes.size, np.int64)
    for i in prange(n):
        o = _peek_i64(items + 8 * i) + data
        a = off[i]
        for k in range(off[i + 1] - a):
            c = lut[_peek_u8(o + k)]
            codes[a + k] = c
            if c == 255 and first[i] == codes.size:
                first[i] = a + k
    return first.min() if n else codes.size


def _in_place_ok() -> bool:
    """Whether reading str lists in place gives Python's own answers here (checked once)."""
    if _IN_PLACE:
        return _IN_PLACE[0]
    ok = False
    k = _ascii_data_offset()
    if k is not None:
        class _S(str):
            pass
        probe = ["ACGTN", "", "acgtn" * 9, "ACé", "Ω", _S("AC"), "TTA"]
        try:
            lens = np.zeros(len(probe), np.int64)
            nbad = _str_lengths(_items(probe), len(probe), id(str), lens)
            good = [0, 1, 2, 6]
            ok = nbad == 3 and lens.tolist() == [5, 0, 45, 0, 0, 0, 3]
            if ok:
                sub = [probe[i] for i in good]
                off = csr([len(x) for x in sub])
                codes = np.empty(int(off[-1]), np.uint8)
                bad = _str_codes(_items(sub), off, k, _LUT, codes)
                ok = bad == codes.size and codes.tobytes() == _LUT[np.frombuffer("".join(sub).encode(), np.uint8)
                                                                   ].tobytes()
        except Exception:      # noqa: BLE001 (any surprise: the joined-text way)
            ok = False
    _IN_PLACE.append(ok)
    return ok


_IN_PLACE: list = []


def _items(lst: list) -> int:
    """Address of a list's item pointers (CPython's PyListObject.ob_item)."""
    return int(ctypes.c_int64.from_address(id(lst) + _LIST_ITEMS).value)


_STAGE = threading.local()


def _staging(total: int) -> np.ndarray:
    """A per-thread uint8 buffer of at least `total` bytes for codes that only go up to the GPU, kept page-locked
    (cudaHostRegister) and reused: fresh pages cost ~1 ms a 8 MB on a VM, locking them ~0.35 ms a 10 MB."""
    import cupy as cp

    buf = getattr(_STAGE, "buf", None)
    if buf is None or buf.size < total:
        if buf is not None and _STAGE.locked:
            cp.cuda.runtime.hostUnregister(buf.ctypes.data)
        buf = np.empty(max(total, 1), np.uint8)
        try:
            cp.cuda.runtime.hostRegister(buf.ctypes.data, buf.nbytes, 0)
            _STAGE.locked = True
        except cp.cuda.runtime.CUDARuntimeError:
            _STAGE.locked = False
        _STAGE.buf = buf
    return buf[:total]


def str_list_codes(seqs, alloc=None):
    """A list of compact ASCII str -> (codes, offsets) read in place, or None (other lists: the joined-text way).
    alloc(total): the uint8 array to write the codes into (default: a new one)."""
    if type(seqs) is not list or not seqs or not _in_place_ok():
        return None
    n = len(seqs)
    lens = np.empty(n, np.int64)
    if _str_lengths(_items(seqs), n, id(str), lens):
        return None
    off = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    total = int(off[-1])
    codes = alloc(total) if alloc is not None else np.empty(total, np.uint8)
    bad = _str_codes(_items(seqs), off, _ascii_data_offset(), _LUT, codes)
    if bad < total:
        return None                                  # an invalid character: the joined-text way names it
    return codes, off


_ASCII_DATA = []       # [offset of the characters in a compact ASCII str object, or None], found on first use


def _ascii_data_offset():
    """Where CPython keeps the characters of a compact ASCII str, relative to the object's address (its header:
    sys.getsizeof("") - 1 bytes), when a probe confirms it; None elsewhere (then text is encoded, a copy)."""
    if not _ASCII_DATA:
        off = None
        if sys.implementation.name == "cpython":
            probe = "".join(["ACGTN", "acgtn-x"])           # made at run time: a compact ASCII str
            k = sys.getsizeof("") - 1
            try:
                if bytes((ctypes.c_char * len(probe)).from_address(id(probe) + k)) == probe.encode("ascii"):
                    off = k
            except (ValueError, OSError):
                off = None
        _ASCII_DATA.append(off)
    return _ASCII_DATA[0]


def _text(seqs):
    """List of str (or of bytes) -> (text uint8: the sequences joined by '\\n', count, the object that owns the
    text's memory), or None when the list mixes types, holds a non-Latin-1 character or other objects (the
    per-sequence path then names the culprit). ASCII text is read in place from the joined str (CPython: no
    encoding copy; the third item keeps it alive), other text is encoded as Latin-1."""
    if not isinstance(seqs, (list, tuple)):
        seqs = list(seqs)
    if not seqs:
        return np.zeros(0, np.uint8), 0, None
    try:
        if isinstance(seqs[0], str):
            j = "\n".join(seqs)
            k = _ascii_data_offset() if j.isascii() and j else None
            if k is not None:
                return np.ctypeslib.as_array((ctypes.c_uint8 * len(j)).from_address(id(j) + k)), len(seqs), j
            b = j.encode("latin-1")
        else:
            b = b"\n".join(seqs)
    except (TypeError, UnicodeEncodeError):
        return None
    return np.frombuffer(b, np.uint8), len(seqs), b


def _slow_text(seqs, what):
    """The per-sequence path: (text, offsets) with a precise error for a character outside Latin-1 or a
    non-sequence item."""
    bs = []
    for k, s in enumerate(seqs):
        if isinstance(s, str):
            try:
                bs.append(s.encode("latin-1"))
            except UnicodeEncodeError as e:
                raise ValueError(f"{what} {k}: invalid character {s[e.start]!r} at position {e.start} "
                                 "(allowed: ACGT, IUPAC codes as N)")
        elif isinstance(s, (bytes, bytearray, memoryview, np.ndarray)):
            bs.append(bytes(s))
        else:
            raise ValueError(f"{what} {k}: a {type(s).__name__}, not a sequence (str or bytes)")
    b = b"\n".join(bs)
    return np.frombuffer(b, np.uint8), len(bs), b


def _bad_char(text, pos, off, what):
    k = int(np.searchsorted(off + np.arange(off.size), pos, side="right") - 1)
    raise ValueError(f"{what} {k}: invalid character {chr(int(text[pos]))!r} at position "
                     f"{int(pos - off[k] - k)} (allowed: ACGT, IUPAC codes as N)")


def _offsets_from_text(text: np.ndarray, nseq: int, seps) -> np.ndarray | None:
    """CSR offsets of the codes from the separator positions (None: a separator inside a sequence)."""
    if nseq == 0:
        return np.zeros(1, np.int64)
    if seps.size != nseq - 1:
        return None
    off = np.empty(nseq + 1, np.int64)
    off[0] = 0
    off[1:nseq] = seps - np.arange(nseq - 1)
    off[nseq] = text.size - (nseq - 1)
    return off


def _check_codes(codes, off, what, full: bool = True):
    """The offsets as int64 numpy, checked against the codes; full=False leaves the order of the offsets to the
    caller (align_pairs checks the lengths it computes anyway)."""
    off = np.ascontiguousarray(_host(off), np.int64)
    if off.ndim != 1 or off.size < 1 or off[0] != 0 or off[-1] != codes.size or (
            full and np.any(off[1:] < off[:-1])):
        raise ValueError(f"{what} offsets are not a valid CSR offsets array")
    return off


def _host(x):
    return x.get() if _is_cupy(x) else np.asarray(x)


def host_codes(seqs, what: str = "sequence") -> tuple[np.ndarray, np.ndarray]:
    """Any input form -> (uint8 codes, int64 offsets), numpy (the CPU path)."""
    if isinstance(seqs, Packed2):
        off = np.ascontiguousarray(seqs.off, np.int64)
        codes = np.empty(int(off[-1]), np.uint8)
        unpack2(np.ascontiguousarray(_host(seqs.data), np.uint8), 0, codes.size, codes)
        return codes, _check_codes(codes, off, what)
    if isinstance(seqs, tuple) and len(seqs) == 2 and hasattr(seqs[0], "dtype"):
        codes = np.ascontiguousarray(_host(seqs[0]), dtype=np.uint8)
        off = _check_codes(codes, seqs[1], what)
        if codes.size and codes.max() > 4:
            raise ValueError(f"{what} codes must be 0..4")
        return codes, off
    r = str_list_codes(seqs)
    if r is not None:
        return r
    tx = _text(seqs)
    if tx is None:
        tx = _slow_text(seqs, what)
    text, nseq, _owner = tx
    off = _offsets_from_text(text, nseq, np.flatnonzero(text == 10))
    if off is None:
        _newline_error(seqs, what)
    codes = np.empty(int(off[-1]), np.uint8)
    bad = encode_text(text, off, codes, _LUT)
    if bad < text.size:
        _bad_char(text, bad, off, what)
    return codes, off


def device_codes(seqs, what: str = "sequence"):
    """Any input form -> (cupy uint8 codes, numpy int64 offsets) on the current device; host arrays go up through
    their own pages locked in place (host_form, slab_codes), text is translated and checked on the GPU."""
    import cupy as cp

    from g3align.aligner.gpu import pinned
    from g3align.kernels.loader import get_module

    form = host_form(seqs, what)
    if form is not None:
        return slab_codes(form, 0, form[2].size - 1, what), form[2]
    if isinstance(seqs, Packed2):                    # (CuPy data)
        off = np.ascontiguousarray(_host(seqs.off), np.int64)
        if off.ndim != 1 or off.size < 1 or off[0] != 0 or off[-1] > 4 * seqs.data.size:
            raise ValueError(f"{what} offsets are not valid CSR offsets of the packed bases")
        return _unpack_on_device(seqs.data, 0, int(off[-1])), off
    if isinstance(seqs, tuple) and len(seqs) == 2 and hasattr(seqs[0], "dtype"):      # (CuPy codes)
        codes = seqs[0] if seqs[0].dtype == cp.uint8 else seqs[0].astype(cp.uint8)
        off = _check_codes(codes, seqs[1], what, full=False)
        if codes.size and int(codes.max()) > 4:
            raise ValueError(f"{what} codes must be 0..4")
        return codes, off
    r = str_list_codes(seqs, _staging)
    if r is not None:
        return pinned.upload(r[0]), r[1]
    tx = _text(seqs)
    if tx is None:
        tx = _slow_text(seqs, what)
    text, nseq, _owner = tx               # (_owner keeps text's memory alive to the end of the call)
    td = pinned.upload(text)
    seps = cp.flatnonzero(td == 10)
    off = _offsets_from_text(text, nseq, pinned.download(seps))
    if off is None:
        _newline_error(seqs, what)
    codes = cp.empty(int(off[-1]), cp.uint8)
    bad = cp.full(1, text.size, cp.uint64)
    if nseq:
        f = get_module("pwio").get_function("pw_encode_text")
        f((-(-nseq * 32 // 256),), (256,), (td, cp.asarray(off), np.int32(nseq), codes, bad))
    b = int(bad.get()[0])
    if b < text.size:
        _bad_char(text, b, off, what)
    return codes, off


def _unpack_on_device(packed, shift: int, n: int):
    """pw_unpack2: n codes from base `shift` of the packed bytes (on the device), as a new CuPy array."""
    import cupy as cp

    from g3align.kernels.loader import get_module

    codes = cp.empty(n, cp.uint8)
    if n:
        get_module("pwio").get_function("pw_unpack2")((min(-(-n // 256), 65536),), (256,),
                                                       (packed, np.int64(shift), np.int64(n), codes))
    return codes


def host_form(seqs, what: str = "sequence"):
    """Host arrays as they are, offsets checked: ("codes", uint8 codes, offsets) or ("packed2", packed bytes,
    offsets); None for the other forms (text, CuPy arrays). The GPU path uploads these a slab at a time
    (slab_codes)."""
    if isinstance(seqs, Packed2) and isinstance(seqs.data, np.ndarray):
        data = np.ascontiguousarray(seqs.data, np.uint8)
        off = np.ascontiguousarray(_host(seqs.off), np.int64)
        if off.ndim != 1 or off.size < 1 or off[0] != 0 or off[-1] > 4 * data.size:
            raise ValueError(f"{what} offsets are not valid CSR offsets of the packed bases")
        return "packed2", data, off
    if isinstance(seqs, tuple) and len(seqs) == 2 and isinstance(seqs[0], np.ndarray):
        codes = np.ascontiguousarray(seqs[0], np.uint8)
        return "codes", codes, _check_codes(codes, seqs[1], what, full=False)
    return None


def slab_codes(form, a: int, b: int, what: str = "sequence"):
    """The codes of sequences a..b-1 of a host_form, on the device (current stream; returns after the copy)."""
    from g3align.aligner.gpu import pinned

    kind, data, off = form
    lo, hi = int(off[a]), int(off[b])
    if kind == "codes":
        d = pinned.upload(data[lo:hi])
        if d.size and int(d.max()) > 4:
            raise ValueError(f"{what} codes must be 0..4")
        return d
    return _unpack_on_device(pinned.upload(data[lo >> 2:(hi + 3) >> 2]), lo & 3, hi - lo)


def _newline_error(seqs, what):
    """A separator count that does not match: some sequence holds a '\n'; name the first one."""
    for k, s in enumerate(seqs):
        p = s.find("\n" if isinstance(s, str) else b"\n")
        if p >= 0:
            raise ValueError(f"{what} {k}: invalid character '\\n' at position {p} (allowed: ACGT, IUPAC codes as N)")
    raise ValueError(f"{what}: the sequences could not be joined")


# ---------------------------------------------------------------------------------------------
# TSV lines of `g3align align` (aligner/cli/align.py), made in parallel into one buffer

@njit(cache=True, inline="always")
def _ndigits(v):
    n = 1
    if v < 0:
        n = 2
        v = -v
    while v >= 10:
        v //= 10
        n += 1
    return n


@njit(cache=True, inline="always")
def _put_int(out, p, v):
    if v < 0:
        out[p] = 45
        p += 1
        v = -v
    nd = _ndigits(v)
    for k in range(nd - 1, -1, -1):
        out[p + k] = 48 + v % 10
        v //= 10
    return p + nd


@njit(cache=True, inline="always")
def _put_bytes(out, p, src, a, b):
    for k in range(a, b):
        out[p] = src[k]
        p += 1
    return p


@njit(cache=True, parallel=True)
def format_tsv(qnb, qno, tnb, tno, qlen, tlen, score, qs, qe, ts, te, cig, coff, tb):
    """One line per pair: qname qlen q_start q_end tname tlen t_start t_end score cigar ('*' without traceback or
    for an empty CIGAR), tab-separated, as bytes (uint8)."""
    n = score.size
    ops = np.array([77, 73, 68, 78, 83, 72, 80, 61, 88], np.uint8)      # M I D N S H P = X
    ln = np.empty(n, np.int64)
    for i in prange(n):
        L = qno[i + 1] - qno[i] + tno[i + 1] - tno[i] + 10
        L += _ndigits(qlen[i]) + _ndigits(qs[i]) + _ndigits(qe[i]) + _ndigits(tlen[i]) + _ndigits(ts[i])
        L += _ndigits(te[i]) + _ndigits(score[i])
        if tb and coff[i + 1] > coff[i]:
            for k in range(coff[i], coff[i + 1]):
                L += _ndigits(cig[k] >> 4) + 1
        else:
            L += 1
        ln[i] = L
    off = np.empty(n + 1, np.int64)
    off[0] = 0
    for i in range(n):
        off[i + 1] = off[i] + ln[i]
    out = np.empty(off[n], np.uint8)
    for i in prange(n):
        p = _put_bytes(out, off[i], qnb, qno[i], qno[i + 1])
        out[p] = 9
        p = _put_int(out, p + 1, qlen[i])
        out[p] = 9
        p = _put_int(out, p + 1, qs[i])
        out[p] = 9
        p = _put_int(out, p + 1, qe[i])
        out[p] = 9
        p = _put_bytes(out, p + 1, tnb, tno[i], tno[i + 1])
        out[p] = 9
        p = _put_int(out, p + 1, tlen[i])
        out[p] = 9
        p = _put_int(out, p + 1, ts[i])
        out[p] = 9
        p = _put_int(out, p + 1, te[i])
        out[p] = 9
        p = _put_int(out, p + 1, score[i])
        out[p] = 9
        p += 1
        if tb and coff[i + 1] > coff[i]:
            for k in range(coff[i], coff[i + 1]):
                p = _put_int(out, p, cig[k] >> 4)
                out[p] = ops[cig[k] & 15]
                p += 1
        else:
            out[p] = 42
            p += 1
        out[p] = 10
    return out
