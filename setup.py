"""Only a fix for editable installs: the project is configured in pyproject.toml.

setuptools' editable wheel installs the data files (the manual pages, into
<prefix>/share/man/man1) only if the distribution answers ``has_data()``, a method distutils
calls ``has_data_files()`` (setuptools/command/editable_wheel.py, ``_run_install("data")``):
without this, ``pip install -e .`` would leave the manual pages out.
"""

from setuptools import Distribution, setup


class _Distribution(Distribution):
    def has_data(self) -> bool:
        return bool(self.has_data_files())


setup(distclass=_Distribution)
