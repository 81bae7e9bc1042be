"""tools/peer_tests.py: a peer's imports move to hipfile's stand-in module
name by name; what it lacks stays with the peer; nothing else changes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

TOOL = Path(__file__).resolve().parent.parent / "tools" / "peer_tests.py"


@pytest.fixture(scope="module")
def tool() -> Any:
    spec = importlib.util.spec_from_file_location("peer_tests", TOOL)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_names_move_one_by_one(tool: Any) -> None:
    src = ("import os\n"
           "from safetensors import safe_open, _safe_open_handle as soh\n"
           "from safetensors.numpy import (\n"
           "    load_file,\n"
           "    save_file as sf,\n"
           ")\n"
           "def f():\n"
           "    from safetensors.numpy import load  # inner\n"
           "    return 'from safetensors import x'\n")
    out, notes = tool.rewrite(src, "safetensors")
    assert out == ("import os\n"
                   "from hipfile.safetensors import safe_open\n"
                   "from safetensors import _safe_open_handle as soh\n"
                   "from hipfile.safetensors.numpy import load_file, save_file as sf\n"
                   "def f():\n"
                   "    from hipfile.safetensors.numpy import load\n"
                   "    return 'from safetensors import x'\n")
    assert "line 2: kept from safetensors: _safe_open_handle as soh" in notes
    compile(out, "rewritten", "exec")


def test_other_peers_and_unrelated_modules(tool: Any) -> None:
    src = "from kvikio import CuFile\nfrom kvikiox import y\nfrom .kvikio import z\n"
    out, _ = tool.rewrite(src, "kvikio")
    assert out == ("from hipfile.compat.kvikio import CuFile\nfrom kvikiox import y\n"
                   "from .kvikio import z\n")


def test_runs_pytest_in_a_copy(tool: Any, tmp_path: Path) -> None:
    (tmp_path / "test_peer.py").write_text(
        "from safetensors import safe_open\n"
        "def test_stand_in():\n"
        "    assert safe_open.__module__.startswith('hipfile.safetensors')\n")
    assert tool.main(["safetensors", str(tmp_path)]) == 0
    assert (tmp_path / "test_peer.py").read_text().startswith("from safetensors import")
    # run from above a copy named tests, as the peers run theirs; a file
    # named on the command line is found in the copy
    (tmp_path / "test_cwd.py").write_text(
        "import os\n"
        "def test_cwd():\n"
        "    assert os.path.isdir('./tests/data')\n")
    (tmp_path / "data").mkdir()
    assert tool.main(["safetensors", str(tmp_path), "test_cwd.py"]) == 0
    assert tool.main(["safetensors", str(tmp_path), "test_cwd.py::test_cwd", "-q"]) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    assert tool.main(["safetensors", str(empty)]) == 2


def test_plain_imports_of_the_peer_bind_the_stand_in(tool: Any) -> None:
    """KvikIO's tests ``import kvikio`` and ``import kvikio.utils``: the same
    names end up bound to hipfile's modules; what hipfile lacks stays."""
    src = ("import os, kvikio\n"
           "import kvikio.utils\n"
           "import kvikio.defaults as d\n"
           "import kvikio.nosuchmodule\n"
           "import kvikiox\n")
    out, notes = tool.rewrite(src, "kvikio")
    assert out == ("import os\n"
                   "from hipfile.compat import kvikio\n"
                   "import hipfile.compat.kvikio.utils\n"
                   "from hipfile.compat import kvikio\n"
                   "import hipfile.compat.kvikio.defaults as d\n"
                   "import kvikio.nosuchmodule\n"
                   "import kvikiox\n")
    assert "line 2: import kvikio.utils -> hipfile.compat.kvikio.utils" in notes
    scope: dict[str, Any] = {}
    exec(compile(out.replace("import kvikio.nosuchmodule\nimport kvikiox\n", ""), "peer",
                 "exec"), scope)
    assert scope["kvikio"].utils.__name__ == "hipfile.compat.kvikio.utils"


def test_kvikio_utils_tests_run_against_the_stand_in(tool: Any, tmp_path: Path) -> None:
    """Tests in the shape of KvikIO's test_utils.py, run through the tool:
    the deprecation decorator warns with the notice and documents it, and
    the module deprecation warns naming the version."""
    (tmp_path / "test_utils.py").write_text(
        "import pytest\n"
        "import kvikio.utils\n"
        "\n"
        "def test_function_deprecation():\n"
        "    @kvikio.utils.kvikio_deprecation_notice('old call', since='24.12')\n"
        "    def func(x):\n"
        "        '''Twice x.'''\n"
        "        return 2 * x\n"
        "    with pytest.warns(FutureWarning, match='old call'):\n"
        "        assert func(3) == 6\n"
        "    assert func.__doc__.startswith('.. deprecated:: 24.12 old call')\n"
        "    assert 'Twice x.' in func.__doc__ and func.__name__ == 'func'\n"
        "    assert kvikio.utils.__name__ == 'hipfile.compat.kvikio.utils'\n"
        "\n"
        "def test_module_deprecation():\n"
        "    with pytest.warns(FutureWarning,\n"
        "                      match=r'This module is deprecated since 24\\.12\\. gone'):\n"
        "        kvikio.utils.kvikio_deprecate_module('gone', since='24.12')\n")
    assert tool.main(["kvikio", str(tmp_path)]) == 0
