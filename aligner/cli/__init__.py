"""Command line: `g3align index`, `g3align mem`, `g3align compare` (thin; logic lives in the modules).

Conventions follow bwa: SAM to stdout, logs to stderr, `-` for stdin, gzip input accepted. Every
expected failure (bad input, bad index, bad option) ends with one `[E::g3align] ...` line and exit 1.
"""
from __future__ import annotations

import os
import shlex
import sys
import threading
import time

import click

from g3align import __version__, jit


class G3Error(Exception):
    """An expected, user-facing error: printed as one line, exit status 1."""


def _split_pair(value: str, name: str, conv=int):
    """bwa's INT[,INT] option values."""
    try:
        parts = [conv(v) for v in value.replace(":", ",").split(",") if v != ""]
    except ValueError:
        raise G3Error(f"option {name}: invalid value '{value}'")
    if not 1 <= len(parts) <= 2:
        raise G3Error(f"option {name}: expected INT[,INT], got '{value}'")
    return parts[0], parts[-1]


def _cuda_driver_warm(choice: str) -> None:
    """--device gpu or auto on a machine with an NVIDIA driver: the driver's start (cuInit) and the device's
    primary context made now, on a thread that calls libcuda through ctypes (a foreign call lets go of the
    GIL), beside the Python imports that follow; CuPy later finds both made. CuPy's own start holds the GIL
    through cuInit, and the context comes with the index's first upload. CUDA_WARM=0 in G3ALIGN_TUNE: off
    (A/B runs)."""
    if not _gpu_machine(choice) or _tune_flag("CUDA_WARM") == "0":
        return

    def run():
        try:
            import ctypes
            cu = ctypes.CDLL("libcuda.so.1")
            dev, ctx = ctypes.c_int(), ctypes.c_void_p()
            if cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0:
                cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)  # kept until the process ends
        except Exception:  # no driver library: CuPy's own start says so later
            pass
    threading.Thread(target=run, name="g3align-cuda-warm", daemon=True).start()


def _gil_switch_interval(device: str, us: int) -> None:
    """On the GPU path, the GIL's switch interval in microseconds (mem's SWITCH_INTERVAL_US, map's
    MAP_SWITCH_INTERVAL_US; 0: Python's 5 ms). A pipeline thread takes the GIL back after each GPU wait (a mem
    part makes ~15), and with 5 ms it waited up to that long each time behind a thread running Python
    (docs/BENCHMARKS.md's git history)."""
    if device == "gpu" and us > 0:
        sys.setswitchinterval(us * 1e-6)


def _gpu_machine(choice: str) -> bool:
    """--device CHOICE may run on the GPU here: not cpu, and an NVIDIA driver's device file exists (checked
    before CuPy is imported)."""
    return choice != "cpu" and os.path.exists("/dev/nvidiactl")


def _device_arg(args) -> str:
    """The value of map's --device in its raw arguments (auto when absent), before the options are parsed."""
    for k, a in enumerate(args):
        if a == "--device" and k + 1 < len(args):
            return args[k + 1]
        if a.startswith("--device="):
            return a.split("=", 1)[1]
    return "auto"


def _import_numba():
    """Import numba without two optional imports it makes at import time that g3align never uses: scipy (for a
    version check only) and coverage (for line coverage of compiled code, which only an active coverage run
    uses, and such a run imported coverage before us). On an H200 box the mem modules' import took 0.82 s
    instead of 1.01 s (medians of 6 interleaved runs, session 21; `-X importtime` there: coverage 52 ms and scipy
    18 ms through numba). A None entry in sys.modules makes such an import fail at once; the entries are taken
    out again right after, so a later import of either works."""
    if "numba" in sys.modules:
        return
    blocked = [m for m in ("scipy", "coverage") if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None
    try:
        import numba  # noqa: F401
    finally:
        for m in blocked:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]


def _numba_start():
    """Set up numba's CPU target now, without its BLAS probe. The probe (numba.np.arraymath's _check_blas)
    imports scipy.linalg only to learn whether np.dot and the like may call BLAS: ~0.2 s of every run's
    start-up, as scipy.linalg pulls in numpy.f2py. g3align's compiled code does no linear algebra. A None
    entry in sys.modules makes that import fail at once; the entry is taken out again right after, so a later
    import of scipy.linalg works as usual. Called before any reader thread starts (its first compiled call
    would set the target up otherwise)."""
    _import_numba()
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:  # set up already / nothing to save
        return
    from numba.core.registry import cpu_target
    sys.modules["scipy.linalg"] = None
    try:
        cpu_target.target_context.refresh()
    finally:
        del sys.modules["scipy.linalg"]


def _fail(msg: str):
    click.echo(f"[E::g3align] {msg}", err=True)
    if _FAST_EXIT:  # the command line program: out now, not through a teardown beside running reader threads
        from g3align.aligner.runtime import stop
        stop.leave(1)
    sys.exit(1)


@click.group(context_settings={"help_option_names": ["--help"]})
@click.version_option(__version__, "--version")
def main():
    """g3align: GPU seed-chain-extend aligner reproducing bwa mem 0.7.17 and minimap2 2.24."""


# ------------------------------------------------------------------------------------------ index
@main.command("index")
@click.option("-p", "prefix", default=None, help="index prefix [same as the FASTA path]")
@click.option("--sa-intv", default=8, show_default=True, help="suffix array sampling interval (power of 2)")
@click.option("-x", "presets", default=None, metavar="PRESET[,PRESET..]",
              help="also build the minimizer index of these `map` presets (PREFIX.<k..w..>.g3m); "
                   "'all' = map-ont,map-pb,map-hifi,sr")
@click.option("--no-fm", is_flag=True, help="skip the FM-index (only with -x)")
@click.option("--bwa", "bwa_files", is_flag=True,
              help="also write bwa's index files (PREFIX.amb .ann .bwt .pac .sa, as `bwa index` writes them)")
@click.argument("fasta")
def index_cmd(fasta, prefix, sa_intv, presets, no_fm, bwa_files):
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
        if os.path.exists(fasta):
            jit.precompile("index")
        if not no_fm:
            build_index(fasta, prefix, sa_intv=sa_intv, progress=sys.stderr.isatty(), bwa_files=bwa_files)
        elif bwa_files:
            raise G3Error("--bwa needs the FM-index (drop --no-fm)")
        if presets:
            _build_mm_indexes(fasta, prefix, presets)
    except (OSError, ValueError, G3Error) as e:
        _fail(str(e).splitlines()[0] if str(e) else repr(e))


def mm_index_path(prefix: str, opt) -> str:
    """Where `g3align index -x` puts (and `map PREFIX` looks for) a minimizer index."""
    return f"{prefix}.{opt.index_key()}.g3m"


