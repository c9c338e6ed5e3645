"""Write ``displacements.json``: each material's label and phono3py displacement counts, which
the DAG plans the third-order chunks from without running phono3py (the jobs check the counts).

    python -m crucible.discovery.phonons.counts data/k-srme/data/phononDB-PBE-structures.extxyz

Run it again after a phono3py upgrade; tests/test_discovery_kappa.py rebuilds a few entries.
"""

from __future__ import annotations

import sys

from crucible.core.io import write_json


def counts_of(material) -> dict:
    from crucible.discovery.phonons.forces import build_phono3py, count

    ph3 = build_phono3py(material.atoms, material.fc2_supercell, material.fc3_supercell, material.q_mesh)
    return {"desc": material.desc, "name": material.name, "fc2": count(ph3, 2), "fc3": count(ph3, 3)}


def main(argv: list[str] | None = None) -> None:
    import phono3py

    from crucible.discovery.phonons.structures import read_structures
    from crucible.discovery.phonons.workflow import COUNTS

    (path,) = argv if argv is not None else sys.argv[1:]
    materials = read_structures(path)
    doc = {"phono3py": phono3py.__version__, "materials": {m.mp_id: counts_of(m) for m in materials}}
    write_json(doc, COUNTS)


if __name__ == "__main__":
    main()
