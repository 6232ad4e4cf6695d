from twinbuild.cli import main

raise SystemExit(main())
