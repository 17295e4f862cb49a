"""``python -m robotrl.commands docs/configuration.md``: write the configuration reference
(stdout without a path)."""

import sys

from robotrl.commands import config_reference

text = config_reference()
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        f.write(text)
else:
    sys.stdout.write(text)
