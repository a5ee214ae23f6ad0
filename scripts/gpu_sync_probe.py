"""Which host calls wait for another stream's kernel (GPU box): a kernel that spins for SPIN_MS runs on stream A;
meanwhile each probe runs on stream B (non-blocking) and its host time is printed. A probe that takes ~SPIN_MS
serialises with the other stream's work (the map pipeline's part workers must avoid those while another part's
ksw2 kernels run). Then the GIL: each blocking probe waits for a kernel on its own stream while another thread
counts; a probe that holds the GIL while it waits stops the count. Usage: python3 scripts/gpu_sync_probe.py
[SPIN_MS]"""
from __future__ import annotations

import os
import sys
import threading
import time

import cupy as cp
import numpy as np

SPIN = r'''
extern "C" __global__ void spin(long long cycles, int* out) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = 1;
}
extern "C" __global__ void touch(int* out) { out[threadIdx.x] = threadIdx.x; }
extern "C" __global__ void touch2(int* out) { out[threadIdx.x] += 2; }
'''


def main() -> None:
    spin_ms = float(sys.argv[1]) if len(sys.argv) > 1 else 200.0
    mod = cp.RawModule(code=SPIN)
    spin, touch = mod.get_function("spin"), mod.get_function("touch")
    clock_hz = cp.cuda.runtime.getDeviceProperties(0)["clockRate"] * 1000
    a = cp.cuda.Stream(non_blocking=True)
    b = cp.cuda.Stream(non_blocking=True)
    flag = cp.zeros(32, cp.int32)
    pool = cp.get_default_memory_pool()
    host5 = np.ones(5 << 20, np.uint8)
    with b:
        dev5 = cp.asarray(host5)
        dev64 = cp.ones(64 << 20, cp.uint8)
        cp.zeros(8, cp.int64)  # (the fill kernel loaded)
        cp.asnumpy(dev5)
        touch((1,), (32,), (flag,))
        b.synchronize()
    keep = []
    big = [0]

    def new_block():
        big[0] += 1
        keep.append(cp.empty((3 << 30) + big[0] * (1 << 20), cp.uint8))  # more than the pool holds: cudaMalloc

    def pool_reuse():
        x = cp.empty(1 << 20, cp.uint8)
        del x

    def free_all():
        keep.clear()
        pool.free_all_blocks()

    probes = [
        ("nothing", lambda: None),
        ("cp.empty 1 MiB (pool reuse)", pool_reuse),
        ("cp.empty 3 GiB (cudaMalloc)", new_block),
        ("pool.free_all_blocks (cudaFree)", free_all),
        ("cp.asarray 5 MiB pageable (H2D)", lambda: cp.asarray(host5)),
        ("cp.asnumpy 5 MiB (D2H pageable)", lambda: cp.asnumpy(dev5)),
        ("cp.asnumpy 64 MiB (D2H pageable)", lambda: cp.asnumpy(dev64)),
        ("cp.zeros 8 (fill kernel)", lambda: cp.zeros(8, cp.int64)),
        ("RawKernel launch", lambda: touch((1,), (32,), (flag,))),
        ("alloc_pinned_memory 64 MiB (new)", lambda: keep.append(cp.cuda.alloc_pinned_memory((64 << 20) + 4096))),
        ("pinned pool reuse 64 MiB", lambda: cp.cuda.alloc_pinned_memory(64 << 20)),
        ("cudaHostAlloc 64 MiB direct", lambda: keep.append(cp.cuda.runtime.hostAlloc(64 << 20, 0))),
        ("Event record+sync on B", lambda: b.record().synchronize()),
        ("new Stream", lambda: cp.cuda.Stream(non_blocking=True)),
        ("memGetInfo", cp.cuda.runtime.memGetInfo),
        # with CUDA's lazy loading (the default; CUDA_MODULE_LOADING=EAGER: not) a kernel's first launch loads it
        ("first launch of a loaded module's kernel", lambda: mod.get_function("touch2")((1,), (32,), (flag,))),
        ("RawModule compile (disk cache) + load", lambda: cp.RawModule(code=SPIN + f"// {time.perf_counter()}")
         .get_function("touch")((1,), (32,), (flag,))),
    ]
    loading = os.environ.get("CUDA_MODULE_LOADING", "default")
    print(f"spin {spin_ms:.0f} ms on stream A; each probe on stream B (host seconds); CUDA_MODULE_LOADING {loading}")
    for name, fn in probes:
        cyc = np.int64(spin_ms * 1e-3 * clock_hz)
        with a:
            spin((1,), (32,), (cyc, flag))
        time.sleep(0.01)  # the kernel is running
        with b:
            t0 = time.perf_counter()
            fn()
            t1 = time.perf_counter()
        a.synchronize()
        b.synchronize()
        print(f"{name:40s} {t1 - t0:8.4f} s{'   <- waited for stream A' if t1 - t0 > 0.5 * spin_ms * 1e-3 else ''}")

    gil_probes(spin, flag, spin_ms, clock_hz, mod)


