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
            extra_compile_args=["-O3"],
            optional=True,
        )
    ]
)
