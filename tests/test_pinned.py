"""aligner/gpu/pinned.py's reserve_pool and staged transfers with a stand-in CuPy (no GPU needed)."""
import sys
import types

import numpy as np

from g3align.aligner.gpu import pinned


def _fake_cupy(free: int, log: list):
    cp = types.ModuleType("cupy")
    current = [_Stream("before", log)]

    class Pool:
        def malloc(self, n):
            log.append(("malloc", n, current[0].name))

    pool = Pool()
    cp.get_default_memory_pool = lambda: pool
    cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(memGetInfo=lambda: (free, 2 * free)),
                                    get_current_stream=lambda: current[0])
    cp._current = current
    return cp


class _Stream:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def use(self):
        sys.modules["cupy"]._current[0] = self
        self.log.append(("use", self.name))


def test_reserve_pool(monkeypatch):
    log: list = []
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(80 << 30, log))
    st = _Stream("s1", log)
    pinned.reserve_pool(st, 4 << 30, 8)  # cap below a share of the free memory: the cap, on the stream, and the
    # stream current before is current again (pinned.on_stream)
    assert log == [("use", "s1"), ("malloc", 4 << 30, "s1"), ("use", "before")]
    log.clear()
    pinned.reserve_pool(st, 64 << 30, 16)  # a 16th of 80 GiB, rounded down to whole MiB
    assert log[1][1] == (80 << 30) // 16 >> 20 << 20
    log.clear()
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy((1 << 20) - 1, log))
    pinned.reserve_pool(st, 4 << 30, 1)  # less than a MiB free: nothing
    pinned.reserve_pool(st, 0, 1)  # switched off: nothing
    assert log == []


# fetch / put through the staging buffers, with a stand-in CuPy whose "device" arrays live in host
# memory: its memcpyAsync copies at once (ctypes.memmove), so the chunking and buffer reuse are what is tested

class _DevArray:
    def __init__(self, a):
        self.a = np.ascontiguousarray(a)
        self.shape, self.dtype, self.nbytes = self.a.shape, self.a.dtype, self.a.nbytes
        self.data = types.SimpleNamespace(ptr=self.a.ctypes.data)

    def reshape(self, *s):
        return _DevArray(self.a.reshape(*s))

    def view(self, dt):
        return _DevArray(self.a.view(dt))

    def __getitem__(self, k):
        return _DevArray(self.a[k])

    def set(self, h, stream=None):
        self.a[...] = h


def _staging_cupy(log: list):
    import ctypes
    cp = types.ModuleType("cupy")

    class Event:
        def synchronize(self):
            log.append("sync")

    class Stream:
        ptr = 0

        def record(self):
            return Event()

        def synchronize(self):
            log.append("stream sync")

        def __init__(self, **kw):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            pass

    def memcpy(dst, src, n, kind, stream):
        log.append(("copy", kind, n))
        ctypes.memmove(dst, src, n)
    rt = types.SimpleNamespace(memcpyAsync=memcpy, memcpyDeviceToHost=2, memcpyHostToDevice=1)
    cp.cuda = types.SimpleNamespace(runtime=rt, get_current_stream=Stream, Stream=Stream,
                                    alloc_pinned_memory=lambda n: (log.append(("pinned", n)), bytearray(n))[1])
    cp.uint8 = np.uint8
    cp.ascontiguousarray = lambda x: x
    cp.asnumpy = lambda x: x.a.copy()
    cp.asarray = lambda a: _DevArray(a.copy())
    cp.empty = lambda shape, dtype: _DevArray(np.empty(shape, dtype))
    return cp


def test_staged_transfers(monkeypatch):
    log: list = []
    monkeypatch.setitem(sys.modules, "cupy", _staging_cupy(log))
    monkeypatch.setattr(pinned, "STAGE_BYTES", 1 << 16)
    monkeypatch.setattr(pinned, "_STAGES", [])
    rng = np.random.default_rng(5)
    pinned.stage_warm(2)
    assert [e for e in log if e[0] == "pinned"] == [("pinned", 1 << 16)] * 4  # two pairs made at once
    log.clear()
    for n in (70000, 1 << 16, (1 << 16) + 1, 5 * (1 << 16) - 3, 300000):  # one chunk, chunk + 1 byte, several
        a = rng.integers(0, 1 << 62, n // 8 + 1, dtype=np.int64).view(np.uint8)[:n].copy()
        d = pinned.put(a)
        assert np.array_equal(d.a, a)
        h = pinned.fetch(_DevArray(a[::-1].copy()))
        assert type(h) is np.ndarray and np.array_equal(h, a[::-1])
        assert sum(e[2] for e in log if e[0] == "copy" and e[1] == 1) == n  # every byte once each way
        assert sum(e[2] for e in log if e[0] == "copy" and e[1] == 2) == n
        assert not [e for e in log if e[0] == "pinned"]  # the warm pairs reused: nothing page-locked anew
        log.clear()
    assert len(pinned._STAGES) == 2  # every pair given back
    monkeypatch.setattr(pinned, "STAGE_BYTES", 1 << 17)  # a new size: the old pairs are dropped, one new pair made
    assert np.array_equal(pinned.put(np.arange(50000)).a, np.arange(50000))
    assert [e for e in log if e[0] == "pinned"] == [("pinned", 1 << 17)] * 2 and len(pinned._STAGES) == 1
    log.clear()
    big = np.arange(70000, dtype=np.int32)  # upload_large: its own two buffers of `chunk` bytes, not the pairs
    assert np.array_equal(pinned.upload_large(big, chunk=1 << 16).a, big)
    assert [e for e in log if e[0] == "pinned"] == [("pinned", 1 << 16)] * 2 and len(pinned._STAGES) == 1
    assert [e[2] for e in log if e[0] == "copy"] == [1 << 16] * 4 + [280000 - 4 * (1 << 16)]
    log.clear()
    small = pinned.fetch(_DevArray(np.arange(5)))  # below PINNED_MIN: the plain copy
    assert np.array_equal(small, np.arange(5)) and not [e for e in log if e[0] == "copy"]


def test_fetch_waits_by_stream_synchronize_first(monkeypatch):
    """fetch waits for the stream by a stream synchronize before any copy (pinned.drain): a blocking copy that waits
    for kernels stalls the other threads' CUDA calls on the box. (to_host, mem's, does not.)"""
    log: list = []
    monkeypatch.setitem(sys.modules, "cupy", _staging_cupy(log))
    monkeypatch.setattr(pinned, "STAGE_BYTES", 1 << 16)
    monkeypatch.setattr(pinned, "_STAGES", [])
    a = np.arange(30000, dtype=np.int64)
    assert np.array_equal(pinned.fetch(_DevArray(a)), a)  # staged: the wait, then the chunks
    copies = [i for i, e in enumerate(log) if e[0] == "copy"]
    assert log[0] == "stream sync" and copies and "stream sync" not in log[1:copies[0]]
    log.clear()
    assert np.array_equal(pinned.fetch(_DevArray(a[:10])), a[:10])  # small: the wait, then cp.asnumpy
    assert log == ["stream sync"]
