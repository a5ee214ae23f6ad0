"""`python -m g3align.aligner.cli`: the `g3align` program."""
from g3align.aligner.cli import entry

entry()
