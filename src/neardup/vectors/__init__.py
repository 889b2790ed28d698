"""Vectors: SimHash/hyperplanes, p-stable and ICWS sketches, Hamming bands, exact
vector verification.
"""
