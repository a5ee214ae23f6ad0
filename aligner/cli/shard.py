"""One command over several workers: `--gpus N` (a worker process per GPU of this host) and `--scheduler ADDRESS`
(the workers of a Dask distributed cluster).

Owns: cutting the parsed input into units, handing the units to workers, and writing each unit's records in input
order. A unit is what a one-process run aligns as one batch: a `-K` batch of paired-end `mem` (bwa's insert-size
statistics are per -K batch), one reader batch of single-end `mem`, one reader part of `map` (its reads are
independent). Reads keep their numbering in the whole input
(ReadBatch.first_id), so a unit's records are the same bytes whichever worker aligns it, and the output equals a
one-process run's with the same -K.

The parent parses the input (reads.py) and writes the output (samhdr.OutputSink); it never starts CUDA. A worker
builds its aligner once (`_Engine`: index load, kernels) and runs the usual pipeline (pipeline.run_mem_pe /
run_mem_se, mmpipeline.run_map) over the units it is sent, writing BATCH_END after each unit's records. Reads and
records travel as files of a spool folder in /dev/shm (dump_item, unit_path; a Python pipe moved ~0.6 GB/s, the
parent's bound), the pipes carry only their names; the parent copies each unit's file to the output in the kernel
(OutputSink.write_file). A worker that fails to start, runs out of memory or dies is reported
on stderr and its unfinished units go to the other workers (nothing is written twice: a unit is written only once
whole); when no worker is left the command fails with the last worker's error.

May import: reads, samhdr and the package's logging in the parent; the pipelines in workers only.
"""
from __future__ import annotations

import collections
import contextlib
import os
import queue
import shutil
import threading
import time
from dataclasses import dataclass, field
from multiprocessing import connection

from g3align.aligner import BATCH_END
from g3align.aligner.gpu.device import gpu_count

DASK_CONNECT_S = 20  # seconds to reach the Dask scheduler before giving up
UNITS_PER_WORKER = 2  # units sent to a worker ahead of its results: the next unit's GPU stages overlap this one's


class ShardError(Exception):
    """Every worker failed (the message names the last failure), or the Dask cluster could not run the units."""


@dataclass
class Job:
    """What a worker needs to build its aligner. kind: 'mem' (kw: the command's options, click's dict, the index
    prefix absolute) or 'map' (kw: {'args': the command line, 'ref_path': the target, absolute}); threads: CPU
    threads per worker. die_at / fail_start: tests only (a worker process that exits when
    it is handed unit `die_at[0]`, once: the file die_at[1] marks it done; worker slot `fail_start` fails at start)."""
    kind: str
    kw: dict
    paired: bool
    threads: int
    die_at: tuple | None = None
    fail_start: int | None = None
    token: str = field(default_factory=lambda: f"{os.getpid()}-{time.time_ns()}")


