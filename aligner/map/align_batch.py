"""Base alignment of a whole batch for `g3align map` (the staged path of aligner/map/pipeline.py).

mmpipeline.map_range_plan runs every read up to its base alignment and lets aligner/map/align.py walk each
region in JC_PLAN mode: the ksw_extd2 calls minimap2's mm_align1 would make (left extension, every gap
fill, right extension) are recorded as keys, without aligning. This module turns the batch's keys into
ksw2 jobs (aligner/map/gpu/ksw2.py), runs them all at once -- kernels/ksw2.cu on the GPU or the twin on CPU
threads -- and mmpipeline.map_range_finish replays each read's alignment with the results (JC_REPLAY).
Calls the plan could not foresee (a second pass after a Z-drop test, the tail of a split region, the
inversion rescue, extz2 / oversized DPs) are computed during the replay on the CPU, so the output is the
per-read path's byte for byte.

Key -> job: the key's query qseq0[q_lo:q_hi] lies in one half of qseq0 = read + reverse complement; the
second half is read as a reversed, complemented view of the read's bytes in the batch's code buffer. The
target is ref_seq[ref_off[rid] + t_lo : ... + t_hi]. A key with rev = 1 (left extension) reads both
backwards.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import numpy as np

from g3align.aligner.map import align as MA
from g3align.aligner.map.gpu import ksw2 as KG
from g3align.aligner.map.ksw2 import gen_simple_mat


def scoring_pset(a: int, b: int, sc_ambi: int, q: int, e: int, q2: int, e2: int) -> np.ndarray:
    """The one parameter set of a map run (mm_align_skeleton's matrix and gap costs), as P's row."""
    return KG.pset_row(q, e, q2, e2, gen_simple_mat(5, a, b, sc_ambi))[None, :]


def keys_to_jobs(K: np.ndarray, key_read: np.ndarray, seq_off: np.ndarray, ref_off: np.ndarray) -> np.ndarray:
    """ksw2 job rows (aligner/map/gpu/ksw2.py) for keys K (mmalign K_* columns); key_read: each key's read
    (index into seq_off, the batch's offsets into its code buffer)."""
    n = K.shape[0]
    jobs = np.zeros((n, KG.J_NF), np.int64)
    if n == 0:
        return jobs
    s0 = seq_off[key_read]
    qlen = seq_off[key_read + 1] - s0
    rev = K[:, MA.K_REV] == 1
    qlo, qhi = K[:, MA.K_QLO], K[:, MA.K_QHI]
    rc = qlo >= qlen  # the reverse-complement half of qseq0
    jobs[:, KG.J_Q_OFF] = np.where(rc, s0 + 2 * qlen - qhi, s0 + qlo)
    jobs[:, KG.J_Q_LEN] = qhi - qlo
    jobs[:, KG.J_Q_MODE] = np.where(rc, KG.MODE_COMP | np.where(rev, 0, KG.MODE_REV), np.where(rev, KG.MODE_REV, 0))
    jobs[:, KG.J_T_OFF] = ref_off[K[:, MA.K_RID]] + K[:, MA.K_TLO]
    jobs[:, KG.J_T_LEN] = K[:, MA.K_THI] - K[:, MA.K_TLO]
    jobs[:, KG.J_T_MODE] = np.where(rev, KG.MODE_REV, 0)
    jobs[:, KG.J_W] = K[:, MA.K_W]
    jobs[:, KG.J_ZDROP] = K[:, MA.K_ZDROP]
    jobs[:, KG.J_END_BONUS] = K[:, MA.K_EB]
    jobs[:, KG.J_FLAG] = K[:, MA.K_FLAG]
    return jobs


# parts whose ksw2 batches run on the GPU at once (run_jobs on the GPU from its launches on: the launches, the wait
# for them and the copies back; the job geometry and the uploads before them are outside the gate; let in in
# arrival order; 0: no limit). Launched side by side on their parts' streams, the batches queue behind each other's
# launches (and each part's small CIGAR-packing kernel behind all of them), so every part of a wave got its results
# at the end of the wave's last launch; one at a time, the first part's batch ends after its own share, and its
# replay and its worker's next part overlap the later batches. chr20 pbsim CLR on the H100 (docs/BENCHMARKS.md's git
# history), mapping phase medians of interleaved runs: the gate held for the whole call, 1.90 s against 2.05 s with
# no gate (4 runs each); held from the launches on, 2.11 / 1.79 / 1.79 s against 2.34 / 1.93 / 2.06 s for the whole
# call in three measurements (3-4 runs each).
KSW2_AT_ONCE = 1


class FifoGate:
    """A context manager that lets at most `width` threads in at once, in the order they arrive."""

    def __init__(self, width: int):
        self.width = width
        self._cv = threading.Condition()
        self._issued = 0    # tickets handed out
        self._released = 0  # holders gone out

    def __enter__(self):
        with self._cv:
            ticket = self._issued
            self._issued += 1
            self._cv.wait_for(lambda: ticket < self._released + self.width)
        return self

    def __exit__(self, *exc):
        with self._cv:
            self._released += 1
            self._cv.notify_all()


_GATES: dict[tuple[str, int], FifoGate] = {}
_GATES_LOCK = threading.Lock()


@contextmanager
def gated(name: str, width: int):
    """The process's gate `name` of that width (shared by every aligner: there is one GPU) held for the with
    block; the wait is a trace event '<name>: waiting'. width <= 0: no gate."""
    if width <= 0:
        yield
        return
    with _GATES_LOCK:
        gate = _GATES.setdefault((name, width), FifoGate(width))
    t0 = time.perf_counter()
    with gate:
        from g3align.aligner import trace_event
        trace_event(f"{name}: waiting", t0, time.perf_counter())
        yield


def run_jobs(seq, ref_seq, jobs, P, device: str = "cpu", stats: dict | None = None,
             scratch_bytes: int = KG.SCRATCH_BYTES):
    """(ez, cig, cig_off, n_cig) of every job: kernels/ksw2.cu (device "gpu"; seq / ref_seq may be on the
    GPU already; the CIGARs copied back packed) or the CPU twin. stats: gets 'jobs' added (and the kernel's counts
    on the GPU). scratch_bytes: the GPU scratch of one launch (jobs beyond it go to the next launch). On the GPU,
    KSW2_AT_ONCE calls at a time, each from its launches on."""
    if device == "gpu":
        return KG.extd2_batch_gpu(seq, ref_seq, jobs, P, stats=stats, scratch_bytes=scratch_bytes, compact=True,
                                  gate=gated("ksw2", KSW2_AT_ONCE))
    if stats is not None:
        stats["jobs"] = stats.get("jobs", 0) + int(jobs.shape[0])
    return KG.extd2_batch_cpu(seq, ref_seq, jobs, P)
