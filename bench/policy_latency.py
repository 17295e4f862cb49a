"""Per-chunk CPU inference latency of our policies and LeRobot's DiffusionPolicy; prints JSON.
Same as ``robotrl bench latency [overrides]``.

Usage: python bench/policy_latency.py [calls=200] [threads=2] [lerobot.python=/path/to/python]
"""

from __future__ import annotations

import sys

from robotrl.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "latency", *sys.argv[1:]]))
