"""The `g3align` command line, one module per subcommand: index.py, mem.py, map.py, align.py (the pairwise engine),
compare.py, warmup.py; common.py holds what they share, startup.py the process's fast start and exit, tracing.py
G3ALIGN_TRACE, shard.py the runs of mem and map over several workers (--gpus, --scheduler), and warmup_plan.py
warmup's data and runs. Every module here is imported at each start; what a command alone needs it imports inside.

Conventions follow bwa and minimap2: SAM to stdout, logs to stderr, `-` for stdin, gzip input accepted. Every
expected failure (bad input, bad index, bad option) ends with one `[E::g3align] ...` line and exit 1.
May import everything in g3align; nothing imports it but the console script and `python -m g3align.aligner.cli`.
"""
from __future__ import annotations

import sys

import click

from g3align import __version__
from g3align.aligner.cli import startup


@click.group(context_settings={"help_option_names": ["--help"]})
@click.version_option(__version__, "--version")
def main():
    """g3align: GPU seed-chain-extend aligner reproducing bwa mem 0.7.17 and minimap2 2.24."""


def entry():
    """The `g3align` program (console script and `python -m g3align.aligner.cli`)."""
    startup.FAST_EXIT = True
    if startup.detach_wanted(sys.argv):
        startup.detach()
    from g3align.aligner.runtime import stop
    stop.install()  # Ctrl-C / SIGTERM / SIGHUP / a broken pipe end the run as they end bwa's (aligner/runtime/stop.py)
    try:
        rv = main.main(standalone_mode=False)
    except click.UsageError as e:  # one line, as every other error: what, and where the help is
        cmd = e.ctx.command_path if e.ctx is not None else "g3align"
        click.echo(f"[E::g3align] {cmd}: {e.format_message()} (see `{cmd} --help`)", err=True)
        sys.exit(e.exit_code)
    except click.ClickException as e:
        click.echo(f"[E::g3align] {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    except click.Abort:
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


def _commands():
    from g3align.aligner.cli import align, compare, index, map, mem, warmup
    for cmd in (index.index_cmd, mem.mem_cmd, map.map_cmd, compare.compare_cmd, align.align_cmd, warmup.warmup_cmd):
        main.add_command(cmd)


_commands()
