"""Matbench v0.1: task metadata, cleaning, official folds, scoring and the results file."""
