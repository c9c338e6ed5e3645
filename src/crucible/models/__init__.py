"""Models for Matbench: scikit-learn estimators registered by name (see ``registry``)."""

LAYER = "services"
