"""Exact scores of candidate pairs, brute-force and AllPairs oracles, explanations of a match."""
