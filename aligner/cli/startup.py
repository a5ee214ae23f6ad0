"""How a `g3align` process starts and ends fast: the CUDA driver started on a thread, numba imported without the
modules it never needs, the GIL's switch interval on the GPU path, and the forked worker whose parent returns as soon
as the output is complete (detach, exit_now)."""
from __future__ import annotations

import os
import sys
import threading
import time


def cuda_driver_warm(choice: str) -> None:
    """--device gpu or auto on a machine with an NVIDIA driver: the driver's start (cuInit) and the device's
    primary context made now, on a thread that calls libcuda through ctypes (a foreign call lets go of the
    GIL), beside the Python imports that follow; CuPy later finds both made. CuPy's own start holds the GIL
    through cuInit, and the context comes with the index's first upload.."""
    if not gpu_machine(choice):
        return

    def run():
        try:
            import ctypes
            cu = ctypes.CDLL("libcuda.so.1")
            dev, ctx = ctypes.c_int(), ctypes.c_void_p()
            if cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0:
                cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)  # kept until the process ends
        except Exception:  # no driver library: CuPy's own start says so later
            pass
    threading.Thread(target=run, name="g3align-cuda-warm", daemon=True).start()


def gil_switch_interval(device: str, us: int) -> None:
    """On the GPU path, the GIL's switch interval in microseconds (mem's SWITCH_INTERVAL_US, map's
    MAP_SWITCH_INTERVAL_US; 0: Python's 5 ms). A pipeline thread takes the GIL back after each GPU wait (a mem
    part makes ~15), and with 5 ms it waited up to that long each time behind a thread running Python
    (docs/BENCHMARKS.md's git history)."""
    if device == "gpu" and us > 0:
        sys.setswitchinterval(us * 1e-6)


def import_numba():
    """Import numba without two optional imports it makes at import time that g3align never uses: scipy (for a
    version check only) and coverage (for line coverage of compiled code, which only an active coverage run
    uses, and such a run imported coverage before us). On an H200 box the mem modules' import took 0.82 s
    instead of 1.01 s (medians of 6 interleaved runs; `-X importtime` there: coverage 52 ms and scipy
    18 ms through numba). A None entry in sys.modules makes such an import fail at once; the entries are taken
    out again right after, so a later import of either works."""
    if "numba" in sys.modules:
        return
    blocked = [m for m in ("scipy", "coverage") if m not in sys.modules]
    for m in blocked:
        sys.modules[m] = None
    try:
        import numba  # noqa: F401
    finally:
        for m in blocked:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]


def numba_start():
    """Set up numba's CPU target now, without its BLAS probe. The probe (numba.np.arraymath's _check_blas)
    imports scipy.linalg only to learn whether np.dot and the like may call BLAS: ~0.2 s of every run's
    start-up, as scipy.linalg pulls in numpy.f2py. g3align's compiled code does no linear algebra. A None
    entry in sys.modules makes that import fail at once; the entry is taken out again right after, so a later
    import of scipy.linalg works as usual. Called before any reader thread starts (its first compiled call
    would set the target up otherwise)."""
    import_numba()
    if "numba.np.arraymath" in sys.modules or "scipy.linalg" in sys.modules:  # set up already / nothing to save
        return
    from numba.core.registry import cpu_target
    sys.modules["scipy.linalg"] = None
    try:
        cpu_target.target_context.refresh()
    finally:
        del sys.modules["scipy.linalg"]


FAST_EXIT = False  # set by entry(): a finished `mem` or `map` leaves without the interpreter's teardown


DONE_FD: int | None = None  # the worker's end of the pipe to its waiting parent (detach), when split


def detach_wanted(argv) -> bool:
    """Whether `mem` / `map` runs in a forked worker whose parent returns as soon as the output is complete
    (detach): on for a run that may use the GPU (--device gpu or auto where an NVIDIA device file exists);
    G3ALIGN_DETACH=0 turns it off, =1 turns it on for CPU runs too
    (tests)."""
    env = os.environ.get("G3ALIGN_DETACH", "")
    if env == "0" or not hasattr(os, "fork") or len(argv) < 2 or argv[1] not in ("mem", "map"):
        return False
    if "--help" in argv or "-h" in argv[2:3]:
        return False
    return env == "1" or gpu_machine(device_arg(argv[2:]))


def detach() -> None:
    """Fork the run into a worker and wait for it here. When the worker's output is complete and closed it
    says so with its exit code (exit_now) and the parent leaves at once; the kernel's teardown of the worker's
    CUDA context and pinned memory (0.1-0.3 s on the GPU box) goes on after the command has returned, and a
    pipe's reader has its end of file. A worker that ends any other way (an error, a signal) is waited for and
    its status is this process's: the same exit code, or death by the same signal. SIGINT, SIGTERM and SIGHUP
    are passed on to the worker (a terminal's ^C reaches both; the two pending SIGINTs mostly merge)."""
    global DONE_FD
    import signal
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        DONE_FD = w
        return
    os.close(w)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    code = os.read(r, 1)  # retried after a handler (PEP 475); empty: the worker ended without saying
    if code:
        os._exit(code[0])
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def exit_now():
    """After a successful run of the command line program (not in-process callers such as tests): flush and
    leave with os._exit. The output is complete and closed; what is skipped is freeing GBs of CUDA and
    pinned memory, the CUDA context and the thread pools one by one (~0.5 s on the GPU box)."""
    if FAST_EXIT:
        try:
            sys.stdout.flush()
            if os.environ.get("G3ALIGN_TRACE"):  # the profile times the kernel's teardown after this line
                import resource
                ru = resource.getrusage(resource.RUSAGE_SELF)
                cpu = ru.ru_utime + ru.ru_stime
                print(f"[trace] leaving at {time.time():.6f}; cpu {cpu:.2f} s", file=sys.stderr)
            sys.stderr.flush()
        except BrokenPipeError:
            pass
        if DONE_FD is not None:  # split (detach): close the output, then let the waiting parent go
            for fd in (1, 2):
                try:
                    os.close(fd)
                except OSError:
                    pass
            os.write(DONE_FD, b"\0")
        os._exit(0)


def process_t0():
    """The process start on perf_counter's clock (CLOCK_MONOTONIC; /proc's start time is since boot), or None;
    a detached worker's (detach) is its parent's, the command's own start."""
    try:
        with open(f"/proc/{os.getppid()}/stat" if DONE_FD is not None else "/proc/self/stat") as fh:
            start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as fh:
            up = float(fh.read().split()[0])
        return time.perf_counter() - (up - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def gpu_machine(choice: str) -> bool:
    """--device CHOICE may run on the GPU here: not cpu, and an NVIDIA driver's device file exists (checked
    before CuPy is imported)."""
    return choice != "cpu" and os.path.exists("/dev/nvidiactl")


def device_arg(args) -> str:
    """The value of map's --device in its raw arguments (auto when absent), before the options are parsed."""
    for k, a in enumerate(args):
        if a == "--device" and k + 1 < len(args):
            return args[k + 1]
        if a.startswith("--device="):
            return a.split("=", 1)[1]
    return "auto"
