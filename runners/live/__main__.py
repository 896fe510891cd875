"""`python -m runners.live`: the live check (`make live`), as `python -m runners.live.main`."""

from __future__ import annotations

import sys

from runners.live.main import main

if __name__ == "__main__":
    sys.exit(main())
