"""Matbench Discovery in the DAG: the diatomics task (homonuclear dimer curves H…U scored against PBE)."""