# ------------------------------------------------------------------------------------------------ worker side
class _Engine:
    """A worker's aligner, built once: `ref` (names, lengths, comments, FASTA path for the parent's header) and
    run(items, sink), the pipeline over the worker's stream of unit items with BATCH_END after each unit."""

    def __init__(self, job: Job, device: str):
        self.job = job
        if job.kind == "map":
            self._init_map(job, device)
            return
        from g3align.aligner.cli import common, startup
        from g3align.aligner.cli import mem as mem_cli
        from g3align.aligner.io.sam import parse_rg
        from g3align.aligner.mem import pipeline as pl
        from g3align.index.store import load_mem_index
        kw = dict(job.kw, threads=job.threads)
        device = common.pick_device(device, 1)
        startup.gil_switch_interval(device, pl.SWITCH_INTERVAL_US)
        opt = mem_cli.build_mem_options(kw)
        rg_id = parse_rg(kw["rg"])[1] if kw["rg"] is not None else ""
        self.pes = pl.user_pestat(kw["insert"]) if kw["insert"] is not None else None
        ref, fm = load_mem_index(kw["prefix"])
        self.ref = {"names": list(ref.names), "lengths": [int(x) for x in ref.lengths],
                    "comments": list(getattr(ref, "comments", None) or [""] * len(ref.names)),
                    "src_path": getattr(ref, "src_path", ""),
                    "alt": None if ref.is_alt is None else [int(x) for x in ref.is_alt]}
        self.aligner = pl.MemAligner(ref, fm, opt, rg_id=rg_id, copy_comment=kw["copy_comment"], device=device)
        pl.preload_kernels(job.paired)
        self.device = device

    def _init_map(self, job: Job, device: str) -> None:
        from g3align.aligner.cli import common, startup
        from g3align.aligner.cli import map as map_cli
        from g3align.aligner.map import options as MO
        from g3align.aligner.map import pipeline as mp
        opt, _, _ = MO.parse_map_args(job.kw["args"])
        opt.n_threads, opt.verbose, opt.dump = job.threads, 1, None
        device = common.pick_device(device, 1, "map")
        startup.gil_switch_interval(device, mp.MAP_SWITCH_INTERVAL_US)
        idx = map_cli.map_index(job.kw["ref_path"], opt)
        MO.update_mid_occ(opt, idx.cal_max_occ)
        self.ref = {"names": list(idx.ref.names), "lengths": [int(x) for x in idx.ref.lengths], "comments": [],
                    "src_path": getattr(idx.ref, "src_path", ""), "mid_occ": opt.mid_occ}
        self.aligner = mp.MapAligner(idx, opt, device=device)
        self.aligner.preload()
        self.aligner.device_setup()
        if device == "gpu":
            mp.warm_thread(self.aligner)
        self.device = device

    def run(self, items, sink) -> None:
        from g3align.aligner.mem import pipeline as pl
        if self.job.kind == "map":
            from g3align.aligner.map.pipeline import run_map
            run_map(self.aligner, items, sink, 1, marks=True)
        elif self.job.paired:
            pl.run_mem_pe(self.aligner, items, sink, 1, self.pes, marks=True)
        else:
            pl.run_mem_se(self.aligner, items, sink, 1, marks=True)


def _one_line(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0]}" if msg else type(e).__name__


