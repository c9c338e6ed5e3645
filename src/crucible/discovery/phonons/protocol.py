"""The protocol of the κ_SRME run: the settings that decide the numbers, in one place.

They follow the benchmark authors' published CHGNet run (k_srme 1.0.0, its ``run_params.json``):
FIRE with ASE's Frechet cell filter, two relaxation stages of at most 300 steps to 1e-4 eV/Å,
symmetry held to 1e-5 during the first, phono3py displacements of 0.03 Å, and the Wigner
conductivity in the relaxation-time approximation with isotope scattering at 300 K.
docs/discovery.md says where the leaderboard's ``phonondb-v1`` protocol differs.
"""

from __future__ import annotations

PROTOCOL = {
    "optimizer": "FIRE",
    "cell_filter": "FrechetCellFilter",
    "relaxation_stages": 2,
    "max_steps": 300,
    "fmax": 1e-4,  # eV/Å
    "symprec": 1e-5,  # Å: FixSymmetry in stage 1 and the space-group checks
    "displacement_distance": 0.03,  # Å
    "temperature": 300.0,  # K
    "conductivity": "Wigner (phono3py transport_type SMM19), RTA, isotope scattering",
    "imaginary_threshold": -0.01,  # THz, acoustic modes at Γ; every other frequency must be >= 0
}
# the cell may stretch but not shear: the crystals are cubic or hexagonal and stay so
NO_TILT_MASK = (True, True, True, False, False, False)
SRME_FAILED = 2.0  # what the benchmark scores a failed material
# bump when a stage's file changes meaning: the rules carry it as a param, so the files rerun
PHONONS_FORMAT = 1
