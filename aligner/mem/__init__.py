"""`g3align mem`: the port of bwa mem 0.7.17, one module per stage (mem_align1_core's order):

options -> smem (seeds) -> chain (+ kbtree, ksort) -> extend (+ ksw) -> primary (dedup, marking, MAPQ)
-> single (the single-end batch kernel) / pair (insert sizes, mate rescue, pairing) -> samout (SAM records);
pipeline.py drives batches through them, on the CPU or through the staged GPU path in mem/gpu/.

May import: io/, runtime/, gpu/, g3align.index, g3align.kernels, g3align.jit. Not map/ or pairwise/.
"""
