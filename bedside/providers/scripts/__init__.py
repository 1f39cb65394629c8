"""``bedside.providers.scripts``: an alias of :mod:`bedside.testing.scripts` (the scripted model's scripts
moved to the test doubles' package); ``bedside.providers.scripts.<benchmark>`` still imports."""

import sys

from bedside.testing import scripts as _scripts
from bedside.testing.scripts import cpb, discharge, medsp, mimic

for _module in (cpb, discharge, medsp, mimic):
    sys.modules[f"{__name__}.{_module.__name__.rsplit('.', 1)[-1]}"] = _module
sys.modules[__name__] = _scripts
