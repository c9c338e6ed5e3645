"""``crucible names ...``: what each name means in this results folder (crucible.identity.name_book),
and the identity record of one output (crucible.identity.records).

crucible names show                      every recorded name, its meaning's digest and spec
crucible names forget KEY [KEY ...]      let the next run give KEY a new meaning (its jobs rerun)
crucible names record --output FILE     the identity record of one output
"""

from __future__ import annotations

# light: the name book stands on crucible.identity.records, which crucible.cli imports anyway
from crucible.identity.name_book import NAME_BOOK_FILE
from crucible.stages.declaration import Opt, Stage

_BOOK = Opt("book", default=str(NAME_BOOK_FILE))

HELP = "what each configured name means in this results folder; forget one"  # the group's line in `crucible --help`
STAGES = (
    Stage("show", "every recorded name with its meaning", ".name_book:show_names", _BOOK),
    Stage(
        "forget",
        "drop recorded names, so that the next run may give them a new meaning",
        ".name_book:forget",
        Opt("keys", many=True, positional=True, metavar="KEY"),
        _BOOK,
    ),
    Stage("record", "the identity record of one output file", ".records:show_record"),
)
