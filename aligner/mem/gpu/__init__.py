"""The staged GPU path of `g3align mem`: launchers of kernels/smem.cu (smem.py), kernels/memchain.cu and
kernels/memext.cu (stage.py: chains, extension, mate-rescue SW) and kernels/memcigar.cu (cigar.py), each beside
its numba CPU twin, which gives the same arrays.

May import: mem/ (the CPU stages it batches), gpu/, runtime/, io/, g3align.index, g3align.kernels, g3align.jit.
"""
