"""`python -m cofferctl`: the client's command line, as the `cofferctl` script runs it."""

from cofferctl.cli import main

raise SystemExit(main())
