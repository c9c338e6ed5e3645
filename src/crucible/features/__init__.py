"""Composition features and the shared, content-addressed feature cache."""

from crucible.features.magpie import COLUMNS as MAGPIE_COLUMNS
from crucible.features.magpie import MAGPIE_VERSION, FormulaError, magpie

__all__ = ["MAGPIE_COLUMNS", "MAGPIE_VERSION", "FormulaError", "magpie"]
