"""Host <-> GPU copies through page-locked memory from CuPy's pinned pool (mem's and map's GPU paths; map's through
a few reused staging buffers: fetch / put), and a block of GPU memory for each CUDA stream's share of CuPy's device
pool.

A copy from or to pageable memory runs at a fraction of the bus speed and goes through the driver's staging
buffer; on the box, four map parts copying their seeds back at once took ~0.1 s together.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

PINNED_MIN = 1 << 16  # bytes: smaller host <-> device copies go the plain way
# fetch / put (map's GPU path): whole arrays copied in chunks through a pair of page-locked staging buffers of
# STAGE_BYTES each, reused by every transfer, instead of a page-locked block per array (to_host / to_device; 0:
# fetch and put are those). A cudaHostAlloc costs ~0.6-1.5 ms a MB on the box and the driver makes one at a time:
# in map's chr20 traces the first wave of parts spent 0.59-0.79 s (summed over threads) in pinned allocations of
# new sizes, with cudaMallocs waiting behind them; with the staging buffers 0.15 s (2026-11-26, docs/BENCHMARKS.md)
STAGE_BYTES = 4 << 20


def drain() -> None:
    """Wait for the current CUDA stream (cudaStreamSynchronize), before a copy to the host that would otherwise wait
    for the stream's kernels itself: ndarray.get(), cp.asnumpy and int() of a device scalar. On the box, a thread
    blocked in such a copy holds a driver lock meanwhile: other threads' pageable uploads wait behind it, and in one
    probe their cuModuleGetFunction, cudaMalloc and event records too (~135 ms each during a 150 ms kernel); behind
    a stream or event synchronize nothing waits (scripts/gpu_sync_probe.py; docs/BENCHMARKS.md's git history). In
    map's traces the part workers stalled so for as long as another part's ksw2 kernel ran. Called by map's GPU code
    (fetch among it); to_host (mem) does not, its timings being measured without it."""
    import cupy as cp

    cp.cuda.get_current_stream().synchronize()


def pinned_class(nbytes: int) -> int:
    """The bytes of the pinned block that holds `nbytes`: at least 4 KiB, else `nbytes` rounded up to one of
    16 sizes per power of two (at most 1/16 more). CuPy's pinned pool hands a freed block out again only
    for a request of the same size (rounded to 512 bytes), and every part's arrays have sizes of their own
    (seeds, jobs), so without classes each part called cudaHostAlloc afresh (page-locking tens of MB) and
    the pool kept every older block."""
    if nbytes <= 4096:
        return 4096
    step = 1 << (nbytes.bit_length() - 5)
    return (nbytes + step - 1) // step * step


def empty_pinned(shape, dtype) -> np.ndarray:
    """An uninitialised NumPy array in page-locked memory from CuPy's pinned pool (what cupyx.empty_pinned
    makes; `import cupyx` in full would load cupyx.linalg, cupyx.scipy.sparse and scipy at the first upload),
    in a block of pinned_class's size."""
    import cupy as cp

    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64))
    return np.ndarray(shape, dtype, buffer=cp.cuda.alloc_pinned_memory(pinned_class(n * dtype.itemsize)))


def to_device(a):
    """numpy -> a new cupy array, copied through pinned host memory (CuPy's pinned pool): a copy from
    pageable memory runs at a fraction of the bus speed (10 Mbases of reads took ~5 ms on the box)."""
    import cupy as cp

    a = np.ascontiguousarray(a)
    if a.nbytes < PINNED_MIN:
        return cp.asarray(a)
    h = empty_pinned(a.shape, a.dtype)
    np.copyto(h, a)
    d = cp.empty(a.shape, a.dtype)
    d.set(h)
    cp.cuda.get_current_stream().synchronize()  # h returns to the pool when this function returns
    return d


def upload_large(a, chunk: int = 16 << 20):
    """numpy -> a new cupy array for large, long-lived arrays (the index at start-up): copied in `chunk`-byte
    pieces through two pinned buffers, each piece's host copy (which also faults in the pages of a mapped
    index file) overlapping the previous piece's transfer. One big pageable copy ran at ~0.9 GB/s on the
    box, and a pinned buffer of the whole array costs a long cudaHostAlloc."""
    import cupy as cp

    a = np.ascontiguousarray(a)
    d = cp.empty(a.shape, a.dtype)
    n = a.nbytes
    if n <= PINNED_MIN:
        d.set(a)
        return d
    bufs = [empty_pinned(min(chunk, n), np.uint8) for _ in range(2)]
    with cp.cuda.Stream(non_blocking=True):
        _through_stages(a.reshape(-1).view(np.uint8), d.data.ptr, n, False, bufs, chunk)
    return d


