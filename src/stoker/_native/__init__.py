"""Compiled helpers, each optional (setup.py builds them where a C compiler is found)."""