def _build_mm_indexes(fasta: str, prefix: str, presets: str) -> None:
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
        idx = mmidx.build_mm_index(ref, o.k, o.w, o.is_hpc, o.bucket_bits)
        mmidx.save_mm_index(path, idx)
        click.echo(f"[M::index] wrote {path} ({idx.n_keys} minimizers, {idx.n_pos} positions)", err=True)


# ------------------------------------------------------------------------------------------ map
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


@main.command("map", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                       "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def map_cmd(args):
    """Map reads like minimap2 2.24 (`g3align map -ax map-ont ref.fa reads.fq`)."""
    try:
        _run_map(list(args))
    except G3Error as e:
        _fail(str(e))
    _exit_now()  # as mem: no teardown of the CUDA context, pools and index (~1 s of the chr20 GPU runs' exit)


_HAVE_MM_ALIGN = True


def _is_g3m(path: str, magic: bytes) -> bool:
    if path == "-":
        return False
    with open(path, "rb") as fh:
        return fh.read(len(magic)) == magic


def _run_map(args):
    t_enter = time.perf_counter()
    jit.note_expect("the minimap2 kernels", "4-6")
    _cuda_driver_warm(_device_arg(args))
    _import_numba()  # before the reader module, which imports numba
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
    if opt.flag & MO.F_CIGAR and not _HAVE_MM_ALIGN:
        raise G3Error("base-level alignment (-a, -c, --cs, --MD) is not available in this build yet")
    ref_path, queries = pos[0], pos[1:]
    if not os.path.exists(ref_path) and not os.path.exists(mm_index_path(ref_path, opt)):
        raise G3Error(f"fail to open file '{ref_path}' (nor a minimizer index {mm_index_path(ref_path, opt)})")
    for p in queries:
        if p != "-" and not os.path.exists(p):
            raise G3Error(f"fail to open file '{p}'")
    _check_sort(opt.sort, opt.out, opt.sort_mem)
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
    jit.precompile(f"map-{'gpu' if _gpu_machine(opt.device) else 'cpu'}")  # the first run here: on all cores
    _tune(reads, only_present=True)  # the reader's constants before it starts; the rest once mmpipeline is in
    _numba_start()  # before the reader thread (not for --help / --version)
    trace = _trace_on()  # the stage laps of every part thread, as for mem

    def reader(q):  # the parser of query file q (or pair of files) in a thread, up to MAP_READ_AHEAD parts ahead
        if isinstance(q, tuple):
            parts = read_pair_batch_parts(*q, chunk_size=opt.mini_batch_size, part_bases=reads.MAP_PART_BASES,
                                          trim_readno=False, check_names=False)
        else:
            parts = read_batch_parts(q, chunk_size=opt.mini_batch_size, part_bases=reads.MAP_PART_BASES,
                                     trim_readno=False)
        return prefetch_now(parts, depth=reads.MAP_READ_AHEAD, name="g3align-reader")

    # the first file's parsing starts now, beside the mapping modules' import, the index load and the device
    # set-up (MAP_EARLY_READER)
    first_parts = reader(queries[0]) if queries and reads.MAP_EARLY_READER else None
    try:
        from g3align.aligner.map import pipeline as mmpipeline
        from g3align.kernels import loader
        tuned = (mmpipeline, reads, loader)
        if os.environ.get("G3ALIGN_TUNE"):  # (the seed kernels' launcher is imported later otherwise)
            from g3align.aligner.gpu import pinned
            from g3align.aligner.map import align_batch as mmext
            from g3align.aligner.map.gpu import seed as mmseed_gpu
            tuned += (mmseed_gpu, mmext, pinned)
        _tune(*tuned)  # G3ALIGN_TUNE: unknown names an error
    except BaseException:
        if first_parts is not None:
            first_parts.close()
        raise
    if queries and (opt.scheduler is not None or _gpu_workers({"gpus": opt.gpus, "device": opt.device}) > 1):
        try:
            return _run_map_sharded(args, opt, queries, ref_path, rg_line, first_parts, reader)
        finally:
            if first_parts is not None:
                first_parts.close()
    # the index is loaded (or built) on a thread, beside CuPy's start-up (_map_with)
    index = _in_background(_map_index, ref_path, opt, name="g3align-index", trace=trace)
    try:
        return _map_with(args, opt, extra, queries, rg_line, first_parts, reader, t_enter, index, trace)
    finally:
        if first_parts is not None:
            first_parts.close()
        if trace is not None:
            _trace_write(trace, t_enter)


def _map_index(ref_path, opt):
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
    idx = mmidx.build_mm_index(ref, opt.k, opt.w, opt.is_hpc, opt.bucket_bits)
    log(f"[M::mm_idx_gen] indexed {ref.n_seq} sequences ({int(ref.lengths.sum())} bp) in "
        f"{time.time() - t0:.3f} s", opt.verbose)
    if opt.dump:
        mmidx.save_mm_index(opt.dump, idx)
    return idx


def _map_with(args, opt, extra, queries, rg_line, first_parts, reader, t_enter, index, trace=None):
    from g3align.aligner import gpu_pool_note
    from g3align.aligner.io.reads import ReadFormatError
    from g3align.aligner.io.sam import OutputSink, sam_header
    from g3align.aligner.map import options as MO
    from g3align.aligner.map import pipeline as mmpipeline
    from g3align.aligner.map.pipeline import MapAligner, log, run_map

    t_device = time.perf_counter()
    device = _pick_device(opt.device, opt.verbose, "map") if queries else "cpu"
    _gil_switch_interval(device, mmpipeline.MAP_SWITCH_INTERVAL_US)
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
    aligner.preload()
    aligner.device_setup()
    if device == "gpu":
        from g3align.aligner.map.gpu import seed as mmseed_gpu
        mmseed_gpu.warm_thread(aligner)  # the seeding's CuPy kernels loaded beside the first parts' reading
    t0 = _process_t0()
    if trace is not None:
        trace += [("start-up: imports, numba, options", "MainThread", t_enter, t_device),
                  ("start-up: device", "MainThread", t_device, t_index),
                  ("start-up: index", "MainThread", t_index, t_setup),
                  ("start-up: aligner (index to the GPU)", "MainThread", t_setup, time.perf_counter())]
    startup = {"start-up (interpreter, imports)": t_device - (t_enter if t0 is None else t0),
               "device (CuPy, CUDA)": t_index - t_device,
               "index (load or build on a thread: the wait; mid_occ)": t_setup - t_index,
               "aligner set-up (index and kernels to the GPU)": time.perf_counter() - t_setup}
    header = None
    if opt.flag & MO.F_OUT_SAM:
        cmdline = " ".join(shlex.quote(a) for a in ["g3align", "map"] + args)
        header = sam_header(idx.ref.names, [int(x) for x in idx.ref.lengths], rg_line=rg_line, pg_cmdline=cmdline)
    elif opt.out and opt.out.lower().endswith((".bam", ".cram")):
        raise G3Error("BAM and CRAM output need -a (SAM records)")
    cram_ref = _cram_reference(opt.out, getattr(idx.ref, "src_path", ""))
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
        st = ", ".join(f"{k} {v:.2f} s" for k, v in {**startup, **aligner.stage_times}.items())
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


def _run_map_sharded(args, opt, queries, ref_path, rg_line, first_parts, reader, gpus=None, test=None):
    """`map --gpus N` / `--scheduler ADDRESS`: this process parses the reads and writes the output; the workers
    (aligner/runtime/shard.py) map the parts, each worker loading (or building) the index once. gpus / test: as for
    _run_mem_sharded."""
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
                          reference=_cram_reference(opt.out, ref["src_path"]))

    kw = {"args": list(args), "ref_path": os.path.abspath(ref_path)}
    items = counted(_map_items(opt, queries, first_parts, reader))
    _shard_run("map", kw, False, opt.n_threads, opt.scheduler, {"gpus": opt.gpus, "device": opt.device}, items,
               make_sink, verbose, gpus, test)
    log(f"[M::main] mapped {n_reads[0]} sequences", verbose)


