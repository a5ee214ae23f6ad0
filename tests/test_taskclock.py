"""TASK_CLOCK (aligner/runtime/taskclock.py): clocked kernels return what the kernels return, their clocks are the
process's, and trace_timeline.task_clock_lines splits a task's time as documented."""
import os
import sys
import time

import numpy as np
from g3align.aligner.runtime import taskclock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
from trace_timeline import task_clock_lines  # noqa: E402


def test_clock_ns_reads_the_monotonic_and_thread_cpu_clocks():
    a = time.perf_counter()
    t = taskclock.clock_ns(taskclock.CLOCK_MONOTONIC) * 1e-9
    b = time.perf_counter()
    assert a <= t <= b
    c = time.thread_time()
    cpu = taskclock.clock_ns(taskclock.CLOCK_THREAD_CPUTIME_ID) * 1e-9
    assert c <= cpu <= time.thread_time()


def test_task_clock_lines_split_each_task():
    ev = [("task stage1", "T1", 1.0, 2.0), ("kernel stage1", "T1", 1.1, 1.8), ("kcpu stage1", "T1", 1.1, 1.5),
          ("task stage1", "T2", 1.0, 1.5), ("kernel stage1", "T2", 1.2, 1.4), ("kcpu stage1", "T2", 1.2, 1.4),
          ("task stage2", "T1", 3.0, 4.0)]  # no kernel events: not in the table
    lines = task_clock_lines(ev)
    assert len(lines) == 2 and lines[1].split()[:3] == ["stage1", "2", "1.500"]
    sums = [float(x) for x in lines[1].split()[3::2]]
    assert np.allclose(sums, [0.1 + 0.2, 0.4 + 0.2, 0.3 + 0.0, 0.2 + 0.1])
    assert task_clock_lines([("task stage1", "T1", 1.0, 2.0)]) == []
