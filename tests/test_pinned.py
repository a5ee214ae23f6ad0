"""aligner/pinned.py's reserve_pool with a stand-in CuPy (the pool and the stream are recorded, no GPU needed)."""
import sys
import types

from g3align.aligner import pinned


def _fake_cupy(free: int, log: list):
    cp = types.ModuleType("cupy")

    class Pool:
        def malloc(self, n):
            log.append(("malloc", n, log[-1][1] if log and log[-1][0] == "enter" else None))

    pool = Pool()
    cp.get_default_memory_pool = lambda: pool
    cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(memGetInfo=lambda: (free, 2 * free)))
    return cp


class _Stream:
    def __init__(self, name, log):
        self.name, self.log = name, log

    def __enter__(self):
        self.log.append(("enter", self.name))

    def __exit__(self, *a):
        self.log.append(("exit", self.name))


def test_reserve_pool(monkeypatch):
    log: list = []
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(80 << 30, log))
    st = _Stream("s1", log)
    pinned.reserve_pool(st, 4 << 30, 8)  # cap below a share of the free memory: the cap, on the stream
    assert log == [("enter", "s1"), ("malloc", 4 << 30, "s1"), ("exit", "s1")]
    log.clear()
    pinned.reserve_pool(st, 64 << 30, 16)  # a 16th of 80 GiB, rounded down to whole MiB
    assert log[1][1] == (80 << 30) // 16 >> 20 << 20
    log.clear()
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy((1 << 20) - 1, log))
    pinned.reserve_pool(st, 4 << 30, 1)  # less than a MiB free: nothing
    pinned.reserve_pool(st, 0, 1)  # switched off: nothing
    assert log == []
