"""Shared test setup. Area-specific fixtures live in tests/helpers_<area>.py or in the test module."""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Never let a test reach the Hub or pick up a developer's real keys.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
for _key in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "HF_TOKEN"):
    os.environ.pop(_key, None)

# What runs keep in the datasets cache folder (datasets' Arrow files, a release's kept image file and
# view hashes, fingerprints) goes to a folder of this test session, removed at its end: the suite
# makes hundreds of releases and must neither fill nor evict the developer's own cache.
_CACHE = tempfile.mkdtemp(prefix="diningbench-tests-cache-")
os.environ["HF_DATASETS_CACHE"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
