"""The models layer stays plain Python: importing it never loads Qt."""

from __future__ import annotations

import subprocess
import sys


def test_models_layer_never_imports_pyside6() -> None:
    code = (
        "import sys\n"
        "import specchat.models.catalog, specchat.models.compat, specchat.models.download\n"
        "import specchat.models.gguf_reader, specchat.models.mirror, specchat.models.transfer\n"
        "import specchat.commands.models\n"
        "from specchat.models.download import find_in_hub_cache\n"
        "from specchat.models.catalog import load_catalog\n"
        "find_in_hub_cache(load_catalog().get('default').target)\n"
        "assert 'PySide6' not in sys.modules, sorted(m for m in sys.modules if 'PySide' in m)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
