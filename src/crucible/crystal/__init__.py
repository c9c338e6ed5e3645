"""Text-to-crystal benchmark: OpenCompass MP-20 scoring on real crystal sets, with generators."""
