"""stoker's one compiled part: ``stoker._native.md5many``, MD5 in SIMD lanes (see
src/stoker/_many_md5.py). Optional: where it cannot be built (no C compiler), stoker installs
without it and every MD5 is hashlib's. The rest of the project's metadata is in pyproject.toml.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "stoker._native.md5many",
            sources=["src/stoker/_native/md5many.c"],
            depends=["src/stoker/_native/md5many_kernel.h"],
            # GCC's reassociation of a step's adds put one more on the chain of dependent steps
            # that bounds a hash of one to four lanes: without it, 2 lanes of a vector hashed ~1,070
            # MiB/s together against ~980, 16 lanes ~6.7 GiB/s against ~6.1 (this machine's core).
            extra_compile_args=["-O3", "-fno-tree-reassoc"],
            optional=True,
        )
    ]
)
