"""Reading and writing corpora: formats, decompression, record ids, direct I/O,
generated corpora.
"""
