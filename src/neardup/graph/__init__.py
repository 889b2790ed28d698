"""Edges to clusters: connected components, keep rules, the edges that joined a cluster."""
