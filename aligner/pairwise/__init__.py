"""The pairwise DP engine: many (query, target) pairs -> score, ends, starts, CIGAR; global, semi-global and local,
linear or affine gaps, on the GPU (kernels/pairwise.cu, kernels/pwio.cu) or the numba CPU twin.

engine.py aligns (align_pairs, its routing between kernels); pwio.py moves the inputs (str lists, numpy or CuPy
codes, 2-bit packed) to the device that aligns them and formats results. The public API is re-exported here:

    from g3align.aligner.pairwise import align_pairs

May import: gpu/, runtime/, g3align.kernels, g3align.jit. Not mem/ or map/.
"""
from g3align.aligner.gpu.device import gpu_available  # noqa: F401
from g3align.aligner.pairwise.engine import align_pairs, encode_seqs, rescore_cigar  # noqa: F401
from g3align.aligner.pairwise.pwio import Packed2, pack2  # noqa: F401
