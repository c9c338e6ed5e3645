"""Matbench Discovery's phonons task ``kappa_103`` (κ_SRME, Póta et al., arXiv:2408.00755).

Per potential and phononDB material: a symmetry-constrained relaxation (:mod:`.relaxation`), the
second- and third-order displacement force sets in chunks (:mod:`.forces`), the force constants and
the Wigner conductivity (:mod:`.conductivity`), scored against the PBE reference by SRD, SRE and the
mode-resolved SRME (:mod:`.metrics`); the leaderboard's prediction file and the tables and figures
(:mod:`.report`). :mod:`.jobs` holds the ``crucible discovery kappa-*`` commands.
"""
