"""pipeline.AsyncWriter: the SAM text reaches the sink in order; a sink error reaches the caller."""
import numpy as np
import pytest

from g3align.aligner.mem.pipeline import AsyncWriter


class _Sink:
    def __init__(self, fail_at=None):
        self.parts = []
        self.fail_at = fail_at

    def write_sam_bytes(self, b):
        if self.fail_at is not None and len(self.parts) == self.fail_at:
            raise BrokenPipeError("closed")
        self.parts.append(bytes(b))


def test_order_and_times():
    sink, times = _Sink(), {}
    w = AsyncWriter(sink, times, depth=4)
    want = [np.frombuffer(b"r%d\n" % i, np.uint8) for i in range(1000)]
    for x in want:
        w.write_sam_bytes(memoryview(x))
    w.close()
    assert b"".join(sink.parts) == b"".join(x.tobytes() for x in want)
    assert times["write"] > 0
    w.close()  # idempotent


def test_error_reaches_the_caller():
    w = AsyncWriter(_Sink(fail_at=3), depth=2)
    with pytest.raises(BrokenPipeError):
        for _ in range(10000):  # the producer never blocks forever: the writer drains after the error
            w.write_sam_bytes(b"x\n")
        w.close()
    w.close(raise_error=False)


def test_error_after_the_last_write():
    w = AsyncWriter(_Sink(fail_at=0))
    w.write_sam_bytes(b"x\n")
    with pytest.raises(BrokenPipeError):
        w.close()
