from twinbuild.cli.entry import main

raise SystemExit(main())
