"""`g3align mem`: bwa mem 0.7.17's command line and options; the run itself is aligner/mem/pipeline.py's."""
from __future__ import annotations

import os
import shlex
import sys
import time

import click

from g3align import jit
from g3align.aligner.cli import startup, tracing
from g3align.aligner.cli.common import (
    G3Error,
    check_sort,
    cram_reference,
    fail,
    gpu_workers,
    in_background,
    mark,
    pick_device,
    shard_run,
    split_pair,
)
from g3align.aligner.cli.startup import gpu_machine
from g3align.aligner.runtime import tune


def _opt(*names, **kw):
    return click.option(*names, **kw)


@click.command("mem", context_settings={"help_option_names": ["--help"]})
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
        fail(str(e))
    except BrokenPipeError:
        # stdout is gone: point it at /dev/null so the interpreter's final flush does not complain
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    startup.exit_now()


# bwa mem -x: the options a read type sets where the command line does not
_PB = {"o_del": 1, "e_del": 1, "o_ins": 1, "e_ins": 1, "b": 1, "split_factor": 10.0, "pen_clip5": 0, "pen_clip3": 0}


_MEM_READ_TYPES = {
    "intractg": {"o_del": 16, "o_ins": 16, "b": 9, "pen_clip5": 5, "pen_clip3": 5},
    "pacbio": {**_PB, "min_chain_weight": 40, "min_seed_len": 17},
    "pbref": {**_PB, "min_chain_weight": 40, "min_seed_len": 17},
    "ont2d": {**_PB, "min_chain_weight": 20, "min_seed_len": 14},
}


def build_mem_options(kw):
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
        d, i = split_pair(kw["gap_open"], "-O")
        setv("o_del", d)
        setv("o_ins", i)
    if kw["gap_ext"] is not None:
        d, i = split_pair(kw["gap_ext"], "-E")
        setv("e_del", d)
        setv("e_ins", i)
    if kw["clip"] is not None:
        c5, c3 = split_pair(kw["clip"], "-L")
        setv("pen_clip5", c5)
        setv("pen_clip3", c3)
    if kw["xa_hits"] is not None:
        h, ha = split_pair(kw["xa_hits"], "-h")
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


def _run_mem(kw):
    t_enter = time.perf_counter()
    jit.note_expect("the bwa-mem kernels", "3-5")
    startup.cuda_driver_warm(kw["device"])
    startup.numba_start()
    # the trace now; G3ALIGN_TUNE's pipeline constants once pipeline.py is imported, after the reader's start
    trace = tracing.trace_on()
    try:
        _run_mem_traced(kw, trace, t_enter)
    finally:
        if trace is not None:
            tracing.trace_write(trace, t_enter)


def _index_is_wide(prefix) -> bool:
    """Whether PREFIX's FM-index has 2**32 rows or more (the superblock table layout), from the .g3i header or bwa's
    .ann."""
    from g3align.index.fasta import read_bwa_ann
    from g3align.index.fm import wide_layout
    from g3align.index.store import IndexFormatError, index_path, read_index_meta
    try:
        if os.path.exists(index_path(prefix)):
            return bool(int(read_index_meta(prefix)["fm"]["occ_wide"]))
        return wide_layout(2 * read_bwa_ann(prefix)[0])
    except (OSError, IndexFormatError, KeyError, ValueError, IndexError, UnicodeDecodeError):
        return False  # the index load reports what is wrong


def _load_mem_index(prefix):
    from g3align.index.store import load_mem_index
    return load_mem_index(prefix)


