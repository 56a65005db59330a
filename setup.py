"""The optional compiled record walker (mqctl/store/_cwalker.c, issue 32): built at `pip install` when a C
compiler and zlib's header are there; when the build fails the install goes on and mqctl uses the numpy
walker (`optional=True`). Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("mqctl.store._cwalker", ["mqctl/store/_cwalker.c"], libraries=["z"],
                             extra_compile_args=["-O2", "-std=c11", "-Wall"], optional=True)])
