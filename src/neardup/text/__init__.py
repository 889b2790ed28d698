"""Text to features: versioned normalizers, tokens and shingles, seeded and keyed
shingle hashes.
"""
