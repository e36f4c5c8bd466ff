"""Bundling for pyproject.toml: with WEFT_BUNDLE_LIBRARY=/path/to/libweft.so set while building,
the library is copied into the package as weft/libweft.so, which the loader tries right after
WEFT_LIBRARY (weft/_lib.py). Such a wheel is tied to the platform the library was built for, so
it is then tagged as a platform wheel. Without the variable the package is pure Python."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

BUNDLE = os.environ.get("WEFT_BUNDLE_LIBRARY")


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        if BUNDLE:
            if not os.path.isfile(BUNDLE):
                raise SystemExit("WEFT_BUNDLE_LIBRARY=%s: no such file" % BUNDLE)
            target = os.path.join(self.build_lib, "weft", "libweft.so")
            shutil.copyfile(BUNDLE, target)
            os.chmod(target, 0o755)


class PlatformDistribution(Distribution):
    def has_ext_modules(self):
        return bool(BUNDLE)


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=PlatformDistribution)
