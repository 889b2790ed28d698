"""Compiled code (numba): hashing, tokenizing, MinHash/OPH, the band join, the one
union-find, vector and online-index kernels, the JSONL scanner, and compiling them
ahead of a run.
"""
