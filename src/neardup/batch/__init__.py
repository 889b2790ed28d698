"""The batch job: the text pipeline, the dedup job and its outputs, out of core,
reports, evaluation, streaming filters.
"""
