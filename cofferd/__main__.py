"""`python -m cofferd`: the daemon's command line, as the `cofferd` script runs it."""

from cofferd.surfaces.cli import main

raise SystemExit(main())
