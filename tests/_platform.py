"""The platform the suite runs on. conftest chooses it (in the environment)
before hipfile is first imported; import this only after conftest."""

from __future__ import annotations

from hipfile import platforms

PLATFORM = platforms.active() or "rocm"
