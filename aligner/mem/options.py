"""Options of `g3align mem`, with bwa mem 0.7.17's defaults and option semantics.

`MemOpt` is a plain dataclass for the CLI; `MemOpt.to_numba(alt)` turns it into the `MemParams`
namedtuple that the numba stages read: ints and floats, and `alt`, the reference's per-contig ALT flags (int8; empty
when no contig is ALT or -j is given: bwa's `bns->anns[rid].is_alt`, from PREFIX.alt).
"""
from collections import namedtuple
from dataclasses import dataclass, field, fields

import numpy as np

from g3align.jit import njit

# bwa's MEM_F_* flag bits
F_PE = 0x2
F_NOPAIRING = 0x4
F_ALL = 0x8
F_NO_MULTI = 0x10
F_NO_RESCUE = 0x20
F_REF_HDR = 0x100
F_SOFTCLIP = 0x200
F_SMARTPE = 0x400
F_PRIMARY5 = 0x800
F_KEEP_SUPP_MAPQ = 0x1000


@dataclass
class MemOpt:
    a: int = 1                  # match score (-A)
    b: int = 4                  # mismatch penalty (-B)
    o_del: int = 6              # gap open, deletions (-O)
    e_del: int = 1              # gap extension, deletions (-E)
    o_ins: int = 6              # gap open, insertions
    e_ins: int = 1              # gap extension, insertions
    pen_unpaired: int = 17      # -U
    pen_clip5: int = 5          # -L (5' end)
    pen_clip3: int = 5          # -L (3' end)
    w: int = 100                # band width (-w)
    zdrop: int = 100            # -d
    T: int = 30                 # minimum output score (-T)
    flag: int = 0               # MEM_F_* bits
    min_seed_len: int = 19      # -k
    max_mem_intv: int = 20      # -y: third-round (LAST-like) seeding occurrence threshold
    split_factor: float = 1.5   # -r: re-seed SMEMs longer than min_seed_len*split_factor
    split_width: int = 10       # -s: ... that occur at most this many times
    max_occ: int = 500          # -c: seed occurrence limit
    min_chain_weight: int = 0   # -W
    max_chain_extend: int = 1 << 30  # -N
    max_chain_gap: int = 10000  # -G
    mask_level: float = 0.50    # -X
    drop_ratio: float = 0.50    # -D
    XA_drop_ratio: float = 0.80
    mask_level_redun: float = 0.95
    mapQ_coef_len: float = 50.0  # -Q
    mapQ_coef_fac: int = 3      # int(log(mapQ_coef_len)): an int field in bwa, so log(50) truncates to 3
    max_ins: int = 10000
    max_XA_hits: int = 5        # -h INT[,INT]
    max_XA_hits_alt: int = 200
    max_matesw: int = 50        # -m
    chunk_size: int = 10000000  # bases per thread per batch (bwa's -K default is this x threads)
    n_threads: int = 1
    ignore_alt: bool = False    # -j: the ALT contigs of PREFIX.alt count as primary assembly
    set_by_user: set = field(default_factory=set)

    def apply_match_scaling(self):
        """bwa's update_a(): when -A is given, penalties not given explicitly scale with it."""
        if "a" in self.set_by_user:
            for name in ("b", "T", "o_del", "e_del", "o_ins", "e_ins", "zdrop", "pen_clip5", "pen_clip3",
                         "pen_unpaired"):
                if name not in self.set_by_user:
                    setattr(self, name, getattr(self, name) * self.a)

    def to_numba(self, alt=None):
        """MemParams; alt: the reference's per-contig ALT flags (Reference.is_alt), or None."""
        vals = {f.name: getattr(self, f.name) for f in fields(self) if f.name in MemParams._fields}
        # bwa keeps these ratios in C floats; products with them round to single precision
        vals = {k: (np.float32(v) if k in _F32 else float(v) if isinstance(getattr(MemOpt, k, 0), float) else int(v))
                for k, v in vals.items()}
        flags = np.zeros(0, np.int8)
        if alt is not None and not self.ignore_alt and np.any(alt):
            flags = np.ascontiguousarray(alt, dtype=np.int8)
        return MemParams(**vals, alt=flags)


_F32 = {"split_factor", "mask_level", "drop_ratio", "XA_drop_ratio", "mask_level_redun", "mapQ_coef_len"}


MemParams = namedtuple("MemParams", [
    "a", "b", "o_del", "e_del", "o_ins", "e_ins", "pen_unpaired", "pen_clip5", "pen_clip3", "w", "zdrop",
    "T", "flag", "min_seed_len", "max_mem_intv", "split_factor", "split_width", "max_occ",
    "min_chain_weight", "max_chain_extend", "max_chain_gap", "mask_level", "drop_ratio", "XA_drop_ratio",
    "mask_level_redun", "mapQ_coef_len", "mapQ_coef_fac", "max_ins", "max_XA_hits", "max_XA_hits_alt",
    "max_matesw", "alt"])


@njit(cache=True, inline="always")
def contig_is_alt(opt, rid):
    """1 if contig rid is an ALT contig (opt.alt; bwa's bns->anns[rid].is_alt), else 0."""
    return 1 if rid >= 0 and rid < opt.alt.shape[0] and opt.alt[rid] != 0 else 0


def score_matrix(a, b):
    """bwa_fill_scmat(): 5x5 int8 matrix, a on the diagonal, -b off it, -1 in the N row/column."""
    mat = np.full((5, 5), -b, dtype=np.int8)
    for i in range(4):
        mat[i, i] = a
    mat[4, :] = -1
    mat[:, 4] = -1
    return mat.reshape(-1)
