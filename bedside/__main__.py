import sys

from bedside.cli import main

sys.exit(main())
