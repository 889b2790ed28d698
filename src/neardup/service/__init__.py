"""The multi-tenant HTTP service: tenants, command log, embedded store, band index,
decisions, feedback, auth, routes, workers.
"""