def _run_mem_traced(kw, trace, t):
    for p in (kw["reads1"], kw["reads2"]):
        if p is not None and p != "-" and not os.path.exists(p):
            raise G3Error(f"fail to open file '{p}'")
    check_sort(kw["sort"], kw["output"], kw["sort_mem"])
    paired = kw["reads2"] is not None or kw["interleaved"]
    from g3align.index.bwafmt import has_bwa_index
    from g3align.index.store import index_path
    # the first run on this machine: its kernels on all cores (for the index's table layout)
    if os.path.exists(index_path(kw["prefix"])) or has_bwa_index(kw["prefix"]):
        job = f"mem-{'pe' if paired else 'se'}-{'gpu' if gpu_machine(kw['device']) else 'cpu'}"
        jit.precompile(jit.wide_job(job, _index_is_wide(kw["prefix"])))
    if kw["reads2"] is not None and kw["interleaved"]:
        kw["reads2"] = None
        ignored_r2 = True
    else:
        ignored_r2 = False
    # the reads are parsed from here on, beside the imports, the CUDA start-up and the index load (the
    # parser's own start-up, numba's included, is most of the first batch's wait). Single-end batches are
    # smaller on the GPU path (se_chunk_for); the device is guessed here (a wrong guess changes only the
    # batch size, and single-end output does not depend on it)
    try:
        tune.apply()  # G3ALIGN_TUNE: before the reader starts
    except tune.TuneError as e:
        raise G3Error(str(e))
    # bwa's -K: a positive INT fixes the batch size; absent, 0 or negative, the default times the threads
    chunk = kw["chunk"] if kw["chunk"] is not None and kw["chunk"] > 0 else _default_chunk() * max(1, kw["threads"])
    if paired:
        reader = start_reader(kw, chunk)
    else:
        from g3align.aligner.io.reads import se_chunk_for
        gpu_guess = kw["device"] == "gpu" or gpu_machine(kw["device"])
        se = se_chunk_for(gpu_guess, chunk)
        reader = start_reader(kw, se, depth=max(2, chunk // se + 1))
    if kw["scheduler"] is not None or gpu_workers(kw) > 1:  # several workers (aligner/cli/shard.py)
        try:
            run_mem_sharded(kw, reader, paired, ignored_r2)
        finally:
            reader.close()
        return
    # the index is loaded (mapped, its checksums checked: zlib lets go of the GIL) beside the imports and the
    # CUDA start-up
    index = in_background(_load_mem_index, kw["prefix"], name="g3align-index", trace=trace)
    try:
        _run_mem_reader(kw, trace, t, paired, ignored_r2, reader, index)
    finally:
        if reader is not None:
            reader.close()


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


def run_mem_sharded(kw, reader, paired, ignored_r2, gpus=None, test=None):
    """`mem --gpus N` / `--scheduler ADDRESS`: this process parses the reads and writes the output; the workers
    (aligner/cli/shard.py) align the -K batches. The same records as a one-process run with the same -K.
    gpus: the workers' CUDA_VISIBLE_DEVICES values (None: from --gpus; a None item: a CPU worker, for tests);
    test: shard.Job's die_at / fail_start."""
    from g3align.aligner import log
    from g3align.aligner.io.sam import OutputSink, sam_header
    verbose = kw["verbose"]
    if ignored_r2:
        log("[W::mem] when '-p' is in use, the second query file is ignored.", verbose, 2)
    build_mem_options(kw)  # option errors before any worker starts
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
            from g3align.aligner.mem.samout import xr_edit
            xr = xr_edit(ref["names"], ref["comments"])
        alt = ref.get("alt") if not kw["ignore_alt"] else None
        header = sam_header(ref["names"], ref["lengths"], rg_line=rg_line, pg_cmdline=cmdline, extra_lines=hdr_lines,
                            alt=alt)
        fasta = kw["prefix"] if os.path.isfile(kw["prefix"]) else ref["src_path"]
        return OutputSink(kw["output"], header, sort=kw["sort"], sort_mem=kw["sort_mem"], threads=kw["threads"],
                          edit=xr, reference=cram_reference(kw["output"], fasta))

    job_kw = dict(kw, prefix=os.path.abspath(kw["prefix"]))
    t0 = time.time()
    n_units = shard_run("mem", job_kw, paired, kw["threads"], kw["scheduler"], kw, counted(reader), make_sink,
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
    from g3align.aligner.io.reads import ReadFormatError
    from g3align.aligner.io.sam import OutputSink, sam_header
    from g3align.aligner.mem import pipeline
    from g3align.aligner.mem.pipeline import MemAligner, log, run_mem_pe, run_mem_se
    from g3align.index.store import IndexFormatError
    t = mark(trace, "start-up: imports", t)
    pipeline.preload_kernels(paired)  # the pool kernels' cached code, on a thread, beside the device and index set-up

    opt = build_mem_options(kw)
    verbose = kw["verbose"]
    if ignored_r2:
        log("[W::mem] when '-p' is in use, the second query file is ignored.", verbose, 2)
    rg_line, rg_id, hdr_lines, pes = _mem_header_parts(kw)
    try:
        device = pick_device(kw["device"], verbose)
        startup.gil_switch_interval(device, pipeline.SWITCH_INTERVAL_US)
        t = mark(trace, "start-up: device", t)
        try:
            ref, fm = index()
        except IndexFormatError as e:
            raise G3Error(str(e))
        t = mark(trace, "start-up: index load", t)
        alt = _alt_flags(ref, opt, verbose)
        cmdline = " ".join(shlex.quote(a) for a in ["g3align"] + sys.argv[1:])
        header = sam_header(ref.names, [int(x) for x in ref.lengths], rg_line=rg_line, pg_cmdline=cmdline,
                            extra_lines=hdr_lines, alt=alt)
        aligner = MemAligner(ref, fm, opt, rg_id=rg_id, copy_comment=kw["copy_comment"], device=device)
        mark(trace, "start-up: aligner (index to the GPU)", t)
        xr = None
        if kw["ref_hdr"]:
            from g3align.aligner.mem.samout import xr_edit
            xr = xr_edit(ref.names, ref.comments)
        fasta = kw["prefix"] if os.path.isfile(kw["prefix"]) else getattr(ref, "src_path", "")
        with OutputSink(kw["output"], header, sort=kw["sort"], sort_mem=kw["sort_mem"], threads=kw["threads"],
                        edit=xr, reference=cram_reference(kw["output"], fasta)) as sink:
            if paired:
                n, dt = run_mem_pe(aligner, reader, sink, verbose, pes)
            else:
                n, dt = run_mem_se(aligner, reader, sink, verbose)
            t = time.perf_counter()
        mark(trace, "end: output closed", t)
    except ReadFormatError as e:
        raise G3Error(str(e))
    except BrokenPipeError:  # the reader of our output left (e.g. `| head`): quietly, as mem_cmd does
        raise
    except OSError as e:
        raise G3Error(f"I/O error: {e}")
    log(f"[M::main] Processed {n} reads in {dt:.3f} sec", verbose)


def start_reader(kw, chunk, depth=2):
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


def _interleaved(batches):
    """-p input (bwa's smart pairing): a batch whose reads all pair with a neighbour of the same name is a paired-end
    batch; one with single reads among the pairs is aligned as bwa does (pipeline.SmartBatch)."""
    from g3align.aligner.io.reads import smart_pairs
    from g3align.aligner.mem.pipeline import SmartBatch
    for b in batches:
        m = smart_pairs(*b.name_csr())
        yield (b if m.all() else SmartBatch(b, m)), True
