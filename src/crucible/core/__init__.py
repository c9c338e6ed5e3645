"""The base layer: helpers that know nothing of benchmarks.

Errors (``errors``), atomic files (``io``), the declared file formats and their strict readers
(``formats``), SHA-256 of files and trees (``hashes``, ``fingerprint``), safe archive extraction
(``archives``), progress bars (``progress``), a command's CPU log (``cpu_log``), torch's thread
setup (``torch_setup``) and the one registry shape every family uses (``registry``).
"""

LAYER = "base"
