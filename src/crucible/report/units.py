"""How tables and figures print a unit. Its own module so that a figure job, which imports
matplotlib anyway, does not also pay for pandas (crucible.report.tables)."""

from __future__ import annotations

DIMENSIONLESS = frozenset({"", "unitless", "dimensionless", "-", "–", "1"})


def printed_unit(unit: str | None) -> str:
    """The unit as a table or figure prints it: empty for a dimensionless quantity (no "MAE
    (unitless)", no "MAE 0.3 unitless")."""
    text = (unit or "").strip()
    return "" if text.lower() in DIMENSIONLESS else text
