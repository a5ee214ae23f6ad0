"""`g3align map`: minimap2 2.24's command line; the run itself is aligner/map/pipeline.py's."""
from __future__ import annotations

import os
import shlex
import sys
import time

import click

from g3align import __version__, jit
from g3align.aligner.cli import startup, tracing
from g3align.aligner.cli.common import (
    G3Error,
    check_sort,
    cram_reference,
    fail,
    gpu_workers,
    in_background,
    pick_device,
    shard_run,
)
from g3align.aligner.cli.index import mm_index_path
from g3align.aligner.cli.startup import device_arg, gpu_machine
from g3align.aligner.runtime import tune

MAP_USAGE = """Usage: g3align map [options] <target.fa>|<target.g3m> [query.fq] [...]

Maps long (or short) reads as minimap2 2.24 does; minimap2's options and presets.
The target is a FASTA[.gz] (indexed on the fly), a .g3m file (`-d`), or an index prefix built with
`g3align index -x PRESET` (PREFIX.<k..w..>.g3m for the preset's k, w and homopolymer setting).
  -x STR   preset: map-ont (default), map-pb, map-hifi, sr, asm5/10/20, ava-ont/pb
  -a       SAM output (else PAF)      -c  CIGAR in PAF (cg tag)    --cs[=short|long]  --MD
  -k -w -H index k-mer, window, homopolymer compression;  -d FILE  save the minimizer index
  -t INT   threads [3]   -o FILE  output (.bam: BAM, .cram: CRAM)   -R STR  @RG line   -Y soft clips
  --sort   with -a -o FILE.bam / FILE.cram: coordinate-sorted, and its .bai / .crai (samtools sort's order)
  --sort-mem INT[K|M|G]  memory per thread before --sort spills to temporary files [768M]
  -N -p --secondary=yes|no  -r -g -n -m -s -z -A -B -O -E -f -U  as in minimap2
  --device auto|cpu|gpu  minimizers, seeds and DP chaining scores of each batch on the GPU
  --gpus N|all  GPUs of this host, one worker process each (-t threads shared among them) [1]
  --scheduler ADDRESS  run the batches on the workers of this Dask scheduler (needs g3align[dask])
  --cpu-align  with a GPU: align per read on CPU threads instead of as batches of ksw2 jobs on the GPU
               (the default there, also spelt --gpu-align); the output is the same either way
"""


