"""`g3align warmup`: compile every kernel for this machine now, ahead of the first real run (the plan:
aligner/cli/warmup_plan.py, imported when the command runs)."""
from __future__ import annotations

import os
import sys

import click

from g3align import jit


@click.command("warmup")
@click.option("-t", "threads", type=int, default=None, help="processes at once [all cores]")
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default="auto", show_default=True,
              help="the paths to compile: auto the CPU's, and the GPU's where there is a GPU")
@click.option("--clear", is_flag=True, help="remove g3align's compiled kernels of every version first")
def warmup_cmd(threads, device, clear):
    """Compile every kernel for this machine now (after an install or upgrade; in a container build). Where the
    install carries portable kernels (a wheel), these are compiled for this CPU exactly (G3ALIGN_CPU, jit.py)."""
    import shutil

    if os.environ.get("G3ALIGN_CPU", "auto") == "auto" and jit.cpu_target() == jit.PORTABLE:
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, "-m", "g3align.aligner.cli", *sys.argv[1:]],
                  dict(os.environ, G3ALIGN_CPU="native"))  # this process chose the shipped kernels: start over
    if clear:
        shutil.rmtree(jit.cache_root() / "numba", ignore_errors=True)
        click.echo(f"[M::warmup] removed {jit.cache_root() / 'numba'}", err=True)
    from g3align.aligner.cli.warmup_plan import run
    if run(threads or os.cpu_count() or 1, device):
        sys.exit(1)
    jit.warmup_done()
