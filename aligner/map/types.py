"""Shared encodings of the long-read path (see docs/MM_PORT.md).

Region matrix columns (one int64 row per minimap2 `mm_reg1_t` + its `mm_extra_t`), ksw2 result
indices, CIGAR op codes and seed flag bits.  Everything here mirrors minimap2 2.24's meaning.
"""
import numpy as np

from g3align.aligner.runtime.nbshare import f32_as_u32, u32_as_f32
from g3align.jit import njit

# --- region matrix R[n, NR] ---------------------------------------------------------------
(ID, CNT, RID, SCORE, QS, QE, RS, RE, PARENT, SUBSC, AS, MLEN, BLEN, N_SUB, SCORE0, MAPQ,
 SPLIT, REV, INV, SAM_PRI, PROPER_FRAG, PE_THRU, SEG_SPLIT, SEG_ID, SPLIT_INV, IS_ALT,
 STRAND_RETAINED, HASH, DIV, HAS_P, DP_SCORE, DP_MAX, DP_MAX2, N_AMBI, TRANS_STRAND,
 N_CIGAR, CIG_OFF) = range(37)
NR = 37

# --- ksw2 result vector (ksw_extz_t) ---------------------------------------------------------
(EZ_MAX, EZ_ZDROPPED, EZ_MAX_Q, EZ_MAX_T, EZ_MQE, EZ_MQE_T, EZ_MTE, EZ_MTE_Q, EZ_SCORE,
 EZ_REACH_END) = range(10)
EZ_N = 10

# ksw2.h flags
KSW_EZ_SCORE_ONLY = 0x01
KSW_EZ_RIGHT = 0x02
KSW_EZ_GENERIC_SC = 0x04
KSW_EZ_APPROX_MAX = 0x08
KSW_EZ_APPROX_DROP = 0x10
KSW_EZ_EXTZ_ONLY = 0x40
KSW_EZ_REV_CIGAR = 0x80
KSW_EZ_SPLICE_FOR = 0x100
KSW_EZ_SPLICE_REV = 0x200
KSW_EZ_SPLICE_FLANK = 0x400
KSW_NEG_INF = -0x40000000

# CIGAR ops (minimap2 numbering, "MIDNSHP=XB")
CIG_M, CIG_I, CIG_D, CIG_N, CIG_S, CIG_H, CIG_P, CIG_EQ, CIG_X = range(9)
CIGAR_CHARS = "MIDNSHP=XB"

# seed flags in anchor y (mmpriv.h)
SEED_LONG_JOIN = np.uint64(1) << np.uint64(40)
SEED_IGNORE = np.uint64(1) << np.uint64(41)
SEED_TANDEM = np.uint64(1) << np.uint64(42)
SEED_SELF = np.uint64(1) << np.uint64(43)
SEED_SEG_SHIFT = 48


def new_regs(n: int) -> np.ndarray:
    """An empty region matrix with n rows (parent = -1 as minimap2 leaves it before set_parent)."""
    r = np.zeros((n, NR), np.int64)
    r[:, PARENT] = -1
    return r


@njit(cache=True, nogil=True)
def f32_bits(x):
    """float -> int64 holding the IEEE single-precision bit pattern as an int32 (for the DIV column)."""
    return np.int64(np.int32(f32_as_u32(np.float32(x))))


@njit(cache=True, nogil=True)
def bits_f32(b):
    """Inverse of f32_bits."""
    return u32_as_f32(np.uint32(np.int32(b)))
