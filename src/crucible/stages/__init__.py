"""How a command is declared once for the CLI and the rules: the ``crucible`` command groups
(``groups``) and the stage declaration each group's ``stages`` module is written in
(``declaration``).
"""

LAYER = "framework"
