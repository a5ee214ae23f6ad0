"""kernels/loader.cupy_compile_once on a stand-in for CuPy's compiler module (no GPU needed): concurrent
builds of one kernel become one build, other kernels are built apart, and the empty program's NVRTC text is
read back from its file by a later process instead of being compiled again."""
from __future__ import annotations

import sys
import threading
import time
import types

import pytest

from g3align.kernels import loader


class FakeCompiler(types.ModuleType):
    def __init__(self, cache_dir):
        super().__init__("cupy.cuda.compiler")
        self.builds, self.passes = [], []
        self.cache_dir = str(cache_dir)

    def _compile_module_with_cache(self, source, options=(), arch=None, cache_dir=None, extra_source=None,
                                   backend="nvrtc", **kw):
        self.builds.append(source)
        time.sleep(0.05)  # long enough for every thread to ask before the first build is done
        return object()

    def _preprocess(self, source, options, arch, backend):
        self.passes.append(source)
        return f"// version text for {options} {arch}"

    def get_cache_dir(self):
        return self.cache_dir


@pytest.fixture
def fake_cupy(tmp_path, monkeypatch):
    """A cupy package whose compiler is FakeCompiler (bound functions, as module functions are called)."""
    def install():
        comp = FakeCompiler(tmp_path / "cache")
        for k in ("_compile_module_with_cache", "_preprocess", "get_cache_dir"):
            setattr(comp, k, getattr(comp, k))
        nvrtc = types.ModuleType("cupy.cuda.nvrtc")
        nvrtc.getVersion = lambda: (13, 0)
        cuda = types.ModuleType("cupy.cuda")
        cuda.compiler, cuda.nvrtc = comp, nvrtc
        cuda.Device = lambda: types.SimpleNamespace(id=0)
        cp = types.ModuleType("cupy")
        cp.cuda, cp.__version__ = cuda, "14.0.0"
        for name, m in (("cupy", cp), ("cupy.cuda", cuda), ("cupy.cuda.compiler", comp), ("cupy.cuda.nvrtc", nvrtc)):
            monkeypatch.setitem(sys.modules, name, m)
        return comp
    return install


def _threads(fn, n):
    out = [None] * n
    ts = [threading.Thread(target=lambda k=k: out.__setitem__(k, fn())) for k in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def test_one_build_per_kernel(fake_cupy):
    comp = fake_cupy()
    loader.cupy_compile_once()
    loader.cupy_compile_once()  # idempotent: not wrapped twice
    got = _threads(lambda: comp._compile_module_with_cache("src A", ("-x",)), 3)
    assert comp.builds == ["src A"] and got[0] is got[1] is got[2]
    other = comp._compile_module_with_cache("src A", ("-y",))  # other options: another kernel
    assert comp.builds == ["src A", "src A"] and other is not got[0]
    kw = comp._compile_module_with_cache("src A", options=("-y",), arch="90")  # keywords passed on as keywords
    assert comp.builds == ["src A"] * 3 and kw is comp._compile_module_with_cache("src A", options=("-y",), arch="90")


def test_empty_program_text_kept_in_a_file(fake_cupy):
    comp = fake_cupy()
    loader.cupy_compile_once()
    texts = _threads(lambda: comp._preprocess("", ("-x",), "90", "nvrtc"), 3)
    assert comp.passes == [""] and len(set(texts)) == 1
    assert comp._preprocess("int a;", ("-x",), "90", "nvrtc") and comp.passes == ["", "int a;"]
    comp2 = fake_cupy()  # a later process: the text from the file, no NVRTC pass
    loader.cupy_compile_once()
    assert comp2._preprocess("", ("-x",), "90", "nvrtc") == texts[0] and comp2.passes == []
    assert comp2._preprocess("", ("-x",), "80", "nvrtc") and comp2.passes == [""]  # another architecture
    assert comp2._preprocess(source="", options=("-x",), arch="80", backend="nvrtc") and comp2.passes == [""] * 2


def test_cache_dir_without_get_cache_dir(fake_cupy, monkeypatch, tmp_path):
    """CuPy 14.2's compiler has no get_cache_dir: the file goes to $CUPY_CACHE_DIR (CuPy's own setting)."""
    comp = fake_cupy()
    del comp.get_cache_dir
    monkeypatch.delattr(FakeCompiler, "get_cache_dir")
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "cc"))
    loader.cupy_compile_once()
    comp._preprocess("", ("-x",), "90", "nvrtc")
    assert [p.name.startswith("g3align-empty-") for p in (tmp_path / "cc").iterdir()] == [True]