_STAGES: list = []  # free pairs of staging buffers
_STAGE_LOCK = threading.Lock()


def _stage_take() -> list:
    """A free pair of staging buffers (uint8 arrays of STAGE_BYTES in pinned memory), made when none is free."""
    with _STAGE_LOCK:
        while _STAGES:
            pair = _STAGES.pop()
            if pair[0].nbytes == STAGE_BYTES:  # (not one of an earlier STAGE_BYTES)
                return pair
    return [empty_pinned(STAGE_BYTES, np.uint8) for _ in range(2)]


def _stage_give(pair: list) -> None:
    with _STAGE_LOCK:
        _STAGES.append(pair)


def stage_warm(n: int) -> None:
    """Up to n pairs of staging buffers made now (on a start-up thread), so that the first transfers of n threads
    at once find theirs made."""
    if STAGE_BYTES <= 0:
        return
    with _STAGE_LOCK:
        have = sum(p[0].nbytes == STAGE_BYTES for p in _STAGES)
    for pair in [_stage_take() for _ in range(max(0, n - have))]:
        _stage_give(pair)


def _through_stages(host: np.ndarray, dptr: int, n: int, down: bool, bufs: list | None = None,
                    chunk: int = 0) -> None:
    """Copy n bytes between the uint8 host array `host` and the device address dptr (down: device to host) in
    chunks through a pair of pinned buffers, on the current stream, and wait for the end. Down, each chunk's copy
    out of one buffer overlaps the next chunk's transfer into the other; up, each chunk's copy into one buffer
    overlaps the previous chunk's transfer out of the other. The buffers: `bufs` with `chunk`-byte chunks (at most
    their size), else a pair of staging buffers taken and given back, with STAGE_BYTES chunks."""
    import cupy as cp

    rt = cp.cuda.runtime
    st = cp.cuda.get_current_stream()
    pair = bufs if bufs is not None else _stage_take()
    step = chunk if bufs is not None else STAGE_BYTES
    pend = None         # down: (buffer, offset, bytes, event) of the chunk to copy out next
    done = [None, None]  # up: each buffer's last transfer
    try:
        for k, o in enumerate(range(0, n, step)):
            m = min(step, n - o)
            b = pair[k & 1]
            if down:  # the buffer's previous chunk (k - 2) was copied out in the last step
                rt.memcpyAsync(b.ctypes.data, dptr + o, m, rt.memcpyDeviceToHost, st.ptr)
                ev = st.record()
                if pend is not None:
                    pend[3].synchronize()
                    np.copyto(host[pend[1]:pend[1] + pend[2]], pend[0][:pend[2]])
                pend = (b, o, m, ev)
            else:
                if done[k & 1] is not None:
                    done[k & 1].synchronize()  # the buffer's previous chunk has left it
                np.copyto(b[:m], host[o:o + m])
                rt.memcpyAsync(dptr + o, b.ctypes.data, m, rt.memcpyHostToDevice, st.ptr)
                done[k & 1] = st.record()
        if pend is not None:
            pend[3].synchronize()
            np.copyto(host[pend[1]:pend[1] + pend[2]], pend[0][:pend[2]])
    finally:
        st.synchronize()  # (after an error too: no copy may still be using the pair)
        if bufs is None:
            _stage_give(pair)


def fetch(x) -> np.ndarray:
    """cupy -> a new numpy array (pageable), copied through a pair of staging buffers (_through_stages); waits for
    the copy, on the current stream. With STAGE_BYTES 0: to_host."""
    import cupy as cp

    x = cp.ascontiguousarray(x)
    drain()
    if STAGE_BYTES <= 0:
        return to_host(x)
    if x.nbytes < PINNED_MIN:
        return cp.asnumpy(x)
    out = np.empty(x.shape, x.dtype)
    _through_stages(out.reshape(-1).view(np.uint8), x.data.ptr, int(x.nbytes), True)
    return out


def put(a):
    """numpy -> a new cupy array, copied through a pair of staging buffers (_through_stages); returns when the copy
    is done (current stream). With STAGE_BYTES 0: to_device."""
    import cupy as cp

    if STAGE_BYTES <= 0:
        return to_device(a)
    a = np.ascontiguousarray(a)
    if a.nbytes < PINNED_MIN:
        return cp.asarray(a)
    d = cp.empty(a.shape, a.dtype)
    _through_stages(a.reshape(-1).view(np.uint8), d.data.ptr, int(a.nbytes), False)
    return d


