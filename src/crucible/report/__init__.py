"""Tables (csv/md/tex) and figures (matplotlib) built from pipeline outputs."""

LAYER = "services"
