from tests.corpus.simulator_errors import main

raise SystemExit(main())
