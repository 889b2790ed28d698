"""Families across splits: the family audit and the family-aware split."""
