"""``bedside.providers.scripted``: an alias of :mod:`bedside.testing.scripted` (the scripted stand-in model)."""

import sys

from bedside.testing import scripted as _scripted

sys.modules[__name__] = _scripted
