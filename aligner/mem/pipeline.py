"""The `g3align mem` pipeline: index load -> read batches -> batch kernels -> SAM/BAM.

    for batch in read_batches(...):          # struct-of-arrays, bwa's -K chunking
        sam = align_batch_se(batch)          # CPU twin: nogil numba kernel over read ranges
        sink.write(sam)

Ranges of a batch run on `n_threads` Python threads (the kernel releases the GIL); their outputs are
concatenated in read order, so the bytes never depend on -t or -K.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import os
import queue
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import g3align.aligner as ag
from g3align.aligner import BATCH_END, add_time, lap, log, trace_event
from g3align.aligner.io.reads import ReadBatch, base_ranges, bytes_csr, gather_bytes, prefetch, se_chunk_for
from g3align.aligner.mem.extend import NF
from g3align.aligner.mem.gpu.cigar import cigar_jobs_cpu, cigar_jobs_gpu, cigar_keys
from g3align.aligner.mem.gpu.stage import (
    assemble,
    assemble_rescue,
    chain_gpu,
    chain_range,
    empty_pre,
    ext_jobs_cpu,
    ext_jobs_gpu,
    gpu_halving,
    join_pieces,
    rep_len_csr,
    rep_len_gpu,
    rescue_sw_cpu,
    rescue_sw_gpu,
    to_device,
    to_host,
    upload_large,
)
from g3align.aligner.mem.options import score_matrix
from g3align.aligner.mem.pair import (
    pestat_of_sizes,
    pestat_sizes,
    regions_claim,
    regions_range,
    rescue_jobs_range,
    sam_pe_range,
)
from g3align.aligner.mem.samout import cg_empty
from g3align.aligner.mem.single import align_range_se, sam_se_range
from g3align.jit import njit

RANGES_PER_THREAD = 8  # read (or pair) ranges per pool thread in one map call: balance against task overhead
WORKER_NICE = 5  # nice increment of the CPU pool's worker threads on the GPU path (0: none)


class _PriorityQueue:
    """The CPU pool's work queue (ThreadPoolExecutor's, replaced in _PriorityPool): a free worker takes the
    waiting task of the lowest priority number, in submission order among equals. The priority is the
    submitting thread's at submit time (_PriorityPool.prio). Paired-end: the regions of the next -K batch's
    parts (which feed the GPU stages) no longer queue behind the hundreds of pairing tasks of the batch before;
    the tasks of one map call keep their order, and the results their places."""

    def __init__(self):
        self._q = queue.PriorityQueue()
        self._seq = itertools.count()

    def put(self, item, block=True, timeout=None):
        prio = (1 << 30) if item is None else getattr(_PriorityPool.local, "prio", 1)  # None: a worker's stop
        self._q.put((prio, next(self._seq), item), block, timeout)

    def get(self, block=True, timeout=None):
        return self._q.get(block, timeout)[2]

    def get_nowait(self):
        return self._q.get_nowait()[2]

    def empty(self):
        return self._q.empty()


class _PriorityPool(ThreadPoolExecutor):
    """ThreadPoolExecutor with _PriorityQueue as its work queue; `with pool.prio(k):` submits at priority k."""
    local = threading.local()

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self._work_queue = _PriorityQueue()  # before any worker exists: each takes the queue when started

    @staticmethod
    @contextlib.contextmanager
    def prio(k: int):
        old = getattr(_PriorityPool.local, "prio", 1)
        _PriorityPool.local.prio = k
        try:
            yield
        finally:
            _PriorityPool.local.prio = old


PRIO_REGIONS, PRIO_DEFAULT, PRIO_PAIRING = 0, 1, 2


def _lower_priority(nice: int):
    """Pool-thread initializer: raise this thread's nice value by `nice` (Linux: per-thread priority)."""
    if nice > 0 and hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + nice)
        except OSError:
            pass


def _traced_task(fn):
    name = "task " + fn.__name__

    def run(r):
        t = time.perf_counter()
        try:
            return fn(r)
        finally:
            trace_event(name, t, time.perf_counter())
    return run