def _maybe_die(job: Job, uid: int) -> None:
    """Tests: the worker process exits at once when handed unit die_at[0], the first time only."""
    if job.die_at is not None and uid == job.die_at[0]:
        try:
            fd = os.open(job.die_at[1], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(3)


class _UnitSink:
    """The pipeline's sink in a worker: each write goes to send(bytes); BATCH_END closes the current unit."""

    def __init__(self, send, end):
        self._send, self._end = send, end

    def write_sam_bytes(self, b) -> None:
        if b is BATCH_END:
            self._end()
        elif len(b):
            self._send(bytes(b))

    write = write_sam_bytes


def spool_dir() -> str:
    """A fresh folder for the units' files: in /dev/shm (memory) where it can be written, else the temp folder."""
    import tempfile
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    return tempfile.mkdtemp(prefix="g3align-shard-", dir=base)


def dump_item(item, path: str) -> None:
    """item (a reader part: numpy arrays) to a file: pickle protocol 5 with the arrays' bytes written as they are
    (one copy), read back by load_item without another."""
    import pickle
    bufs: list = []
    head = pickle.dumps(item, protocol=5, buffer_callback=bufs.append)
    views = [b.raw() for b in bufs]
    sizes = [len(head)] + [v.nbytes for v in views]
    with open(path, "wb") as fh:
        fh.write(len(sizes).to_bytes(8, "little"))
        for n in sizes:
            fh.write(n.to_bytes(8, "little"))
        fh.write(head)
        for v in views:
            fh.write(v)


def load_item(path: str):
    import pickle
    with open(path, "rb") as fh:
        k = int.from_bytes(fh.read(8), "little")
        sizes = [int.from_bytes(fh.read(8), "little") for _ in range(k)]
        data = bytearray(sum(sizes))
        fh.readinto(data)
    mv = memoryview(data)
    parts, at = [], 0
    for n in sizes:
        parts.append(mv[at:at + n])
        at += n
    return pickle.loads(parts[0], buffers=parts[1:])


def unit_path(spool: str, uid: int, slot: int) -> str:
    return os.path.join(spool, f"u{uid}.w{slot}.sam")


def _worker_main(job: Job, slot: int, gpu: str | None, conn_in, conn_out, spool: str) -> None:
    """A `--gpus` worker process: GPU `gpu` only (CUDA_VISIBLE_DEVICES, set before CUDA starts), or the CPU
    twin when gpu is None. Its input: (uid, item file, first) messages; a unit's records go to unit_path(spool,
    uid, slot). Messages to the parent: ('ready', ref), ('done', uid), ('failed', text), ('exit',)."""
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = gpu
    try:
        if job.fail_start == slot:
            raise RuntimeError("this worker was told to fail at start (test)")
        eng = _Engine(job, "gpu" if gpu is not None else "cpu")
    except BaseException as e:  # noqa: BLE001 (reported to the parent, which goes on with the others)
        conn_out.send(("failed", _one_line(e)))
        return
    conn_out.send(("ready", eng.ref))
    ids: collections.deque = collections.deque()

    def items():
        # None when no input is waiting: the pipelines then hand on what is done (pipeline.ahead, run_map), as the
        # parent sends more only once results come back
        while True:
            try:
                if not conn_in.poll(0.05):
                    yield None
                    continue
                msg = conn_in.recv()
            except EOFError:  # the parent is gone
                return
            if msg is None:
                return
            uid, path, first = msg
            if first:
                _maybe_die(job, uid)
                ids.append(uid)
            item = load_item(path)
            os.unlink(path)
            yield item

    out = [None]  # the open file of the unit being written

    def send(b):
        if out[0] is None:
            out[0] = open(unit_path(spool, ids[0], slot), "wb")  # closed at the unit's end
        out[0].write(b)

    def end():
        if out[0] is None:
            open(unit_path(spool, ids[0], slot), "wb").close()  # a unit without records
        else:
            out[0].close()
            out[0] = None
        conn_out.send(("done", ids.popleft()))

    try:
        eng.run(items(), _UnitSink(send, end))
    except BaseException as e:  # noqa: BLE001
        conn_out.send(("failed", _one_line(e)))
        return
    conn_out.send(("exit",))


# ------------------------------------------------------------------------------------------------ parent side
def units(items, paired: bool):
    """(uid, item, first, last) for each reader item: paired-end items are (part, end_of_batch), a unit ends at
    end_of_batch; single-end items (reader batches) are a unit each."""
    uid, first = 0, True
    for it in items:
        last = it[1] if paired else True
        yield uid, it, first, last
        first = last
        uid += last


def visible_gpus(n: int) -> list[str]:
    """The CUDA_VISIBLE_DEVICES value of each of n workers: the first n of the GPUs this process may use."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in vis.split(",") if v.strip()] if vis else [str(i) for i in range(gpu_count())]
    return ids[:n]


class _Worker:
    def __init__(self, slot, proc, conn_out, gpu):
        self.slot, self.proc, self.conn, self.gpu = slot, proc, conn_out, gpu
        self.ready = False
        self.alive = True
        self.inflight: list[int] = []  # unit ids sent and not yet done, in the order sent
        self.outq: queue.Queue = queue.Queue()

    def name(self) -> str:
        return f"worker {self.slot}" + (f" (GPU {self.gpu})" if self.gpu is not None else " (CPU)")


def _exit_text(w: _Worker) -> str:
    """How w's process ended (its pipe and sentinel close a moment before its exit status can be read)."""
    w.proc.join(5)
    return f"the process exited with status {w.proc.exitcode}" if w.proc.exitcode is not None else "its pipe closed"


def _sender(conn, q: queue.Queue, spool: str, slot: int) -> None:
    """Feeds one worker from q (the parent never blocks on a worker that is busy): each item written to a file
    of the spool (dump_item), its name sent down the pipe; stops at None or when the worker is gone."""
    k = 0
    while True:
        msg = q.get()
        if msg is not None:
            uid, item, first = msg
            path = os.path.join(spool, f"i{uid}.{k}.w{slot}")
            k += 1
            dump_item(item, path)
            msg = (uid, path, first)
        try:
            conn.send(msg)
        except (OSError, ValueError):
            return
        if msg is None:
            return


class ShardRun:
    """The parent of a `--gpus` run: ShardRun(job, gpus) spawns the workers (their start-up overlaps the parent's
    parsing), ref() waits for the first one ready, run(items, write) hands out the units and writes records in
    order, close() stops the workers and removes the spool. `gpus` holds a CUDA_VISIBLE_DEVICES value per worker,
    or None for a CPU worker."""

    def __init__(self, job: Job, gpus: list, log=None):
        import multiprocessing as mp
        ctx = mp.get_context("spawn")  # CUDA cannot be used in a forked child
        self.job = job
        self.log = log or (lambda m: None)
        self.workers: list[_Worker] = []
        self._ref = None
        self._last_error = ""
        self.spool = spool_dir()
        from g3align.aligner.runtime import stop
        stop.TEMP.add(os.path.join(self.spool, "*"))  # a stop (SIGINT, SIGTERM) removes the units' files
        for slot, gpu in enumerate(gpus):
            r_in, w_in = ctx.Pipe(duplex=False)
            r_out, w_out = ctx.Pipe(duplex=False)
            p = ctx.Process(target=_worker_main, args=(job, slot, gpu, r_in, w_out, self.spool), daemon=True,
                            name=f"g3align-worker-{slot}")
            p.start()
            r_in.close()
            w_out.close()
            w = _Worker(slot, p, r_out, gpu)
            stop.CHILDREN.append(p)  # and kills the workers
            threading.Thread(target=_sender, args=(w_in, w.outq, self.spool, slot), daemon=True,
                             name=f"g3align-send-{slot}").start()
            self.workers.append(w)
        self._done: dict[int, str] = {}  # uid -> the file of its records, waiting for the units before it
        self._pending: dict[int, list] = {}  # uid -> its items (kept until done, to redo them elsewhere)
        self.next_write = 0

    # -- worker events
    def _live(self):
        return [w for w in self.workers if w.alive]

    def _fail(self, w: _Worker, why: str) -> list[int]:
        """w is out: its unfinished units (to be redone) returned, its partial records dropped."""
        w.alive = False
        self._last_error = f"{w.name()}: {why}"
        todo = list(w.inflight)
        w.inflight.clear()
        for uid in todo:  # a partial unit's records
            with contextlib.suppress(OSError):
                os.unlink(unit_path(self.spool, uid, w.slot))
        rest = len(self._live())
        self.log(f"[W::shard] {w.name()} failed ({why}); {len(todo)} unfinished batches go to the "
                 f"{rest} other workers" if rest else f"[E::shard] {w.name()} failed ({why})")
        w.outq.put(None)
        try:
            w.conn.close()
        except OSError:
            pass
        return todo

    def _poll(self, timeout: float, write) -> list[int]:
        """Handle the workers' messages for up to `timeout` s (0: only those waiting); the units of workers that
        failed are returned for redoing."""
        redo: list[int] = []
        live = self._live()
        if not live:
            return redo
        waits = {w.conn: w for w in live}
        waits.update({w.proc.sentinel: w for w in live})
        t_end = time.perf_counter() + timeout
        while True:
            ready = connection.wait(list(waits), timeout=max(0.0, t_end - time.perf_counter()))
            if not ready:
                return redo
            for obj in ready:
                w = waits.get(obj)
                if w is None or not w.alive:
                    continue
                if obj is w.proc.sentinel:
                    # the process ended: read what it sent before (its pipe), then judge
                    self._drain(w, write, redo)
                    if w.alive:
                        redo += self._fail(w, _exit_text(w))
                    continue
                self._drain(w, write, redo, once=True)
            live = self._live()
            waits = {w.conn: w for w in live}
            waits.update({w.proc.sentinel: w for w in live})
            if not live or timeout == 0:
                return redo

    def _drain(self, w: _Worker, write, redo: list, once: bool = False) -> None:
        while w.alive:
            try:
                if not w.conn.poll(0 if not once else None):
                    return
                msg = w.conn.recv()
            except (EOFError, OSError):
                redo += self._fail(w, _exit_text(w))
                return
            kind = msg[0]
            if kind == "done":
                uid = msg[1]
                if uid in w.inflight:
                    w.inflight.remove(uid)
                self._done[uid] = unit_path(self.spool, uid, w.slot)
                self._pending.pop(uid, None)
                self._flush(write)
            elif kind == "ready":
                w.ready = True
                if self._ref is None:
                    self._ref = msg[1]
            elif kind == "failed":
                redo += self._fail(w, msg[1])
                return
            elif kind == "exit":
                w.alive = False
                return
            if once:
                once = False  # one blocking read done; then only what is already waiting

    def _flush(self, write) -> None:
        while self.next_write in self._done:
            path = self._done.pop(self.next_write)
            write(path)
            os.unlink(path)
            self.next_write += 1

    def ref(self) -> dict:
        """The reference's names, lengths, comments and FASTA path, from the first worker ready (for the header)."""
        while self._ref is None:
            if not self._live():
                raise ShardError(f"no worker started: {self._last_error}")
            self._poll(0.5, lambda path: None)
        return self._ref

    # -- the run
    def _pick(self, limit: int | None) -> _Worker | None:
        cands = [w for w in self._live() if limit is None or len(w.inflight) < limit]
        if not cands:
            return None
        return min(cands, key=lambda w: (len(w.inflight), not w.ready, w.slot))

    def _send_unit(self, uid: int, w: _Worker) -> None:
        w.inflight.append(uid)
        its = self._pending[uid]
        for k, it in enumerate(its):
            w.outq.put((uid, it, k == 0))

    def run(self, items, write) -> int:
        """Hand out the units of `items` (see units()); write(path) each unit's records (a file) in input order.
        Returns the number of units."""
        it = iter(items)
        cur: tuple | None = None  # (uid, worker) of the unit being read
        redo: collections.deque = collections.deque()
        more = True
        n_units = 0
        while True:
            if not self._live():
                raise ShardError(f"every worker failed; the last: {self._last_error}")
            for uid in self._poll(0, write):
                if cur is not None and uid == cur[0]:
                    w = self._pick(None)
                    if w is None:
                        continue  # no one left: raised at the loop's top
                    cur = (uid, w)
                    self._send_unit(uid, w)
                else:
                    redo.append(uid)
            if cur is None and redo:  # redone units go out between units, never inside one
                uid = redo.popleft()
                w = self._pick(None)
                if w is not None:
                    self._send_unit(uid, w)
                continue
            if more and (cur is not None or self._pick(UNITS_PER_WORKER) is not None):
                try:
                    uid, item, first, last = next(it)
                except StopIteration:
                    more, cur = False, None  # (the reader ends its last batch; an open unit is whole here)
                    continue
                if first:
                    w = self._pick(UNITS_PER_WORKER) or self._pick(None)
                    self._pending[uid] = []
                    w.inflight.append(uid)
                    cur = (uid, w)
                    n_units = uid + 1
                self._pending[uid].append(item)
                cur[1].outq.put((uid, item, first))
                if last:
                    cur = None
                continue
            if not more and cur is None and not redo and not any(w.inflight for w in self._live()):
                break
            for uid in self._poll(0.2, write):
                redo.append(uid)
        return n_units

    def close(self) -> None:
        for w in self.workers:
            w.outq.put(None)
        for w in self.workers:
            w.proc.join(timeout=10)
            if w.proc.is_alive():
                w.proc.terminate()
        shutil.rmtree(self.spool, ignore_errors=True)
        from g3align.aligner.runtime import stop
        stop.TEMP.discard(os.path.join(self.spool, "*"))
        for w in self.workers:
            if w.proc in stop.CHILDREN:
                stop.CHILDREN.remove(w.proc)


def run_shards(job: Job, gpus: list, items, make_sink, log=None) -> int:
    """A `--gpus` run: workers for `gpus` (see ShardRun), make_sink(ref) the output once a worker is ready,
    items the reader's. Returns the number of units."""
    run = ShardRun(job, gpus, log)
    try:
        ref = run.ref()
        with make_sink(ref) as sink:
            return run.run(units(items, job.paired), sink.write_file)
    finally:
        run.close()


# ------------------------------------------------------------------------------------------------ Dask
_DASK_ENGINES: dict = {}
_DASK_LOCK = threading.Lock()


def _dask_engine(job: Job) -> _Engine:
    eng = _DASK_ENGINES.get(job.token)
    if eng is None:
        _DASK_ENGINES.clear()  # one job's index at a time in a worker
        eng = _DASK_ENGINES[job.token] = _Engine(job, job.kw.get("device", "auto"))
    return eng


def dask_ref(job: Job) -> dict:
    """Runs on a Dask worker: builds (or finds) the worker's engine, returns the reference for the header."""
    with _DASK_LOCK:
        return _dask_engine(job).ref


def dask_unit(job: Job, uid: int, unit_items: list) -> bytes:
    """Runs on a Dask worker: one unit's records. One unit at a time per worker process (the engine's pipeline
    uses all its threads)."""
    _maybe_die(job, uid)
    out: list = []
    with _DASK_LOCK:
        eng = _dask_engine(job)
        eng.run(iter(unit_items), _UnitSink(out.append, lambda: None))
    return b"".join(out)


def run_dask(job: Job, address, items, make_sink, log=None, per_worker: int = UNITS_PER_WORKER) -> int:
    """A `--scheduler` run: units submitted to the Dask cluster at `address` (or a distributed.Client), at most
    per_worker per worker at a time, records written in input order. A worker lost mid-run has its units redone
    by the scheduler (the units travel with their tasks, so nothing is lost with a worker)."""
    import warnings

    try:
        from distributed import Client, wait
    except ImportError:
        raise ShardError("--scheduler needs Dask: pip install 'g3align[dask]'")
    log = log or (lambda m: None)
    own = not hasattr(address, "submit")
    try:
        client = Client(address, timeout=DASK_CONNECT_S) if own else address
    except (OSError, TimeoutError) as e:
        raise ShardError(f"--scheduler {address}: {_one_line(e)}")
    try:
        n_workers = max(1, len(client.scheduler_info().get("workers", {})))
        ref = client.submit(dask_ref, job, pure=False).result()
        done: dict[int, bytes] = {}
        futs: dict = {}
        next_write = 0
        n_units = 0
        with make_sink(ref) as sink, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "large graph": the reads travel with their tasks

            def collect(block: bool):
                nonlocal next_write
                if not futs:
                    return
                ready, _ = wait(list(futs), return_when="FIRST_COMPLETED") if block else (
                    [f for f in futs if f.done()], None)
                for f in ready:
                    uid = futs.pop(f)
                    try:
                        done[uid] = f.result()
                    except Exception as e:  # noqa: BLE001 (a task that failed more than allowed)
                        raise ShardError(f"Dask: batch {uid} failed: {_one_line(e)}")
                while next_write in done:
                    sink.write_sam_bytes(done.pop(next_write))
                    next_write += 1

            unit: list = []
            for uid, item, _first, last in units(items, job.paired):
                unit.append(item)
                if not last:
                    continue
                while len(futs) >= per_worker * n_workers:
                    collect(True)
                futs[client.submit(dask_unit, job, uid, unit, pure=False,
                                   key=f"g3align-{job.token}-{uid}")] = uid
                n_units = uid + 1
                unit = []
                collect(False)
            while futs:
                collect(True)
        log(f"[M::dask] {n_units} batches on {n_workers} workers")
        return n_units
    finally:
        if own:
            client.close()
