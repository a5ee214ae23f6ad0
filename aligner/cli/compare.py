"""`g3align compare`: the per-read concordance report of aligner/io/compare.py."""
from __future__ import annotations

import sys

import click


@click.command("compare", context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def compare_cmd(args):
    """Per-read concordance of TEST.sam against GOLD.sam (see `g3align compare --help`)."""
    from g3align.aligner.io import compare
    sys.exit(compare.main(list(args)))
