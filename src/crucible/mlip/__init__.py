"""Interatomic potentials: calculators registry, EOS benchmark, s2ef predictions and FAIRChem-style metrics."""
