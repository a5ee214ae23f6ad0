"""g3align.kernels"""
