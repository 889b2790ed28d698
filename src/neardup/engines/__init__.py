"""Other engines for the batch job (Ray)."""
