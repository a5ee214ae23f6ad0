"""`g3align map`: the port of minimap2 2.24, one module per stage of minimap2's own files:

options (options.c, presets) -> seed (seed.c, map.c; sdust.py for -T) -> lchain (lchain.c, region generation)
-> hit (hit.c, esterr.c) -> align (align.c; ksw2.py for the ksw2 kernels, align_batch.py for a whole batch's
alignment jobs) -> format (format.c: PAF and SAM); types.py holds the shared encodings and pipeline.py the per-read
and per-batch driver (map.c's mm_map_frag). map/gpu/ holds the batch kernels' launchers.

May import: io/, runtime/, gpu/, g3align.index, g3align.kernels, g3align.jit. Not mem/ or pairwise/.
"""
