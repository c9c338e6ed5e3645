"""Composition and structure features: content-addressed files, one per task table.

``crucible.features.magpie`` is the Magpie module; its featurizer is ``magpie_features``.
"""

from crucible.features.magpie import COLUMNS as MAGPIE_COLUMNS
from crucible.features.magpie import MAGPIE_VERSION, FormulaError, magpie_features

__all__ = ["MAGPIE_COLUMNS", "MAGPIE_VERSION", "FormulaError", "magpie_features"]
