"""The models' own batched forward passes (``PotentialSpec.batched`` in
:mod:`crucible.potentials.registry`), run by :func:`crucible.potentials.batch.evaluate`.

Each is ``batched(calculator) -> run(atoms_list, forces, stress)`` giving, per structure,
``{"energy": eV, "forces": (natoms, 3) eV/Å, "stress": ASE's Voigt 6 or 3×3, eV/Å³}`` in the
units and sign of the model's own ASE calculator; the checks are :mod:`crucible.potentials.batch`'s.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

# (atoms_list, forces, stress) -> per structure {"energy", "forces"?, "stress"?}
BatchedPath = Callable[[Sequence[Any], bool, bool], list]


# CHGNet on the CPU: structures per forward pass so that a pass holds at most this many atoms
CHGNET_CPU_ATOMS_PER_PASS = 64


def chgnet_batched(calc) -> BatchedPath:
    """CHGNet's ``predict_structure`` on a list: its energy is per atom (times natoms here, as
    its calculator does for an intensive model), its stress a 3×3 in GPa (times the
    calculator's ``stress_weight``, GPa → eV/Å³).

    On the CPU at most :data:`CHGNET_CPU_ATOMS_PER_PASS` atoms per forward pass: chgnet 0.4.2's
    batched pass costs more per structure the more dense cells it holds (64-atom MgO
    supercells, 2 threads, subnormals flushed: 0.65 CPU-s a cell one per pass, 0.80 four per
    pass, 1.03 sixteen per pass; ``benchmarks/batched_forces.py --per-pass``), while two-atom
    dimers gain fivefold from a whole curve per pass (119 points: 0.18 CPU-s against 0.88 one at
    a time). On a GPU the list goes through in one pass."""
    model = calc.model
    on_cpu = str(getattr(calc, "device", "cpu")).startswith("cpu")

    def run(atoms_list, forces: bool, stress: bool) -> list[dict[str, Any]]:
        import numpy as np
        from pymatgen.io.ase import AseAtomsAdaptor

        structures = [AseAtomsAdaptor.get_structure(a) for a in atoms_list]
        task = "e" + ("f" if forces else "") + ("s" if stress else "")
        largest = max(len(a) for a in atoms_list)
        per_pass = max(1, CHGNET_CPU_ATOMS_PER_PASS // largest) if on_cpu else len(structures)
        preds = model.predict_structure(structures, task=task, batch_size=per_pass)
        if isinstance(preds, dict):
            preds = [preds]
        out = []
        for p, atoms in zip(preds, atoms_list):
            factor = len(atoms) if model.is_intensive else 1
            row: dict[str, Any] = {"energy": float(np.asarray(p["e"]).reshape(())) * factor}
            if forces:
                row["forces"] = p["f"]
            if stress:
                row["stress"] = np.asarray(p["s"]) * calc.stress_weight
            out.append(row)
        return out

    return run


def sevennet_batched(calc) -> BatchedPath:
    """SevenNet's own batch: each structure's graph (as its calculator builds it) collated into
    one, the model switched to batched data for the pass (and back: the calculator shares it).
    Its stress comes as (xx, yy, zz, xy, yz, zx) of the opposite sign; turned into ASE's here,
    as its calculator does."""
    model = calc.model

    def run(atoms_list, forces: bool, stress: bool) -> list[dict[str, Any]]:
        import sevenn._keys as KEY
        from sevenn.atom_graph_data import AtomGraphData
        from sevenn.train.dataload import unlabeled_atoms_to_graph
        from torch_geometric.loader.dataloader import Collater

        graphs = []
        for atoms in atoms_list:
            calc.set_atoms(atoms)  # its element check, with its message
            data = AtomGraphData.from_numpy_dict(unlabeled_atoms_to_graph(atoms, calc.cutoff, with_shift=False))
            if calc.modal:
                data[KEY.DATA_MODALITY] = calc.modal
            graphs.append(data)
        batch = Collater([], follow_batch=None, exclude_keys=None)(graphs).to(calc.device)
        model.set_is_batch_data(True)
        try:
            output = model(batch)
        finally:
            model.set_is_batch_data(False)
        energies = output[KEY.PRED_TOTAL_ENERGY].detach().cpu().numpy().reshape(-1)
        f_all = output[KEY.PRED_FORCE].detach().cpu().numpy()
        s_all = -output[KEY.PRED_STRESS].detach().cpu().numpy().reshape(len(atoms_list), 6)[:, [0, 1, 2, 4, 5, 3]]
        out, start = [], 0
        for k, atoms in enumerate(atoms_list):
            row: dict[str, Any] = {"energy": float(energies[k])}
            if forces:
                row["forces"] = f_all[start : start + len(atoms)]
            if stress:
                row["stress"] = s_all[k]
            start += len(atoms)
            out.append(row)
        return out

    return run
