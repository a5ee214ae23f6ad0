"""How g3align's processes and threads run: stopping on signals and closed pipes (stop.py), one command over
several workers, GPUs or a Dask cluster (shard.py), read-only views of shared arrays for numba threads
(nbshare.py), and the G3ALIGN_TUNE sizes (tune.py).

May import: g3align.jit, g3align.aligner (log, trace), io/; shard.py starts the mem and map pipelines in its
workers (imported there, at run time).
"""
