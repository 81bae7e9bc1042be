"""Where AMD's own libhipfile is, and a ROCm-style prefix made from it.

AMD's library is never part of the project: it is looked for in
``../shared/amd-hipfile`` beside the checkout (or ``HIPFILE_AMD_HIPFILE``),
and tests that need it skip, with a reason, when it is absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hipfile import platforms

ROOT = Path(__file__).resolve().parent.parent


def amd_dir() -> Path | None:
    """The folder holding AMD's library and its make-prefix.sh, or None."""
    explicit = os.environ.get("HIPFILE_AMD_HIPFILE")
    candidates = [Path(explicit)] if explicit else [ROOT.parent / "shared" / "amd-hipfile",
                                                    ROOT.parent.parent / "shared" / "amd-hipfile"]
    for c in candidates:
        if (c / "make-prefix.sh").is_file():
            return c.resolve()
    return None


ABSENT = ("AMD's libhipfile is absent (no ../shared/amd-hipfile/make-prefix.sh; "
          "set HIPFILE_AMD_HIPFILE to its folder)")


def make_prefix(dest: Path) -> Path:
    """Assemble the prefix (AMD's libhipfile over the emulated HIP runtime)."""
    source = amd_dir()
    assert source is not None
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(["bash", str(source / "make-prefix.sh"), str(dest),
                    str(platforms.prefix("emulated"))],
                   check=True, env=env, capture_output=True, timeout=60)
    return dest