def _shard_run(kind, job_kw, paired, threads, scheduler, gpus_kw, items, make_sink, verbose, gpus=None, test=None):
    """The workers' run of `mem` or `map` (aligner/runtime/shard.py): on the Dask scheduler's workers (-t threads each),
    or one process per GPU (gpus: their CUDA_VISIBLE_DEVICES values, None: from --gpus; -t shared). Returns the
    number of units; shard, reader and output errors as one-line G3Errors."""
    from g3align.aligner import log
    from g3align.aligner.io.reads import ReadFormatError
    from g3align.aligner.runtime import shard

    def say(m):
        log(m, verbose)
    try:
        if scheduler is not None:
            job = shard.Job(kind, job_kw, paired, max(1, threads), **(test or {}))
            return shard.run_dask(job, scheduler, items, make_sink, say)
        if gpus is None:
            n = _gpu_workers(gpus_kw)
            gpus = shard.visible_gpus(n)
            if len(gpus) < n:
                raise G3Error(f"--gpus {n}: {len(gpus)} CUDA devices visible")
        job = shard.Job(kind, job_kw, paired, max(1, threads // len(gpus)), **(test or {}))
        where = ",".join("cpu" if g is None else g for g in gpus)
        say(f"[M::{kind}] {len(gpus)} workers (devices {where}), {job.threads} threads each")
        return shard.run_shards(job, gpus, items, make_sink, say)
    except (shard.ShardError, ReadFormatError) as e:
        raise G3Error(str(e))
    except BrokenPipeError:
        raise
    except OSError as e:
        raise G3Error(f"I/O error: {e}")


def _cram_reference(out: str | None, fasta: str | None) -> str | None:
    """The reference FASTA a CRAM output (-o FILE.cram) is written against: `fasta` (the FASTA given, or the one the
    index was built from), which must still exist; None for other outputs."""
    if not out or not out.lower().endswith(".cram"):
        return None
    if not fasta or not os.path.isfile(fasta):
        raise G3Error(f"{out}: CRAM output needs the reference FASTA{f' ({fasta})' if fasta else ''}, which is not "
                      "there: write SAM or BAM, or index a FASTA file that stays in place")
    return fasta


def _check_sort(sort: bool, out: str | None, mem: str) -> None:
    """--sort's requirements, before any work: a BAM or CRAM file to write, a memory size samtools sort reads."""
    if not sort:
        return
    if not out or not out.lower().endswith((".bam", ".cram")):
        raise G3Error("--sort writes a coordinate-sorted BAM or CRAM: give -o FILE.bam or FILE.cram")
    from g3align.aligner.io.sam import sort_mem_bytes
    try:
        sort_mem_bytes(mem)
    except ValueError as e:
        raise G3Error(str(e))


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


# ------------------------------------------------------------------------------------------ mem
def _opt(*names, **kw):
    return click.option(*names, **kw)


@main.command("mem", context_settings={"help_option_names": ["--help"]})
@_opt("-t", "threads", type=int, default=1, help="number of threads [1]")
@_opt("-k", "min_seed_len", type=int, default=None, help="minimum seed length [19]")
@_opt("-w", "band", type=int, default=None, help="band width for banded alignment [100]")
@_opt("-d", "zdrop", type=int, default=None, help="off-diagonal X-dropoff [100]")
@_opt("-r", "split_factor", type=float, default=None, help="re-seed inside seeds longer than {-k} * FLOAT [1.5]")
@_opt("-y", "max_mem_intv", type=int, default=None, help="seed occurrence for the 3rd round seeding [20]")
@_opt("-c", "max_occ", type=int, default=None, help="skip seeds with more than INT occurrences [500]")
@_opt("-D", "drop_ratio", type=float, default=None, help="drop chains < FLOAT x an overlapping chain [0.50]")
@_opt("-W", "min_chain_weight", type=int, default=None, help="discard a chain if seeded bases shorter than INT [0]")
@_opt("-m", "max_matesw", type=int, default=None, help="perform at most INT rounds of mate rescues for each read [50]")
@_opt("-S", "no_rescue", is_flag=True, help="skip mate rescue")
@_opt("-P", "no_pairing", is_flag=True, help="skip pairing; mate rescue performed unless -S also in use")
@_opt("-A", "match", type=int, default=None, help="score for a sequence match [1]")
@_opt("-B", "mismatch", type=int, default=None, help="penalty for a mismatch [4]")
@_opt("-O", "gap_open", default=None, help="gap open penalties for deletions and insertions [6,6]")
@_opt("-E", "gap_ext", default=None, help="gap extension penalty [1,1]")
@_opt("-L", "clip", default=None, help="penalty for 5'- and 3'-end clipping [5,5]")
@_opt("-U", "unpaired", type=int, default=None, help="penalty for an unpaired read pair [17]")
@_opt("-p", "interleaved", is_flag=True, help="smart pairing (ignoring in2.fq)")
@_opt("-R", "rg", default=None, help="read group header line such as '@RG\\tID:foo\\tSM:bar'")
@_opt("-H", "hdr", default=None, help="insert STR to header if it starts with @; or insert lines in FILE")
@_opt("-o", "output", default=None, help="output file (SAM; BAM / CRAM if it ends in .bam / .cram) [stdout]")
@_opt("--sort", "sort", is_flag=True, help="coordinate-sorted BAM or CRAM and its index (-o FILE.bam / FILE.cram; "
                                           "samtools sort's order)")
@_opt("--sort-mem", "sort_mem", default="768M", help="with --sort: memory per thread before spilling [768M]")
@_opt("-j", "ignore_alt", is_flag=True, help="treat ALT contigs as part of the primary assembly")
@_opt("-5", "primary5", is_flag=True, help="for split alignments, the one with the smallest query start is primary")
@_opt("-q", "keep_supp_mapq", is_flag=True, help="don't modify mapQ of supplementary alignments")
@_opt("-K", "chunk", type=int, default=None, help="process INT input bases in each batch regardless of nThreads")
@_opt("-v", "verbose", type=int, default=3, help="verbosity level: 1=error, 2=warning, 3=message [3]")
@_opt("-T", "min_score", type=int, default=None, help="minimum score to output [30]")
@_opt("-h", "xa_hits", default=None, help="XA lists all hits if <INT score >80% of the best [5,200]")
@_opt("-a", "all_aln", is_flag=True, help="output all alignments for SE or unpaired PE")
@_opt("-C", "copy_comment", is_flag=True, help="append FASTA/FASTQ comment to SAM output")
@_opt("-V", "ref_hdr", is_flag=True, help="output the reference FASTA header in the XR tag")
@_opt("-Y", "softclip", is_flag=True, help="use soft clipping for supplementary alignments")
@_opt("-M", "no_multi", is_flag=True, help="mark shorter split hits as secondary")
@_opt("-I", "insert", default=None, help="insert size distribution FLOAT[,FLOAT[,INT[,INT]]]")
@_opt("-X", "mask_level", type=float, default=None, help="mask level [0.50]")
@_opt("-x", "read_type", default=None, metavar="STR",
      help="read type, setting the options not given: pacbio (-k17 -W40 -r10 -A1 -B1 -O1 -E1 -L0), ont2d (-k14 -W20 "
           "-r10 -A1 -B1 -O1 -E1 -L0), intractg (-B9 -O16 -L5); pbref as pacbio")
@_opt("-s", "split_width", type=int, default=None, help="re-seed SMEMs that occur at most INT times [10]")
@_opt("-G", "max_chain_gap", type=int, default=None, help="maximum gap between seeds of a chain [10000]")
@_opt("-N", "max_chain_extend", type=int, default=None, help="extend at most INT chains after the first [all]")
@_opt("-Q", "mapq_coef", type=int, default=None, help="MAPQ length coefficient [50]")
@_opt("-f", "output_f", default=None, hidden=True, help="as -o")
@_opt("-1", "single_io", is_flag=True, hidden=True, help="accepted for bwa's command line (no effect)")
@_opt("--device", type=click.Choice(["auto", "cpu", "gpu"]), default="auto", show_default=True,
      help="where the heavy stages run")
@_opt("--gpus", "gpus", default="1", metavar="N|all",
      help="GPUs of this host, one worker process each; -t threads shared among them [1]")
@_opt("--scheduler", "scheduler", default=None, metavar="ADDRESS",
      help="run the batches on the workers of this Dask scheduler (host:port; needs g3align[dask])")
@click.argument("prefix")
@click.argument("reads1")
@click.argument("reads2", required=False)
def mem_cmd(**kw):
    """Align 70bp-1Mbp query sequences with the BWA-MEM algorithm (bwa mem 0.7.17 compatible)."""
    if kw["output"] is None:
        kw["output"] = kw["output_f"]
    try:
        _run_mem(kw)
    except G3Error as e:
        _fail(str(e))
    except BrokenPipeError:
        # stdout is gone: point it at /dev/null so the interpreter's final flush does not complain
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    _exit_now()


_FAST_EXIT = False  # set by entry(): a finished `mem` or `map` leaves without the interpreter's teardown
_DONE_FD: int | None = None  # the worker's end of the pipe to its waiting parent (_detach), when split


def _detach_wanted(argv) -> bool:
    """Whether `mem` / `map` runs in a forked worker whose parent returns as soon as the output is complete
    (_detach): on for a run that may use the GPU (--device gpu or auto where an NVIDIA device file exists);
    G3ALIGN_DETACH=0 (or DETACH=0 in G3ALIGN_TUNE, for A/B runs) turns it off, =1 turns it on for CPU runs too
    (tests)."""
    env = os.environ.get("G3ALIGN_DETACH", "")
    if _tune_flag("DETACH") == "0":
        env = "0"
    if env == "0" or not hasattr(os, "fork") or len(argv) < 2 or argv[1] not in ("mem", "map"):
        return False
    if "--help" in argv or "-h" in argv[2:3]:
        return False
    return env == "1" or _gpu_machine(_device_arg(argv[2:]))


def _detach() -> None:
    """Fork the run into a worker and wait for it here. When the worker's output is complete and closed it
    says so with its exit code (_exit_now) and the parent leaves at once; the kernel's teardown of the worker's
    CUDA context and pinned memory (0.1-0.3 s on the GPU box) goes on after the command has returned, and a
    pipe's reader has its end of file. A worker that ends any other way (an error, a signal) is waited for and
    its status is this process's: the same exit code, or death by the same signal. SIGINT, SIGTERM and SIGHUP
    are passed on to the worker (a terminal's ^C reaches both; the two pending SIGINTs mostly merge)."""
    global _DONE_FD
    import signal
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _DONE_FD = w
        return
    os.close(w)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    code = os.read(r, 1)  # retried after a handler (PEP 475); empty: the worker ended without saying
    if code:
        os._exit(code[0])
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def _exit_now():
    """After a successful run of the command line program (not in-process callers such as tests): flush and
    leave with os._exit. The output is complete and closed; what is skipped is freeing GBs of CUDA and
    pinned memory, the CUDA context and the thread pools one by one (~0.5 s on the GPU box)."""
    if _FAST_EXIT:
        try:
            sys.stdout.flush()
            if os.environ.get("G3ALIGN_TRACE"):  # the profile times the kernel's teardown after this line
                import resource
                ru = resource.getrusage(resource.RUSAGE_SELF)
                cpu = ru.ru_utime + ru.ru_stime
                print(f"[trace] leaving at {time.time():.6f}; cpu {cpu:.2f} s", file=sys.stderr)
            sys.stderr.flush()
        except BrokenPipeError:
            pass
        if _DONE_FD is not None:  # split (_detach): close the output, then let the waiting parent go
            for fd in (1, 2):
                try:
                    os.close(fd)
                except OSError:
                    pass
            os.write(_DONE_FD, b"\0")
        os._exit(0)


def entry():
    """The `g3align` program (console script and `python -m g3align.aligner.cli`)."""
    global _FAST_EXIT
    _FAST_EXIT = True
    if _detach_wanted(sys.argv):
        _detach()
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


# bwa mem -x: the options a read type sets where the command line does not
_PB = {"o_del": 1, "e_del": 1, "o_ins": 1, "e_ins": 1, "b": 1, "split_factor": 10.0, "pen_clip5": 0, "pen_clip3": 0}
_MEM_READ_TYPES = {
    "intractg": {"o_del": 16, "o_ins": 16, "b": 9, "pen_clip5": 5, "pen_clip3": 5},
    "pacbio": {**_PB, "min_chain_weight": 40, "min_seed_len": 17},
    "pbref": {**_PB, "min_chain_weight": 40, "min_seed_len": 17},
    "ont2d": {**_PB, "min_chain_weight": 20, "min_seed_len": 14},
}


def _build_mem_options(kw):
    import math

    from g3align.aligner.mem.options import (
        F_ALL,
        F_KEEP_SUPP_MAPQ,
        F_NO_MULTI,
        F_NO_RESCUE,
        F_NOPAIRING,
        F_PE,
        F_PRIMARY5,
        F_REF_HDR,
        F_SMARTPE,
        F_SOFTCLIP,
        MemOpt,
    )
    o = MemOpt()
    user = o.set_by_user

    def setv(name, val):
        setattr(o, name, val)
        user.add(name)
    simple = {"min_seed_len": "min_seed_len", "band": "w", "zdrop": "zdrop", "split_factor": "split_factor",
              "max_mem_intv": "max_mem_intv", "max_occ": "max_occ", "drop_ratio": "drop_ratio",
              "min_chain_weight": "min_chain_weight", "max_matesw": "max_matesw", "match": "a",
              "mismatch": "b", "unpaired": "pen_unpaired", "min_score": "T", "mask_level": "mask_level",
              "split_width": "split_width", "max_chain_gap": "max_chain_gap", "max_chain_extend": "max_chain_extend",
              "mapq_coef": "mapQ_coef_len"}
    for k, name in simple.items():
        if kw.get(k) is not None:
            setv(name, kw[k])
    if kw["gap_open"] is not None:
        d, i = _split_pair(kw["gap_open"], "-O")
        setv("o_del", d)
        setv("o_ins", i)
    if kw["gap_ext"] is not None:
        d, i = _split_pair(kw["gap_ext"], "-E")
        setv("e_del", d)
        setv("e_ins", i)
    if kw["clip"] is not None:
        c5, c3 = _split_pair(kw["clip"], "-L")
        setv("pen_clip5", c5)
        setv("pen_clip3", c3)
    if kw["xa_hits"] is not None:
        h, ha = _split_pair(kw["xa_hits"], "-h")
        if "," not in kw["xa_hits"]:
            ha = h
        setv("max_XA_hits", h)
        setv("max_XA_hits_alt", ha)
    for flagname, bit in (("all_aln", F_ALL), ("no_multi", F_NO_MULTI), ("softclip", F_SOFTCLIP),
                          ("keep_supp_mapq", F_KEEP_SUPP_MAPQ), ("ref_hdr", F_REF_HDR),
                          ("no_pairing", F_NOPAIRING), ("no_rescue", F_NO_RESCUE)):
        if kw[flagname]:
            o.flag |= bit
    if kw["primary5"]:
        o.flag |= F_PRIMARY5 | F_KEEP_SUPP_MAPQ
    o.ignore_alt = bool(kw["ignore_alt"])
    if kw["interleaved"]:
        o.flag |= F_PE | F_SMARTPE
    o.n_threads = max(1, kw["threads"])
    if kw.get("read_type") is not None:  # bwa: a read type's settings instead of -A's scaling
        preset = _MEM_READ_TYPES.get(kw["read_type"])
        if preset is None:
            raise G3Error(f"unknown read type '{kw['read_type']}'")
        for name, val in preset.items():
            if name not in user:
                setattr(o, name, val)
    else:
        o.apply_match_scaling()
    for name in ("a", "b", "o_del", "e_del", "o_ins", "e_ins", "w", "min_seed_len", "max_occ"):
        if getattr(o, name) < (1 if name in ("a", "e_del", "e_ins", "min_seed_len", "max_occ") else 0):
            raise G3Error(f"invalid value {getattr(o, name)} for {name}")
    o.mapQ_coef_fac = int(math.log(o.mapQ_coef_len)) if o.mapQ_coef_len > 0 else 0  # int in bwa
    return o


def _tune(*modules, only_present: bool = False) -> None:
    """G3ALIGN_TUNE='NAME=VALUE,...': set pipeline constants for A/B runs of benchmarks, each in the first of
    `modules` that has it (an error when none has it; only_present: such names are left for a later call)."""
    for k, v in _tune_pairs():
        mod = next((m for m in modules if k.isupper() and getattr(m, k, None) is not None), None)
        if mod is None:
            if only_present:
                continue
            raise G3Error(f"G3ALIGN_TUNE: {' / '.join(m.__name__ for m in modules)} has no constant {k!r}")
        old = getattr(mod, k)
        setattr(mod, k, type(old)(int(v)) if isinstance(old, bool) else type(old)(v))


def _trace_on():
    """G3ALIGN_TRACE=FILE: record the start-up steps and g3align.aligner.TRACE's stage laps and reader items of
    this run (the list returned; None without the variable), written to FILE by _trace_write as JSON [stage,
    thread, t0, t1] with times in seconds from the process start (scripts/trace_timeline.py and
    gpu_cli_profile.py draw them)."""
    if not os.environ.get("G3ALIGN_TRACE"):
        return None
    import g3align.aligner as ag
    ag.TRACE = []
    if os.environ.get("G3ALIGN_KTIME") == "1":  # every kernel launch timed by CUDA events (loader.KTIME)
        from g3align.kernels import loader
        loader.KTIME = []
    _CpuSampler.start()
    _numba_loads_traced()
    return ag.TRACE


def _cupy_compiles_traced():
    """With G3ALIGN_TRACE: each CuPy module build (NVRTC or its disk cache, then the load) as a trace event "cupy
    compile", and its NVRTC version pass (once per set of options, by each thread asking before the first is done)
    as "cupy nvrtc pass", on the thread that waited for it."""
    import re

    from cupy.cuda import compiler
    from g3align.aligner import trace_event
    kname = re.compile(r"__global__\s+void\s+(\w+)")

    def traced(fn, stage):
        def run(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:  # the module's first kernel named: "cupy compile: NAME"
                m = kname.search(a[0]) if a and isinstance(a[0], str) else None
                trace_event(f"{stage}: {m.group(1)}" if m else stage, t0, time.perf_counter())
        run.traced = True
        return run
    if not getattr(compiler._compile_module_with_cache, "traced", False):
        compiler._compile_module_with_cache = traced(compiler._compile_module_with_cache, "cupy compile")
        compiler._preprocess = traced(compiler._preprocess, "cupy nvrtc pass")


def _cupy_allocs_traced(min_s: float = 2e-4):
    """With G3ALIGN_TRACE: each request to CuPy's device or pinned memory pool that took at least min_s
    seconds (a cudaMalloc or cudaHostAlloc behind it, or a wait for the pool's lock) as a trace event "cuda
    alloc: device" or "cuda alloc: pinned" on the thread that waited for it."""
    import cupy as cp
    from g3align.aligner import trace_event

    def timed(pool, name):
        def alloc(nbytes):
            t0 = time.perf_counter()
            try:
                return pool.malloc(nbytes)
            finally:
                t1 = time.perf_counter()
                if t1 - t0 >= min_s:
                    trace_event(name, t0, t1)
        return alloc
    cp.cuda.set_allocator(timed(cp.get_default_memory_pool(), "cuda alloc: device"))
    cp.cuda.set_pinned_memory_allocator(timed(cp.get_default_pinned_memory_pool(), "cuda alloc: pinned"))


def _numba_loads_traced():
    """With G3ALIGN_TRACE: every numba dispatcher's load from its cache (or compile: its first call with new
    argument types) as a trace event "numba MODULE.NAME" on the thread that waited for it."""
    from g3align.aligner import trace_event
    from numba.core.dispatcher import Dispatcher
    compile_ = Dispatcher.compile

    def compile_traced(self, sig):
        t = time.perf_counter()
        try:
            return compile_(self, sig)
        finally:
            f = self.py_func
            trace_event(f"numba {f.__module__.rsplit('.', 1)[-1]}.{f.__qualname__}", t, time.perf_counter())
    Dispatcher.compile = compile_traced


class _CpuSampler:
    """With G3ALIGN_TRACE: every 50 ms, each thread's CPU seconds from /proc/self/task (a thread spinning on a
    GPU wait counts there, not in a stage lap), written beside the trace as FILE.cpu: JSON [t, {thread: cpu
    s}] with t in seconds from the process start (scripts/trace_timeline.py draws cores per thread group)."""
    samples: list = []
    _stop = threading.Event()
    _th = None

    @classmethod
    def start(cls):
        cls._th = threading.Thread(target=cls._run, name="g3align-cpu-sampler", daemon=True)
        cls._th.start()

    @classmethod
    def _run(cls):
        tck = os.sysconf("SC_CLK_TCK")
        while True:
            names = {t.native_id: t.name for t in threading.enumerate()}
            row = {}
            try:
                for tid in os.listdir("/proc/self/task"):
                    try:
                        with open(f"/proc/self/task/{tid}/stat") as fh:
                            f = fh.read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    name = names.get(int(tid), f"tid-{tid}")
                    row[name] = row.get(name, 0.0) + (int(f[11]) + int(f[12])) / tck
            except OSError:
                return
            cls.samples.append((time.perf_counter(), row))
            if cls._stop.wait(0.05):
                return

    @classmethod
    def write(cls, path, t0):
        cls._stop.set()
        if cls._th is not None:
            cls._th.join()
        import json
        with open(path, "w") as fh:
            json.dump([(t - t0, row) for t, row in cls.samples], fh)


def _trace_write(trace, t_enter):
    from g3align.kernels import loader
    t0 = _process_t0()
    if t0 is None:
        t0 = min((e[2] for e in trace), default=0.0)
    ev = list(trace) + [("module " + n, "loader", a, b) for n, a, b in loader.LOAD_TIMES]
    ev += loader.kernel_timeline() if loader.KTIME is not None else []
    ev.append(("start-up: interpreter, cli import", "MainThread", t0, t_enter))
    import json
    with open(os.environ["G3ALIGN_TRACE"], "w") as fh:
        json.dump([(s, th, a - t0, b - t0) for s, th, a, b in ev], fh)
    _CpuSampler.write(os.environ["G3ALIGN_TRACE"] + ".cpu", t0)
    if loader.KTIME is not None:  # G3ALIGN_KTIME: {module.kernel: [launches, GPU ms]}
        with open(os.environ["G3ALIGN_TRACE"] + ".kernels", "w") as fh:
            json.dump(loader.kernel_times(), fh)


def _process_t0():
    """The process start on perf_counter's clock (CLOCK_MONOTONIC; /proc's start time is since boot), or None;
    a detached worker's (_detach) is its parent's, the command's own start."""
    try:
        with open(f"/proc/{os.getppid()}/stat" if _DONE_FD is not None else "/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            up = float(fh.read().split()[0])
        return time.perf_counter() - (up - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def _run_mem(kw):
    t_enter = time.perf_counter()
    jit.note_expect("the bwa-mem kernels", "3-5")
    _cuda_driver_warm(kw["device"])
    _numba_start()
    # the trace now; G3ALIGN_TUNE's pipeline constants once pipeline.py is imported, after the reader's start
    trace = _trace_on()
    try:
        _run_mem_traced(kw, trace, t_enter)
    finally:
        if trace is not None:
            _trace_write(trace, t_enter)


def _mark(trace, stage, t0):
    t = time.perf_counter()
    if trace is not None:
        trace.append((stage, "MainThread", t0, t))
    return t


def _in_background(fn, *args, name: str, trace=None):
    """fn(*args) on a thread started now; returns a callable that waits for it and gives its result or raises
    its exception, in the caller's thread. With a trace, the thread's time is an event "start-up: NAME"."""
    box = {}

    def run():
        t0 = time.perf_counter()
        try:
            box["v"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 (raised again by result(), in the waiting thread)
            box["e"] = e
        if trace is not None:
            trace.append((f"start-up: {name[8:]} (thread)", name, t0, time.perf_counter()))
    th = threading.Thread(target=run, name=name, daemon=True)
    th.start()

    def result():
        th.join()
        if "e" in box:
            raise box["e"]
        return box["v"]
    return result


def _load_mem_index(prefix):
    from g3align.index.store import load_mem_index
    return load_mem_index(prefix)


def _tune_pairs():
    """G3ALIGN_TUNE='NAME=VALUE,...' as (NAME, VALUE) pairs."""
    for kv in filter(None, os.environ.get("G3ALIGN_TUNE", "").split(",")):
        k, _, v = kv.partition("=")
        yield k, v


def _tune_flag(name: str) -> str | None:
    """NAME's value in G3ALIGN_TUNE (read before the module holding the constant is imported), or None."""
    return next((v for k, v in _tune_pairs() if k == name), None)


def _run_mem_traced(kw, trace, t):
    for p in (kw["reads1"], kw["reads2"]):
        if p is not None and p != "-" and not os.path.exists(p):
            raise G3Error(f"fail to open file '{p}'")
    _check_sort(kw["sort"], kw["output"], kw["sort_mem"])
    paired = kw["reads2"] is not None or kw["interleaved"]
    from g3align.index.bwafmt import has_bwa_index
    from g3align.index.store import index_path
    # the first run on this machine: its kernels on all cores
    if os.path.exists(index_path(kw["prefix"])) or has_bwa_index(kw["prefix"]):
        jit.precompile(f"mem-{'pe' if paired else 'se'}-{'gpu' if _gpu_machine(kw['device']) else 'cpu'}")
    if kw["reads2"] is not None and kw["interleaved"]:
        kw["reads2"] = None
        ignored_r2 = True
    else:
        ignored_r2 = False
    # the reads are parsed from here on, beside the imports, the CUDA start-up and the index load (the
    # parser's own start-up, numba's included, is most of the first batch's wait). Single-end batches are
    # smaller on the GPU path (se_chunk_for); the device is guessed here (a wrong guess changes only the
    # batch size, and single-end output does not depend on it)
    from g3align.aligner.io import reads
    _tune(reads, only_present=True)  # the reader's constants (PART_BASES, SE_STAGED_CHUNK) before it starts
    # bwa's -K: a positive INT fixes the batch size; absent, 0 or negative, the default times the threads
    chunk = kw["chunk"] if kw["chunk"] is not None and kw["chunk"] > 0 else _default_chunk() * max(1, kw["threads"])
    if paired:
        reader = _start_reader(kw, chunk)
    else:
        from g3align.aligner.io.reads import se_chunk_for
        gpu_guess = kw["device"] == "gpu" or _gpu_machine(kw["device"])
        se = se_chunk_for(gpu_guess, chunk)
        reader = _start_reader(kw, se, depth=max(2, chunk // se + 1))
    if kw["scheduler"] is not None or _gpu_workers(kw) > 1:  # several workers (aligner/runtime/shard.py)
        try:
            _run_mem_sharded(kw, reader, paired, ignored_r2)
        finally:
            reader.close()
        return
    # the index is loaded (mapped, its checksums checked: zlib lets go of the GIL) beside the imports and the
    # CUDA start-up
    index = _in_background(_load_mem_index, kw["prefix"], name="g3align-index", trace=trace)
    try:
        _run_mem_reader(kw, trace, t, paired, ignored_r2, reader, index)
    finally:
        if reader is not None:
            reader.close()


def _gpu_workers(kw) -> int:
    """--gpus: the number of GPU worker processes (1: the usual one-process run); checked before any work."""
    v = str(kw["gpus"]).strip().lower()
    if v == "all":
        if kw["device"] == "cpu":
            raise G3Error("--gpus all: not with --device cpu")
        from g3align.aligner.runtime.shard import gpu_count
        n = gpu_count()
        if n == 0:
            raise G3Error("--gpus all: no CUDA device visible")
        return n
    try:
        n = int(v)
    except ValueError:
        raise G3Error(f"--gpus: expected a number or 'all', got '{kw['gpus']}'")
    if n < 1:
        raise G3Error(f"--gpus: expected a number >= 1, got {n}")
    if n > 1 and kw["device"] == "cpu":
        raise G3Error(f"--gpus {n}: not with --device cpu")
    return n


def _mem_header_parts(kw):
    """-R, -H and -I checked and parsed: (read-group line, its ID, extra header lines, insert-size statistics)."""
    from g3align.aligner.io.sam import parse_header_arg, parse_rg
    rg_line, rg_id = None, ""
    if kw["rg"] is not None:
        try:
            rg_line, rg_id = parse_rg(kw["rg"])
        except ValueError as e:
            raise G3Error(str(e))
    hdr_lines = []
    if kw["hdr"] is not None:
        try:
            hdr_lines = parse_header_arg(kw["hdr"])
        except (OSError, ValueError) as e:
            raise G3Error(f"-H: {e}")
    pes = None
    if kw["insert"] is not None:
        from g3align.aligner.mem.pipeline import user_pestat
        try:
            pes = user_pestat(kw["insert"])
        except ValueError as e:
            raise G3Error(str(e))
    return rg_line, rg_id, hdr_lines, pes


def _run_mem_sharded(kw, reader, paired, ignored_r2, gpus=None, test=None):
    """`mem --gpus N` / `--scheduler ADDRESS`: this process parses the reads and writes the output; the workers
    (aligner/runtime/shard.py) align the -K batches. The same records as a one-process run with the same -K.
    gpus: the workers' CUDA_VISIBLE_DEVICES values (None: from --gpus; a None item: a CPU worker, for tests);
    test: shard.Job's die_at / fail_start."""
    from g3align.aligner import log
    from g3align.aligner.io.sam import OutputSink, sam_header
    verbose = kw["verbose"]
    if ignored_r2:
        log("[W::mem] when '-p' is in use, the second query file is ignored.", verbose, 2)
    _build_mem_options(kw)  # option errors before any worker starts
    rg_line, _, hdr_lines, _ = _mem_header_parts(kw)
    cmdline = " ".join(shlex.quote(a) for a in ["g3align"] + sys.argv[1:])
    n_reads = [0]

    def counted(items):
        for it in items:
            b = it[0] if paired else it
            n_reads[0] += b.n if b is not None else 0
            yield it

    def make_sink(ref):
        xr = None
        if kw["ref_hdr"]:
            from g3align.aligner.mem.samout import xr_table
            xr = xr_table(ref["names"], ref["comments"])
        alt = ref.get("alt") if not kw["ignore_alt"] else None
        header = sam_header(ref["names"], ref["lengths"], rg_line=rg_line, pg_cmdline=cmdline, extra_lines=hdr_lines,
                            alt=alt)
        fasta = kw["prefix"] if os.path.isfile(kw["prefix"]) else ref["src_path"]
        return OutputSink(kw["output"], header, sort=kw["sort"], sort_mem=kw["sort_mem"], threads=kw["threads"],
                          xr=xr, reference=_cram_reference(kw["output"], fasta))

    job_kw = dict(kw, prefix=os.path.abspath(kw["prefix"]))
    t0 = time.time()
    n_units = _shard_run("mem", job_kw, paired, kw["threads"], kw["scheduler"], kw, counted(reader), make_sink,
                         verbose, gpus, test)
    log(f"[M::main] Processed {n_reads[0]} reads in {n_units} batches in {time.time() - t0:.3f} sec", verbose)


def _alt_flags(ref, opt, verbose):
    """The ALT flags the header's @SQ lines show (AH:*): PREFIX.alt's, none with -j or without the file. Logs
    their count, as bwa does when it loads an index."""
    from g3align.aligner import log
    alt = getattr(ref, "is_alt", None)
    if alt is None:
        return None
    log(f"[M::mem] read {int(alt.sum())} ALT contigs", verbose)
    return None if opt.ignore_alt else alt


def _default_chunk() -> int:
    from g3align.aligner.mem.options import MemOpt
    return MemOpt.chunk_size


def _run_mem_reader(kw, trace, t, paired, ignored_r2, reader, index):
    from g3align.aligner.gpu import pinned
    from g3align.aligner.io import reads
    from g3align.aligner.io.reads import ReadFormatError
    from g3align.aligner.mem import pipeline
    from g3align.aligner.mem.gpu import stage as memstage
    from g3align.aligner.mem.pipeline import MemAligner, log, run_mem_pe, run_mem_se
    from g3align.kernels import loader
    _tune(pipeline, reads, memstage, loader, pinned)  # G3ALIGN_TUNE (A/B runs): unknown names an error
    from g3align.aligner.io.sam import OutputSink, sam_header
    from g3align.index.store import IndexFormatError
    t = _mark(trace, "start-up: imports", t)
    if pipeline.EARLY_PRELOAD:
        pipeline.preload_kernels(paired)

    opt = _build_mem_options(kw)
    verbose = kw["verbose"]
    if ignored_r2:
        log("[W::mem] when '-p' is in use, the second query file is ignored.", verbose, 2)
    rg_line, rg_id, hdr_lines, pes = _mem_header_parts(kw)
    try:
        device = _pick_device(kw["device"], verbose)
        _gil_switch_interval(device, pipeline.SWITCH_INTERVAL_US)
        t = _mark(trace, "start-up: device", t)
        try:
            ref, fm = index()
        except IndexFormatError as e:
            raise G3Error(str(e))
        t = _mark(trace, "start-up: index load", t)
        alt = _alt_flags(ref, opt, verbose)
        cmdline = " ".join(shlex.quote(a) for a in ["g3align"] + sys.argv[1:])
        header = sam_header(ref.names, [int(x) for x in ref.lengths], rg_line=rg_line, pg_cmdline=cmdline,
                            extra_lines=hdr_lines, alt=alt)
        aligner = MemAligner(ref, fm, opt, rg_id=rg_id, copy_comment=kw["copy_comment"], device=device)
        if not pipeline.EARLY_PRELOAD:
            pipeline.preload_kernels(paired)
        _mark(trace, "start-up: aligner (index to the GPU)", t)
        xr = None
        if kw["ref_hdr"]:
            from g3align.aligner.mem.samout import xr_table
            xr = xr_table(ref.names, ref.comments)
        fasta = kw["prefix"] if os.path.isfile(kw["prefix"]) else getattr(ref, "src_path", "")
        with OutputSink(kw["output"], header, sort=kw["sort"], sort_mem=kw["sort_mem"], threads=kw["threads"],
                        xr=xr, reference=_cram_reference(kw["output"], fasta)) as sink:
            if paired:
                n, dt = run_mem_pe(aligner, reader, sink, verbose, pes)
            else:
                n, dt = run_mem_se(aligner, reader, sink, verbose)
            t = time.perf_counter()
        _mark(trace, "end: output closed", t)
    except ReadFormatError as e:
        raise G3Error(str(e))
    except BrokenPipeError:  # the reader of our output left (e.g. `| head`): quietly, as mem_cmd does
        raise
    except OSError as e:
        raise G3Error(f"I/O error: {e}")
    log(f"[M::main] Processed {n} reads in {dt:.3f} sec", verbose)


def _start_reader(kw, chunk, depth=2):
    """The reads' parser in a thread started now, up to about one -K batch ahead: (part, end_of_batch)
    pairs for paired-end input, -K batches for single-end. keep_raw False: mem prints bases from their
    codes, so the parser skips the letters as read."""
    from g3align.aligner.io import reads
    from g3align.aligner.io.reads import prefetch_now, read_batches, read_pair_batch_parts
    # the constants passed, not left to default arguments (bound when reads.py was imported): G3ALIGN_TUNE
    block, part = reads.DEFAULT_BLOCK_SIZE, reads.PART_BASES
    if kw["reads2"]:
        return prefetch_now(read_pair_batch_parts(kw["reads1"], kw["reads2"], chunk_size=chunk, part_bases=part,
                                                  block_size=block, keep_raw=False),
                            depth=max(2, chunk // part + 1), name="g3align-batches")
    batches = read_batches(kw["reads1"], chunk_size=chunk, block_size=block, keep_raw=False)
    if kw["interleaved"]:
        return prefetch_now(_interleaved(batches), depth=2, name="g3align-batches")
    return prefetch_now(batches, depth=depth, name="g3align-batches")


def gpu_available() -> bool:
    try:
        import cupy
        ok = cupy.cuda.runtime.getDeviceCount() > 0
        import g3align.aligner as ag
        if ok and ag.TRACE is not None:
            _cupy_compiles_traced()
            _cupy_allocs_traced()
        if ok:  # after the tracing: its events are then the builds, not the waits for another thread's
            from g3align.kernels.loader import cupy_compile_once
            cupy_compile_once()
        return ok
    except Exception:  # no CuPy, no driver, no device
        return False


def _pick_device(choice: str, verbose: int, cmd: str = "mem") -> str:
    """--device: gpu (error if none), cpu, or auto (GPU when CuPy sees one, else CPU with a note).
    On the GPU, seeding runs as CUDA kernels (mem: kernels/smem.cu; map: kernels/mmsketch.cu and
    kernels/mmseed.cu); the later stages still run on the CPU."""
    from g3align.aligner import log
    if choice == "cpu":
        return "cpu"
    if gpu_available():
        return "gpu"
    if choice == "gpu":
        raise G3Error("--device gpu: no CUDA device visible to CuPy (install g3align[cuda12] or [cuda13])")
    log(f"[M::{cmd}] no GPU found; running on the CPU", verbose)
    return "cpu"


def _interleaved(batches):
    """-p input (bwa's smart pairing): a batch whose reads all pair with a neighbour of the same name is a paired-end
    batch; one with single reads among the pairs is aligned as bwa does (pipeline.SmartBatch)."""
    from g3align.aligner.io.reads import smart_pairs
    from g3align.aligner.mem.pipeline import SmartBatch
    for b in batches:
        m = smart_pairs(*b.name_csr())
        yield (b if m.all() else SmartBatch(b, m)), True


# ------------------------------------------------------------------------------------------ compare
@main.command("compare", context_settings={"ignore_unknown_options": True, "help_option_names": []})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def compare_cmd(args):
    """Per-read concordance of TEST.sam against GOLD.sam (see `g3align compare --help`)."""
    from g3align.aligner.io import compare
    sys.exit(compare.main(list(args)))


# ------------------------------------------------------------------------------------------ align
from g3align.aligner.cli.align import align_cmd  # noqa: E402  (pairwise DP engine, issue 7)

main.add_command(align_cmd)


@main.command("warmup")
@click.option("-t", "threads", type=int, default=None, help="processes at once [all cores]")
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default="auto", show_default=True,
              help="the paths to compile: auto the CPU's, and the GPU's where there is a GPU")
@click.option("--clear", is_flag=True, help="remove g3align's compiled kernels of every version first")
def warmup_cmd(threads, device, clear):
    """Compile every kernel for this machine now (after an install or upgrade; in a container build). Where the
    install carries portable kernels (a wheel), these are compiled for this CPU exactly (G3ALIGN_CPU, jit.py)."""
    import shutil

    from g3align.aligner.cli import warmup
    if os.environ.get("G3ALIGN_CPU", "auto") == "auto" and jit.cpu_target() == jit.PORTABLE:
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, "-m", "g3align.aligner.cli", *sys.argv[1:]],
                  dict(os.environ, G3ALIGN_CPU="native"))  # this process chose the shipped kernels: start over
    if clear:
        shutil.rmtree(jit.cache_root() / "numba", ignore_errors=True)
        click.echo(f"[M::warmup] removed {jit.cache_root() / 'numba'}", err=True)
    if warmup.run(threads or os.cpu_count() or 1, device):
        sys.exit(1)
    jit.warmup_done()


if __name__ == "__main__":
    entry()
