from twinbuild.cli.main import main

raise SystemExit(main())
