"""What identifies a result: the identity record beside every output (``records``), the code a
command's job reaches (``code_closure``, ``job_code``), installed distributions checked against
their RECORD (``installed_code``) and the ``crucible names`` commands (``stages``).
"""

LAYER = "framework"
