"""Sets to signatures and candidates: MinHash, OPH, b-bit, the LSH index, the Bloom screen."""
