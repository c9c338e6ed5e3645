"""``comp-transformer``: a composition transformer estimator (see :mod:`.estimator`).

Its registry entry is in :mod:`crucible.models.networks` (no torch import when the workflow plans); ``encoding`` (formulas -> tensors), ``network``
(torch modules) and ``estimator`` (scikit-learn estimator, training) hold one job each.
"""

from crucible.models.comp_transformer.encoding import encode_formulas, load_element_table, parse_formula
from crucible.models.comp_transformer.estimator import FORMAT_VERSION, CompTransformer
from crucible.models.comp_transformer.network import CompTransformerNet, Ensemble, FractionEncoder

__all__ = [
    "FORMAT_VERSION",
    "CompTransformer",
    "CompTransformerNet",
    "Ensemble",
    "FractionEncoder",
    "encode_formulas",
    "load_element_table",
    "parse_formula",
]
