"""GPU plumbing shared by mem, map and the pairwise engine: which CUDA devices there are (device.py, the one
gpu_available), host <-> device copies through page-locked memory and per-stream device memory (pinned.py).

May import: g3align.aligner (log, trace), runtime/. Nothing of the ports.
"""
