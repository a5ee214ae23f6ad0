"""g3align.index"""
