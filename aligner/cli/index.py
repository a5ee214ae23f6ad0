"""`g3align index`: the FM-index (PREFIX.g3i; with --bwa also bwa's five files) and, with -x, minimizer indexes."""
from __future__ import annotations

import os
import sys

import click

from g3align import jit
from g3align.aligner.cli.common import (
    G3Error,
    fail,
    pick_device,
)
from g3align.aligner.cli.startup import gpu_machine


@click.command("index")
@click.option("-p", "prefix", default=None, help="index prefix [same as the FASTA path]")
@click.option("--sa-intv", default=8, show_default=True, help="suffix array sampling interval (power of 2)")
@click.option("-x", "presets", default=None, metavar="PRESET[,PRESET..]",
              help="also build the minimizer index of these `map` presets (PREFIX.<k..w..>.g3m); "
                   "'all' = map-ont,map-pb,map-hifi,sr")
@click.option("--no-fm", is_flag=True, help="skip the FM-index (only with -x)")
@click.option("--bwa", "bwa_files", is_flag=True,
              help="also write bwa's index files (PREFIX.amb .ann .bwt .pac .sa, as `bwa index` writes them)")
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default="auto", show_default=True,
              help="where the suffixes are sorted (gpu: buckets, kernels/sufsort.cu; cpu: divsufsort) and the "
                   "minimizer indexes built (gpu: index/mmgpu.py); auto: the GPU when there is one; the same bytes")
@click.option("-a", "algo", type=click.Choice(["auto", "is", "bwtsw"]), default="auto", show_default=True,
              help="CPU suffix sorting: is = divsufsort (the whole suffix array in memory, ~9 bytes a base of both "
                   "strands), bwtsw = block by block in bounded memory (~1.25 bytes a base of both strands plus "
                   "48 bytes a block suffix); auto = bwtsw where is would not fit in memory and bwtsw needs less; "
                   "the same index")
@click.option("-b", "block", type=click.IntRange(1 << 10, 1 << 27), default=None, metavar="INT",
              help="suffixes a block of -a bwtsw at most [134217728]")
@click.argument("fasta")
def index_cmd(fasta, prefix, sa_intv, presets, no_fm, bwa_files, device, algo, block):
    """Build the FM-index (double-step occurrence tables) of FASTA[.gz] for `mem`, and with -x the
    minimizer indexes for `map`."""
    from g3align.index.build import build_index
    jit.note_expect("the indexing kernels", "1")
    prefix = prefix or fasta
    try:
        if no_fm and not presets:
            raise G3Error("--no-fm needs -x")
        out_dir = os.path.dirname(prefix) or "."
        if not os.path.isdir(out_dir):  # before the build, not after it
            raise G3Error(f"cannot write the index {prefix}.*: no directory '{out_dir}'")
        if not os.access(out_dir, os.W_OK):
            raise G3Error(f"cannot write the index {prefix}.*: directory '{out_dir}' is not writable")
        if algo == "bwtsw" and bwa_files:
            raise G3Error("--bwa (bwa's index files) needs -a is or --device gpu, not the blockwise build (-a bwtsw)")
        if algo != "auto" and device == "gpu":
            raise G3Error(f"-a {algo} chooses the CPU's suffix sorting, not --device gpu")
        if os.path.exists(fasta):
            jit.precompile("index")
        # (gpu without a GPU: pick_device's one-line error)
        dev = pick_device(device, 1, "index") if device == "gpu" or gpu_machine(device) else "cpu"
        if not no_fm:
            build_index(fasta, prefix, sa_intv=sa_intv, progress=sys.stderr.isatty(), bwa_files=bwa_files,
                        device="cpu" if algo != "auto" else dev, algo=algo, block=block)
        elif bwa_files:
            raise G3Error("--bwa needs the FM-index (drop --no-fm)")
        if presets:
            _build_mm_indexes(fasta, prefix, presets, dev)
    except (OSError, ValueError, G3Error) as e:
        fail(str(e).splitlines()[0] if str(e) else repr(e))


def mm_index_path(prefix: str, opt) -> str:
    """Where `g3align index -x` puts (and `map PREFIX` looks for) a minimizer index."""
    return f"{prefix}.{opt.index_key()}.g3m"


def _build_mm_indexes(fasta: str, prefix: str, presets: str, device: str = "cpu") -> None:
    from g3align.aligner.map import options as MO
    from g3align.index import mmidx
    names = ["map-ont", "map-pb", "map-hifi", "sr"] if presets == "all" else [p for p in presets.split(",") if p]
    opts = []
    for name in names:
        o = MO.MapOpt()
        try:
            MO.set_preset(o, name)
        except MO.MapOptError as e:
            raise G3Error(str(e))
        opts.append(o)
    ref = mmidx.read_mm_ref(fasta)
    done = set()
    for o in opts:
        path = mm_index_path(prefix, o)
        if path in done:
            continue
        done.add(path)
        idx = mmidx.build_mm_index(ref, o.k, o.w, o.is_hpc, o.bucket_bits, device=device,
                                   log=lambda m: click.echo(m, err=True))
        idx.extra.pop("device", None)  # its device copies: not needed to write it
        mmidx.save_mm_index(path, idx)
        click.echo(f"[M::index] wrote {path} ({idx.n_keys} minimizers, {idx.n_pos} positions)", err=True)
