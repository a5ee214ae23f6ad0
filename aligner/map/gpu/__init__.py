"""The GPU batch stages of `g3align map`: launchers of kernels/mmsketch.cu (sketch.py), kernels/mmseed.cu
(seed.py), kernels/lchain.cu (lchain.py) and kernels/ksw2.cu (ksw2.py), each beside its numba CPU twin, which
gives the same arrays.

May import: map/ (the CPU stages it batches), gpu/, runtime/, io/, g3align.index, g3align.kernels, g3align.jit.
"""
