"""Foundations every layer may use: the exception tree, configs and their fingerprints,
checksummed files, owned temporary folders, process settings.
"""
