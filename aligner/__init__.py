"""g3align.aligner"""
import sys
import threading
import time

# G3ALIGN_TRACE (the CLI sets a list here; scripts/gpu_check.py too): (stage, thread, t0, t1) perf_counter times of
# every stage lap of mem's and map's pipelines and of every item their reader threads make; None: nothing kept
TRACE: list | None = None
_TIMES_LOCK = threading.Lock()
# written to a pipeline's sink after each batch's records when the pipeline runs with marks=True
# (aligner/cli/shard.py's workers cut their output into units there)
BATCH_END = object()


def log(msg: str, verbose: int = 3, level: int = 3) -> None:
    """A progress / note line on stderr (minimap2's and bwa's [M::...] lines) when verbose >= level."""
    if verbose >= level:
        bar = Progress.active
        if bar is not None:  # the line above the progress bar, which is drawn again below it
            bar.bar.clear()
        print(msg, file=sys.stderr, flush=True)
        if bar is not None:
            bar.bar.refresh()


class Progress:
    """`mem` and `map`'s progress on a terminal: one tqdm line of the reads written and their rate, kept below the
    [M::...] lines; nothing when stderr is not a terminal or at -v 0 / 1 (errors only, as bwa's levels)."""

    active: "Progress | None" = None

    def __init__(self, what: str, verbose: int):
        self.bar = None
        if verbose >= 2 and sys.stderr is not None and sys.stderr.isatty():
            from tqdm import tqdm
            self.bar = tqdm(desc=f"[M::{what}]", unit=" reads", unit_scale=True, file=sys.stderr, leave=False,
                            mininterval=0.5, dynamic_ncols=True)
            Progress.active = self

    def update(self, n_reads: int) -> None:
        if self.bar is not None:
            self.bar.update(n_reads)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            Progress.active = None
            self.bar.close()


def add_time(times: dict, key: str, v) -> None:
    """times[key] += v (pipeline threads share the dict)."""
    with _TIMES_LOCK:
        times[key] = times.get(key, 0) + v


def trace_event(stage: str, t0: float, t1: float) -> None:
    """(stage, this thread's name, t0, t1) into TRACE when a trace is being kept."""
    tr = TRACE
    if tr is not None:
        tr.append((stage, threading.current_thread().name, t0, t1))


_MARK = threading.local()


def trace_mark(step: str | None) -> None:
    """With a trace kept: the time since this thread's previous mark as the event `step` (None: just start the
    clock). For a stage's host steps, each ending where the host waits or launches."""
    if TRACE is None:
        return
    t = time.perf_counter()
    t0 = getattr(_MARK, "t", None)
    if step is not None and t0 is not None:
        trace_event(step, t0, t)
    _MARK.t = t


def lap(times: dict, stage: str, t0: float) -> float:
    """The stage's time since t0 added to times[stage] (and to TRACE); returns now (the next lap's t0)."""
    t = time.perf_counter()
    add_time(times, stage, t - t0)
    trace_event(stage, t0, t)
    return t


def gpu_pool_note() -> str:
    """For the stage lines of a GPU run (G3ALIGN_STAGES): what CuPy's device pool uses and holds, and the GPU memory
    left free; empty without CuPy or a device."""
    cp = sys.modules.get("cupy")
    if cp is None:
        return ""
    try:
        free, total = cp.cuda.runtime.memGetInfo()
        pool = cp.get_default_memory_pool()
        used, held = pool.used_bytes(), pool.total_bytes()
        pinned = cp.get_default_pinned_memory_pool().n_free_blocks()
    except Exception:  # (no device after all)
        return ""
    return (f"; GPU pool {used / 2**30:.2f} GiB used, {held / 2**30:.2f} GiB held, {free / 2**30:.1f} of "
            f"{total / 2**30:.1f} GiB free; {pinned} free pinned blocks")
