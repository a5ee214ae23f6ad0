"""setuptools hooks (the project's metadata is in pyproject.toml).

With G3ALIGN_BUILD_KERNELS=1 (`make wheel`), building the package also compiles every numba kernel for the portable
CPU target and puts them into the package (g3align/jit.py, "kernels shipped in a wheel"): the wheel is then tagged
for this Python and platform, and a machine that installs it runs its first alignment without compiling. Without
it (a plain `pip install`), nothing is compiled at build time and the first run of each command compiles.
"""
import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

KERNELS = os.environ.get("G3ALIGN_BUILD_KERNELS") == "1"


class BuildPy(build_py):
    def run(self):
        super().run()
        if KERNELS:
            lib = os.path.abspath(self.build_lib)
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (lib, os.environ.get("PYTHONPATH")) if p),
                       PYTHONSAFEPATH="1", G3ALIGN_CPU="portable")
            subprocess.run([sys.executable, "-m", "g3align.jit", "ship", lib], env=env, cwd="/", check=True)


class Dist(Distribution):
    def has_ext_modules(self):  # compiled code inside: a wheel for this Python and platform, not py3-none-any
        return KERNELS


setup(cmdclass={"build_py": BuildPy}, distclass=Dist)
