"""The torch releases symshape supports, checked when it is imported.

``pyproject.toml`` asks for the same range (a test keeps the two equal), so
``pip install`` keeps a user's torch of any of these releases. Installed
another way (``--no-deps``, a source tree on ``PYTHONPATH``), an unsupported
torch is refused at import with the range, not met later as a wrong result.

What differs between the supported releases is looked up where it is used
(``hasattr``, ``symshape.ops.available``), never inferred from the version.
"""

from __future__ import annotations

import re

OLDEST = (2, 11)  # the first supported minor release
NEWEST = (2, 15)  # the last
RANGE = f">={OLDEST[0]}.{OLDEST[1]},<{NEWEST[0]}.{NEWEST[1] + 1}"  # as pyproject.toml says it


def parse(version: str) -> tuple[int, int]:
    """(major, minor) of a torch version string: ``"2.15.0+cu132"`` -> ``(2, 15)``."""
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None:
        raise ImportError(f"symshape cannot read the torch version {version!r}")
    return int(m.group(1)), int(m.group(2))


def check(version: str) -> None:
    """Raise ImportError unless ``version`` is a supported torch release."""
    if not OLDEST <= parse(version) <= NEWEST:
        raise ImportError(
            f"symshape supports torch{RANGE} (releases {OLDEST[0]}.{OLDEST[1]} to "
            f"{NEWEST[0]}.{NEWEST[1]}); this Python has torch {version}. Fix: install a "
            f"supported release, e.g. pip install 'torch{RANGE}'."
        )
