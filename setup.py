"""The optional C extensions; everything else about the package is in pyproject.toml.

They are declared here rather than in pyproject.toml's ``[tool.setuptools.ext-modules]``,
which setuptools still calls experimental (and warns about on every install). ``optional``:
an install without a C compiler or Python's headers still succeeds, and the pure-Python
twins run (``raftlog/speedups.py`` says why these exist and how the choice is made).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(name, [f"{name.replace('.', '/')}.c"], optional=True, extra_compile_args=["-O2"])
        for name in ("raftlog._speedups_records", "raftlog._speedups_transport")
    ]
)