def to_host(x) -> np.ndarray:
    """cupy -> numpy in pinned host memory (waits for the copy, on the current stream); see to_device."""
    import cupy as cp

    x = cp.ascontiguousarray(x)
    if x.nbytes < PINNED_MIN:
        return cp.asnumpy(x)
    h = empty_pinned(x.shape, x.dtype)
    x.get(out=h)
    return h


def reserve_pool(stream, cap: int, share: int) -> None:
    """One block of min(cap, free GPU memory / share) bytes (MiB-rounded; nothing when cap <= 0) into CuPy's device
    pool for `stream`, freed at once. A cudaMalloc serialises with the work of every stream, and CuPy keeps freed
    blocks per stream and splits big ones: the stream's first allocations then come from this block instead of
    each waiting for the other streams' kernels (mem's pipeline streams, map's part workers)."""
    if cap <= 0:
        return
    import cupy as cp

    size = min(cap, cp.cuda.runtime.memGetInfo()[0] // max(1, share)) >> 20 << 20
    if size > 0:
        with on_stream(stream):
            cp.get_default_memory_pool().malloc(size)


@contextmanager
def on_stream(stream):
    """`stream` current for the with block, then the stream current before it again. (On the box, CuPy 14's own
    `with stream:` left its null stream current after the block, not the one before: map's part workers
    switch to their ksw2 stream and back, mmpipeline.MapAligner.worker_init.)"""
    import cupy as cp

    prev = cp.cuda.get_current_stream()
    stream.use()
    try:
        yield stream
    finally:
        prev.use()


# upload / download (the pairwise engine's inputs and results): the caller's own pages locked in place
# (cudaHostRegister) for the copy instead of a copy through a pinned buffer. On the H100 box a 300 MB array moved
# at 6.2 GB/s from pageable memory, 53 GB/s from locked pages, and locking cost 10.5 ms (~29 GB/s), against
# 9.7 GB/s for a host copy into a pinned buffer (scripts/pairwise_api_bench.py --stages xfer).
REGISTER_MIN = 4 << 20      # bytes: smaller arrays go the plain way
REGISTER_CHUNK = 32 << 20   # locked and sent a chunk at a time: a chunk's transfer overlaps the next one's locking
_PAGE = 4096


def _locked_copy(hptr: int, dptr: int, n: int, down: bool) -> None:
    """n bytes between host address hptr and device address dptr (down: device to host) in page-aligned chunks,
    each locked (cudaHostRegister) before its asynchronous copy on the current stream; waits for the copies, then
    unlocks. A chunk that cannot be locked (already locked, e.g. memory from a pinned pool) is copied as it is."""
    import cupy as cp

    rt = cp.cuda.runtime
    st = cp.cuda.get_current_stream()
    kind = rt.memcpyDeviceToHost if down else rt.memcpyHostToDevice
    locked = []
    try:
        a = hptr
        end = hptr + n
        while a < end:
            b = min(end, (a + REGISTER_CHUNK + _PAGE - 1) // _PAGE * _PAGE)
            try:
                rt.hostRegister(a, b - a, 0)
                locked.append(a)
            except rt.CUDARuntimeError:
                pass
            if down:
                rt.memcpyAsync(a, dptr + (a - hptr), b - a, kind, st.ptr)
            else:
                rt.memcpyAsync(dptr + (a - hptr), a, b - a, kind, st.ptr)
            a = b
    finally:
        st.synchronize()
        for p in locked:
            rt.hostUnregister(p)


def upload(a):
    """numpy -> a new cupy array, through the array's own pages locked in place (_locked_copy); returns when the
    copy is done (current stream)."""
    import cupy as cp

    a = np.ascontiguousarray(a)
    d = cp.empty(a.shape, a.dtype)
    if a.nbytes < REGISTER_MIN:
        d.set(a)
        # set() is a cudaMemcpyAsync on the current stream: from page-locked memory (pwio's reused _staging buffer)
        # the DMA reads the source later, so without this wait the next device_codes call could overwrite it first
        cp.cuda.get_current_stream().synchronize()
        return d
    _locked_copy(a.ctypes.data, d.data.ptr, int(a.nbytes), False)
    return d


def download(x) -> np.ndarray:
    """cupy -> a new pageable numpy array, through its pages locked in place; waits (current stream)."""
    import cupy as cp

    x = cp.ascontiguousarray(x)
    h = np.empty(x.shape, x.dtype)
    if x.nbytes < REGISTER_MIN:
        x.get(out=h)
        return h
    _locked_copy(h.ctypes.data, x.data.ptr, int(x.nbytes), True)
    return h
