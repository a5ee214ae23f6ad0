"""Input and output: FASTQ/FASTA reads as struct-of-arrays batches (reads.py), SAM headers and the output sink for
SAM, BAM and CRAM (sam.py), text into byte buffers from numba code for the record writers (textbuf.py), and the
per-read concordance of two SAM files (compare.py).

May import: g3align.jit, g3align.aligner (the log and trace helpers), aligner.runtime. Nothing of the ports
(mem/, map/, pairwise/): they import this package.
"""
