"""Env throughput vs the raw MuJoCo bound; prints JSON. Same as ``robotrl bench sim [overrides]``.

Usage: python bench/sim_throughput.py [task=lift] [controller=native|impedance] [num_envs=2]
"""

from __future__ import annotations

import sys

from robotrl.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "sim", *sys.argv[1:]]))
