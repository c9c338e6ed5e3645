"""Interatomic potentials, a service that every family uses: the registry and loading, users' own potentials (config ``potentials:``), the one relaxation loop."""

LAYER = "services"
