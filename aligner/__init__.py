"""g3align.aligner"""
import sys


def log(msg: str, verbose: int = 3, level: int = 3) -> None:
    """A progress / note line on stderr (minimap2's and bwa's [M::...] lines) when verbose >= level."""
    if verbose >= level:
        print(msg, file=sys.stderr, flush=True)
