"""Pinned raw sources, a service every family uses: the download and SHA-256 check
(``downloads``), the pins of ``config/sources.yaml`` (``pins``), where artifacts are saved and
extracted (``workflow``, ``artifacts``) and the ``crucible sources`` commands (``stages``).
"""

LAYER = "services"
