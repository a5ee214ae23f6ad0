"""What the commands share: the one-line user error (G3Error, fail), --device and --gpus, --sort and CRAM checks,
the runs over several workers, a start-up step on a thread."""
from __future__ import annotations

import os
import sys
import threading
import time

import click

from g3align.aligner.cli import startup, tracing


class G3Error(Exception):
    """An expected, user-facing error: printed as one line, exit status 1."""


def split_pair(value: str, name: str, conv=int):
    """bwa's INT[,INT] option values."""
    try:
        parts = [conv(v) for v in value.replace(":", ",").split(",") if v != ""]
    except ValueError:
        raise G3Error(f"option {name}: invalid value '{value}'")
    if not 1 <= len(parts) <= 2:
        raise G3Error(f"option {name}: expected INT[,INT], got '{value}'")
    return parts[0], parts[-1]


def fail(msg: str):
    """The one-line error (`[E::g3align] msg`) and exit status 1."""
    click.echo(f"[E::g3align] {msg}", err=True)
    if startup.FAST_EXIT:  # the command line program: out now, not through a teardown beside running reader threads
        from g3align.aligner.runtime import stop
        stop.leave(1)
    sys.exit(1)


def cram_reference(out: str | None, fasta: str | None) -> str | None:
    """The reference FASTA a CRAM output (-o FILE.cram) is written against: `fasta` (the FASTA given, or the one the
    index was built from), which must still exist; None for other outputs."""
    if not out or not out.lower().endswith(".cram"):
        return None
    if not fasta or not os.path.isfile(fasta):
        raise G3Error(f"{out}: CRAM output needs the reference FASTA{f' ({fasta})' if fasta else ''}, which is not "
                      "there: write SAM or BAM, or index a FASTA file that stays in place")
    return fasta


def check_sort(sort: bool, out: str | None, mem: str) -> None:
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


def shard_run(kind, job_kw, paired, threads, scheduler, gpus_kw, items, make_sink, verbose, gpus=None, test=None):
    """The workers' run of `mem` or `map` (aligner/cli/shard.py): on the Dask scheduler's workers (-t threads each),
    or one process per GPU (gpus: their CUDA_VISIBLE_DEVICES values, None: from --gpus; -t shared). Returns the
    number of units; shard, reader and output errors as one-line G3Errors."""
    from g3align.aligner import log
    from g3align.aligner.cli import shard
    from g3align.aligner.io.reads import ReadFormatError

    def say(m):
        log(m, verbose)
    try:
        if scheduler is not None:
            job = shard.Job(kind, job_kw, paired, max(1, threads), **(test or {}))
            return shard.run_dask(job, scheduler, items, make_sink, say)
        if gpus is None:
            n = gpu_workers(gpus_kw)
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


def gpu_workers(kw) -> int:
    """--gpus: the number of GPU worker processes (1: the usual one-process run); checked before any work."""
    v = str(kw["gpus"]).strip().lower()
    if v == "all":
        if kw["device"] == "cpu":
            raise G3Error("--gpus all: not with --device cpu")
        from g3align.aligner.gpu.device import gpu_count
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


def in_background(fn, *args, name: str, trace=None):
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


def mark(trace, stage, t0):
    """A start-up step from t0 to now into the trace (when kept); returns now."""
    t = time.perf_counter()
    if trace is not None:
        trace.append((stage, "MainThread", t0, t))
    return t


def start_gpu() -> bool:
    """Whether CuPy sees a CUDA device; if so, CuPy set up for g3align's runs: its kernel builds made once per
    process (kernels/loader.cupy_compile_once) and, with G3ALIGN_TRACE, its builds and allocations traced."""
    from g3align.aligner.gpu.device import gpu_available
    if not gpu_available():
        return False
    try:
        import g3align.aligner as ag
        if ag.TRACE is not None:
            tracing.cupy_compiles_traced()
            tracing.cupy_allocs_traced()
        from g3align.kernels.loader import cupy_compile_once  # after the tracing: its events are then the builds
        cupy_compile_once()
    except Exception:  # a CuPy that cannot be set up counts as no GPU (auto then runs on the CPU), as before
        return False
    return True


def pick_device(choice: str, verbose: int, cmd: str = "mem") -> str:
    """--device: gpu (error if none), cpu, or auto (GPU when CuPy sees one, else CPU with a note).
    On the GPU, seeding runs as CUDA kernels (mem: kernels/smem.cu; map: kernels/mmsketch.cu and
    kernels/mmseed.cu); the later stages still run on the CPU."""
    from g3align.aligner import log
    if choice == "cpu":
        return "cpu"
    if start_gpu():
        return "gpu"
    if choice == "gpu":
        raise G3Error("--device gpu: no CUDA device visible to CuPy (install g3align[cuda12] or [cuda13])")
    log(f"[M::{cmd}] no GPU found; running on the CPU", verbose)
    return "cpu"
