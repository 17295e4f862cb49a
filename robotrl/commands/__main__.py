"""``python -m robotrl.commands docs/configuration.md``: restate the dataclasses' defaults in
the YAML configs, then write the configuration reference (stdout without a path)."""

import sys

from robotrl.commands import config_reference, write_restated_configs

for name in write_restated_configs():
    print(f"robotrl/conf/{name}.yaml: defaults restated from its dataclasses", file=sys.stderr)
text = config_reference()
if len(sys.argv) > 1:
    with open(sys.argv[1], "w") as f:
        f.write(text)
else:
    sys.stdout.write(text)