@click.command("map", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                       "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def map_cmd(args):
    """Map reads like minimap2 2.24 (`g3align map -ax map-ont ref.fa reads.fq`)."""
    try:
        _run_map(list(args))
    except G3Error as e:
        fail(str(e))
    startup.exit_now()  # as mem: no teardown of the CUDA context, pools and index (~1 s of the chr20 GPU runs' exit)


def _is_g3m(path: str, magic: bytes) -> bool:
    if path == "-":
        return False
    with open(path, "rb") as fh:
        return fh.read(len(magic)) == magic


def _run_map(args):
    t_enter = time.perf_counter()
    jit.note_expect("the minimap2 kernels", "4-6")
    startup.cuda_driver_warm(device_arg(args))
    startup.import_numba()  # before the reader module, which imports numba
    from g3align.aligner.io import reads
    from g3align.aligner.io.reads import prefetch_now, read_batch_parts, read_pair_batch_parts
    from g3align.aligner.io.sam import parse_rg
    from g3align.aligner.map import options as MO

    try:
        opt, pos, extra = MO.parse_map_args(args)
    except MO.MapOptError as e:
        raise G3Error(str(e))
    if extra.get("version"):
        click.echo(__version__)
        return
    if extra.get("help") or not pos:
        click.echo(MAP_USAGE, err=not extra.get("help"))
        if not extra.get("help"):
            sys.exit(1)
        return
    ref_path, queries = pos[0], pos[1:]
    if not os.path.exists(ref_path) and not os.path.exists(mm_index_path(ref_path, opt)):
        raise G3Error(f"fail to open file '{ref_path}' (nor a minimizer index {mm_index_path(ref_path, opt)})")
    for p in queries:
        if p != "-" and not os.path.exists(p):
            raise G3Error(f"fail to open file '{p}'")
    check_sort(opt.sort, opt.out, opt.sort_mem)
    if opt.sort and not opt.flag & MO.F_OUT_SAM:
        raise G3Error("--sort needs SAM records (-a)")
    if opt.dump and (opt.scheduler is not None or str(opt.gpus).strip() != "1"):
        raise G3Error("-d: not with --gpus or --scheduler (save the index first: `g3align index -x PRESET REF` "
                      "or `g3align map -d FILE REF`)")
    if opt.flag & MO.F_FRAG_MODE and len(queries) > 2:
        raise G3Error("fragment mode (-x sr, --frag=yes) takes one read file (mates as neighbouring records) or two "
                      "(mates in lockstep), not more")
    if opt.flag & MO.F_FRAG_MODE and len(queries) == 2:
        queries = [(queries[0], queries[1])]  # the two files' records in lockstep: the two segments of a fragment
    rg_line = None
    if opt.rg is not None:
        try:
            rg_line, _ = parse_rg(opt.rg)
        except ValueError as e:
            raise G3Error(str(e))
    jit.precompile(f"map-{'gpu' if gpu_machine(opt.device) else 'cpu'}")  # the first run here: on all cores
    try:
        tune.apply()  # G3ALIGN_TUNE: before the reader starts
    except tune.TuneError as e:
        raise G3Error(str(e))
    startup.numba_start()  # before the reader thread (not for --help / --version)
    trace = tracing.trace_on()  # the stage laps of every part thread, as for mem

    def reader(q):  # the parser of query file q (or pair of files) in a thread, up to MAP_READ_AHEAD parts ahead
        if isinstance(q, tuple):
            parts = read_pair_batch_parts(*q, chunk_size=opt.mini_batch_size, part_bases=reads.MAP_PART_BASES,
                                          trim_readno=False, check_names=False)
        else:
            parts = read_batch_parts(q, chunk_size=opt.mini_batch_size, part_bases=reads.MAP_PART_BASES,
                                     trim_readno=False)
        return prefetch_now(parts, depth=reads.MAP_READ_AHEAD, name="g3align-reader")

    # the first file's parsing starts now, beside the mapping modules' import, the index load and the device set-up
    first_parts = reader(queries[0]) if queries else None
    try:
        from g3align.aligner.map import pipeline as mmpipeline  # noqa: F401 (imported beside the reader's start)
    except BaseException:
        if first_parts is not None:
            first_parts.close()
        raise
    if queries and (opt.scheduler is not None or gpu_workers({"gpus": opt.gpus, "device": opt.device}) > 1):
        try:
            return run_map_sharded(args, opt, queries, ref_path, rg_line, first_parts, reader)
        finally:
            if first_parts is not None:
                first_parts.close()
    # the index is loaded (or built) on a thread, beside CuPy's start-up (_map_with)
    index = in_background(map_index, ref_path, opt, name="g3align-index", trace=trace)
    try:
        return _map_with(args, opt, extra, queries, rg_line, first_parts, reader, t_enter, index, trace)
    finally:
        if first_parts is not None:
            first_parts.close()
        if trace is not None:
            tracing.trace_write(trace, t_enter)


def map_index(ref_path, opt):
    """map's minimizer index: PATH.g3m (or the index of the preset made by `g3align index -x`) loaded, or built
    from the FASTA (and saved with -d); opt takes the loaded index's k, w and flags."""
    from g3align.aligner.map import options as MO
    from g3align.aligner.map.pipeline import log
    from g3align.index import mmidx
    cached = mm_index_path(ref_path, opt)
    if not os.path.exists(ref_path) and os.path.exists(cached):
        ref_path = cached                       # an index prefix made by `g3align index -x`
    if _is_g3m(ref_path, mmidx.MM_MAGIC):
        idx = mmidx.load_mm_index(ref_path)
        opt.k, opt.w, opt.bucket_bits = idx.k, idx.w, idx.b
        opt.idx_flag = MO.I_HPC if idx.is_hpc else 0
        return idx
    t0 = time.time()
    ref = mmidx.read_mm_ref(ref_path)
    idx = mmidx.build_mm_index(ref, opt.k, opt.w, opt.is_hpc, opt.bucket_bits, device=_index_device(opt.device),
                               log=lambda m: log(m, opt.verbose))
    log(f"[M::mm_idx_gen] indexed {ref.n_seq} sequences ({int(ref.lengths.sum())} bp) in "
        f"{time.time() - t0:.3f} s", opt.verbose)
    if opt.dump:
        mmidx.save_mm_index(opt.dump, idx)
    return idx


def _index_device(choice: str) -> str:
    """Where map builds a minimizer index: on the GPU whenever it maps there (--device gpu, or auto with a GPU)."""
    if not gpu_machine(choice):
        return "cpu"
    from g3align.aligner.gpu.device import gpu_available
    return "gpu" if gpu_available() else "cpu"


def _map_with(args, opt, extra, queries, rg_line, first_parts, reader, t_enter, index, trace=None):
    from g3align.aligner import gpu_pool_note
    from g3align.aligner.io.reads import ReadFormatError
    from g3align.aligner.io.sam import OutputSink, sam_header
    from g3align.aligner.map import options as MO
    from g3align.aligner.map import pipeline as mmpipeline
    from g3align.aligner.map.pipeline import MapAligner, log, run_map

    t_device = time.perf_counter()
    device = pick_device(opt.device, opt.verbose, "map") if queries else "cpu"
    startup.gil_switch_interval(device, mmpipeline.MAP_SWITCH_INTERVAL_US)
    t_index = time.perf_counter()
    try:
        idx = index()
    except (OSError, ValueError) as e:
        raise G3Error(str(e).splitlines()[0] if str(e) else repr(e))
    if not queries:
        if opt.dump:
            return
        raise G3Error("no query files given")
    MO.update_mid_occ(opt, idx.cal_max_occ)
    log(f"[M::mm_mapopt_update] mid_occ = {opt.mid_occ}", opt.verbose)
    t_setup = time.perf_counter()
    aligner = MapAligner(idx, opt, device=device)
    # fragment mode on two files in lockstep: every fragment of two reads maps on the CPU threads, so the index
    # and the kernels go to the GPU only if a batch of single reads needs them (mates whose names disagree)
    aligner.defer_device = bool(opt.flag & MO.F_FRAG_MODE) and all(isinstance(q, tuple) for q in queries)
    if not aligner.defer_device:
        aligner.preload()
        aligner.device_setup()
        if device == "gpu":
            mmpipeline.warm_thread(aligner)  # the seeding's CuPy kernels loaded beside the first parts' reading
    t0 = startup.process_t0()
    if trace is not None:
        trace += [("start-up: imports, numba, options", "MainThread", t_enter, t_device),
                  ("start-up: device", "MainThread", t_device, t_index),
                  ("start-up: index", "MainThread", t_index, t_setup),
                  ("start-up: aligner (index to the GPU)", "MainThread", t_setup, time.perf_counter())]
    startup_s = {"start-up (interpreter, imports)": t_device - (t_enter if t0 is None else t0),
               "device (CuPy, CUDA)": t_index - t_device,
               "index (load or build on a thread: the wait; mid_occ)": t_setup - t_index,
               "aligner set-up (index and kernels to the GPU)": time.perf_counter() - t_setup}
    header = None
    if opt.flag & MO.F_OUT_SAM:
        cmdline = " ".join(shlex.quote(a) for a in ["g3align", "map"] + args)
        header = sam_header(idx.ref.names, [int(x) for x in idx.ref.lengths], rg_line=rg_line, pg_cmdline=cmdline)
    elif opt.out and opt.out.lower().endswith((".bam", ".cram")):
        raise G3Error("BAM and CRAM output need -a (SAM records)")
    cram_ref = cram_reference(opt.out, getattr(idx.ref, "src_path", ""))
    try:
        with OutputSink(opt.out, header or "", sort=opt.sort, sort_mem=opt.sort_mem, threads=opt.n_threads,
                        reference=cram_ref) as sink:
            n = 0
            for i, q in enumerate(queries):
                parts = first_parts if i == 0 and first_parts is not None else reader(q)
                try:
                    k, _ = run_map(aligner, _whole_fragments(parts, isinstance(q, tuple))
                                   if opt.flag & MO.F_FRAG_MODE else parts, sink, opt.verbose)
                finally:
                    parts.close()
                n += k
    except ReadFormatError as e:
        raise G3Error(str(e))
    except OSError as e:
        raise G3Error(f"I/O error: {e}")
    log(f"[M::main] mapped {n} sequences", opt.verbose)
    if os.environ.get("G3ALIGN_STAGES"):  # wall time of each stage, start-up to output (benchmarks)
        st = ", ".join(f"{k} {v:.2f} s" for k, v in {**startup_s, **aligner.stage_times}.items())
        log(f"[M::stages] {st}; ksw2 batch {aligner.ext_stats}{gpu_pool_note()}", 3, 3)


def _map_items(opt, queries, first_parts, reader):
    """map's reader items over all query files, in order (fragment mode: whole fragments)."""
    from g3align.aligner.map import options as MO
    for i, q in enumerate(queries):
        parts = first_parts if i == 0 and first_parts is not None else reader(q)
        try:
            yield from (_whole_fragments(parts, isinstance(q, tuple)) if opt.flag & MO.F_FRAG_MODE else parts)
        finally:
            parts.close()


def run_map_sharded(args, opt, queries, ref_path, rg_line, first_parts, reader, gpus=None, test=None):
    """`map --gpus N` / `--scheduler ADDRESS`: this process parses the reads and writes the output; the workers
    (aligner/cli/shard.py) map the parts, each worker loading (or building) the index once. gpus / test: as for
    run_mem_sharded."""
    from g3align.aligner import log
    from g3align.aligner.io.sam import OutputSink, sam_header
    from g3align.aligner.map import options as MO
    verbose = opt.verbose
    sam = bool(opt.flag & MO.F_OUT_SAM)
    if not sam and opt.out and opt.out.lower().endswith((".bam", ".cram")):
        raise G3Error("BAM and CRAM output need -a (SAM records)")
    n_reads = [0]

    def counted(items):
        for it in items:
            n_reads[0] += it[0].n
            yield it

    def make_sink(ref):
        log(f"[M::mm_mapopt_update] mid_occ = {ref['mid_occ']}", verbose)
        header = ""
        if sam:
            cmdline = " ".join(shlex.quote(a) for a in ["g3align", "map"] + args)
            header = sam_header(ref["names"], ref["lengths"], rg_line=rg_line, pg_cmdline=cmdline)
        return OutputSink(opt.out, header, sort=opt.sort, sort_mem=opt.sort_mem, threads=opt.n_threads,
                          reference=cram_reference(opt.out, ref["src_path"]))

    kw = {"args": list(args), "ref_path": os.path.abspath(ref_path)}
    items = counted(_map_items(opt, queries, first_parts, reader))
    shard_run("map", kw, False, opt.n_threads, opt.scheduler, {"gpus": opt.gpus, "device": opt.device}, items,
               make_sink, verbose, gpus, test)
    log(f"[M::main] mapped {n_reads[0]} sequences", verbose)


def _whole_fragments(parts, lockstep: bool):
    """map's parts in fragment mode (-x sr, --frag=yes), re-cut so that no fragment (neighbouring records named alike
    but for a /DIGIT end: reads.frag_offsets) is split between two parts: the last fragment of a part waits for the
    next part's records. From one file fragments are never split (minimap2's reader keeps reading while the names
    agree); from two files in lockstep (lockstep True) they are cut at the end of a -K batch, as minimap2 groups
    each batch's records on their own."""
    from g3align.aligner.io.reads import ReadBatch, frag_offsets
    carry = None
    for item in parts:
        part, end = item if isinstance(item, tuple) else (item, True)
        if carry is not None:
            part, carry = ReadBatch.concat([carry, part]), None
        if part.n and not (end and lockstep):
            fo = frag_offsets(*part.name_csr())
            k = int(fo[-2])  # the first record of the last fragment
            carry = part.slice(k, part.n)
            if k == 0:
                continue
            part = part.slice(0, k)
        yield part, end
    if carry is not None:
        yield carry, True
