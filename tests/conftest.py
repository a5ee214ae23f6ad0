"""Shared test fixtures."""
import ctypes
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def nvcc_spill_free(tmp_path):
    """check(cu, kernels=(), flags=()): compile a kernels/*.cu file with `nvcc -arch=sm_90 -cubin -Xptxas -v`
    (no GPU needed; skipped without nvcc), assert no warnings, that every named kernel was built and that
    every function of the file is free of register spills; returns the number of functions."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")

    def check(cu, kernels=(), flags=()):
        r = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-std=c++17", *flags, str(cu), "-o",
                            str(tmp_path / f"{Path(cu).stem}.cubin")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert "warning" not in r.stderr.lower(), r.stderr
        for k in kernels:
            assert f"Function properties for {k}" in r.stderr, r.stderr
        n_fun = r.stderr.count("Function properties for")
        assert r.stderr.count(" 0 bytes spill stores") == n_fun, r.stderr
        assert r.stderr.count(" 0 bytes spill loads") == n_fun, r.stderr
        return n_fun
    return check


@pytest.fixture(scope="session")
def host_cuda(tmp_path_factory):
    """build(cu, shim, flags=()) -> ctypes.CDLL: a kernels/*.cu file compiled as host C++ (g++), through `shim`,
    C++ source that defines the CUDA built-ins it needs and `#include KERNEL_FILE` (replaced by the .cu path)
    plus extern "C" drivers that run the kernel one emulated thread at a time. Skipped without g++."""
    if shutil.which("g++") is None:
        pytest.skip("g++ not on PATH")

    def build(cu, shim, flags=("-O2",)):
        d = tmp_path_factory.mktemp(f"{Path(cu).stem}host")
        src = d / "shim.cpp"
        src.write_text(shim.replace("KERNEL_FILE", f'"{cu}"'))
        so = d / f"lib{Path(cu).stem}.so"
        r = subprocess.run(["g++", *flags, "-std=c++17", "-shared", "-fPIC", "-Wall", "-Wno-unknown-pragmas", str(src),
                            "-o", str(so)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return ctypes.CDLL(str(so))
    return build


def run_spying_cupyx(call: str) -> subprocess.CompletedProcess:
    """Python code `call` (a g3align run on the GPU) in a fresh interpreter whose import hook prints the stack
    of the first import of cupyx.scipy.special, which CuPy makes at the first NumPy-ufunc override (an
    operator between a CuPy array and a Python number); stdout ends with 'cupyx.scipy imported: True|False'
    and the sorted list of the cupyx modules loaded (`import cupy` itself makes a bare 'cupyx')."""
    code = ("import sys, traceback\n"
            "class Spy:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'cupyx.scipy.special':\n"
            "            print('first import of', name, 'from:', ''.join(traceback.format_stack(limit=25)))\n"
            "        return None\n"
            "sys.meta_path.insert(0, Spy())\n"
            f"{call}\n"
            "print('cupyx modules:', sorted(m for m in sys.modules if m.split('.')[0] == 'cupyx'))\n"
            "print('cupyx.scipy imported:', 'cupyx.scipy.special' in sys.modules)\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def load_script(name: str):
    """scripts/<name>.py (not a package module) loaded as a module, for tests of the scripts' functions."""
    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs CuPy and a CUDA device; skipped without one (`pytest -m gpu` runs "
                                       "only these, `-m 'not gpu'` none of them)")


def pytest_collection_modifyitems(config, items):
    """Tests marked gpu are skipped where CuPy sees no CUDA device."""
    from g3align.aligner.gpu.device import gpu_available
    if any(it.get_closest_marker("gpu") for it in items) and not gpu_available():
        skip = pytest.mark.skip(reason="no CuPy / CUDA device")
        for it in items:
            if it.get_closest_marker("gpu"):
                it.add_marker(skip)


def cupy_or_none():
    """The cupy module where it sees a CUDA device, else None (for code in GPU tests that needs the module)."""
    from g3align.aligner.gpu.device import gpu_available
    if not gpu_available():
        return None
    import cupy
    return cupy
