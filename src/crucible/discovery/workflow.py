"""What the discovery part of the DAG builds, as pure functions of the config dict.

``workflow/rules/discovery.smk`` calls these. Per potential: its dimer curves
(``results/discovery/diatomics/{potential}.json.gz``, the leaderboard's prediction format) and
their grid figure; over the configured potentials: the diatomics table beside the published
rows of the leaderboard's model cards, and the metrics figure. Per model of
``discovery.stability.models``: its stability scores from the leaderboard's own prediction file
(``results/discovery/stability/{model}.json``); over them, the stability table beside the
published discovery rows of the cards.
"""

from __future__ import annotations

from typing import Any

from crucible.core.errors import ConfigError
from crucible.dag.config import section
from crucible.dag.families import Family
from crucible.dag.rules import alternation
from crucible.identity.name_book import Meaning
from crucible.potentials import workflow as potentials_wf

CURVES = "results/discovery/diatomics/{potential}.json.gz"
TABLE = "results/tables/discovery_diatomics.{ext}"
CURVE_FIGURE = "results/figures/discovery_diatomics_curves_{potential}.{ext}"
METRICS_FIGURE = "results/figures/discovery_diatomics_metrics.{ext}"
STABILITY_SCORES = "results/discovery/stability/{model}.json"
STABILITY_TABLE = "results/tables/discovery_stability.{ext}"


def _section(config: dict[str, Any]) -> dict[str, Any]:
    return section(config, "discovery")


def potentials(config: dict[str, Any]) -> list[str]:
    return list(_section(config)["diatomics"]["potentials"])


def potentials_on(config: dict[str, Any], device: str) -> str:
    """The ``potential`` constraint of run_diatomics (cpu) or run_diatomics_neural."""
    return alternation(potentials_wf.potentials_on(config, device, potentials_wf.potential_names(config)))


def potentials_plotted(config: dict[str, Any]) -> str:
    """The ``potential`` constraint of plot_diatomic_curves: every potential the curves may come
    from, CPU and GPU rule alike."""
    return alternation(potentials_wf.potential_names(config))


def elements(config: dict[str, Any]) -> str:
    """The curves command's --elements: 'all' or the configured symbols, sorted."""
    value = _section(config)["diatomics"]["elements"]
    return value if isinstance(value, str) else ",".join(sorted(value))


def curves_format() -> int:
    """The meaning of the curves file (:data:`crucible.discovery.curves.CURVES_FORMAT`), a param."""
    from crucible.discovery.curves import CURVES_FORMAT

    return CURVES_FORMAT


def stability_models(config: dict[str, Any]) -> list[str]:
    return list(_section(config)["stability"]["models"])


def stability_model_pattern(config: dict[str, Any]) -> str:
    """The ``model`` constraint of score_stability: the configured models."""
    return alternation(stability_models(config))


def stability_files(config: dict[str, Any]) -> list[str]:
    return [STABILITY_SCORES.format(model=m) for m in stability_models(config)]


def wbm_summary_file() -> str:
    from crucible.discovery.wbm import WBM_ROLE
    from crucible.sources.pinned_files import resource_path

    return str(resource_path(WBM_ROLE))


def predictions_file(model: str) -> str:
    from crucible.discovery.wbm import predictions_role
    from crucible.sources.pinned_files import resource_path

    return str(resource_path(predictions_role(model)))


def card_file(model: str) -> str:
    from crucible.discovery.data import CARD_ROLE_PREFIX
    from crucible.sources.pinned_files import resource_path

    return str(resource_path(CARD_ROLE_PREFIX + model))


def scores_format() -> int:
    """The meaning of a scores file (:data:`crucible.discovery.stability_jobs.SCORES_FORMAT`), a param."""
    from crucible.discovery.stability_jobs import SCORES_FORMAT

    return SCORES_FORMAT


def check(config: dict[str, Any]) -> None:
    from crucible.discovery.curves import symbols
    from crucible.discovery.wbm import prediction_models

    unknown = sorted(set(stability_models(config)) - set(prediction_models()))
    if unknown:
        raise ConfigError(
            f"config discovery.stability.models: {', '.join(unknown)} has no pinned predictions file "
            f"(config/sources.yaml pins those of: {', '.join(prediction_models())})"
        )

    potentials_wf.check_potential_names(config, potentials(config), "discovery.diatomics.potentials")
    from crucible.discovery.phonons import workflow as phonons_wf

    phonons_wf.check(config)
    value = _section(config)["diatomics"]["elements"]
    if not isinstance(value, str):
        unknown = sorted(set(value) - set(symbols()))
        if unknown:
            raise ConfigError(f"config discovery.diatomics.elements: {', '.join(unknown)} not among H…U")


def curve_files(config: dict[str, Any]) -> list[str]:
    return [CURVES.format(potential=p) for p in potentials(config)]


def card_files() -> list[str]:
    """Where the fetch stage puts the leaderboard's model cards (their roles, config/sources.yaml)."""
    from crucible.discovery.data import card_roles
    from crucible.sources.pinned_files import resource_path

    return [str(resource_path(role)) for role in card_roles()]


def reference_file() -> str:
    from crucible.discovery.data import REFERENCE_ROLE
    from crucible.sources.pinned_files import resource_path

    return str(resource_path(REFERENCE_ROLE))


def names(config: dict[str, Any]) -> dict[str, Meaning]:
    from crucible.discovery.phonons import workflow as phonons_wf

    if "discovery" not in config:
        return {}
    # the κ task's jobs carry the identity of the potential they ran, as the curves do
    kappa = potentials_wf.potential_meanings(config, phonons_wf.potentials(config))
    if not potentials(config):
        return kappa
    out = {
        "discovery/settings": Meaning(
            {"elements": elements(config)},
            "discovery.diatomics",
            "use another --directory",
            rules=(
                "run_diatomics",
                "run_diatomics_neural",
                "tabulate_diatomics",
                "plot_diatomic_curves",
                "plot_diatomics",
            ),
        )
    }
    return out | kappa | potentials_wf.potential_meanings(config, potentials(config))


def final_outputs(config: dict[str, Any]) -> list[str]:
    from crucible.discovery.phonons import workflow as phonons_wf

    out = stability_files(config)
    if out:
        out += [STABILITY_TABLE.format(ext=e) for e in ("csv", "md", "tex")]
    out += phonons_wf.final_outputs(config)
    ps = potentials(config)
    if not ps:
        return out
    out += curve_files(config)
    out += [TABLE.format(ext=e) for e in ("csv", "md", "tex")]
    out += [METRICS_FIGURE.format(ext=e) for e in ("png", "pdf")]
    out += [CURVE_FIGURE.format(potential=p, ext=e) for p in ps for e in ("png", "pdf")]
    return out


FAMILY = Family(
    name="discovery",
    package="crucible.discovery",
    final_outputs=final_outputs,
    check=check,
    captions=(
        "discovery_diatomics.rst",
        "discovery_diatomics_curves.rst",
        "discovery_diatomics_metrics.rst",
        "discovery_stability.rst",
        "discovery_kappa.rst",
        "discovery_kappa_materials.rst",
        "discovery_kappa_parity.rst",
        "discovery_kappa_srme.rst",
    ),
    envs=("mlip.yaml",),
    built=lambda c: {
        "diatomics potentials": potentials(c),
        "stability models": stability_models(c),
        "κ potentials": section(c, "discovery")["phonons"]["potentials"],
    },
    names=names,
)
