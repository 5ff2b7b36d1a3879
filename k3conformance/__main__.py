from k3conformance.cli import main

raise SystemExit(main())
