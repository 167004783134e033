"""Print the interpreter `make` installs into and runs: python3 itself, or .venv/bin/python when
python3 is externally managed (PEP 668: Debian's own refuses `pip install` outside a venv)."""

import sys
import sysconfig
from pathlib import Path

in_venv = sys.prefix != sys.base_prefix
managed = (Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED").exists()
print(".venv/bin/python" if managed and not in_venv else "python3")
