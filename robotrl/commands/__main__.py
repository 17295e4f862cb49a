"""``python -m robotrl.commands [--defaults] docs/configuration.md``: write the configuration
reference (stdout without a path); with ``--defaults``, first restate the dataclasses' defaults
in the YAML configs they are stale in."""

import sys

from robotrl.commands import config_reference, write_restated_configs

args = sys.argv[1:]
if "--defaults" in args:
    args.remove("--defaults")
    for path in write_restated_configs():
        print(f"{path}: defaults restated from its dataclasses", file=sys.stderr)
text = config_reference()
if args:
    with open(args[0], "w") as f:
        f.write(text)
else:
    sys.stdout.write(text)