@functools.cache
def tune_malloc() -> bool:
    """glibc only, once per process: serve large blocks from the heap (mmap threshold 1 GiB) and never trim
    it (trim threshold 2 GiB), like MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ in the environment.
    The batch kernels allocate and free many large buffers on every thread; with glibc's defaults each
    one is a fresh mmap/munmap or heap shrink and its pages fault in again, which serialises the threads
    in the kernel. On the H100 box (scripts/cpu_scaling.py, 16 threads) the environment variables took
    the CPU stages from 7.5-8x to 10-12x their 1-thread speed. The cost: freed memory stays in the process.
    Returns whether glibc took both settings."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(-3, 1 << 30)) & bool(libc.mallopt(-1, 2**31 - 1))  # M_MMAP_, M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        return False


def preload_kernels(paired: bool) -> threading.Thread | None:
    """Load the cached code of the kernels the pool and pipeline threads call first in a paired-end or
    single-end run, in the order they are first called, on a thread started now (nbshare.preload):
    without it each first call stops every thread that makes it until the load is done. The CLI starts it
    right after the imports, beside the CUDA start and the index load."""
    from g3align.aligner.mem.gpu.cigar import cigar_plan, job_table
    from g3align.aligner.mem.pair import mean_std
    from g3align.aligner.runtime.nbshare import preload_thread
    ks = [regions_claim, cigar_keys, cigar_plan, job_table, cg_empty]
    ks += [pestat_sizes, mean_std, rescue_jobs_range, sam_pe_range] if paired else [sam_se_range]
    return preload_thread(ks)


class MemAligner:
    """Holds the index and options; aligns ReadBatches to SAM bytes."""

    def __init__(self, ref, fm, opt, rg_id: str = "", copy_comment: bool = False, device: str = "cpu",
                 staged: bool = False):
        self.ref = ref
        self.fm = fm
        self.opt = opt
        self.params = opt.to_numba(getattr(ref, "is_alt", None))
        self.mat = score_matrix(opt.a, opt.b)
        self.ctg_names, self.ctg_off = bytes_csr(ref.names)
        self.offsets = np.ascontiguousarray(ref.offsets, dtype=np.int64)
        self.pac = ref.pac
        self.l_pac = int(ref.l_pac)
        self.rg_id = np.frombuffer(rg_id.encode(), np.uint8).copy()
        self.copy_comment = copy_comment
        self.n_threads = max(1, int(opt.n_threads))
        if self.n_threads > 1:
            tune_malloc()
        self.stage_times: dict = {}  # seconds per stage, summed over batches (wall clock)
        # on the GPU path the pool's workers run at a lower priority (WORKER_NICE): the threads that feed the
        # GPU and order the stages (prepare, regions, rescue, main) must not wait behind 16 busy workers
        nice = WORKER_NICE if device == "gpu" else 0
        self._pool = (_PriorityPool(self.n_threads, initializer=_lower_priority, initargs=(nice,))
                      if self.n_threads > 1 else None)
        self.device = device
        self.staged = staged or device == "gpu"
        # the CPU twin's prepare already runs on the pool's threads: one part at a time there
        self.prep_workers = PREP_WORKERS if device == "gpu" else 1
        self._fm_dev = None
        self._pac_dev = None
        self._tls = threading.local()
        if device == "gpu":
            from g3align.aligner.mem.gpu.smem import fm_to_device
            self._fm_dev = fm_to_device(fm)
            self._pac_dev = upload_large(self.pac)

    def _gpu_stream(self):
        """The calling thread's own non-blocking CUDA stream (a context), so the GPU stages that run in
        different pipeline threads (next part's seeding/extension, this part's mate rescue) overlap on
        the device instead of queueing on the legacy default stream. Each stage ends by copying its
        result to the host, which synchronises its stream before another thread uses its arrays."""
        if self._fm_dev is None:
            return contextlib.nullcontext()
        st = getattr(self._tls, "stream", None)
        if st is None:
            import cupy as cp
            st = self._tls.stream = cp.cuda.Stream(non_blocking=True)
        return st

    def _pre(self, batch, seq_off):
        """Staged batch state (memstage.py) for the GPU path or its CPU twin, empty_pre() otherwise."""
        if not self.staged:
            return empty_pre()
        with self._gpu_stream():
            return self._pre_staged(batch, seq_off)

    def _pre_staged(self, batch, seq_off):
        p = self.params
        st = self.stage_times
        t = time.perf_counter()
        n = batch.n
        if self._fm_dev is not None:
            from g3align.aligner.mem.gpu.smem import collect_intv_batch_gpu, seed_pos_batch_gpu
            seq_d = to_device(batch.seq)
            off_d = to_device(seq_off)
            trace_event("upload", t, time.perf_counter())
            batch.dev_seq = (seq_d, off_d)  # for the part's traceback (region_cigars), which drops it
            ts = [0.0, 0.0]

            def seed_chain(a, b):  # reads [a, b): seeds and chains on the GPU -> host `pre` parts, device jobs
                t0 = time.perf_counter()
                sd = seq_d[int(seq_off[a]):int(seq_off[b])]
                # the offsets of [a, b) from 0: the part's own when it is whole (no device subtraction)
                od = off_d if a == 0 and b == n and seq_off[0] == 0 else to_device(seq_off[a:b + 1] - seq_off[a])
                mb, me, mk, ms, ioff = collect_intv_batch_gpu(self._fm_dev, sd, od, p, cap=SMEM_CAP)
                t_smem = time.perf_counter()
                trace_event("smem", t0, t_smem)  # with G3ALIGN_TRACE: the prepare's steps
                fr = to_host(rep_len_gpu(mb, me, ms, ioff, p.max_occ))
                seeds = seed_pos_batch_gpu(self._fm_dev, self.offsets, mb, me, mk, ms, ioff, p.max_occ)
                del mb, me, mk, ms, ioff
                h_seeds = [to_host(x) for x in (seeds[4], seeds[0], seeds[1], seeds[2])]
                t1 = time.perf_counter()
                so = seq_off[a:b + 1] - seq_off[a]
                ch, jobs = chain_gpu(p, self.mat, self.offsets, self.l_pac, self.pac,
                                     batch.seq[int(seq_off[a]):int(seq_off[b])], so, od, seeds, read_base=a,
                                     host_seeds=h_seeds)
                t2 = time.perf_counter()
                trace_event("seeds", t_smem, t1)
                trace_event("chaining", t1, t2)
                ts[0] += t1 - t0
                ts[1] += t2 - t1
                return h_seeds, ch, fr, jobs
            got = gpu_halving(seed_chain, n)
            pre, jobs = join_pieces(got)
            add_time(st, "seeding", ts[0])
            add_time(st, "chaining", ts[1])
            t = time.perf_counter()
            pre[9] = ext_jobs_gpu(p, self.mat, self._pac_dev, self.l_pac, seq_d, off_d, jobs)
        else:
            from g3align.aligner.mem.gpu.smem import collect_intv_batch_cpu, seed_pos_batch_cpu
            mb, me, mk, ms, ioff = collect_intv_batch_cpu(self.fm, batch.seq, seq_off, p)
            fr = rep_len_csr(mb, me, ms, ioff, p.max_occ)
            seeds = seed_pos_batch_cpu(self.fm, self.offsets, mb, me, mk, ms, ioff, p.max_occ)
            s_rbeg, s_qbeg, s_len, s_rid, s_off = (np.ascontiguousarray(a) for a in seeds)
            t = lap(st, "seeding", t)

            def chains(r):
                return chain_range(self.offsets, self.l_pac, self.pac, batch.seq, seq_off, r[0], r[1], p, self.mat,
                                   s_off, s_rbeg, s_qbeg, s_len, s_rid)
            parts = self._map(chains, self._ranges(seq_off, n))
            pre, jobs = assemble(n, s_off, s_rbeg, s_qbeg, s_len, parts, fr)
            t = lap(st, "chaining", t)
            pre[9] = ext_jobs_cpu(p, self.mat, self.l_pac, self.pac, batch.seq, seq_off, jobs, self._map,
                                  8 * self.n_threads)
        lap(st, "extension", t)
        add_time(st, "jobs", int(jobs[0].shape[0]))
        return tuple(pre)

    _NO_SW = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 8), np.int64))

    def pe_rescue_jobs(self, states, pes) -> list:
        """The mate-rescue job lists of several parts (CPU threads, one map for all parts): per part
        (sw_off, key, jobs) for pe_rescue_align; None when not staged."""
        if not self.staged:
            return [None] * len(states)
        t = time.perf_counter()
        low, high, failed, avg, std = pes
        p = self.params
        ranges = [self._pair_ranges(s[0].n, s[1][4], len(states)) if s[0].n >= 2 else [] for s in states]
        tasks = [(k, r) for k, rs in enumerate(ranges) for r in rs]

        def jobs(task):
            k, (a, b) = task
            _, arrays, R_cat, reg_off = states[k][:4]
            return rescue_jobs_range(p, self.offsets, self.l_pac, low, high, failed, arrays[4], R_cat, reg_off,
                                     a, b)
        got = self._map(jobs, tasks)
        per, i = [], 0  # per part: (sw_off, key, jobs)
        for s, rs in zip(states, ranges):
            per.append(assemble_rescue(s[0].n // 2, got[i:i + len(rs)]))
            i += len(rs)
        lap(self.stage_times, "rescue", t)
        return per

    def pe_rescue_align(self, states, per) -> list:
        """The rescue alignments of pe_rescue_jobs' lists: the jobs' mates gathered into one array, all jobs
        aligned in one GPU launch (one warp per job) or by the CPU twin -> per part (sw_off, key, res)."""
        if not self.staged:
            return [self._NO_SW] * len(states)
        t = time.perf_counter()
        p = self.params
        counts = [int(x[1].shape[0]) for x in per]
        n_job = sum(counts)
        res = np.zeros((n_job, 8), np.int64)
        if n_job:
            # the jobs' mates, gathered into one array (job j's mate is read j there)
            lens, starts, srcs, wins = [], [], [], []
            for s, x in zip(states, per):
                if x[1].shape[0]:
                    so = s[1][4]
                    m = x[2][0]
                    lens.append(so[m + 1] - so[m])
                    starts.append(so[m])
                    srcs.append(s[0].seq)
                    wins.append(x[2][1:])
            ln = np.concatenate(lens)
            off = np.zeros(n_job + 1, np.int64)
            np.cumsum(ln, out=off[1:])
            seq = np.empty(int(off[-1]), np.uint8)
            j = 0
            for src, st, n_ in zip(srcs, starts, lens):
                gather_bytes(src, st, n_, off[j:j + len(n_)], seq, -1)
                j += len(n_)
            jb = (np.arange(n_job, dtype=np.int64),) + tuple(np.concatenate([w[f] for w in wins]) for f in range(4))
            if self._fm_dev is not None and p.o_ins > 0:
                with self._gpu_stream():
                    res = rescue_sw_gpu(p, self.mat, self._pac_dev, self.l_pac, to_device(seq), to_device(off), jb)
            else:
                res = rescue_sw_cpu(p, self.mat, self.l_pac, self.pac, seq, off, jb, self._map, 8 * self.n_threads)
        out, j = [], 0
        for x, c in zip(per, counts):
            out.append((x[0], x[1], res[j:j + c]))
            j += c
        lap(self.stage_times, "rescue_sw", t)
        add_time(self.stage_times, "rescue_jobs", n_job)
        return out

    def _ranges(self, seq_off, n, per_thread: int = RANGES_PER_THREAD):
        """Contiguous read ranges with about equal bases, `per_thread` per thread for balance."""
        return base_ranges(seq_off, n, self.n_threads * per_thread if self.n_threads > 1 else 1)

    def _map(self, fn, ranges, prio: int = PRIO_DEFAULT):
        if ag.TRACE is not None:  # G3ALIGN_TRACE: every pool task as an event "task <function name>"
            fn = _traced_task(fn)
        if self._pool is None or len(ranges) == 1:
            return [fn(r) for r in ranges]
        with _PriorityPool.prio(prio):  # Executor.map submits every task before it returns
            it = self._pool.map(fn, ranges)
        return list(it)

    def _read_arrays(self, batch):
        n = batch.n
        names, name_off = batch.name_csr()
        if self.copy_comment:
            comments, com_off = batch.comment_csr()
        else:
            comments, com_off = np.zeros(0, np.uint8), np.zeros(n + 1, np.int64)
        seq_off = np.ascontiguousarray(batch.seq_off - batch.seq_off[0], dtype=np.int64)
        qual = batch.qual if batch.has_qual else np.zeros(0, np.uint8)
        return names, name_off, comments, com_off, seq_off, qual

    def align_batch_pe(self, batch, pes=None, log=None) -> bytes:
        """An interleaved batch (read 2j and 2j+1 are mates; bwa's -K chunk): regions of every read,
        insert-size statistics over the whole batch (unless given with -I), then pairing."""
        if batch.n == 0:
            return b""
        st = self.pe_regions(batch)
        if pes is None:
            pes = self.pe_stat([st], log)
        return self.pe_pairs(st, pes)

    def prepare(self, batch):
        """The GPU-heavy front of a batch (or part): its read arrays and staged state (_pre: seeds,
        chains, extensions). The pipeline runs it one batch ahead, in its own thread (`ahead`), so the
        GPU stages of batch k+1 overlap the CPU stages of batch k. Returns (batch, arrays, pre)."""
        t = time.perf_counter()
        arrays = self._read_arrays(batch)
        pre = self._pre(batch, arrays[4]) if batch.n else empty_pre()
        lap(self.stage_times, "prepare", t)
        return batch, arrays, pre

    def pe_regions(self, batch):
        """Stage 1 of paired-end on an interleaved part of a -K batch (an even number of reads): the
        regions of every read (they do not depend on the rest of the batch) and, staged, their alignments
        (traceback). Returns the part's state (batch, arrays, R_cat, reg_off, cg)."""
        return self.pe_regions_of(self.prepare(batch))

    def pe_regions_of(self, prep, traceback: bool = True):
        """pe_regions from prepare()'s result; traceback=False leaves cg out (with_traceback adds it)."""
        batch, arrays, pre = prep
        n = batch.n
        seq_off = arrays[4]
        t = time.perf_counter()
        ranges = self._ranges(seq_off, n) if n else []
        reg_off = np.zeros(n + 1, np.int64)
        if len(ranges) > 1:
            # one task per pool thread, each claiming ranges until none is left (pair.regions_claim)
            bounds = np.array([r[0] for r in ranges] + [n], np.int64)
            counter = np.zeros(1, np.int64)
            k_beg, k_end, k_own = (np.empty(len(ranges), np.int64) for _ in range(3))

            def stage1(t):
                return regions_claim(self.fm, self.offsets, self.l_pac, self.pac, batch.seq, seq_off, bounds,
                                     counter, reg_off[1:], k_beg, k_end, k_own, t, self.params, self.mat, pre)
            bufs = self._map(stage1, list(range(min(len(ranges), self.n_threads))), PRIO_REGIONS)
            R_cat = np.concatenate([bufs[t][a:b] for t, a, b in zip(k_own.tolist(), k_beg.tolist(),
                                                                       k_end.tolist())])
        else:
            def stage1(r):
                return regions_range(self.fm, self.offsets, self.l_pac, self.pac, batch.seq, seq_off, r[0], r[1],
                                     self.params, self.mat, pre)
            parts = self._map(stage1, ranges, PRIO_REGIONS)
            R_cat = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, NF), np.int64)
            if parts:
                np.concatenate([p[1] for p in parts], out=reg_off[1:])
        np.cumsum(reg_off, out=reg_off)
        lap(self.stage_times, "regions", t)
        state = (batch, arrays, R_cat, reg_off)
        return self.with_traceback(state) if traceback else state

    def with_traceback(self, state):
        """A part's (batch, arrays, R_cat, reg_off) + its cg (region_cigars)."""
        batch, arrays, R_cat, reg_off = state
        return state + (self.region_cigars(batch, arrays[4], R_cat, reg_off),)

    def region_cigars(self, batch, seq_off, R_cat, reg_off):
        """The traceback stage (memcigar.py): CIGAR, NM and MD of every region of a part, on the GPU or by
        its CPU twin when staged; cg_empty() otherwise (the SAM stage aligns each printed region)."""
        dev = batch.__dict__.pop("dev_seq", None)  # the part's reads as prepare() uploaded them
        if not self.staged or R_cat.shape[0] == 0:
            return cg_empty()
        t = time.perf_counter()
        p = self.params
        keys, j_read = cigar_keys(R_cat, reg_off)
        if self._fm_dev is not None:
            with self._gpu_stream():
                seq_d, off_d = dev if dev is not None else (to_device(batch.seq), to_device(seq_off))
                cg = cigar_jobs_gpu(p, self.mat, self._pac_dev, self.l_pac, seq_d, off_d, keys, j_read)
        else:
            cg = cigar_jobs_cpu(p, self.mat, self.l_pac, self.pac, batch.seq, seq_off, keys, j_read, self._map,
                                8 * self.n_threads)
        lap(self.stage_times, "traceback", t)
        add_time(self.stage_times, "traceback_jobs", int(keys.shape[0]))
        return cg

    def pe_stat(self, states, log=None):
        """Insert-size statistics (bwa's mem_pestat) over all parts of one -K batch."""
        t = time.perf_counter()
        # insert sizes part by part (parts hold whole pairs), then the statistics over all of them
        sz = self._map(lambda s: pestat_sizes(self.params, self.l_pac, s[2], s[3], (s[3].shape[0] - 1) // 2), states)
        res = pestat_of_sizes(np.concatenate([x[0] for x in sz]), np.concatenate([x[1] for x in sz]), log)
        lap(self.stage_times, "pestat", t)
        return res

    def pe_pairs(self, state, pes) -> bytes:
        """Stage 2 of paired-end on one part: mate rescue, pairing, SAM records."""
        return self.pe_sam(state, pes, self.pe_rescue(state, pes))

    def pe_rescue(self, state, pes):
        """The part's speculative mate-rescue alignments (pair.rescue_jobs_range; GPU on the staged path,
        empty when not staged): (sw_off, sw_key, sw_res) for pe_sam."""
        return self.pe_rescue_align([state], self.pe_rescue_jobs([state], pes))[0]

    def _pair_ranges(self, n, seq_off, n_parts: int = 1):
        """Pair ranges of one part; with `n_parts` parts mapped at once, fewer per part (the tasks of all
        parts balance each other; fewer tasks, less pool and GIL traffic)."""
        per = max(1, -(-RANGES_PER_THREAD // max(1, n_parts)))
        return self._ranges(seq_off[::2].copy(), n // 2, per) if n >= 2 else [(0, 0)]

    def pe_sam(self, state, pes, sw) -> bytes:
        """Pairing and SAM records of one part, given its rescue alignments (pe_rescue)."""
        return self.pe_sam_group([state], pes, [sw])[0]

    def pe_sam_group(self, states, pes, sws) -> list:
        """pe_sam of several parts at once: the pair ranges of all parts go to the CPU threads together, so
        the threads do not wait for the slowest range of each part in turn. Returns bytes per part."""
        return [b"".join(x) for x in self.pe_sam_chunks(states, pes, sws)]

    def pe_sam_chunks(self, states, pes, sws) -> list:
        """pe_sam_group's SAM text per part as the threads' buffers (memoryviews, in order), not joined: a
        group's text is ~100 MB, and copying it into one bytes object on this thread cost as much as the
        threads' pairing (docs/BENCHMARKS.md's git history)."""
        t = time.perf_counter()
        tasks = [(k, r) for k, st in enumerate(states) if st[0].n
                 for r in self._pair_ranges(st[0].n, st[1][4], len(states))]
        low, high, failed, avg, std = pes

        def stage2(task):
            k, r = task
            batch, (names, name_off, comments, com_off, seq_off, qual), R_cat, reg_off, cg = states[k]
            return sam_pe_range(self.fm, self.offsets, self.l_pac, self.pac, self.ctg_names, self.ctg_off,
                                batch.seq, seq_off, qual, batch.has_qual, names, name_off, comments, com_off,
                                self.rg_id, R_cat, reg_off, low, high, failed, avg, std,
                                int(batch.first_id) // 2, r[0], r[1], self.params, self.mat, *sws[k], cg)
        got = self._map(stage2, tasks, PRIO_PAIRING) if tasks else []
        out = [[] for _ in states]
        for (k, _), o in zip(tasks, got):
            out[k].append(memoryview(o))
        lap(self.stage_times, "pairing+sam", t)
        return out

    def align_batch_se(self, batch) -> bytes:
        return self.finish_se(self.prepare(batch))

    def finish_se(self, prep) -> bytes:
        """Regions and SAM records of a single-end batch from prepare()'s result."""
        return b"".join(self.finish_se_chunks(prep))

    def finish_se_chunks(self, prep) -> list:
        """finish_se's SAM text as the threads' buffers (memoryviews, in order), not joined. Staged: regions,
        traceback, then SAM (se_sam_chunks); otherwise one fused kernel per read range."""
        if self.staged:
            return self.se_sam_chunks(self.se_regions(prep))
        batch, (names, name_off, comments, com_off, seq_off, qual), pre = prep
        n = batch.n
        if n == 0:
            return []
        t = time.perf_counter()

        def run(r):
            return align_range_se(self.fm, self.offsets, self.l_pac, self.pac, self.ctg_names, self.ctg_off,
                                  batch.seq, seq_off, qual, batch.has_qual, names, name_off, comments,
                                  com_off, self.rg_id, int(batch.first_id), r[0], r[1], self.params, self.mat,
                                  pre)

        out = [memoryview(o) for o in self._map(run, self._ranges(seq_off, n))]
        lap(self.stage_times, "regions+sam", t)
        return out

    def se_regions(self, prep):
        """The regions and their alignments (traceback) of a single-end batch from prepare()'s result: the
        state (batch, arrays, R_cat, reg_off, cg) for se_sam_chunks (pe_regions_of reads no mates)."""
        return self.pe_regions_of(prep) if prep[0].n else None

    def se_sam_chunks(self, state) -> list:
        """SAM text of a single-end batch from se_regions' state, as the threads' buffers (in order)."""
        if state is None:
            return []
        batch, (names, name_off, comments, com_off, seq_off, qual), R_cat, reg_off, cg = state
        t = time.perf_counter()

        def run(r):
            return sam_se_range(self.offsets, self.l_pac, self.pac, self.ctg_names, self.ctg_off, batch.seq, seq_off,
                                qual, batch.has_qual, names, name_off, comments, com_off, self.rg_id,
                                int(batch.first_id), R_cat, reg_off, cg, r[0], r[1], self.params, self.mat)

        out = [memoryview(o) for o in self._map(run, self._ranges(seq_off, batch.n), PRIO_PAIRING)]
        lap(self.stage_times, "sam", t)
        return out


def user_pestat(spec: str):
    """bwa's -I FLOAT[,FLOAT[,INT[,INT]]]: mean, std, max, min of the FR insert size."""
    try:
        vals = [float(v) for v in spec.replace(":", ",").split(",") if v]
    except ValueError:
        vals = []
    if not 1 <= len(vals) <= 4:
        raise ValueError(f"-I: expected FLOAT[,FLOAT[,INT[,INT]]], got '{spec}'")
    avg = vals[0]
    std = vals[1] if len(vals) > 1 else avg * .1
    high = int(vals[2] + .499) if len(vals) > 2 else int(avg + 4. * std + .499)
    low = int(vals[3] + .499) if len(vals) > 3 else max(1, int(avg - 4. * std + .499))
    low_a = np.zeros(4, np.int64)
    high_a = np.zeros(4, np.int64)
    failed = np.ones(4, np.int64)
    avg_a = np.zeros(4)
    std_a = np.zeros(4)
    low_a[1], high_a[1], failed[1], avg_a[1], std_a[1] = low, high, 0, avg, std
    return low_a, high_a, failed, avg_a, std_a


def se_chunk(aligner: MemAligner, chunk: int) -> int:
    """Batch size (bases) for single-end input: -K, or reads.SE_STAGED_CHUNK on the staged path."""
    return se_chunk_for(aligner.staged, chunk)


def ahead(fn, items, depth: int = 1, name: str = "g3align-ahead", workers: int = 1):
    """fn(item) for each item, computed in background threads up to `depth` items ahead of the consumer:
    the staged path prepares batch k+1 (GPU seeding, chaining, extension) while the caller finishes batch
    k on the CPU threads. workers == 1: one thread (prefetch over a lazy map); more: that many items are
    computed at once (each thread with its own CUDA stream), results still in order. Exceptions as in
    prefetch: raised at the point of the stream where they happened. A None item says that no input is waiting
    (shard.py's workers, whose input comes unit by unit): it is dropped, and with several workers the oldest
    result in flight is handed on meanwhile (else the last items of a unit would wait for input that comes only
    once they are written)."""
    if workers <= 1:
        return prefetch((fn(x) for x in items if x is not None), depth, name)
    return _ahead_pool(fn, items, depth, name, workers)


def _ahead_pool(fn, items, depth, name, workers):
    pool = ThreadPoolExecutor(workers, thread_name_prefix=name)
    pend: collections.deque = collections.deque()
    try:
        for x in items:
            if x is None:
                if pend:
                    yield pend.popleft().result()
                continue
            pend.append(pool.submit(fn, x))
            while len(pend) > depth + workers - 1:
                yield pend.popleft().result()
        while pend:
            yield pend.popleft().result()
    finally:
        for f in pend:
            f.cancel()
        pool.shutdown(wait=True)


PE_AHEAD = 16  # parts whose regions are computed ahead of the consumer (run_mem_pe): a default -K batch
SWITCH_INTERVAL_US = 500  # sys.setswitchinterval of mem's GPU path, microseconds (0: Python's 5 ms)
SMEM_CAP = 64  # interval records per read in the first SMEM launch (more: the read runs again with 4x as many)
PREP_WORKERS = 3  # paired-end parts prepared at once on the GPU path (prepare: seeding, chaining, extension)
SE_PREP_WORKERS = 1  # single-end batches prepared at once on the GPU path (see run_mem_se)
RESCUE_GROUP_BASES = 40_000_000  # parts of a -K batch whose mate rescue runs as one GPU launch (run_mem_pe)
POOL_LOG = bool(os.environ.get("G3ALIGN_STAGES"))  # paired-end: CuPy's pool after every -K batch ([M::pool] lines)


def trim_pool(aligner: MemAligner) -> None:
    """At the end of a -K batch on the GPU path: CuPy's free device blocks, which it keeps per stream, back to CUDA,
    so the pool holds what the next batch needs rather than the most every stream ever needed. On a 20M-pair chr20
    soak the pool held 1.5-2.7 GiB throughout with it, 5.4-5.6 GiB from the 15th batch on without it, in the same time
    (docs/BENCHMARKS.md "A 10M-pair run")."""
    if aligner.device == "gpu":
        import cupy as cp
        cp.get_default_memory_pool().free_all_blocks()


def rescue_groups(states, bases: int | None = None):
    """Consecutive parts of a -K batch in groups of about `bases` bases (RESCUE_GROUP_BASES): one mate-
    rescue launch per group, the next group's rescue overlapping this group's pairing."""
    bases = RESCUE_GROUP_BASES if bases is None else bases
    groups, cur, acc = [], [], 0
    for st in states:
        cur.append(st)
        acc += st[0].bases
        if acc >= bases:
            groups.append(cur)
            cur, acc = [], 0
    if cur:
        groups.append(cur)
    return groups


class AsyncWriter:
    """A sink's write_sam_bytes in a background thread, in order: the main thread hands over the threads' SAM
    buffers and goes on queueing work while the text goes to the file or pipe (~0.4 KB per record, ~1 GB
    per million pairs). An error of the sink (e.g. a broken pipe) is raised in the main thread at its next
    write or at close(). close() returns once everything is written; the time spent writing is summed in
    times["write"]."""

    def __init__(self, sink, times: dict | None = None, depth: int = 512):
        self._sink = sink
        self._times = times
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._err: BaseException | None = None
        self._th = threading.Thread(target=self._run, name="g3align-writer", daemon=True)
        self._th.start()

    def _run(self):
        while True:
            b = self._q.get()
            if b is None:
                return
            if self._err is not None:
                continue  # drain after an error: the producer must not block
            try:
                t = time.perf_counter()
                self._sink.write_sam_bytes(b)
                lap(self._times if self._times is not None else {}, "write", t)
            except BaseException as e:
                self._err = e

    def write_sam_bytes(self, b):
        if self._err is not None:
            raise self._err
        self._q.put(b)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close(raise_error=exc_type is None)  # unwinding from another error: that one propagates

    def close(self, raise_error: bool = True):
        """Write what is queued, stop the thread; raise the sink's error, if any (unless raise_error is
        False: the caller is already unwinding from another error)."""
        if self._th.is_alive():
            self._q.put(None)
            self._th.join()
        if raise_error and self._err is not None:
            raise self._err


class SmartBatch:
    """A `-p` batch holding single reads among its pairs: `paired` (reads.smart_pairs) is 1 for a read of a pair.
    bwa aligns such a batch as two: the singles as single-end reads numbered from the batch's first id, then the
    pairs as paired-end reads numbered after the singles (insert sizes estimated over these pairs alone), and
    prints every read's records in input order."""

    def __init__(self, batch: ReadBatch, paired: np.ndarray):
        self.batch = batch
        self.paired = paired
        self.n = batch.n


def align_smart(aligner: MemAligner, sb: SmartBatch, pes=None, log=None) -> bytes:
    """SAM text of a SmartBatch, records in input order."""
    b = sb.batch
    m = sb.paired.astype(bool)
    si, pi = np.flatnonzero(~m), np.flatnonzero(m)
    if log is not None:
        log(f"[M::process] {si.shape[0]} single-end sequences; {pi.shape[0]} paired-end sequences")
    se = aligner.align_batch_se(b.take(si, b.first_id)) if si.shape[0] else b""
    pe = aligner.align_batch_pe(b.take(pi, b.first_id + si.shape[0]), pes, log) if pi.shape[0] else b""
    buf_s, buf_p = np.frombuffer(se, np.uint8), np.frombuffer(pe, np.uint8)
    st_s, st_p = read_starts(buf_s, si.shape[0]), read_starts(buf_p, pi.shape[0])
    if st_s[-1] != buf_s.shape[0] or st_p[-1] != buf_p.shape[0]:
        raise RuntimeError("smart pairing: records do not match reads")  # an internal error, not bad input
    # read i's records: those of the single or the paired read it became
    starts, lens = np.empty(b.n, np.int64), np.empty(b.n, np.int64)
    starts[si], lens[si] = st_s[:-1], np.diff(st_s)
    starts[pi], lens[pi] = st_p[:-1] + buf_s.shape[0], np.diff(st_p)
    off = np.zeros(b.n + 1, np.int64)
    np.cumsum(lens, out=off[1:])
    out = np.empty(int(off[-1]), np.uint8)
    gather_bytes(np.concatenate([buf_s, buf_p]), starts, lens, off, out, -1)
    return out.tobytes()


@njit(cache=True, nogil=True)
def read_starts(buf, n):
    """Where each of n reads' SAM records begin in buf (a read's first record is its primary or unmapped one: FLAG
    without 0x100 / 0x800; the rest are its secondary and supplementary ones), and len(buf) last. Fewer than n
    starts found: the missing ones are -1 (the caller checks the last)."""
    out = np.full(n + 1, -1, np.int64)
    k = 0
    pos = 0
    while pos < buf.shape[0]:
        f = pos
        while buf[f] != 9:
            f += 1
        flag = 0
        f += 1
        while buf[f] != 9:
            flag = flag * 10 + (buf[f] - 48)
            f += 1
        if flag & 0x900 == 0:
            if k == n:
                return out
            out[k] = pos
            k += 1
        while buf[pos] != 10:
            pos += 1
        pos += 1
    if k == n:
        out[n] = buf.shape[0]
    return out


def run_mem_pe(aligner: MemAligner, parts, sink, verbose: int = 3, pes=None, marks: bool = False):
    """Paired-end: `parts` yields (part, end_of_batch) as reads.read_pair_batch_parts does (a whole -K
    batch is (batch, True)). A reader thread parses ahead; a second thread prepares the next part (seeds,
    chains, extensions: the GPU stages) while a third computes the regions of the part before it on the
    CPU threads (regions do not depend on the rest of the batch), so the next -K batch is under way while
    this thread pairs the current one; a fourth aligns each part's regions (traceback, memcigar.py) beside
    the regions of the next parts. Insert-size statistics once a -K batch's regions are complete; then
    pairing part by part (waiting for the parts' traceback), the mate rescue of the next group of parts (one
    GPU launch, rescue_groups) overlapping this group's pairing and SAM records; a writer thread writes the
    records (AsyncWriter). marks: BATCH_END written after each -K batch's records."""
    n_reads = 0
    t0 = time.time()
    states, tbs = [], []  # the -K batch's parts (regions) and their traceback futures
    t1 = time.time()
    resc = ThreadPoolExecutor(1, thread_name_prefix="g3align-rescue")
    tb = ThreadPoolExecutor(1, thread_name_prefix="g3align-traceback")
    with AsyncWriter(sink, aligner.stage_times) as out, ag.Progress("mem", verbose) as bar:
        try:
            preps = ahead(lambda it: (_prepare_part(aligner, it[0]), it[1]), prefetch(parts),
                          name="g3align-prepare", workers=aligner.prep_workers)

            def regions(it):
                # the part's traceback (GPU) in its own thread, beside the regions of the next parts; the
                # insert-size statistics and rescue jobs need only the regions, the pairing waits for it.
                # Queued here, by the regions thread: from the main thread, the parts of the next -K batch
                # would wait for this batch's pairing to be queued first
                if isinstance(it[0], SmartBatch):
                    return it[0], None, it[1]
                state = aligner.pe_regions_of(it[0], False) if it[0] is not None else None
                fut = tb.submit(aligner.with_traceback, state) if state is not None else None
                return state, fut, it[1]
            for (state, fut, end) in ahead(regions, preps, depth=PE_AHEAD, name="g3align-regions"):
                if isinstance(state, SmartBatch):  # -p with singles: a batch of its own (end is True)
                    out.write_sam_bytes(align_smart(aligner, state, pes, log=lambda m: log(m, verbose)))
                    if marks:
                        out.write_sam_bytes(BATCH_END)
                    n_reads += state.n
                    log(f"[M::mem_process_seqs] Processed {state.n} reads in {time.time() - t1:.3f} real sec",
                        verbose)
                    bar.update(state.n)
                    t1 = time.time()
                    continue
                if state is not None:
                    states.append(state)
                    tbs.append(fut)
                if not end:
                    continue
                n = sum(s[0].n for s in states)
                bases = sum(s[0].bases for s in states)
                log(f"[M::process] read {n} sequences ({bases} bp)...", verbose)
                if states:
                    p = pes if pes is not None else aligner.pe_stat(states, log=lambda m: log(m, verbose))
                    # the job lists of the whole batch at once (cheap, on the CPU threads, before any pairing is
                    # queued there), then one GPU launch per group, the next group's beside this group's pairing
                    jobs = aligner.pe_rescue_jobs(states, p)
                    groups = rescue_groups(states)
                    first = np.cumsum([0] + [len(g) for g in groups])  # groups are consecutive parts
                    todo = [(g, jobs[first[i]:first[i + 1]]) for i, g in enumerate(groups)]
                    fut = resc.submit(aligner.pe_rescue_align, *todo[0])
                    for i in range(len(todo)):
                        sws = fut.result()
                        if i + 1 < len(todo):
                            fut = resc.submit(aligner.pe_rescue_align, *todo[i + 1])
                        group = [f.result() for f in tbs[first[i]:first[i + 1]]]
                        for chunks in aligner.pe_sam_chunks(group, p, sws):
                            for c in chunks:
                                out.write_sam_bytes(c)
                if marks:
                    out.write_sam_bytes(BATCH_END)
                n_reads += n
                log(f"[M::mem_process_seqs] Processed {n} reads in {time.time() - t1:.3f} real sec", verbose)
                if POOL_LOG:  # long runs: whether the GPU memory stays flat batch after batch
                    log(f"[M::pool] after {n_reads} reads{ag.gpu_pool_note()}", verbose)
                trim_pool(aligner)
                bar.update(n)
                states, tbs = [], []
                t1 = time.time()
        finally:
            resc.shutdown(wait=True, cancel_futures=True)
            tb.shutdown(wait=True, cancel_futures=True)
    return n_reads, time.time() - t0


def _prepare_part(aligner: MemAligner, part):
    """run_mem_pe's prepare of one part: a SmartBatch passes (it is aligned whole, in order), an empty part is
    None."""
    if isinstance(part, SmartBatch):
        return part
    return aligner.prepare(part) if part.n else None


def run_mem_se(aligner: MemAligner, batches, sink, verbose: int = 3, marks: bool = False):
    """Single-end: a reader thread parses ahead, a second thread prepares the next batch (the GPU stages)
    while this one computes the current batch's regions and SAM records; a writer thread writes them.
    marks: BATCH_END written after each batch's records."""
    n_reads = 0
    t0 = time.time()
    t1 = time.time()
    with AsyncWriter(sink, aligner.stage_times) as out, ag.Progress("mem", verbose) as bar:
        # SE_PREP_WORKERS batches prepared at once (1: with 3, single-end was slower on the GPU box, 3.33 vs 2.89 s,
        # although its one prepare thread is busy through the whole run)
        preps = ahead(aligner.prepare, prefetch(batches), name="g3align-prepare",
                      workers=SE_PREP_WORKERS if aligner.device == "gpu" else 1)
        if aligner.staged:  # regions + traceback of batch k+1 beside the SAM records of batch k
            items = ahead(lambda p: (p[0], aligner.se_regions(p)), preps, name="g3align-regions")
            finish = aligner.se_sam_chunks
        else:
            items = ((p[0], p) for p in preps)
            finish = aligner.finish_se_chunks
        for batch, st in items:
            for c in finish(st):
                out.write_sam_bytes(c)
            if marks:
                out.write_sam_bytes(BATCH_END)
            n_reads += batch.n
            log(f"[M::mem_process_seqs] Processed {batch.n} reads in {time.time() - t1:.3f} real sec", verbose)
            trim_pool(aligner)
            bar.update(batch.n)
            t1 = time.time()
    return n_reads, time.time() - t0
