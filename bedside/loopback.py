"""``python -m bedside.loopback`` and ``bedside.loopback``: an alias of :mod:`bedside.testing.loopback`."""

import sys

from bedside.testing import loopback as _loopback

if __name__ == "__main__":
    _loopback.main()
else:
    sys.modules[__name__] = _loopback
