"""The MLIP benchmark family: the EOS benchmark on the Delta set, s2ef predictions and FAIRChem-style metrics (the potentials themselves: crucible.potentials)."""
