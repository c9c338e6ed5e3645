"""Composition and structure features: content-addressed files, one per task table.

``crucible.features.magpie`` is the Magpie module; its featurizer is ``magpie_features``.
"""

# Imported on first use (PEP 562): the magpie module needs pandas, which `crucible features
# build-structures` and every other job that only touches this package must not pay for.
_MAGPIE_NAMES = {
    "MAGPIE_COLUMNS": "COLUMNS",
    "MAGPIE_VERSION": "MAGPIE_VERSION",
    "FormulaError": "FormulaError",
    "magpie_features": "magpie_features",
}

__all__ = ["MAGPIE_COLUMNS", "MAGPIE_VERSION", "FormulaError", "magpie_features"]


def __getattr__(name: str):
    if name in _MAGPIE_NAMES:
        from crucible.features import magpie

        return getattr(magpie, _MAGPIE_NAMES[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


LAYER = "services"
