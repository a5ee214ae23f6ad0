"""How g3align's processes and threads run: stopping on signals and closed pipes (stop.py), read-only views of
shared arrays for numba threads (nbshare.py), and the G3ALIGN_TUNE list of pipeline sizes (tune.py).

May import: g3align.jit, g3align.aligner (log, trace). Nothing of the ports.
"""
