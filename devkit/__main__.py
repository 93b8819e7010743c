from devkit.cli import main

raise SystemExit(main())