def blocking_waits(s) -> list:
    """Ways a thread waits on the host for the work of stream s: (name, call), each made with its own small device
    arrays and pinned buffer (gil_probes, lock_probes)."""
    small = cp.zeros(1, cp.int32)
    mid = cp.zeros(1 << 20, cp.uint8)
    pinned = np.frombuffer(cp.cuda.alloc_pinned_memory(1 << 20), np.uint8, 1 << 20)
    rt = cp.cuda.runtime

    def pinned_copy():
        rt.memcpyAsync(pinned.ctypes.data, mid.data.ptr, 1 << 20, rt.memcpyDeviceToHost, s.ptr)
        s.record().synchronize()

    return [
        ("ndarray.get() 4 bytes (pageable D2H)", lambda: small.get()),
        ("cp.asnumpy 1 MiB (pageable D2H)", lambda: cp.asnumpy(mid)),
        ("memcpyAsync to pinned + event sync", pinned_copy),
        ("Stream.synchronize", lambda: s.synchronize()),
        ("Event.synchronize", lambda: s.record().synchronize()),
        ("memcpy (sync) 4 bytes", lambda: rt.memcpy(pinned.ctypes.data, small.data.ptr, 4, rt.memcpyDeviceToHost)),
    ]


def gil_probes(spin, flag, spin_ms: float, clock_hz: int, mod) -> None:
    """Host calls that wait for a kernel on their own stream: does the waiting thread keep the GIL?"""
    s = cp.cuda.Stream(non_blocking=True)
    probes = blocking_waits(s)
    print(f"\nGIL: a kernel of {spin_ms:.0f} ms on the probe's stream; another thread counts meanwhile")
    for name, fn in probes:
        count, stop = [0], threading.Event()

        def counter(count=count, stop=stop):
            while not stop.is_set():
                count[0] += 1

        with s:
            spin((1,), (32,), (np.int64(spin_ms * 1e-3 * clock_hz), flag))
            th = threading.Thread(target=counter)
            th.start()
            time.sleep(0.005)
            c0, t0 = count[0], time.perf_counter()
            fn()
            c1, t1 = count[0], time.perf_counter()
            stop.set()
            th.join()
        rate = (c1 - c0) / max(t1 - t0, 1e-9)
        print(f"{name:40s} {t1 - t0:8.4f} s, counter {rate / 1e6:6.2f} M/s{'   <- held the GIL' if rate < 1e5 else ''}")

    lock_probes(spin, flag, spin_ms, clock_hz, mod)


def lock_probes(spin, flag, spin_ms: float, clock_hz: int, mod) -> None:
    """One thread waits for a kernel on its stream in each blocking call; meanwhile the main thread times CUDA
    calls on another stream. A call that takes ~SPIN_MS waits for a driver lock the blocked thread holds."""
    s = cp.cuda.Stream(non_blocking=True)
    other = cp.cuda.Stream(non_blocking=True)
    host = np.ones(1 << 16, np.uint8)
    waits = blocking_waits(s)
    calls = [
        ("Device().id", lambda: cp.cuda.Device().id),
        ("cp.asarray 64 KiB (H2D)", lambda: cp.asarray(host)),
        ("small D2H get", lambda: cp.zeros(1, cp.int32).get()),
        ("Event record", lambda: other.record()),
        ("cp.empty 1 MiB", lambda: cp.empty(1 << 20, cp.uint8)),
        ("get_function (loaded)", lambda: mod.get_function("touch")),
        ("cp.empty new size (cudaMalloc)", lambda: cp.empty((64 << 20) + (next(sizes) << 20), cp.uint8)),
    ]
    sizes = iter(range(1, 1 << 20))
    print(f"\ndriver locks: a thread waits for a {spin_ms:.0f} ms kernel; the main thread's calls on another stream")
    for wname, wait in waits:
        def waiter(wait=wait):
            with s:
                wait()

        with s:
            spin((1,), (32,), (np.int64(spin_ms * 1e-3 * clock_hz), flag))
        th = threading.Thread(target=waiter)
        th.start()
        time.sleep(0.01)
        out = []
        with other:
            for cname, call in calls:
                t0 = time.perf_counter()
                call()
                out.append(f"{cname} {time.perf_counter() - t0:.4f}")
        th.join()
        s.synchronize()
        print(f"{wname:40s} " + ", ".join(out))


if __name__ == "__main__":
    main()
