"""g3align.aligner"""
