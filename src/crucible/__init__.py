"""crucible: reproducible benchmarks for materials and chemistry machine learning."""

__version__ = "0.1.0"
