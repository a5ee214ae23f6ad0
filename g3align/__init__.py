"""g3align: a GPU seed-chain-extend aligner reproducing bwa mem 0.7.17 and minimap2 2.24.

The source tree keeps the design card's layout (aligner/, index/, kernels/); the package maps
those directories to g3align.aligner, g3align.index and g3align.kernels.
"""
__version__ = "0.1.0"

from g3align import jit as _jit  # noqa: E402

_jit.cpu_target()  # which CPU the kernels are compiled for, chosen before numba starts (g3align/jit.py)
